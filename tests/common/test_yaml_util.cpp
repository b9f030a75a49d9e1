// Tests of common/yaml_util.hpp: strict keys and file/line-aware messages.
#include <catch2/catch.hpp>

#include "common/errors.hpp"
#include "common/yaml_util.hpp"

using namespace dtsim;

TEST_CASE("common::yaml: unknown keys name the file, line and allowed keys", "[common]") {
  const auto node = yaml::load_string("a: 1\nb: 2\nzzz: 3\n", "t.yaml");
  try {
    yaml::check_keys(node, {"a", "b"}, yaml::Origin{"t.yaml"}, "root");
    FAIL("no error");
  } catch (const InputError& e) {
    const std::string msg = e.what();
    CHECK(msg.find("t.yaml:3") != std::string::npos);
    CHECK(msg.find("zzz") != std::string::npos);
    CHECK(msg.find("allowed: a, b") != std::string::npos);
  }
}

TEST_CASE("common::yaml: malformed text is an InputError with its line", "[common]") {
  CHECK_THROWS_AS(yaml::load_string("a: [1, 2\nb: 3\n", "bad.yaml"), InputError);
  CHECK_THROWS_WITH(yaml::load_string("a: [1, 2\nb: 3\n", "bad.yaml"), Catch::Contains("bad.yaml:"));
}

TEST_CASE("common::yaml: required and optional fields check types", "[common]") {
  const auto node = yaml::load_string("n: 4\nx: abc\n", "f.yaml");
  const yaml::Origin o{"f.yaml"};
  CHECK(yaml::required<int>(node, "n", o, "root") == 4);
  CHECK(yaml::optional<int>(node, "m", 7, o, "root") == 7);
  CHECK_THROWS_WITH(yaml::required<int>(node, "x", o, "root"), Catch::Contains("must be an integer"));
  CHECK_THROWS_WITH(yaml::required<int>(node, "q", o, "root"), Catch::Contains("missing required field 'q'"));
  CHECK_THROWS_WITH(yaml::require_positive(-3, node, "n", o, "root"), Catch::Contains("must be > 0"));
}
