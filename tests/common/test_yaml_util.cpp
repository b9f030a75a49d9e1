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

namespace {
std::string load_error(const std::string& text) {
  try {
    yaml::load_string(text, "h.yaml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}
// "lol0: &a0 [x, x, ...]" then each level a list of `fanout` aliases of the level below.
std::string alias_bomb(int levels, int fanout) {
  std::string text = "l0: &a0 [x";
  for (int i = 1; i < fanout; ++i) text += ", x";
  text += "]\n";
  for (int l = 1; l <= levels; ++l) {
    text += "l" + std::to_string(l) + ": &a" + std::to_string(l) + " [";
    for (int i = 0; i < fanout; ++i) text += (i ? ", *a" : "*a") + std::to_string(l - 1);
    text += "]\n";
  }
  return text;
}
}  // namespace

TEST_CASE("common::yaml: an alias inside its own anchor is refused with its line", "[common]") {
  const std::string msg = load_error("name: x\ndescription: &s [*s]\n");
  CHECK(msg.find("h.yaml:2:") == 0);
  CHECK(msg.find("recursive alias") != std::string::npos);
  CHECK(load_error("a: &m {b: [1, {c: *m}]}\n").find("recursive alias") != std::string::npos);
}

TEST_CASE("common::yaml: an alias bomb is refused before it is expanded", "[common]") {
  const std::string bomb = alias_bomb(9, 10);  // 10^10 nodes in ~700 bytes
  REQUIRE(bomb.size() < 1000);
  const std::string msg = load_error(bomb);
  CHECK(msg.find("h.yaml:") == 0);
  CHECK(msg.find("alias bomb") != std::string::npos);
  // A few shared aliases stay fine: 10^3 nodes.
  CHECK(load_error(alias_bomb(2, 10)).empty());
  const auto ok = yaml::load_string("base: &b {x: 1}\nuse: *b\n", "ok.yaml");
  CHECK(ok["use"]["x"].as<int>() == 1);
}

TEST_CASE("common::yaml: nesting deeper than the bound is refused", "[common]") {
  CHECK(load_error(std::string(65, '[') + std::string(65, ']')).find("nesting deeper than 64") != std::string::npos);
  CHECK(load_error(std::string(60, '[') + std::string(60, ']')).empty());
  // Depth through an alias counts too.
  const std::string deep = "a: &d " + std::string(40, '[') + std::string(40, ']') + "\nb: " + std::string(30, '[') +
                           "*d" + std::string(30, ']') + "\n";
  CHECK(load_error(deep).find("nesting deeper") != std::string::npos);
}

TEST_CASE("common::yaml: duplicate keys are errors naming both lines", "[common]") {
  const std::string msg = load_error("a: 1\nb: 2\na: 3\n");
  CHECK(msg == "h.yaml:3: duplicate key 'a' (first at line 1)");
  CHECK(load_error("m: {x: 1, y: {x: 2}}\n").empty());  // same key in different maps
  CHECK(load_error("m:\n  - {k: 1}\n  - {k: 2}\n").empty());
  CHECK(load_error("m: {x: 1, x: 2}\n").find("duplicate key 'x'") != std::string::npos);
  CHECK(load_error("? [a]\n: 1\nz: 2\nz: 3\n").find("h.yaml:4: duplicate key 'z'") == 0);
}

TEST_CASE("common::yaml: invalid UTF-8 is refused with its line", "[common]") {
  CHECK(load_error("name: ok\nname2: a\xff\n") == "h.yaml:2: invalid UTF-8 byte 0xff (YAML files are UTF-8 text)");
  CHECK(load_error("name: caf\xc3\xa9\n").empty());
  CHECK(load_error("x: \xc0\xaf\n").find("invalid UTF-8") != std::string::npos);  // overlong '/'
}

TEST_CASE("common::yaml: echoed values stay on one line", "[common]") {
  const std::string msg = load_error("\"a\\nb\": 1\n\"a\\nb\": 2\n");
  CHECK(msg.find('\n') == std::string::npos);
  CHECK(msg.find("a\\nb") != std::string::npos);
  const auto node = yaml::load_string("n: \"4\\nrm -rf\"\n", "f.yaml");
  try {
    yaml::required<int>(node, "n", yaml::Origin{"f.yaml"}, "root");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find('\n') == std::string::npos);
  }
}
