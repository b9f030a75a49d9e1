// Step programs without SimGrid: the data-parallel planner's program, the checks every program passes,
// and the rank grid's process groups (Megatron-LM's order: tp fastest, pp slowest).
#include <catch2/catch.hpp>

#include <algorithm>

#include "common/errors.hpp"
#include "tests/sim/profile_test_support.hpp"
#include "sim/src/plan/planners.hpp"
#include "sim/src/plan/program.hpp"
#include "sim/src/plan/rank_grid.hpp"

using namespace dtsim;
using namespace dtsim::sim;

namespace {
using test_profiles::profile_of;

int count(const RankProgram& p, TaskKind kind) {
  return static_cast<int>(std::count_if(p.tasks.begin(), p.tasks.end(), [&](const Task& t) { return t.kind == kind; }));
}
}  // namespace

TEST_CASE("sim::Programs: data parallelism is one shared program with an allreduce per bucket", "[sim][programs]") {
  const auto prof = profile_of({0, 10, 10, 30, 10, 10});
  const auto plan = plan_iteration(prof, 25);  // 3 buckets
  for (bool overlap : {true, false}) {
    const auto programs = plan_data_parallel(plan, prof, 4, {.overlap = overlap});
    REQUIRE_NOTHROW(check_programs(programs));
    REQUIRE(programs.programs.size() == 1);
    CHECK(programs.ranks() == 4);
    const auto& p = programs.of(3);
    CHECK(count(p, TaskKind::COMPUTE) == 1 + 3 + 1 + 1);  // forward, 3 segments, tail, update
    CHECK(count(p, TaskKind::COLLECTIVE) == 3);
    double compute_s = 0, bytes = 0;
    for (const auto& t : p.tasks) {
      if (t.kind == TaskKind::COMPUTE) compute_s += t.seconds;
      if (t.kind == TaskKind::COLLECTIVE) {
        bytes += t.bytes;
        CHECK(t.operation == "allreduce");
        CHECK(programs.groups[static_cast<std::size_t>(programs.group_of(3, t))].ranks.size() == 4);
        // Bucket k's allreduce waits for its backward segment, and (without overlap) for all of backward.
        const auto& seg = p.tasks[static_cast<std::size_t>(t.deps.front())];
        CHECK(seg.phase == TaskPhase::BACKWARD);
      }
    }
    CHECK(compute_s == Approx(plan.step_s()));
    CHECK(bytes == Approx(plan.grad_bytes));
    const auto& update = p.tasks.back();
    CHECK(update.phase == TaskPhase::UPDATE);
    CHECK(update.deps.size() == 2);  // backward's tail and the last allreduce
    if (!overlap) {
      // Every allreduce depends on the tail of backward (directly or through the previous one).
      const auto& first = *std::find_if(p.tasks.begin(), p.tasks.end(), [](const Task& t) { return t.kind == TaskKind::COLLECTIVE; });
      CHECK(first.deps.size() == 2);
    }
  }
}

TEST_CASE("sim::Programs: the checks catch what would hang or mislead the executor", "[sim][programs]") {
  const auto prof = profile_of({0, 10, 10});
  const auto good = plan_data_parallel(plan_iteration(prof, 0), prof, 3, {});
  REQUIRE_NOTHROW(check_programs(good));
  SECTION("a dependency on a later task") {
    auto p = good;
    p.programs[0].tasks[1].deps = {5};
    CHECK_THROWS_AS(check_programs(p), Failure);
  }
  SECTION("a rank that calls other collectives than its group") {
    auto p = good;
    p.programs.push_back(p.programs[0]);
    for (auto& t : p.programs[1].tasks)
      if (t.kind == TaskKind::COLLECTIVE) t.bytes *= 2;
    p.program_of[2] = 1;
    CHECK_THROWS_AS(check_programs(p), Failure);
  }
  SECTION("a member missing from a group's callers") {
    auto p = good;
    p.groups.push_back({"other", {0, 1}});
    p.rank_groups[2] = {1};  // rank 2's world slot points at a group it is not in
    CHECK_THROWS_AS(check_programs(p), Failure);
  }
  SECTION("a send without its receive") {
    auto p = good;
    p.rank_peers[0] = {1};
    p.programs.push_back(p.programs[0]);
    p.programs[1].add({.kind = TaskKind::SEND, .phase = TaskPhase::COMMUNICATION, .label = "send", .peer = 0, .bytes = 8});
    p.program_of[0] = 1;
    CHECK_THROWS_AS(check_programs(p), Failure);
  }
  SECTION("negative or infinite costs") {
    auto p = good;
    p.programs[0].tasks[0].seconds = -1;
    CHECK_THROWS_AS(check_programs(p), Failure);
  }
}

TEST_CASE("sim::RankGrid: groups follow Megatron-LM's order, tensor-parallel ranks adjacent", "[sim][programs]") {
  // 16 ranks: tp 2, dp 2, pp 4 (tp fastest).
  const RankGrid grid({{"tp", 2}, {"dp", 2}, {"pp", 4}});
  CHECK(grid.ranks() == 16);
  const auto tp = grid.groups("tp");
  REQUIRE(tp.size() == 8);
  CHECK(tp[0].ranks == std::vector<int>{0, 1});
  CHECK(tp[1].ranks == std::vector<int>{2, 3});
  const auto dp = grid.groups("dp");
  REQUIRE(dp.size() == 8);
  CHECK(dp[0].ranks == std::vector<int>{0, 2});
  CHECK(dp[1].ranks == std::vector<int>{1, 3});
  const auto pp = grid.groups("pp");
  REQUIRE(pp.size() == 4);
  CHECK(pp[0].ranks == std::vector<int>{0, 4, 8, 12});
  CHECK(pp[3].ranks == std::vector<int>{3, 7, 11, 15});
  CHECK(grid.coordinate(13, "tp") == 1);
  CHECK(grid.coordinate(13, "dp") == 0);
  CHECK(grid.coordinate(13, "pp") == 3);
  CHECK(grid.group_of(13, "pp").ranks == pp[1].ranks);
  CHECK(grid.size_of("cp") == 1);
  CHECK(grid.group_of(5, "cp").ranks == std::vector<int>{5});
  // Every rank is in exactly one group of each dimension.
  for (const char* dim : {"tp", "dp", "pp"}) {
    std::vector<int> seen(16, 0);
    for (const auto& g : grid.groups(dim))
      for (int r : g.ranks) ++seen[static_cast<std::size_t>(r)];
    CHECK(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
  }
  CHECK_THROWS_AS(RankGrid({{"tp", 0}}), InputError);
  // Several dimensions at once: Megatron-LM's dp-cp group (ranks differing only in cp and dp).
  const RankGrid g2({{"tp", 2}, {"cp", 2}, {"dp", 2}, {"pp", 2}});
  const auto dpcp = g2.joint_groups({"cp", "dp"});
  REQUIRE(dpcp.size() == 4);
  CHECK(dpcp[0].ranks == std::vector<int>{0, 2, 4, 6});
  CHECK(dpcp[1].ranks == std::vector<int>{1, 3, 5, 7});
  CHECK(dpcp[2].ranks == std::vector<int>{8, 10, 12, 14});
  CHECK(dpcp[0].name == "cp-dp 0");
  CHECK_THROWS_AS(RankGrid({{"tp", 2}, {"tp", 2}}), InputError);
}
