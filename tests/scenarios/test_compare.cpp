// Platform comparison: the platform list is validated and becomes one point per platform.
#include <catch2/catch.hpp>

#include "common/errors.hpp"
#include "scenarios/compare.hpp"

using namespace dtsim::scenarios;

TEST_CASE("scenarios::Compare: platform lists are split, trimmed and checked") {
  CHECK(parse_platform_list("a,b , c") == std::vector<std::string>{"a", "b", "c"});
  CHECK_THROWS_WITH(parse_platform_list("a,,b"), Catch::Contains("--platforms"));
  CHECK_THROWS_WITH(parse_platform_list(""), Catch::Contains("comma-separated"));
  CHECK_THROWS_WITH(parse_platform_list("a,b,a"), Catch::Contains("listed twice"));
}

TEST_CASE("scenarios::Compare: one point per platform, the scenario's own sweep dropped") {
  const YAML::Node n = YAML::Load("model: resnet50\nplatform: x\nworkers: [1, 8]\nsweep: {product: {batch: [1, 2]}}\n");
  const auto pts = compare_points(n, {"taiwania2-ib", "taiwania2-10gbe"}, dtsim::yaml::Origin{"c.yaml"});
  REQUIRE(pts.size() == 2);
  CHECK(pts[1].node["platform"].as<std::string>() == "taiwania2-10gbe");
  CHECK(pts[1].key == "platform=taiwania2-10gbe");
  CHECK_FALSE(pts[0].node["sweep"]);
  CHECK(pts[0].node["workers"].size() == 2);
}
