// Tests of common/text.hpp: echoed input is made safe for one-line messages.
#include <catch2/catch.hpp>

#include "common/text.hpp"

using dtsim::printable;

TEST_CASE("common::printable: control characters are escaped", "[common]") {
  CHECK(printable("plain name") == "plain name");
  CHECK(printable("a\nb\tc\rd") == "a\\nb\\tc\\rd");
  CHECK(printable(std::string("x\0y\x1b", 4)) == "x\\x00y\\x1b");
  CHECK(printable("caf\xc3\xa9") == "caf\xc3\xa9");  // UTF-8 is kept
}

TEST_CASE("common::printable: long values are cut with an ellipsis", "[common]") {
  CHECK(printable(std::string(300, 'a')) == std::string(120, 'a') + "...");
  CHECK(printable("abcdef", 3) == "abc...");
  CHECK(printable("abc", 3) == "abc");
}

TEST_CASE("common::human_bytes: three significant digits in SI units", "[common]") {
  CHECK(dtsim::human_bytes(0) == "0 B");
  CHECK(dtsim::human_bytes(512) == "512 B");
  CHECK(dtsim::human_bytes(2.5e7) == "25.0 MB");
  CHECK(dtsim::human_bytes(102.2e6) == "102 MB");
  CHECK(dtsim::human_bytes(1.5e9) == "1.50 GB");
  CHECK(dtsim::human_bytes(999.96e3) == "1.00 MB");  // rounds up into the next unit
}

TEST_CASE("common::human_seconds: the largest unit that keeps the value >= 1", "[common]") {
  CHECK(dtsim::human_seconds(0) == "0 s");
  CHECK(dtsim::human_seconds(0.0019) == "1.90 ms");
  CHECK(dtsim::human_seconds(2.5e-5) == "25.0 us");
  CHECK(dtsim::human_seconds(0.123456) == "123 ms");
  CHECK(dtsim::human_seconds(3.14159) == "3.14 s");
  CHECK(dtsim::human_seconds(250) == "250 s");
  CHECK(dtsim::human_seconds(0.9999) == "1.00 s");
}

TEST_CASE("common::plural: one worker, two workers", "[common]") {
  CHECK(dtsim::plural(1, "worker") == "1 worker");
  CHECK(dtsim::plural(0, "worker") == "0 workers");
  CHECK(dtsim::plural(64, "server") == "64 servers");
}
