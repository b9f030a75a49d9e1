// The step-program executor on hand-built programs and a uniform star network: closed forms for a
// two-stage pipeline (send/recv), sharded data parallelism (reduce-scatter + allgather), collectives on
// disjoint groups at once, and the stream rules (one compute and one collective at a time per rank).
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "common/errors.hpp"
#include "sim/src/coll/collective.hpp"
#include "sim/src/executor.hpp"
#include "tests/sim/comm_test_platforms.hpp"

using namespace dtsim;
using namespace dtsim::sim;

namespace {
constexpr double BW = 1.25e9;  // 10 Gb/s ports
constexpr double LAT = 5e-6;   // per port: 2 x LAT between two nodes
constexpr double MS = 1e-3;

calibrate::ComputeProfile profile() {
  calibrate::ComputeProfile p;
  p.model = "programs";
  p.device = "test-cpu";
  p.batch = 8;
  // The profile's layers are not played (the programs are): one, for the point's checks.
  calibrate::LayerTime l;
  l.name = "layer";
  l.op = "conv2d";
  l.fwd_s = 1e-3;
  l.grad_bytes = 4;
  p.layers.push_back(l);
  return p;
}

TrainingPoint point(int workers, const std::string& strategy = "allreduce-ring") {
  TrainingPoint p;
  p.workers = workers;
  p.workers_per_node = 1;
  p.strategy = strategy_by_name(strategy);
  p.fidelity.iterations = 2;
  p.fidelity.interference = false;
  return p;
}

Task compute(const std::string& label, double seconds, std::vector<int> deps = {}, TaskPhase phase = TaskPhase::FORWARD) {
  return {.kind = TaskKind::COMPUTE, .phase = phase, .label = label, .seconds = seconds, .deps = std::move(deps)};
}
Task collective(const std::string& op, int slot, double bytes, std::vector<int> deps) {
  return {.kind = TaskKind::COLLECTIVE, .phase = TaskPhase::COMMUNICATION, .label = op, .operation = op, .group = slot,
          .bytes = bytes, .deps = std::move(deps)};
}
Task p2p(TaskKind kind, int slot, double bytes, std::vector<int> deps) {
  return {.kind = kind, .phase = TaskPhase::COMMUNICATION, .label = kind == TaskKind::SEND ? "send" : "recv",
          .peer = slot, .bytes = bytes, .deps = std::move(deps)};
}
double message_s(double bytes) { return 2 * LAT + bytes / BW; }
}  // namespace

TEST_CASE("sim::Executor: a two-stage pipeline sends activations forward and gradients back", "[sim][executor]") {
  const double act = 5e6;
  StepPrograms pr;
  RankProgram first, last;
  int f = first.add(compute("forward stage 0", 1 * MS));
  int s = first.add(p2p(TaskKind::SEND, 0, act, {f}));
  int r = first.add(p2p(TaskKind::RECV, 0, act, {s}));
  first.add(compute("backward stage 0", 2 * MS, {r}, TaskPhase::BACKWARD));
  r = last.add(p2p(TaskKind::RECV, 0, act, {}));
  f = last.add(compute("forward stage 1", 1 * MS, {r}));
  int b = last.add(compute("backward stage 1", 2 * MS, {f}, TaskPhase::BACKWARD));
  last.add(p2p(TaskKind::SEND, 0, act, {b}));
  pr.programs = {first, last};
  pr.program_of = {0, 1};
  pr.rank_groups = {{}, {}};
  pr.rank_peers = {{1}, {0}};
  const auto res = simulate_programs(test_platforms::uniform_star(2, BW, LAT), profile(), point(2), pr);
  // One micro-batch: no overlap at all, every step waits for the previous one.
  CHECK(res.iteration_time_s == Approx(1 * MS + message_s(act) + 3 * MS + message_s(act) + 2 * MS).epsilon(1e-6));
  CHECK(res.inter_node_bytes == Approx(2 * act));
}

TEST_CASE("sim::Executor: sharded data parallelism is compute, reduce-scatter, then allgather", "[sim][executor]") {
  const int n = 4;
  const double grads = 40e6;
  StepPrograms pr;
  pr.groups = {world_group(n)};
  RankProgram p;
  int c = p.add(compute("forward and backward", 3 * MS));
  int rs = p.add(collective("reduce-scatter", 0, grads, {c}));
  int u = p.add(compute("optimizer step on the shard", 0.5 * MS, {rs}, TaskPhase::UPDATE));
  p.add(collective("allgather", 0, grads, {u}));
  pr.programs = {p};
  pr.program_of.assign(n, 0);
  pr.rank_groups.assign(n, {0});
  pr.rank_peers.assign(n, {});
  const auto res = simulate_programs(test_platforms::uniform_star(n, BW, LAT), profile(), point(n), pr);
  const UniformNetwork net{2 * LAT, BW};
  const double rs_s = collective_or_null("reduce-scatter", "ring")->closed_form_s(net, n, grads);
  const double ag_s = collective_or_null("allgather", "ring")->closed_form_s(net, n, grads);
  CHECK(rs_s == Approx(3 * (2 * LAT + grads / n / BW)));
  CHECK(res.iteration_time_s == Approx(3.5 * MS + rs_s + ag_s).epsilon(0.02));
  // Together the two move what one ring allreduce moves.
  CHECK(res.inter_node_bytes == Approx(2.0 * (n - 1) / n * grads * n));
}

TEST_CASE("sim::Executor: collectives on disjoint groups run at once; one rank's collectives one at a time",
          "[sim][executor]") {
  const double bytes = 25e6;
  const UniformNetwork net{2 * LAT, BW};
  const double one = collective_or_null("allreduce", "ring")->closed_form_s(net, 2, bytes);
  SECTION("groups {0,1} and {2,3}: both allreduces take the time of one") {
    StepPrograms pr;
    pr.groups = {{"a", {0, 1}}, {"b", {2, 3}}};
    RankProgram p;
    p.add(collective("allreduce", 0, bytes, {}));
    pr.programs = {p};
    pr.program_of.assign(4, 0);
    pr.rank_groups = {{0}, {0}, {1}, {1}};
    pr.rank_peers.assign(4, {});
    const auto res = simulate_programs(test_platforms::uniform_star(4, BW, LAT), profile(), point(4), pr);
    CHECK(res.iteration_time_s == Approx(one).epsilon(0.02));
  }
  SECTION("two independent allreduces of one rank serialise on its communication stream") {
    StepPrograms pr;
    pr.groups = {world_group(2)};
    RankProgram p;
    p.add(collective("allreduce", 0, bytes, {}));
    p.add(collective("allreduce", 0, bytes, {}));
    pr.programs = {p};
    pr.program_of.assign(2, 0);
    pr.rank_groups.assign(2, {0});
    pr.rank_peers.assign(2, {});
    const auto res = simulate_programs(test_platforms::uniform_star(2, BW, LAT), profile(), point(2), pr);
    CHECK(res.iteration_time_s == Approx(2 * one).epsilon(0.02));
  }
  SECTION("two independent computes of one rank serialise on its device") {
    StepPrograms pr;
    RankProgram p;
    p.add(compute("a", 1 * MS));
    p.add(compute("b", 2 * MS));
    pr.programs = {p};
    pr.program_of.assign(2, 0);
    pr.rank_groups.assign(2, {});
    pr.rank_peers.assign(2, {});
    const auto res = simulate_programs(test_platforms::uniform_star(2, BW, LAT), profile(), point(2), pr);
    CHECK(res.iteration_time_s == Approx(3 * MS).epsilon(1e-9));
    CHECK(res.breakdown.compute_s == Approx(3 * MS).epsilon(1e-9));
  }
}

TEST_CASE("sim::Executor: programs that break the rules are refused", "[sim][executor]") {
  StepPrograms pr;
  pr.groups = {world_group(2)};
  RankProgram p;
  p.add(collective("allreduce", 0, 1e6, {}));
  pr.programs = {p};
  pr.program_of.assign(3, 0);  // three ranks, a group of two
  pr.rank_groups.assign(3, {0});
  pr.rank_peers.assign(3, {});
  CHECK_THROWS_AS(simulate_programs(test_platforms::uniform_star(3, BW, LAT), profile(), point(3), pr), Failure);
  pr.program_of.assign(2, 0);
  pr.rank_groups.assign(2, {0});
  pr.rank_peers.assign(2, {});
  pr.programs[0].tasks[0].operation = "gather-everything";
  CHECK_THROWS_AS(simulate_programs(test_platforms::uniform_star(2, BW, LAT), profile(), point(2), pr), Failure);
}

TEST_CASE("sim::Executor: flows to a server role and serves queued on its processor", "[sim][executor]") {
  // Both ranks push to server 0 (colocated: node 0's host), the server applies each push in turn, each rank
  // pulls back. Rank 0's flows stay inside node 0; rank 1's cross the network. The server's processor is
  // the bottleneck: in steady state each rank's iteration lasts both serves.
  const double bytes = 1e6, serve_s = 10 * MS;
  StepPrograms pr;
  pr.servers = 1;
  RankProgram p;
  const Role server{RoleKind::SERVER, 0};
  int push = p.add({.kind = TaskKind::FLOW, .phase = TaskPhase::COMMUNICATION, .label = "push", .bytes = bytes,
                    .src = {RoleKind::RANK}, .dst = server});
  int apply = p.add({.kind = TaskKind::SERVE, .label = "apply", .seconds = serve_s, .dst = server, .deps = {push}});
  p.add({.kind = TaskKind::FLOW, .phase = TaskPhase::COMMUNICATION, .label = "pull", .bytes = bytes, .src = server,
         .dst = {RoleKind::RANK}, .deps = {apply}});
  pr.programs = {p};
  pr.program_of = {0, 0};
  pr.rank_groups = {{}, {}};
  pr.rank_peers = {{}, {}};
  auto pt = point(2, "ps");
  pt.ps.servers = 1;
  const auto res = simulate_programs(test_platforms::uniform_star(2, BW, LAT), profile(), pt, pr);
  CHECK(res.iteration_time_s == Approx(2 * serve_s).epsilon(1e-9));
  CHECK(res.inter_node_bytes == Approx(2 * bytes));
  CHECK(res.intra_node_bytes == Approx(2 * bytes));
  CHECK(res.ps_servers == 1);
}

TEST_CASE("sim::Executor: a collective naming its algorithm runs as copies that leave compute alone",
          "[sim][executor]") {
  // Two GPUs of one node: a broadcast (2.5 ms) under a 10 ms compute. Played by the collective library its
  // kernels slow the overlapped compute (interference on); as the binomial algorithm's copies alone
  // (nn.DataParallel's replicate) the compute keeps its 10 ms and the iteration is that compute.
  platforms::Platform plat = test_platforms::uniform_star(1, BW, LAT);
  plat.node.gpus = 2;
  plat.node.gpu = "test-gpu";
  plat.node.intra.kind = platforms::IntraNodeKind::PCIE;
  plat.node.intra.link_bandwidth_Bps = 16e9;
  plat.node.intra.uplink_bandwidth_Bps = 16e9;
  plat.node.intra.devices_per_switch = 2;
  const double bytes = 40e6, compute_s = 10 * MS;
  auto run = [&](const std::string& algorithm) {
    StepPrograms pr;
    pr.groups = {world_group(2)};
    RankProgram p;
    p.add(compute("forward", compute_s));
    Task bcast = collective("broadcast", 0, bytes, {});
    bcast.algorithm = algorithm;
    p.add(bcast);
    pr.programs = {p};
    pr.program_of = {0, 0};
    pr.rank_groups = {{0}, {0}};
    pr.rank_peers = {{}, {}};
    auto pt = point(2);
    pt.workers_per_node = 2;
    pt.fidelity.interference = true;
    return simulate_programs(plat, profile(), pt, pr);
  };
  const auto copies = run("binomial"), kernels = run("");
  CHECK(copies.iteration_time_s == Approx(compute_s).epsilon(1e-9));
  CHECK(copies.intra_node_bytes == Approx(bytes));  // one message from GPU 0 to GPU 1
  CHECK(kernels.iteration_time_s > compute_s * (1 + 1e-3));
}

TEST_CASE("sim::Executor: a barrier ends every member's step its seconds after the last one arrives",
          "[sim][executor]") {
  // Rank 0 computes 1 ms, rank 1 3 ms; both wait at the barrier, which then holds 0.5 ms more (the servers'
  // update): every iteration is 3.5 ms on both ranks.
  StepPrograms pr;
  pr.groups = {world_group(2)};
  RankProgram fast, slow;
  fast.add({.kind = TaskKind::BARRIER, .seconds = 0.5 * MS, .group = 0, .deps = {fast.add(compute("c", 1 * MS))}});
  slow.add({.kind = TaskKind::BARRIER, .seconds = 0.5 * MS, .group = 0, .deps = {slow.add(compute("c", 3 * MS))}});
  pr.programs = {fast, slow};
  pr.program_of = {0, 1};
  pr.rank_groups = {{0}, {0}};
  pr.rank_peers = {{}, {}};
  const auto res = simulate_programs(test_platforms::uniform_star(2, BW, LAT), profile(), point(2), pr);
  CHECK(res.iteration_time_s == Approx(3.5 * MS).epsilon(1e-9));
  CHECK(res.breakdown.compute_s == Approx(1 * MS).epsilon(1e-9));
  CHECK(res.inter_node_bytes == 0);
  // Members that disagree on the barrier's seconds are refused.
  pr.programs[1].tasks[1].seconds = 1 * MS;
  CHECK_THROWS_AS(simulate_programs(test_platforms::uniform_star(2, BW, LAT), profile(), point(2), pr), Failure);
}

TEST_CASE("sim::Executor: a serving queue runs its calls on its threads, a role's processor one serve at a time",
          "[sim][executor]") {
  // Four ranks each serve one 10 ms call on server 0. Two threads: two waves per iteration, 20 ms; the
  // processor (one FIFO): 40 ms. The next iteration's calls queue behind the last wave, so the steady
  // state is the waves' time.
  const double call_s = 10 * MS;
  auto run = [&](bool threads) {
    StepPrograms pr;
    pr.servers = 1;
    pr.serve_queues = {{"rpc threads", 2, call_s}};
    RankProgram p;
    Task t{.kind = TaskKind::SERVE, .phase = TaskPhase::COMMUNICATION, .label = "call", .dst = {RoleKind::SERVER, 0}};
    if (threads) {
      t.queue = 0;
      t.calls = 1;
    } else {
      t.seconds = call_s;
    }
    p.add(t);
    pr.programs = {p};
    pr.program_of.assign(4, 0);
    pr.rank_groups.assign(4, {});
    pr.rank_peers.assign(4, {});
    auto pt = point(4, "ps");
    pt.ps.servers = 1;
    return simulate_programs(test_platforms::uniform_star(4, BW, LAT), profile(), pt, pr);
  };
  const auto threaded = run(true), fifo = run(false);
  CHECK(threaded.iteration_time_s == Approx(2 * call_s).epsilon(1e-9));
  CHECK(fifo.iteration_time_s == Approx(4 * call_s).epsilon(1e-9));
  // A serve of the communication phase counts from when it is ready, its wait in the queue included.
  CHECK(threaded.breakdown.communication_s == Approx(2 * call_s).epsilon(1e-9));
}

TEST_CASE("sim::Executor: a client delay before a flow counts in the rank's communication", "[sim][executor]") {
  const double delay_s = 2 * MS, bytes = 1e6;
  StepPrograms pr;
  pr.servers = 1;
  RankProgram p;
  int d = p.add({.kind = TaskKind::DELAY, .phase = TaskPhase::COMMUNICATION, .label = "rpc", .seconds = delay_s});
  p.add({.kind = TaskKind::FLOW, .phase = TaskPhase::COMMUNICATION, .label = "push", .bytes = bytes,
         .src = {RoleKind::RANK}, .dst = {RoleKind::SERVER, 0}, .deps = {d}});
  pr.programs = {p};
  pr.program_of = {0};
  pr.rank_groups = {{}};
  pr.rank_peers = {{}};
  auto pt = point(1, "ps");
  pt.ps.servers = 1;
  pt.ps.placement = PsPlacement::DEDICATED;
  const auto res = simulate_programs(test_platforms::uniform_star(2, BW, LAT), profile(), pt, pr);
  CHECK(res.iteration_time_s == Approx(delay_s + message_s(bytes)).epsilon(1e-6));
  CHECK(res.breakdown.communication_s == Approx(res.iteration_time_s).epsilon(1e-9));
}

TEST_CASE("sim::Executor: folded nodes' flows are their representatives', k nodes' bytes each", "[sim][executor]") {
  // Four one-worker nodes push 10 MB each to a dedicated server, whose port the four flows share: each
  // iteration is one route's latency plus 40 MB at the port's rate, and the server applies each push (1 ms
  // a node, one after another). Folded as {0, 1} and {2, 3} (each representative's own links twice as
  // wide), two flows of 20 MB share the port and each apply does two nodes' work: the same time and bytes,
  // half the flows; the mirrors end with their representatives.
  const double bytes = 10e6, apply_s = 1 * MS;
  auto run = [&](bool fold) {
    StepPrograms pr;
    pr.servers = 1;
    pr.groups = {world_group(4)};
    RankProgram p;
    const Role server{RoleKind::SERVER, 0};
    int push = p.add({.kind = TaskKind::FLOW, .phase = TaskPhase::COMMUNICATION, .label = "push", .bytes = bytes,
                      .src = {RoleKind::RANK}, .dst = server});
    int apply = p.add({.kind = TaskKind::SERVE, .phase = TaskPhase::COMMUNICATION, .label = "apply", .seconds = apply_s,
                       .dst = server, .deps = {push}});
    p.add({.kind = TaskKind::BARRIER, .group = 0, .deps = {apply}});
    pr.programs = {p};
    pr.program_of.assign(4, 0);
    pr.rank_groups.assign(4, {0});
    pr.rank_peers.assign(4, {});
    if (fold) pr.fold = {.groups = {{0, 1}, {2, 3}}, .refs = {server}};
    auto pt = point(4, "ps");
    pt.ps.servers = 1;
    pt.ps.placement = PsPlacement::DEDICATED;
    return simulate_programs(test_platforms::uniform_star(5, BW, LAT), profile(), pt, pr);
  };
  const auto folded = run(true), plain = run(false);
  // The pushes arrive together after 40 MB; the server then applies them one after another.
  CHECK(plain.iteration_time_s == Approx(message_s(4 * bytes) + 4 * apply_s).epsilon(1e-6));
  CHECK(folded.iteration_time_s == Approx(plain.iteration_time_s).epsilon(1e-9));
  CHECK(folded.inter_node_bytes == Approx(plain.inter_node_bytes));
  CHECK(folded.throughput == Approx(plain.throughput).epsilon(1e-9));  // every rank, mirrors too, finished
  CHECK(folded.flows * 2 == plain.flows);
}

namespace {
// Two ranks computing `segments` (seconds each, one after the other) and allreducing `bytes[k]` after
// segment k, with the framework runtime of `runtime` on every allreduce (cycle, fusion, negotiation, copies).
StepPrograms cycle_programs(const std::vector<double>& segments, const std::vector<double>& bytes, const Task& runtime) {
  StepPrograms pr;
  pr.groups = {world_group(2)};
  RankProgram p;
  int prev = -1;
  for (std::size_t k = 0; k < segments.size(); ++k) {
    prev = p.add(compute("backward " + std::to_string(k), segments[k], prev >= 0 ? std::vector<int>{prev} : std::vector<int>{},
                         TaskPhase::BACKWARD));
    Task t = collective("allreduce", 0, bytes[k], {prev});
    t.cycle_s = runtime.cycle_s;
    t.fuse_up_to_B = runtime.fuse_up_to_B;
    t.negotiation_B = runtime.negotiation_B;
    t.copy_s_per_B = runtime.copy_s_per_B;
    t.copy_min_items = runtime.copy_min_items;
    t.copy_on_cores = runtime.copy_on_cores;
    t.items = runtime.items;
    p.add(std::move(t));
  }
  pr.programs = {p};
  pr.program_of.assign(2, 0);
  pr.rank_groups.assign(2, {0});
  pr.rank_peers.assign(2, {});
  return pr;
}
TrainingPoint one_iteration(int workers) {
  TrainingPoint p = point(workers);
  p.fidelity.iterations = 1;
  return p;
}
double ring_s(double bytes) { return collective_or_null("allreduce", "ring")->closed_form_s(UniformNetwork{2 * LAT, BW}, 2, bytes); }
}  // namespace

TEST_CASE("sim::Executor: a collective with a cycle starts at the next multiple of the cycle", "[sim][executor]") {
  const double bytes = 10e6;
  const auto platform = test_platforms::uniform_star(2, BW, LAT);
  SECTION("ready between two ticks: it waits for the later one") {
    const auto res = simulate_programs(platform, profile(), one_iteration(2),
                                       cycle_programs({1.3 * MS}, {bytes}, {.cycle_s = 1 * MS}));
    CHECK(res.iteration_time_s == Approx(2 * MS + ring_s(bytes)).epsilon(1e-3));
  }
  SECTION("without a cycle it starts at once") {
    const auto res = simulate_programs(platform, profile(), one_iteration(2), cycle_programs({1.3 * MS}, {bytes}, {}));
    CHECK(res.iteration_time_s == Approx(1.3 * MS + ring_s(bytes)).epsilon(1e-3));
  }
}

TEST_CASE("sim::Executor: at its tick a collective absorbs the following ready ones within its fusion limit",
          "[sim][executor]") {
  const double a = 10e6, b = 6e6;
  const auto platform = test_platforms::uniform_star(2, BW, LAT);
  // Bucket 0 is ready at 1 ms, bucket 1 at 1.2 ms; the cycle's tick is at 1.5 ms.
  const std::vector<double> segments{1 * MS, 0.2 * MS};
  SECTION("both fit: one allreduce of their summed bytes at the tick") {
    const auto res = simulate_programs(platform, profile(), one_iteration(2),
                                       cycle_programs(segments, {a, b}, {.cycle_s = 1.5 * MS, .fuse_up_to_B = a + b}));
    CHECK(res.iteration_time_s == Approx(1.5 * MS + ring_s(a + b)).epsilon(1e-3));
    CHECK(res.inter_node_bytes == Approx(2.0 * (a + b)));  // a ring of 2 moves each rank's buffer once
  }
  SECTION("over the limit: the second waits for the first, then for the next tick") {
    const auto res = simulate_programs(platform, profile(), one_iteration(2),
                                       cycle_programs(segments, {a, b}, {.cycle_s = 1.5 * MS, .fuse_up_to_B = a}));
    const double first_end = 1.5 * MS + ring_s(a);
    const double second_start = std::ceil(first_end / (1.5 * MS)) * 1.5 * MS;
    CHECK(res.iteration_time_s == Approx(second_start + ring_s(b)).epsilon(1e-3));
    CHECK(res.inter_node_bytes == Approx(2.0 * (a + b)));
  }
  SECTION("not yet ready at the tick: it goes alone") {
    const auto res = simulate_programs(platform, profile(), one_iteration(2),
                                       cycle_programs({1 * MS, 0.8 * MS}, {a, b}, {.cycle_s = 1.5 * MS, .fuse_up_to_B = a + b}));
    const double first_end = 1.5 * MS + ring_s(a);
    const double second_start = std::ceil(first_end / (1.5 * MS)) * 1.5 * MS;
    CHECK(res.iteration_time_s == Approx(second_start + ring_s(b)).epsilon(1e-3));
  }
}

TEST_CASE("sim::Executor: a negotiation precedes a collective and a fused one copies in and out", "[sim][executor]") {
  const double bytes = 10e6, words = 16, copy_s_per_B = 1e-10;
  const auto platform = test_platforms::uniform_star(2, BW, LAT);
  const double negotiation_s =
      collective_or_null("allreduce", "rhd")->closed_form_s(UniformNetwork{2 * LAT, BW}, 2, words);
  SECTION("several items: negotiation, copy in, allreduce, copy out") {
    const auto res = simulate_programs(
        platform, profile(), one_iteration(2),
        cycle_programs({1 * MS}, {bytes}, {.negotiation_B = words, .copy_s_per_B = copy_s_per_B, .items = 3}));
    CHECK(res.iteration_time_s ==
          Approx(1 * MS + negotiation_s + 2 * bytes * copy_s_per_B + ring_s(bytes)).epsilon(1e-3));
  }
  SECTION("one item is not copied where copies start at two (Horovod)") {
    const auto res = simulate_programs(
        platform, profile(), one_iteration(2),
        cycle_programs({1 * MS}, {bytes}, {.negotiation_B = words, .copy_s_per_B = copy_s_per_B, .copy_min_items = 2, .items = 1}));
    CHECK(res.iteration_time_s == Approx(1 * MS + negotiation_s + ring_s(bytes)).epsilon(1e-3));
  }
  SECTION("one item is copied where every bucket is (DDP)") {
    const auto res = simulate_programs(
        platform, profile(), one_iteration(2),
        cycle_programs({1 * MS}, {bytes}, {.negotiation_B = words, .copy_s_per_B = copy_s_per_B, .copy_min_items = 1, .items = 1}));
    CHECK(res.iteration_time_s ==
          Approx(1 * MS + negotiation_s + 2 * bytes * copy_s_per_B + ring_s(bytes)).epsilon(1e-3));
  }
}

TEST_CASE("sim::Executor: copies on the members' cores share their devices with the backward they overlap "
          "(closed form)",
          "[sim][executor]") {
  // Two ranks: backward 0 (S0), then bucket 0's allreduce, overlapped by backward 1 (S1), which the update
  // follows. Each copy is c of device time. On the cores: the copy in and backward 1 share the device at
  // half speed each, so the copy ends at S0 + 2c, the allreduce runs R alone on the network, the copy out
  // shares the device again for 2c; backward 1 has lost c to each copy and ends at S0 + S1 + 2c, later by
  // exactly the copies' time (S1 > 2c + R: both copies end under it). As delays (a GPU's copy kernels off
  // its compute stream) nothing is taken from backward 1: S0 + S1.
  const double bytes = 1e6, copy_s_per_B = 1e-9, s0 = 1 * MS, s1 = 10 * MS, update = 0.5 * MS;
  const double c = bytes * copy_s_per_B;
  const auto platform = test_platforms::uniform_star(2, BW, LAT);
  REQUIRE(s1 > 2 * c + ring_s(bytes));
  auto run = [&](bool on_cores, int min_items, double second_s) {
    StepPrograms pr;
    pr.groups = {world_group(2)};
    RankProgram p;
    const int b0 = p.add(compute("backward 0", s0, {}, TaskPhase::BACKWARD));
    Task t = collective("allreduce", 0, bytes, {b0});
    t.copy_s_per_B = copy_s_per_B;
    t.copy_min_items = min_items;
    t.copy_on_cores = on_cores;
    const int ar = p.add(std::move(t));
    const int b1 = p.add(compute("backward 1", second_s, {b0}, TaskPhase::BACKWARD));
    p.add({.kind = TaskKind::COMPUTE, .phase = TaskPhase::UPDATE, .label = "update", .seconds = update, .deps = {ar, b1}});
    pr.programs = {p};
    pr.program_of.assign(2, 0);
    pr.rank_groups.assign(2, {0});
    pr.rank_peers.assign(2, {});
    return simulate_programs(platform, profile(), one_iteration(2), pr).iteration_time_s;
  };
  CHECK(run(true, 1, s1) == Approx(s0 + s1 + 2 * c + update).epsilon(1e-9));
  CHECK(run(false, 1, s1) == Approx(s0 + s1 + update).epsilon(1e-9));
  // A bucket under the framework's threshold is not copied: nothing taken.
  CHECK(run(true, 2, s1) == Approx(s0 + s1 + update).epsilon(1e-9));
  // Nothing to overlap: a copy alone on the device takes c, as the delay does.
  const double alone = s0 + 2 * c + ring_s(bytes) + update;
  CHECK(run(true, 1, 0) == Approx(alone).epsilon(1e-3));
  CHECK(run(false, 1, 0) == Approx(run(true, 1, 0)).epsilon(1e-9));
}
