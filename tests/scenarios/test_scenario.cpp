// Scenario files: strict schema, list and `auto` parsing, cross-field checks with one-line errors.
#include <catch2/catch.hpp>

#include "common/errors.hpp"
#include "scenarios/scenario.hpp"

using namespace dtsim;

namespace {
scenarios::Scenario parse(const std::string& text) {
  return scenarios::parse_scenario_node(yaml::load_string(text, "s.yaml"), yaml::Origin{"s.yaml"});
}
std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("scenarios::Scenario: every predict field is read", "[scenarios][scenario]") {
  const auto s = parse(R"(
name: daint
model: inception_v3
platform: piz-daint
workers: [1, 2, 4]
batch: 64
strategy: ps
ps: [1, 1, 3]
ps_placement: dedicated
ps_balance: round-robin
fusion_mb: 32
cycle_ms: 5
overlap: false
data: real
sample_bytes: 100000
prefetch_depth: 4
iterations: 5
anchor: 138.23
variability: {jitter_cv: 0.05, straggler_probability: 0.01, straggler_slowdown: 2, seed: 9}
sweep: {product: {batch: [32, 64]}}
)");
  CHECK(s.name == "daint");
  CHECK(s.workers == std::vector<int>{1, 2, 4});
  CHECK(s.ps == std::vector<int>{1, 1, 3});
  CHECK(s.batch == 64);
  CHECK(s.point.strategy == sim::strategy_by_name("ps"));
  CHECK(s.point.ps.placement == sim::PsPlacement::DEDICATED);
  CHECK(s.point.ps.balance == sim::PsBalance::ROUND_ROBIN);
  CHECK(s.point.runtime.fusion_bytes == Approx(32.0 * 1024 * 1024));
  CHECK(s.point.runtime.cycle_s == Approx(0.005));
  CHECK_FALSE(s.point.runtime.overlap);
  CHECK(s.point.input.data == sim::DataMode::REAL);
  CHECK(s.point.input.prefetch_depth == 4);
  CHECK(s.point.fidelity.iterations == 5);
  REQUIRE(s.anchor_samples_per_s);
  CHECK(*s.anchor_samples_per_s == Approx(138.23));
  CHECK(s.point.variability.seed == 9);
  CHECK(s.point.variability.straggler_slowdown == Approx(2));
}

TEST_CASE("scenarios::Scenario: workers as a scalar or text list, ps auto", "[scenarios][scenario]") {
  auto s = parse("model: resnet50\nplatform: piz-daint\nworkers: 8\nps: auto\n");
  CHECK(s.workers == std::vector<int>{8});
  CHECK(s.ps_auto);
  s = parse("model: resnet50\nplatform: piz-daint\nworkers: 1,2,4\n");
  CHECK(s.workers == std::vector<int>{1, 2, 4});
}

TEST_CASE("scenarios::Scenario: bad fields are one-line errors with file and line", "[scenarios][scenario]") {
  CHECK(error_of("model: a\nplatform: b\nbogus: 1\n").find("s.yaml:3") != std::string::npos);
  CHECK(error_of("model: a\nplatform: b\nbogus: 1\n").find("unknown key 'bogus'") != std::string::npos);
  CHECK(error_of("platform: b\n").find("model") != std::string::npos);
  CHECK(error_of("model: a\nplatform: b\nbatch: 0\n").find("batch") != std::string::npos);
  CHECK(error_of("model: a\nplatform: b\nworkers: [1, -2]\n").find("workers") != std::string::npos);
  CHECK(error_of("model: a\nplatform: b\nstrategy: magic\n").find("unknown strategy 'magic'") != std::string::npos);
  // A named choice is blamed on its own line, not the scenario's first.
  CHECK(error_of("model: a\nplatform: b\nstrategy: magic\n").find("s.yaml:3") != std::string::npos);
  CHECK(error_of("model: a\nplatform: b\nbatch: 4\nframework: tf\n").find("s.yaml:4: framework: unknown framework 'tf'") !=
        std::string::npos);
  CHECK(error_of("model: a\nplatform: b\nworkers: [1, 2]\nps: [1, 2, 3]\n").find("ps") != std::string::npos);
  CHECK(error_of("model: a\nplatform: b\nfusion_mb: -1\n").find("fusion_mb") != std::string::npos);
  CHECK(error_of("model: a\nplatform: b\nvariability: {jitter: 1}\n").find("unknown key 'jitter'") != std::string::npos);
  for (const auto& text : {"model: a\nplatform: b\nbogus: 1\n", "model: a\nplatform: b\nbatch: 0\n"})
    CHECK(error_of(text).find('\n') == std::string::npos);
}

TEST_CASE("scenarios::Scenario: list parsing and cross-field checks", "[scenarios][scenario]") {
  CHECK(scenarios::parse_count_list("1, 2,4", "--workers") == std::vector<int>{1, 2, 4});
  CHECK_THROWS_AS(scenarios::parse_count_list("1,,2", "--workers"), InputError);
  CHECK_THROWS_AS(scenarios::parse_count_list("0", "--workers"), InputError);
  CHECK_THROWS_AS(scenarios::parse_count_list("abc", "--workers"), InputError);
  CHECK_THROWS_AS(scenarios::parse_count_list("99999999999999", "--workers"), InputError);
  scenarios::Scenario s;
  s.model = "resnet50";
  s.platform = "piz-daint";
  s.workers = {1, 2, 4};
  scenarios::set_ps_text(s, "1,2", "--ps");
  CHECK_THROWS_WITH(scenarios::check_scenario(s), Catch::Contains("--ps: got 2 server counts for 3 worker counts"));
  scenarios::set_ps_text(s, "auto", "--ps");
  CHECK_NOTHROW(scenarios::check_scenario(s));
  s.batch = 0;
  CHECK_THROWS_AS(scenarios::check_scenario(s), InputError);
}
