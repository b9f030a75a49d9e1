// The layout search (scenarios/plan.hpp, `dtsim plan`): what it enumerates, what it drops and why,
// resumption from --out, and bad input.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

#include "common/errors.hpp"
#include "scenarios/plan.hpp"
#include "scenarios/scenario.hpp"
#include "scenarios/src/layout_fit.hpp"
#include "tests/support/run_cli.hpp"

namespace fs = std::filesystem;
using dtsim::test::run_cli;
using namespace dtsim::scenarios;

namespace {

Scenario base_scenario(const std::string& model, const std::string& platform, int workers, int global_batch) {
  Scenario s;
  s.name = "cli";
  s.model = model;
  s.platform = platform;
  s.workers = {workers};
  s.global_batch = global_batch;
  s.precision = dtsim::calibrate::Precision::BF16_MIXED;
  s.point.variability = dtsim::sim::Variability::none();
  return s;
}

std::size_t dropped_total(const PlanEnumeration& e) {
  std::size_t n = 0;
  for (const auto& [reason, count] : e.dropped) n += count;
  return n;
}

std::size_t dropped_matching(const PlanEnumeration& e, const std::string& part) {
  std::size_t n = 0;
  for (const auto& [reason, count] : e.dropped)
    if (reason.find(part) != std::string::npos) n += count;
  return n;
}

}  // namespace

TEST_CASE("scenarios::Plan: GPT-2 on 8 H100 enumerates tp x cp x pp x vp x micro-batch x ZeRO x recompute") {
  // 12 heads and 12 layers, 8 GPUs per node, global batch 16, micro-batches 1..2, one virtual stage.
  PlanSpace space;
  space.max_micro_batch = 2;
  space.max_vp = 1;
  space.max_cp = 2;
  const auto e = enumerate_layouts(base_scenario("gpt2", "dgx-h100-superpod", 8, 16), space);
  // Every (tp | 8, cp | 8/tp, cp <= 2, pp | 8/(tp cp)) gives micro-batches {1, 2} x 4 ZeRO stages x 3 policies.
  std::size_t expected = 0;
  for (int tp : {1, 2, 4, 8})
    for (int cp : {1, 2})
      for (int pp : {1, 2, 4, 8})
        if (8 % (tp * cp * pp) == 0) expected += 2 * 4 * 3;
  CHECK(e.enumerated == expected);
  CHECK(e.fitting.size() + dropped_total(e) == e.enumerated);
  // tp 8 does not divide 12 heads: every tp-8 candidate is dropped with the model's own message.
  CHECK(dropped_matching(e, "attention heads") > 0);
  for (const auto& c : e.fitting) {
    CHECK(c.layout.tp != 8);
    // GPT-2 fits an 80 GB GPU without recomputation: no heavier policy is kept.
    CHECK(c.layout.recompute == "none");
    CHECK(c.layout.zero != 2);  // ZeRO 1 fits wherever ZeRO 2 does, with the same collectives
    if (c.layout.tp * c.layout.pp == 8) CHECK(c.layout.zero == 0);  // dp x cp = 1: one rank per gradient group
  }
  // Distinct, and every kept candidate has a positive estimate within the GPU.
  std::set<std::string> keys;
  for (const auto& c : e.fitting) keys.insert(c.key());
  CHECK(keys.size() == e.fitting.size());
  for (double m : e.fitting_memory_B) {
    CHECK(m > 0);
    CHECK(m <= e.capacity_B);
  }
}

TEST_CASE("scenarios::Plan: Llama 2 7B on 8 A100 80 GB does not fit without sharding") {
  PlanSpace space;
  space.max_micro_batch = 1;
  space.max_vp = 1;
  space.max_cp = 1;
  const auto e = enumerate_layouts(base_scenario("llama2_7b", "dgx-a100-cluster", 8, 8), space);
  CHECK(dropped_matching(e, "does not fit") > 0);
  REQUIRE_FALSE(e.fitting.empty());
  for (const auto& c : e.fitting) {
    // 7B parameters x 16 bytes (BF16 weights and gradients, FP32 Adam) = 112 GB > 80 GB on one rank.
    const bool replicated = c.layout.tp == 1 && c.layout.pp == 1 && c.layout.zero == 0;
    CHECK_FALSE(replicated);
  }
}

TEST_CASE("scenarios::Plan: bad input names the flag and exits 2") {
  SECTION("a CNN") {
    const auto r = run_cli({"plan", "--model", "resnet50", "--platform", "dgx-h100-superpod", "--workers", "8",
                            "--global-batch", "16", "--quiet"});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("transformer") != std::string::npos);
  }
  SECTION("several GPU counts") {
    const auto r = run_cli({"plan", "--model", "gpt2", "--platform", "dgx-h100-superpod", "--workers", "8,16",
                            "--global-batch", "16", "--quiet"});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--workers") != std::string::npos);
  }
  SECTION("no global batch") {
    const auto r = run_cli({"plan", "--model", "gpt2", "--platform", "dgx-h100-superpod", "--workers", "8", "--quiet"});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--global-batch") != std::string::npos);
  }
  SECTION("more layouts fit than --max-candidates, simulating every one") {
    const auto r = run_cli({"plan", "--model", "gpt2", "--platform", "dgx-h100-superpod", "--workers", "8",
                            "--global-batch", "16", "--max-candidates", "3", "--exhaustive", "--quiet"});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--max-candidates") != std::string::npos);
    CHECK(r.err.find("layouts fit") != std::string::npos);
  }
  SECTION("--max-candidates simulations do not decide the top N") {
    const auto r = run_cli({"plan", "--model", "gpt2", "--platform", "dgx-h100-superpod", "--workers", "8",
                            "--global-batch", "16", "--seq-len", "256", "--iterations", "2", "--max-candidates", "2",
                            "--top", "3", "--quiet"});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--max-candidates") != std::string::npos);
    CHECK(r.err.find("could still be among the fastest 3") != std::string::npos);
  }
}

TEST_CASE("scenarios::Plan: a rerun with --out skips the layouts already simulated") {
  const fs::path dir = fs::temp_directory_path() / ("dtsim_plan_resume_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const std::vector<std::string> args{"plan", "--model", "gpt2", "--platform", "dgx-h100-superpod", "--workers", "2",
                                      "--global-batch", "4", "--seq-len", "256", "--precision", "bf16-mixed",
                                      "--max-micro-batch", "1", "--max-vp", "1", "--max-cp", "1", "--no-variability",
                                      "--iterations", "2", "--quiet", "--format", "json", "--out", dir.string(),
                                      "-j", "2"};
  const auto first = run_cli(args);
  REQUIRE(first.exit_code == 0);
  const auto a = nlohmann::json::parse(first.out);
  const std::size_t fitting = a["fitting"].get<std::size_t>();
  REQUIRE(fitting >= 3);
  CHECK(a["simulated"].get<std::size_t>() == fitting);
  CHECK(a["already_done"].get<std::size_t>() == 0);
  CHECK(a["layouts"].size() == fitting);
  // Fastest first.
  for (std::size_t i = 1; i < a["layouts"].size(); ++i)
    CHECK(a["layouts"][i - 1]["result"]["tokens_per_s"].get<double>() >=
          a["layouts"][i]["result"]["tokens_per_s"].get<double>());
  const auto second = run_cli(args);
  REQUIRE(second.exit_code == 0);
  const auto b = nlohmann::json::parse(second.out);
  CHECK(b["simulated"].get<std::size_t>() == 0);
  CHECK(b["already_done"].get<std::size_t>() == fitting);
  CHECK(b["layouts"][0]["result"]["tokens_per_s"] == a["layouts"][0]["result"]["tokens_per_s"]);
  fs::remove_all(dir);
}

TEST_CASE("scenarios::Plan: mpirun -np 2 splits the layouts and ranks them as one process does") {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) {
    WARN("mpirun not found: MPI plan not checked");
    return;
  }
  const fs::path dir = fs::temp_directory_path() / ("dtsim_plan_mpi_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string common = " plan --model gpt2 --platform dgx-h100-superpod --workers 2 --global-batch 4 --seq-len 256 "
                            "--precision bf16-mixed --max-micro-batch 1 --max-vp 1 --max-cp 1 --no-variability "
                            "--iterations 2 --quiet --format json";
  const std::string flags = common + " --out ";
  const auto serial = run_cli({"plan", "--model", "gpt2", "--platform", "dgx-h100-superpod", "--workers", "2",
                               "--global-batch", "4", "--seq-len", "256", "--precision", "bf16-mixed",
                               "--max-micro-batch", "1", "--max-vp", "1", "--max-cp", "1", "--no-variability",
                               "--iterations", "2", "--quiet", "--format", "json", "--out", (dir / "serial").string()});
  REQUIRE(serial.exit_code == 0);
  const std::string cmd = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
                          "OMPI_MCA_rmaps_base_oversubscribe=1 mpirun -np 2 -x OMP_NUM_THREADS=1 '" DTSIM_BINARY "'" +
                          flags + "'" + (dir / "mpi").string() + "' > '" + (dir / "mpi.json").string() + "' 2> '" +
                          (dir / "mpi.err").string() + "'";
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::ifstream in(dir / "mpi.json");
  const auto a = nlohmann::json::parse(serial.out);
  const auto b = nlohmann::json::parse(in);
  CHECK(b["simulated"] == a["fitting"]);
  REQUIRE(b["layouts"].size() == a["layouts"].size());
  for (std::size_t i = 0; i < a["layouts"].size(); ++i) {
    auto x = a["layouts"][i], y = b["layouts"][i];
    x["result"].erase("wall_s");
    y["result"].erase("wall_s");
    CHECK(x == y);
  }
  // Without --out the ranks would have no folder in common.
  const std::string no_out = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
                             "OMPI_MCA_rmaps_base_oversubscribe=1 mpirun -np 2 -x OMP_NUM_THREADS=1 '" DTSIM_BINARY "'" +
                             common + " > /dev/null 2> '" + (dir / "noout.err").string() + "'";
  CHECK(std::system(no_out.c_str()) != 0);
  std::ifstream err(dir / "noout.err");
  const std::string text((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
  CHECK(text.find("--out") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("scenarios::Plan: each candidate's bound is at most its simulated iteration, and the cached prediction "
          "is predict's") {
  // GPT-2 on 8 H100, a mix of tp, pp, vp, cp, ZeRO and recomputation.
  Scenario base = base_scenario("gpt2", "dgx-h100-superpod", 8, 16);
  base.seq_len = 256;
  base.point.fidelity.iterations = 2;
  const auto candidate = [](int tp, int pp, int vp, int cp, int mb, int zero, const char* recompute) {
    PlanCandidate c;
    c.layout.tp = tp;
    c.layout.pp = pp;
    c.layout.vp = vp;
    c.layout.cp = cp;
    c.layout.zero = zero;
    c.layout.recompute = recompute;
    c.micro_batch = mb;
    return c;
  };
  const std::vector<PlanCandidate> candidates{
      candidate(1, 1, 1, 1, 2, 0, "none"),      candidate(2, 2, 1, 1, 1, 1, "selective"),
      candidate(1, 2, 2, 1, 1, 2, "none"),      candidate(2, 1, 1, 2, 1, 3, "full"),
      candidate(1, 4, 1, 1, 1, 3, "selective"), candidate(4, 2, 1, 1, 2, 0, "full"),
  };
  LayoutCache cache;
  for (const auto& c : candidates) {
    INFO(c.key());
    const Scenario s = apply_candidate(base, c);
    const double bound = layout_lower_bound_s(s, cache);
    const auto rows = predict_scenario(s);
    REQUIRE(rows.size() == 1);
    const double simulated = base.global_batch / rows[0].throughput;
    CHECK(bound > 0);
    CHECK(bound <= simulated);
    CHECK(bound >= 0.2 * simulated);  // a bound worth ordering by: compute is a good part of the iteration
    const auto cached = predict_layout(s, cache);
    REQUIRE(cached.size() == 1);
    CHECK(cached[0].tokens_per_s == rows[0].tokens_per_s);
    CHECK(cached[0].memory_per_device_B == rows[0].memory_per_device_B);
  }
}

TEST_CASE("scenarios::Plan: the pruned search ranks the same top N as simulating every layout") {
  Scenario base = base_scenario("gpt2", "dgx-h100-superpod", 8, 16);
  base.seq_len = 256;
  base.point.fidelity.iterations = 2;
  PlanOptions options;
  options.space.max_micro_batch = 2;
  options.space.max_vp = 2;
  options.space.max_cp = 2;
  options.progress = false;
  options.jobs = 2;
  options.top = 3;
  options.prune = false;
  const auto all = run_plan(base, options);
  options.prune = true;
  const auto pruned = run_plan(base, options);
  REQUIRE(all.ranked.size() == all.enumeration.fitting.size());
  CHECK(all.pruned == 0);
  // Every fitting layout's bound (communication included) is at most its simulated iteration.
  for (const auto& row : all.ranked) {
    INFO(row.candidate.key());
    CHECK(row.bound_s <= base.global_batch / row.result.throughput);
  }
  // Some layouts were left out, and every fitting one is simulated or left out.
  CHECK(pruned.pruned > 0);
  CHECK(pruned.simulated + pruned.pruned == pruned.enumeration.fitting.size());
  REQUIRE(pruned.ranked.size() >= options.top);
  for (std::size_t i = 0; i < options.top; ++i) {
    CHECK(pruned.ranked[i].candidate.key() == all.ranked[i].candidate.key());
    CHECK(pruned.ranked[i].result.tokens_per_s == all.ranked[i].result.tokens_per_s);
  }
  // Every layout left out has a bound the third fastest beats.
  const double third_s = base.global_batch / all.ranked[options.top - 1].result.throughput;
  std::size_t beaten = 0;
  for (double b : all.enumeration.fitting_bound_s) beaten += third_s < b ? 1 : 0;
  CHECK(pruned.pruned <= beaten);
}
