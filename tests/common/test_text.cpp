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
