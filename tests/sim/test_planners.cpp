// Planners of today's families without SimGrid: the shape of their step programs (which tasks, between
// which ranks and roles, how many bytes) against closed forms from the plan and the point.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>

#include "common/errors.hpp"
#include "sim/src/exchange/exchange.hpp"
#include "sim/src/plan/planners.hpp"
#include "sim/src/plan/program.hpp"
#include "platforms/transport.hpp"
#include "tests/sim/comm_test_platforms.hpp"
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

namespace {
TrainingPoint ps_point(int workers, int servers) {
  TrainingPoint p;
  p.workers = workers;
  p.workers_per_node = 1;
  p.strategy = strategy_by_name("ps");
  p.ps.servers = servers;
  p.ps.balance = PsBalance::ROUND_ROBIN;
  return p;
}
platforms::Platform test_platforms_star() { return test_platforms::uniform_star(16, 1.25e9, 5e-6); }
Layout layout_of(const TrainingPoint& p) { return {.nodes = p.workers / p.workers_per_node, .workers_per_node = p.workers_per_node}; }
double sum_seconds(const std::vector<const Task*>& tasks) {
  return std::accumulate(tasks.begin(), tasks.end(), 0.0, [](double a, const Task* t) { return a + t->seconds; });
}
}  // namespace

TEST_CASE("sim::Planners: a synchronous parameter server pulls each shard, pushes each layer and applies it",
          "[sim][planners]") {
  // Four parameter layers round robin on two servers: server 0 holds l1 and l3 (10 + 30 B), server 1 l2 and
  // l4 (20 + 40 B). One program for every worker.
  const auto prof = profile_of({0, 10, 20, 30, 40});
  const auto plan = plan_iteration(prof, 0);
  auto point = ps_point(4, 2);
  point.ps.apply_s_per_B = 1e-3;
  const auto programs = plan_parameter_server(plan, prof, point, test_platforms_star(), layout_of(point));
  REQUIRE_NOTHROW(check_programs(programs));
  REQUIRE(programs.programs.size() == 1);
  CHECK(programs.servers == 2);
  const auto& p = programs.of(3);
  const auto pulls = tasks_of(p, TaskKind::FLOW, "pull"), pushes = tasks_of(p, TaskKind::FLOW, "push");
  REQUIRE(pulls.size() == 2);
  CHECK(pulls[0]->src == Role{RoleKind::SERVER, 0});
  CHECK(pulls[0]->bytes == 40);
  CHECK(pulls[1]->bytes == 60);
  CHECK(pushes.size() == 4);  // one per parameter layer (TF pushes per variable)
  CHECK(sum_bytes(pushes) == Approx(plan.grad_bytes));
  // Forward waits for both pulls; every push is applied on its server, 1 ms a byte.
  const auto& forward = *tasks_of(p, TaskKind::COMPUTE, "forward").front();
  CHECK(forward.deps.size() == 3);  // the input and two pulls
  CHECK(sum_seconds(tasks_of(p, TaskKind::SERVE, "apply push")) == Approx(plan.grad_bytes * 1e-3));
  // The step ends at a barrier of every worker after every apply and the backward.
  const auto barrier = tasks_of(p, TaskKind::BARRIER);
  REQUIRE(barrier.size() == 1);
  CHECK(barrier[0]->seconds == 0);
  CHECK(barrier[0]->deps.size() == 4 + 1);
  // No RPC layer: no serving queue, no client delay.
  CHECK(tasks_of(p, TaskKind::DELAY).empty());
  CHECK(programs.serve_queues.empty());
  // The busiest shard's CPU: every worker's push of server 1's 60 B.
  CHECK(programs.busiest_server_s == Approx(4 * 60 * 1e-3));
  CHECK(programs.fold.groups.empty());  // fine mode: nothing folded

  SECTION("without server apply the barrier holds the busiest shard's share of one update") {
    point.ps.apply_s_per_B = 0;
    const auto sync = plan_parameter_server(plan, prof, point, test_platforms_star(), layout_of(point));
    CHECK(tasks_of(sync.of(0), TaskKind::SERVE).empty());
    CHECK(tasks_of(sync.of(0), TaskKind::BARRIER)[0]->seconds == Approx(plan.update_s * 60 / 100));
  }
  SECTION("an RPC layer: the server's threads serve each call, the client pays its software time") {
    point.ps.transport = "grpc";
    const auto rpc = plan_parameter_server(plan, prof, point, test_platforms_star(), layout_of(point));
    const auto& grpc = platforms::transport_by_name("grpc", platforms::TransportScope::RPC);
    REQUIRE(rpc.serve_queues.size() == 1);
    CHECK(rpc.serve_queues[0].threads == grpc.rpc_server_threads);
    CHECK(rpc.serve_queues[0].per_call_s == grpc.rpc_server_cpu_per_call_s);
    const auto& q = rpc.of(0);
    // Two calls per pull (two variables a shard), one per push.
    double calls = 0;
    for (const Task* t : tasks_of(q, TaskKind::SERVE)) calls += t->calls;
    CHECK(calls == 2 + 2 + 4);
    CHECK(sum_seconds(tasks_of(q, TaskKind::DELAY, "pull call")) ==
          Approx(grpc.rpc_cost_s(2, 40) + grpc.rpc_cost_s(2, 60)));
    CHECK(tasks_of(q, TaskKind::DELAY, "push call").size() == 4);
  }
  SECTION("a bad apply cost is refused as input") {
    point.ps.apply_s_per_B = -1;
    CHECK_THROWS_AS(plan_parameter_server(plan, prof, point, test_platforms_star(), layout_of(point)), InputError);
  }
}

TEST_CASE("sim::Planners: a coarse parameter-server job folds whole switches onto their first nodes",
          "[sim][planners]") {
  const auto prof = profile_of({0, 10, 20, 30, 40});
  const auto plan = plan_iteration(prof, 0);
  auto platform = test_platforms_star();
  platform.network.topology = platforms::TopologyKind::FAT_TREE;
  platform.network.fat_tree.levels = 2;
  platform.network.fat_tree.down = {4, 2};
  auto point = ps_point(8, 2);
  point.fidelity.comm_mode = CommMode::COARSE;
  SECTION("dedicated servers: every switch, routes checked against the used servers") {
    point.ps.placement = PsPlacement::DEDICATED;
    const auto programs = plan_parameter_server(plan, prof, point, platform, layout_of(point));
    CHECK(programs.fold.groups == std::vector<std::vector<int>>{{0, 1, 2, 3}, {4, 5, 6, 7}});
    CHECK(programs.fold.refs == std::vector<Role>{{RoleKind::SERVER, 0}, {RoleKind::SERVER, 1}});
    CHECK_FALSE(programs.fold.weighted);
    CHECK(programs.fold.bytes_to == std::vector<double>{40, 60});
    // Coarse pushes: at most 8 groups, here the four layers' own (each a quarter or more of the bytes).
    CHECK(programs.fold.flows_per_group == 2 + 4);
  }
  SECTION("colocated servers: only the switches without one, weighted") {
    point.ps.placement = PsPlacement::COLOCATED;
    point.ps.servers = 1;
    auto wide = point;
    wide.workers = 12;
    platform.network.fat_tree.down = {4, 3};
    const auto programs = plan_parameter_server(plan, prof, wide, platform, layout_of(wide));
    CHECK(programs.fold.groups == std::vector<std::vector<int>>{{4, 5, 6, 7}, {8, 9, 10, 11}});
    CHECK(programs.fold.weighted);
  }
  SECTION("real input data: no fold") {
    point.input.data = DataMode::REAL;
    CHECK(plan_parameter_server(plan, prof, point, platform, layout_of(point)).fold.groups.empty());
  }
}

TEST_CASE("sim::Planners: ps-replicated sums a node's gradients on its first GPU, which pushes and pulls for it",
          "[sim][planners]") {
  const auto prof = profile_of({0, 10, 20, 30, 40});
  const auto plan = plan_iteration(prof, 0);
  auto point = ps_point(8, 2);
  point.strategy = strategy_by_name("ps-replicated");
  point.workers_per_node = 4;
  point.ps.apply_s_per_B = 1e-3;
  const auto programs = plan_parameter_server(plan, prof, point, test_platforms_star(), layout_of(point));
  REQUIRE_NOTHROW(check_programs(programs));
  REQUIRE(programs.programs.size() == 2);  // the nodes' first GPUs, and every other GPU
  CHECK(programs.program_of == std::vector<int>{0, 1, 1, 1, 0, 1, 1, 1});
  CHECK(programs.rank_peers[4] == std::vector<int>{5, 6, 7});
  CHECK(programs.rank_peers[6] == std::vector<int>{4});
  const auto& leader = programs.of(0);
  const auto& other = programs.of(1);
  CHECK(tasks_of(leader, TaskKind::FLOW, "pull").size() == 2);
  CHECK(sum_bytes(tasks_of(leader, TaskKind::FLOW, "push")) == Approx(plan.grad_bytes));
  CHECK(tasks_of(other, TaskKind::FLOW).empty());
  // Each other GPU sends all its gradients to the first and takes the parameters from it.
  CHECK(sum_bytes(tasks_of(other, TaskKind::SEND, "local gradients")) == Approx(plan.grad_bytes));
  CHECK(sum_bytes(tasks_of(other, TaskKind::RECV, "local parameters")) == Approx(plan.grad_bytes));
  CHECK(sum_bytes(tasks_of(leader, TaskKind::RECV, "local gradients")) == Approx(3 * plan.grad_bytes));
  CHECK(tasks_of(leader, TaskKind::SEND, "local parameters").size() == 3);
  // A push waits for the node's gradients of its layers: its own backward and the three copies.
  const Task& push = *tasks_of(leader, TaskKind::FLOW, "push").front();
  CHECK(push.deps.size() == 1 + 3);
  // Copies are compute-side traffic, not the rank's communication; both programs end at one barrier.
  for (const auto* p : {&leader, &other}) {
    for (const Task* t : tasks_of(*p, TaskKind::SEND)) CHECK(t->phase != TaskPhase::COMMUNICATION);
    CHECK(tasks_of(*p, TaskKind::BARRIER).size() == 1);
  }
  CHECK(programs.busiest_server_s == Approx(2 * 60 * 1e-3));  // two nodes' pushes of the busiest shard
}

TEST_CASE("sim::Planners: ps-async has no barrier and folds only beyond the unfolded budget, at shared paces",
          "[sim][planners]") {
  const auto prof = profile_of({0, 10, 20, 30, 40});
  const auto plan = plan_iteration(prof, 0);
  auto point = ps_point(16, 2);
  point.strategy = strategy_by_name("ps-async");
  point.fidelity.comm_mode = CommMode::COARSE;
  point.ps.placement = PsPlacement::DEDICATED;
  auto platform = test_platforms_star();
  const auto small = plan_parameter_server(plan, prof, point, platform, layout_of(point));
  REQUIRE_NOTHROW(check_programs(small));
  CHECK(tasks_of(small.of(0), TaskKind::BARRIER).empty());
  CHECK(small.groups.empty());
  CHECK(small.busiest_server_s == 0);   // no server apply, no update: nothing waits for it
  CHECK(small.fold.groups.empty());     // 16 workers under the budget: each simulated
  // 256 one-GPU nodes on switches of 16: beyond 128 workers they fold, 16 groups... kept at 32 paces: 8
  // nodes a group, each group at its devices' mean pace.
  point.workers = 256;
  platform.nodes = 300;
  platform.network.topology = platforms::TopologyKind::FAT_TREE;
  platform.network.fat_tree.levels = 2;
  platform.network.fat_tree.down = {16, 16};
  const auto big = plan_parameter_server(plan, prof, point, platform, layout_of(point));
  CHECK(big.fold.shared_pace);
  CHECK(big.fold.min_groups == 32);
  REQUIRE(big.fold.groups.size() == 32);
  CHECK(big.fold.groups[1] == std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15});
}

TEST_CASE("sim::Planners: Horovod's runtime rides on every allreduce of the data-parallel program", "[sim][planners]") {
  const auto prof = profile_of({0, 10, 10, 30, 10, 10});
  const auto plan = plan_iteration(prof, 0, 1e-3);  // one bucket per parameter layer under a cycle
  const int n = 4;
  const DataParallelOptions options{
      .overlap = true, .cycle_s = 1e-3, .fuse_up_to_B = 64, .negotiation_B = 8, .copy_s_per_B = 1e-10};
  const auto programs = plan_data_parallel(plan, prof, n, options);
  REQUIRE_NOTHROW(check_programs(programs));
  CHECK(programs.latency_bound_bypass);
  const auto& p = programs.of(0);
  const auto collectives = tasks_of(p, TaskKind::COLLECTIVE);
  REQUIRE(collectives.size() == plan.buckets.size());
  std::vector<int> indices;
  for (std::size_t i = 0; i < p.tasks.size(); ++i)
    if (p.tasks[i].kind == TaskKind::COLLECTIVE) indices.push_back(static_cast<int>(i));
  for (std::size_t k = 0; k < collectives.size(); ++k) {
    const Task& t = *collectives[k];
    CHECK(t.cycle_s == 1e-3);
    CHECK(t.fuse_up_to_B == 64);
    CHECK(t.negotiation_B == 8);
    CHECK(t.copy_s_per_B == 1e-10);
    CHECK(t.items == static_cast<int>(plan.buckets[k].layers.size()));
    CHECK(t.bytes == plan.buckets[k].bytes);
    // Only its bucket's backward: the next one can be ready (and absorbed) while this one waits for a tick.
    REQUIRE(t.deps.size() == 1);
    CHECK(p.tasks[static_cast<std::size_t>(t.deps[0])].kind == TaskKind::COMPUTE);
  }
  // The update waits for every allreduce.
  const Task& update = p.tasks.back();
  CHECK(update.phase == TaskPhase::UPDATE);
  for (int i : indices) CHECK(std::find(update.deps.begin(), update.deps.end(), i) != update.deps.end());

  SECTION("without a runtime the allreduces chain and carry none of it") {
    const auto plain = plan_data_parallel(plan, prof, n, {.overlap = true});
    CHECK_FALSE(plain.latency_bound_bypass);
    int prev = -1;
    for (std::size_t i = 0; i < plain.of(0).tasks.size(); ++i) {
      const Task& t = plain.of(0).tasks[i];
      if (t.kind != TaskKind::COLLECTIVE) continue;
      CHECK(t.cycle_s == 0);
      CHECK(t.fuse_up_to_B == 0);
      CHECK(t.negotiation_B == 0);
      CHECK(t.copy_s_per_B == 0);
      if (prev >= 0) CHECK(std::find(t.deps.begin(), t.deps.end(), prev) != t.deps.end());
      prev = static_cast<int>(i);
    }
  }
}

TEST_CASE("sim::Planners: the allreduce family negotiates 8-byte words of 64 tensors each under Horovod",
          "[sim][planners]") {
  std::vector<std::int64_t> grads(70, 16);  // 70 tensors: two words
  grads.push_back(0);                        // a layer without parameters is not negotiated
  const auto prof = profile_of(grads);
  TrainingPoint point;
  point.workers = 4;
  point.strategy = strategy_by_name("allreduce-ring");
  point.runtime.cycle_s = 1e-3;
  point.runtime.fusion_bytes = 1024;
  point.runtime.framework.negotiation = true;
  const auto plan = plan_iteration(prof, 0, point.runtime.cycle_s);
  const auto programs = plan_allreduce_family(plan, prof, point, test_platforms::uniform_star(4, 1.25e9, 5e-6));
  REQUIRE_NOTHROW(check_programs(programs));
  const auto collectives = tasks_of(programs.of(0), TaskKind::COLLECTIVE);
  REQUIRE_FALSE(collectives.empty());
  for (const Task* t : collectives) {
    CHECK(t->negotiation_B == 2 * 8);
    CHECK(t->cycle_s == 1e-3);
    CHECK(t->fuse_up_to_B == 1024);
    CHECK(t->copy_s_per_B == 0);  // no fusion copies asked for
    CHECK_FALSE(t->host_buffers);
  }
}

TEST_CASE("sim::Planners: DDP copies every bucket, on a CPU worker's cores and as a GPU's copy delays",
          "[sim][planners]") {
  // PyTorch DDP's reducer copies each gradient into its bucket and back (pytorch-ddp: copy_min_items 1).
  // A CPU worker does it with its own threads at one core's share of the socket's bandwidth each (xeon-e5-2680-v4:
  // 76.8 GB/s over 14 cores, platforms/devices.yaml), 2 threads here; a GPU at its memory bandwidth, off its
  // compute stream.
  auto prof = profile_of({0, 10, 10, 30, 10, 10});
  prof.threads = 2;
  const auto plan = plan_iteration(prof, 25);
  TrainingPoint point;
  point.workers = 4;
  point.strategy = strategy_by_name("allreduce-ring");
  apply_framework(point, framework_by_name("pytorch-ddp"));
  REQUIRE(point.runtime.framework.copy_min_items == 1);
  auto cpu = test_platforms::uniform_star(4, 1.25e9, 5e-6);
  cpu.node.cpu = "xeon-e5-2680-v4";
  auto gpu = test_platforms::gpu_fat_tree(4, 4);
  gpu.node.cpu = "xeon-e5-2680-v4";
  gpu.node.gpu = "p100-pcie";
  const auto& p100 = platforms::DeviceCatalog::builtin().by_name("p100-pcie");
  const double core_Bps = 76.8e9 / 14;
  for (const bool on_cpu : {true, false}) {
    const auto programs = plan_allreduce_family(plan, prof, point, on_cpu ? cpu : gpu);
    REQUIRE_NOTHROW(check_programs(programs));
    const auto collectives = tasks_of(programs.of(0), TaskKind::COLLECTIVE);
    REQUIRE_FALSE(collectives.empty());
    for (const Task* t : collectives) {
      CHECK(t->copy_min_items == 1);
      CHECK(t->copy_on_cores == on_cpu);
      CHECK(t->copy_s_per_B == Approx(on_cpu ? 2 / (2 * core_Bps) : 2 / p100.mem_bandwidth_Bps).epsilon(1e-12));
    }
  }
  SECTION("Horovod copies only what it fuses") {
    apply_framework(point, framework_by_name("horovod"));
    for (const Task* t : tasks_of(plan_allreduce_family(plan, prof, point, cpu).of(0), TaskKind::COLLECTIVE)) {
      CHECK(t->copy_min_items == 2);
      CHECK(t->copy_on_cores);
    }
  }
}
