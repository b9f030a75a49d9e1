// Planners of today's families without SimGrid: the shape of their step programs (which tasks, between
// which ranks and roles, how many bytes) against closed forms from the plan and the point.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>

#include "common/errors.hpp"
#include "sim/src/plan/planners.hpp"
#include "sim/src/plan/program.hpp"
#include "tests/sim/profile_test_support.hpp"

using namespace dtsim;
using namespace dtsim::sim;

namespace {
using test_profiles::profile_of;

std::vector<const Task*> tasks_of(const RankProgram& p, TaskKind kind, const std::string& label = "") {
  std::vector<const Task*> out;
  for (const auto& t : p.tasks)
    if (t.kind == kind && (label.empty() || t.label == label)) out.push_back(&t);
  return out;
}
double sum_bytes(const std::vector<const Task*>& tasks) {
  return std::accumulate(tasks.begin(), tasks.end(), 0.0, [](double a, const Task* t) { return a + t->bytes; });
}

TrainingPoint single_node_point(int workers) {
  TrainingPoint p;
  p.workers = workers;
  p.strategy = strategy_by_name("data-parallel-single-node");
  p.input.scattered_bytes_per_sample = 3 * 224 * 224 * 4;
  p.input.gathered_bytes_per_sample = 4000;
  return p;
}
}  // namespace

TEST_CASE("sim::Planners: nn.DataParallel moves every copy between device 0 and each replica",
          "[sim][planners]") {
  const auto prof = profile_of({0, 10, 10, 30, 10, 10});
  const auto plan = plan_iteration(prof, 25);
  const double batch = 16;
  const int n = 4;
  const auto point = single_node_point(n);
  const auto programs = plan_data_parallel_single_node(plan, batch, point);
  REQUIRE_NOTHROW(check_programs(programs));
  REQUIRE(programs.ranks() == n);
  REQUIRE(programs.programs.size() == 2);  // device 0, and one program every other replica shares
  CHECK(programs.program_of == std::vector<int>{0, 1, 1, 1});
  const double input_B = batch * point.input.scattered_bytes_per_sample,
               output_B = batch * point.input.gathered_bytes_per_sample;

  const auto& lead = programs.of(0);
  // Device 0: one input slice, one output gradient and one "update done" to each replica; one output and
  // one set of gradients from each.
  CHECK(sum_bytes(tasks_of(lead, TaskKind::SEND, "scatter input")) == Approx((n - 1) * input_B));
  CHECK(sum_bytes(tasks_of(lead, TaskKind::RECV, "gather output")) == Approx((n - 1) * output_B));
  CHECK(sum_bytes(tasks_of(lead, TaskKind::SEND, "scatter output gradient")) == Approx((n - 1) * output_B));
  CHECK(sum_bytes(tasks_of(lead, TaskKind::RECV, "reduce gradients")) == Approx((n - 1) * plan.grad_bytes));
  CHECK(tasks_of(lead, TaskKind::SEND, "update done").size() == static_cast<std::size_t>(n - 1));
  // Each replica's messages go to a different peer slot, and the slots name replicas 1 .. n-1.
  std::vector<int> peers;
  for (const Task* t : tasks_of(lead, TaskKind::SEND, "scatter input")) peers.push_back(programs.peer_of(0, *t));
  CHECK(peers == std::vector<int>{1, 2, 3});
  // The parameters: one binomial broadcast of the gradient's bytes over every device, played without a
  // collective library, the only task counted as communication.
  for (int r : {0, 2}) {
    const auto bcast = tasks_of(programs.of(r), TaskKind::COLLECTIVE);
    REQUIRE(bcast.size() == 1);
    CHECK(bcast[0]->operation == "broadcast");
    CHECK(bcast[0]->algorithm == "binomial");
    CHECK(bcast[0]->bytes == plan.grad_bytes);
    CHECK(programs.groups[static_cast<std::size_t>(programs.group_of(r, *bcast[0]))].ranks.size() == static_cast<std::size_t>(n));
    for (const auto& t : programs.of(r).tasks)
      CHECK((t.phase == TaskPhase::COMMUNICATION) == (t.kind == TaskKind::COLLECTIVE));
  }
  // Compute: every replica runs forward and its whole backward; only device 0 updates.
  double backward_s = plan.bwd_tail_s;
  for (double s : plan.bwd_segment_s) backward_s += s;
  for (int r : {0, 3}) {
    const auto computes = tasks_of(programs.of(r), TaskKind::COMPUTE);
    CHECK(tasks_of(programs.of(r), TaskKind::COMPUTE, "forward").front()->seconds == plan.fwd_s);
    CHECK(tasks_of(programs.of(r), TaskKind::COMPUTE, "backward").front()->seconds == backward_s);
    CHECK(computes.size() == (r == 0 ? 3u : 2u));
    CHECK(tasks_of(programs.of(r), TaskKind::INPUT).size() == 1);
  }
  CHECK(tasks_of(lead, TaskKind::COMPUTE, "optimizer update").front()->seconds == plan.update_s);
  // Device 0's update waits for its backward and every replica's gradients.
  const auto& update = *tasks_of(lead, TaskKind::COMPUTE, "optimizer update").front();
  CHECK(update.deps.size() == static_cast<std::size_t>(n));
  // A replica's backward waits for its output gradient, which device 0 sends once it has every output.
  const auto& replica = programs.of(1);
  const auto& bwd = *tasks_of(replica, TaskKind::COMPUTE, "backward").front();
  CHECK(std::any_of(bwd.deps.begin(), bwd.deps.end(), [&](int d) {
    return replica.tasks[static_cast<std::size_t>(d)].label == "scatter output gradient";
  }));
  for (const Task* t : tasks_of(lead, TaskKind::SEND, "scatter output gradient"))
    CHECK(t->deps.size() == static_cast<std::size_t>(n));  // its forward and the n - 1 outputs
}

TEST_CASE("sim::Planners: nn.DataParallel on one device has nothing to copy", "[sim][planners]") {
  const auto prof = profile_of({10, 10});
  const auto plan = plan_iteration(prof, 25);
  const auto programs = plan_data_parallel_single_node(plan, 8, single_node_point(1));
  REQUIRE_NOTHROW(check_programs(programs));
  REQUIRE(programs.programs.size() == 1);
  const auto& p = programs.of(0);
  CHECK(tasks_of(p, TaskKind::COLLECTIVE).empty());
  CHECK(tasks_of(p, TaskKind::SEND).empty());
  CHECK(tasks_of(p, TaskKind::RECV).empty());
  CHECK(tasks_of(p, TaskKind::COMPUTE).size() == 3);
}

TEST_CASE("sim::Programs: flows and serves name roles the executor can map", "[sim][programs]") {
  StepPrograms pr;
  pr.servers = 2;
  RankProgram p;
  p.add({.kind = TaskKind::FLOW, .label = "push", .bytes = 1e6, .src = {RoleKind::RANK}, .dst = {RoleKind::SERVER, 1}});
  p.add({.kind = TaskKind::SERVE, .label = "apply", .seconds = 1e-3, .dst = {RoleKind::SERVER, 1}, .deps = {0}});
  p.add({.kind = TaskKind::INPUT, .label = "input batch"});
  pr.programs = {p};
  pr.program_of = {0};
  pr.groups = {world_group(1)};
  pr.rank_groups = {{0}};
  pr.rank_peers = {{}};
  REQUIRE_NOTHROW(check_programs(pr));
  auto broken = [&](auto edit) {
    StepPrograms b = pr;
    edit(b.programs[0]);
    return b;
  };
  CHECK_THROWS_AS(check_programs(broken([](RankProgram& q) { q.tasks[0].dst = {RoleKind::SERVER, 2}; })), Failure);
  CHECK_THROWS_AS(check_programs(broken([](RankProgram& q) { q.tasks[0].dst = {RoleKind::RANK}; })), Failure);
  CHECK_THROWS_AS(check_programs(broken([](RankProgram& q) { q.tasks[1].dst = {RoleKind::STORAGE}; })), Failure);
  CHECK_THROWS_AS(check_programs(broken([](RankProgram& q) { q.add({.kind = TaskKind::INPUT, .label = "again"}); })), Failure);
  CHECK_THROWS_AS(check_programs(broken([](RankProgram& q) {
                    q.add({.kind = TaskKind::COLLECTIVE, .label = "b", .operation = "broadcast", .group = 0, .algorithm = "ring"});
                  })),
                  Failure);
}
