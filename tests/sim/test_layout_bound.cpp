// The bound on a layout's iteration time (sim/layout_bound.hpp): the 1F1B closed form on an ideal network,
// the collectives' lower bounds in closed form, never above the simulated time on a slow star or GPU nodes
// whatever the layout, equal to the longest path of the programs themselves, and none under jitter.
#include <catch2/catch.hpp>

#include "common/errors.hpp"
#include "platforms/platform.hpp"
#include "sim/comm.hpp"
#include "sim/layout_bound.hpp"
#include "sim/src/plan/planners.hpp"
#include "tests/sim/comm_test_platforms.hpp"
#include "tests/sim/layout_fixtures.hpp"

using namespace dtsim;
using namespace dtsim::sim;

namespace {
using test_layouts::MS;

// Blocks alternating attention and linear layers, an optimizer step of 1 ms over the whole model.
calibrate::ComputeProfile blocks_profile(int blocks, std::int64_t grad = 1'000'000) {
  return test_layouts::blocks_profile(blocks, grad, 1 * MS, true);
}

TrainingPoint layout_point(int workers, ParallelLayout layout) {
  return test_layouts::layout_point(workers, std::move(layout), 3, true);
}

// The simulated iteration of the job (global batch / throughput), as `dtsim plan` ranks it.
double job_iteration_s(const PointResult& r, const TrainingPoint& point) {
  return point.layout.samples_per_iteration / r.throughput;
}
}  // namespace

TEST_CASE("sim::LayoutBound: 1F1B on an ideal network is the bound: (m + pp - 1) micro-batch times and the update",
          "[sim][layout]") {
  for (const auto& [pp, m] : {std::pair{1, 3}, std::pair{2, 4}, std::pair{4, 8}, std::pair{4, 3}}) {
    ParallelLayout l;
    l.pp = pp;
    l.micro_batches = m;
    l.pp_bytes = 8;
    const auto profile = blocks_profile(2 * pp);
    auto point = layout_point(pp, l);
    const auto platform = test_platforms::uniform_star(pp, 1e12, 1e-9);
    const double bound = layout_iteration_lower_bound_s(platform, profile, point);
    // Two blocks per stage at 1 ms forward + 2 ms backward each; the update's share of each stage: 1 ms / pp.
    const double per_micro = 2 * (1 + 2) * MS;
    CHECK(bound == Approx((m + pp - 1) * per_micro + 1 * MS / pp).epsilon(1e-6));
    const auto r = simulate_training(platform, profile, point);
    CHECK(bound <= job_iteration_s(r, point));
    CHECK(bound == Approx(job_iteration_s(r, point)).epsilon(1e-3));
    // A device spread runs every rank at the slowest device's pace: the bound follows it.
    point.variability.device_cv = 0.05;
    const double spread = layout_iteration_lower_bound_s(platform, profile, point);
    const auto slower = simulate_training(platform, profile, point);
    CHECK(spread >= bound);
    CHECK(spread <= job_iteration_s(slower, point));
    CHECK(spread == Approx(job_iteration_s(slower, point)).epsilon(1e-3));
  }
}

TEST_CASE("sim::LayoutBound: a collective's bound is its bytes over the links they must cross",
          "[sim][layout]") {
  // One rank per node on a star of 10 GB/s ports: a rank's and a node's path are its port.
  const CommLowerBound star(test_platforms::uniform_star(8, 10e9, 1e-6), 1);
  std::vector<int> ranks{0, 1, 2, 3, 4, 5, 6, 7};
  const auto g = star.geometry(ranks);
  CHECK(g.ranks == 8);
  CHECK(g.on_node == 1);
  CHECK(g.spans);
  const double B = 8e8;
  // The closed forms of the ring algorithms without latency: (n-1)/n x bytes for allgather and
  // reduce-scatter; an allreduce at least the bytes (every element's sum reaches every rank).
  CHECK(star.collective_s("allgather", B, g) == Approx(7.0 / 8 * B / 10e9));
  CHECK(star.collective_s("reduce-scatter", B, g) == Approx(7.0 / 8 * B / 10e9));
  CHECK(star.collective_s("allreduce", B, g) == Approx(B / 10e9));
  CHECK(star.collective_s("alltoall", B, g) == Approx(7.0 / 8 * B / 10e9));
  CHECK(star.collective_s("allgather", B, star.geometry({3})) == 0);
  CHECK(star.p2p_s(B, 0, 1) == Approx(B / 10e9));
  // DGX H100 nodes: inside a node a GPU's NVSwitch port (18 x 20.6 GB/s); across nodes its rail (one
  // 50 GB/s NDR port), and the node's 8 rails together; NVLink and InfiniBand at protocol efficiency 0.975.
  const auto dgx = platforms::load_platform("dgx-h100-superpod");
  const CommLowerBound h100(dgx, 8);
  const double port_Bps = 18 * 20.6e9 * 0.975, rail_Bps = 50e9 * 0.975;
  CHECK(h100.collective_s("allgather", B, h100.geometry(ranks)) == Approx(7.0 / 8 * B / port_Bps));
  // Sixteen ranks, eight per node: the node must receive half the pieces through its 8 rails, the rank
  // 15/16 of them through its port and its rail.
  std::vector<int> two_nodes;
  for (int r = 0; r < 16; ++r) two_nodes.push_back(r);
  const auto g2 = h100.geometry(two_nodes);
  CHECK(g2.on_node == 8);
  CHECK(h100.collective_s("allgather", B, g2) ==
        Approx(std::max(15.0 / 16 * B / (port_Bps + rail_Bps), 0.5 * B / (8 * rail_Bps))));
  // One rank per node (stride 8): all through its rail.
  const auto g3 = h100.geometry({0, 8, 16, 24});
  CHECK(h100.collective_s("reduce-scatter", B, g3) == Approx(3.0 / 4 * B / rail_Bps));
  CHECK(h100.p2p_s(B, 0, 8) == Approx(B / rail_Bps));
  CHECK(h100.p2p_s(B, 0, 1) == Approx(B / port_Bps));
}

TEST_CASE("sim::LayoutBound: no collective algorithm beats its bound on any shipped platform", "[sim][layout]") {
  // Every algorithm of the collective table, simulated alone on every shipped platform: inside one node,
  // over two nodes and with one rank on each of four nodes.
  const std::vector<std::pair<std::string, std::string>> patterns{
      {"allreduce-ring", "allreduce"},     {"allreduce-tree", "allreduce"}, {"allreduce-rhd", "allreduce"},
      {"allreduce-rd", "allreduce"},       {"allreduce-hier", "allreduce"}, {"allreduce-nvls", "allreduce"},
      {"reduce-scatter-ring", "reduce-scatter"}, {"allgather-ring", "allgather"},
      {"alltoall-pairwise", "alltoall"},   {"broadcast-binomial", "broadcast"},
  };
  const double B = 64e6;
  int checked = 0;
  for (const auto& name : platforms::platform_names()) {
    const auto platform = platforms::load_platform(name);
    const int per_node = platform.default_workers_per_node();
    std::vector<std::pair<int, int>> shapes;  // (workers, per node)
    if (per_node > 1) shapes.emplace_back(per_node, per_node);
    if (platform.nodes >= 2) shapes.emplace_back(2 * per_node, per_node);
    if (platform.nodes >= 4) shapes.emplace_back(4, 1);
    for (const auto& [workers, wpn] : shapes)
      for (const auto& [pattern, operation] : patterns) {
        INFO(name << " " << pattern << " " << workers << " ranks, " << wpn << " per node");
        CommRequest req;
        req.pattern = pattern;
        req.workers = workers;
        req.workers_per_node = wpn;
        req.bytes = B;
        CommResult r;
        try {
          r = simulate_comm(platform, req);
        } catch (const InputError&) {
          continue;  // an algorithm the platform cannot run (NVLink SHARP without an NVSwitch that reduces)
        }
        std::vector<int> ranks;
        for (int q = 0; q < workers; ++q) ranks.push_back(q);
        const CommLowerBound bound(platform, wpn);
        const double least = bound.collective_s(operation, B, bound.geometry(ranks));
        CHECK(least > 0);
        CHECK(least <= r.time_s);
        ++checked;
      }
  }
  CHECK(checked > 100);
}

TEST_CASE("sim::LayoutBound: a rank's two streams together: overlapping its collectives slows its compute",
          "[sim][layout]") {
  const double s = OVERLAP_COMPUTE_SLOWDOWN;
  // Without interference, the longer stream.
  CHECK(streams_lower_bound_s(1.0, 0.2, 0.5, 1) == Approx(1.2));
  CHECK(streams_lower_bound_s(1.0, 0.2, 3.0, 1) == Approx(3.0));
  // With it: the collectives beyond the inline ones overlap compute at best, which then runs s times slower.
  CHECK(streams_lower_bound_s(1.0, 0.2, 0.5, s) == Approx(1.2 + 0.3 * (1 - 1 / s)));
  CHECK(streams_lower_bound_s(1.0, 0.5, 0.2, s) == Approx(1.5));
  // Collectives longer than the whole compute slowed: they set the iteration.
  CHECK(streams_lower_bound_s(1.0, 0.0, 3.0, s) == Approx(3.0));
}

TEST_CASE("sim::LayoutBound: never above the simulated iteration on a slow star or GPU nodes, for every kind of "
          "layout", "[sim][layout]") {
  struct Case {
    const char* name;
    int workers;
    ParallelLayout layout;
  };
  const auto with = [](auto set) {
    ParallelLayout l;
    set(l);
    return l;
  };
  const std::vector<Case> cases{
      {"dp 4, ZeRO 0", 4, with([](ParallelLayout& l) { l.micro_batches = 2; })},
      {"tp 2, pp 2, dp 2, selective", 8, with([](ParallelLayout& l) {
         l.tp = 2;
         l.pp = 2;
         l.micro_batches = 4;
         l.recompute = "selective";
         l.sequence_parallel = true;
       })},
      {"pp 2, vp 2, ZeRO 1", 8, with([](ParallelLayout& l) {
         l.pp = 2;
         l.vp = 2;
         l.micro_batches = 4;
         l.zero = 1;
       })},
      {"cp 2, pp 2, ZeRO 2, full", 8, with([](ParallelLayout& l) {
         l.cp = 2;
         l.pp = 2;
         l.micro_batches = 3;
         l.zero = 2;
         l.recompute = "full";
       })},
      {"pp 4, ZeRO 3", 8, with([](ParallelLayout& l) {
         l.pp = 4;
         l.micro_batches = 4;
         l.zero = 3;
       })},
      {"tp 2, dp 4, ZeRO 3, full, GPipe", 8, with([](ParallelLayout& l) {
         l.tp = 2;
         l.zero = 3;
         l.micro_batches = 2;
         l.recompute = "full";
         l.schedule = "gpipe";
       })},
      {"tp 2, dp 4, ZeRO 0, unfolded", 8, with([](ParallelLayout& l) {
         l.tp = 2;
         l.micro_batches = 2;
         l.fold_local_collectives = false;
         l.fold_replicas = false;
       })},
      {"ep 2, dp 4, ZeRO 1", 4, with([](ParallelLayout& l) {
         l.ep = 2;
         l.micro_batches = 2;
         l.zero = 1;
       })},
  };
  struct Machine {
    const char* name;
    platforms::Platform platform;
    int workers_per_node;
    double message_B;  // tensor/pipeline/context/expert bytes: a visible share of the iteration
  };
  auto dgx = platforms::load_platform("dgx-h100-superpod");
  const std::vector<Machine> machines{
      {"star of 1 GB/s, 20 us", test_platforms::uniform_star(8, 1e9, 20e-6), 1, 2e6},
      {"DGX H100, 2 GPUs per node", dgx, 2, 2e8},
      {"PCIe GPU nodes on a fat tree, 2 GPUs per node", test_platforms::gpu_fat_tree(4, 2), 2, 2e7},
  };
  bool communication_counted = false;
  for (const auto& machine : machines)
    for (const auto& c : cases) {
      INFO(machine.name << ": " << c.name);
      ParallelLayout layout = c.layout;
      layout.tp_bytes = layout.pp_bytes = layout.cp_kv_bytes = layout.ep_bytes = machine.message_B;
      // Blocks with experts where the layout has expert parallelism.
      auto profile = blocks_profile(8, machine.message_B > 1e7 ? 100'000'000 : 1'000'000);
      if (layout.ep > 1)
        for (auto& l : profile.layers)
          if (l.block % 2 == 1) l.op = "moe_experts";
      auto point = layout_point(c.workers, layout);
      point.workers_per_node = machine.workers_per_node;
      point.variability.device_cv = 0.05;  // factors >= 1: the slowest device sets every rank's pace
      const double bound = layout_iteration_lower_bound_s(machine.platform, profile, point);
      const auto r = simulate_training(machine.platform, profile, point);
      const double simulated = job_iteration_s(r, point);
      CHECK(bound > 0);
      CHECK(bound <= simulated);
      // Not a vacuous bound: compute is a good part of the iteration even where 1 GB/s tensor-parallel
      // collectives take most of it (tp 2: about a quarter).
      CHECK(bound >= 0.2 * simulated);
      const auto free = layout_schedule_bound(profile, point);
      if (bound > 1.05 * std::max(free.rank0_path_s, free.busiest_s)) communication_counted = true;
    }
  CHECK(communication_counted);  // the communication's part raises some bounds well above compute alone
}

TEST_CASE("sim::LayoutBound: per-iteration jitter leaves no bound", "[sim][layout]") {
  ParallelLayout l;
  l.pp = 2;
  l.micro_batches = 2;
  auto point = layout_point(2, l);
  const auto platform = test_platforms::uniform_star(2, 1e9, 1e-6);
  CHECK(layout_iteration_lower_bound_s(platform, blocks_profile(4), point) > 0);
  point.variability.jitter_cv = 0.05;
  CHECK(layout_iteration_lower_bound_s(platform, blocks_profile(4), point) == 0);
}

TEST_CASE("sim::LayoutBound: the schedules give the longest path of the programs themselves", "[sim][layout]") {
  // Uneven blocks (8 blocks over 3 or 6 chunks), every schedule, ZeRO stage and recomputation, with
  // communication free and at its bounds on DGX H100 nodes of 2 GPUs (tensor groups inside a node, data and
  // pipeline groups across).
  const auto profile = blocks_profile(8);
  const CommLowerBound dgx(platforms::load_platform("dgx-h100-superpod"), 2);
  for (const CommLowerBound* comm : {static_cast<const CommLowerBound*>(nullptr), &dgx})
    for (const char* schedule : {"1f1b", "gpipe"})
      for (int tp : {1, 2})
        for (int pp : {1, 2, 3})
          for (int vp : {1, 2})
            for (int zero : {0, 1, 3})
              for (const char* recompute : {"none", "full"})
                for (int m : {3, 6}) {
                  ParallelLayout l;
                  l.tp = tp;
                  l.sequence_parallel = tp > 1;
                  l.pp = pp;
                  l.vp = vp;
                  l.zero = zero;
                  l.recompute = recompute;
                  l.schedule = schedule;
                  l.micro_batches = m;
                  l.tp_bytes = l.pp_bytes = 1e8;
                  if ((vp > 1 && (pp == 1 || m % pp != 0 || l.schedule == "gpipe"))) continue;
                  INFO((comm ? "priced" : "free") << " " << schedule << " tp " << tp << " pp " << pp << " vp " << vp
                                                  << " zero " << zero << " " << recompute << " m " << m);
                  auto point = layout_point(2 * tp * pp, l);
                  point.workers_per_node = 2;
                  const auto fast = layout_schedule_bound(profile, point, comm, OVERLAP_COMPUTE_SLOWDOWN);
                  const auto reference = programs_schedule_bound(plan_layout(profile, point), comm, OVERLAP_COMPUTE_SLOWDOWN);
                  // ZeRO-3's weight gathers wait on the computes two units back: only the programs' path has them.
                  if (zero == 3 && comm) {
                    CHECK(fast.rank0_path_s <= reference.rank0_path_s * (1 + 1e-12));
                  } else {
                    CHECK(fast.rank0_path_s == Approx(reference.rank0_path_s).epsilon(1e-12));
                  }
                  CHECK(fast.busiest_s == Approx(reference.busiest_s).epsilon(1e-12));
                  CHECK(fast.comm_busiest_s == Approx(reference.comm_busiest_s).epsilon(1e-12));
                  CHECK(fast.overlapped_s == Approx(reference.overlapped_s).epsilon(1e-12));
                  if (comm && tp * pp > 1) CHECK(fast.rank0_path_s > programs_schedule_bound(plan_layout(profile, point)).rank0_path_s);
                }
}
