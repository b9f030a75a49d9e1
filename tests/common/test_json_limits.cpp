// Tests of the bounded JSON reader (common/json_limits.hpp): depth and size at their bounds, and the
// one-line InputError for everything it refuses.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/errors.hpp"
#include "common/json_limits.hpp"

namespace {

std::string nested_arrays(int depth) { return std::string(static_cast<std::size_t>(depth), '[') + std::string(static_cast<std::size_t>(depth), ']'); }

std::string error_of(const std::string& text, const dtsim::JsonLimits& limits) {
  try {
    (void)dtsim::parse_json(text, "f.json", "test file", limits);
  } catch (const dtsim::InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("common::parse_json: nesting at the depth bound is read, one level more is an InputError", "[common]") {
  const dtsim::JsonLimits limits{1 << 20};
  CHECK(dtsim::parse_json(nested_arrays(dtsim::JSON_MAX_DEPTH), "f.json", "test file", limits).is_array());
  const std::string deeper = error_of(nested_arrays(dtsim::JSON_MAX_DEPTH + 1), limits);
  CHECK(deeper.find("f.json: test file nests arrays and objects deeper than 64 levels") == 0);
  // Objects count as arrays do, and 100,000 levels (a stack overflow in nlohmann's recursive dump) stop
  // at the bound without being built.
  std::string objects;
  for (int i = 0; i <= dtsim::JSON_MAX_DEPTH; ++i) objects += "{\"a\":";
  objects += "1" + std::string(dtsim::JSON_MAX_DEPTH + 1, '}');
  CHECK(error_of(objects, limits).find("deeper than 64 levels") != std::string::npos);
  CHECK(error_of(nested_arrays(100'000), {1 << 20}).find("deeper than 64 levels") != std::string::npos);
}

TEST_CASE("common::parse_json: a text at the size bound is read, one byte more is an InputError", "[common]") {
  const std::string text = "[" + std::string(98, ' ') + "]";  // 100 bytes
  CHECK(dtsim::parse_json(text, "f.json", "test file", {100}).is_array());
  const std::string msg = error_of(text + " ", {100});
  CHECK(msg == "f.json: test file is 101 bytes; expected at most 100 bytes");
  CHECK(error_of(std::string(1234567, ' '), {1000000}) == "f.json: test file is 1,234,567 bytes; expected at most 1,000,000 bytes");
}

TEST_CASE("common::parse_json: invalid JSON and numbers no double holds are one-line InputErrors", "[common]") {
  CHECK(error_of("{\"a\": ", {100}) == "f.json: test file is not valid JSON (byte 7)");
  CHECK(error_of("[1e309]", {100}) == "f.json: test file holds a number outside the range of a double");
}

TEST_CASE("common::read_json_file: the size bound is checked before the file is read", "[common]") {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("dtsim_json_limits_" + std::to_string(::getpid()) + ".json")).string();
  std::ofstream(path) << "[" << std::string(1 << 20, ' ') << "]";
  CHECK(dtsim::read_json_file(path, "test file", {(1 << 20) + 2}).is_array());
  try {
    (void)dtsim::read_json_file(path, "test file", {1 << 20});
    FAIL("expected an InputError");
  } catch (const dtsim::InputError& e) {
    CHECK(std::string(e.what()) == path + ": test file is 1,048,578 bytes; expected at most 1,048,576 bytes");
  }
  std::remove(path.c_str());
  CHECK_THROWS_AS(dtsim::read_json_file(path, "test file", {100}), dtsim::InputError);
}
