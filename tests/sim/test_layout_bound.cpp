// The bound on a layout's iteration time (sim/layout_bound.hpp): the 1F1B closed form on an ideal network,
// never above the simulated time on a slow one whatever the layout, and none under jitter.
#include <catch2/catch.hpp>

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
    const auto point = layout_point(pp, l);
    const double bound = layout_iteration_lower_bound_s(profile, point);
    // Two blocks per stage at 1 ms forward + 2 ms backward each; the update's share of each stage: 1 ms / pp.
    const double per_micro = 2 * (1 + 2) * MS;
    CHECK(bound == Approx((m + pp - 1) * per_micro + 1 * MS / pp).epsilon(1e-9));
    const auto r = simulate_training(test_platforms::uniform_star(pp, 1e12, 1e-9), profile, point);
    CHECK(bound <= job_iteration_s(r, point));
    CHECK(bound == Approx(job_iteration_s(r, point)).epsilon(1e-3));
  }
}

TEST_CASE("sim::LayoutBound: never above the simulated iteration on a slow network, for every kind of layout",
          "[sim][layout]") {
  struct Case {
    const char* name;
    int workers;
    ParallelLayout layout;
  };
  const auto with = [](auto set) {
    ParallelLayout l;
    l.tp_bytes = l.pp_bytes = l.cp_kv_bytes = 2e6;
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
  };
  const auto profile = blocks_profile(8);
  for (const auto& c : cases) {
    INFO(c.name);
    auto point = layout_point(c.workers, c.layout);
    point.variability.device_cv = 0.05;  // factors >= 1: the slowest device sets every rank's pace
    const double bound = layout_iteration_lower_bound_s(profile, point);
    // 1 GB/s, 20 us: communication takes a visible share of the iteration.
    const auto r = simulate_training(test_platforms::uniform_star(c.workers, 1e9, 20e-6), profile, point);
    const double simulated = job_iteration_s(r, point);
    CHECK(bound > 0);
    CHECK(bound <= simulated);
    // Not a vacuous bound: compute is a good part of the iteration even where 1 GB/s tensor-parallel
    // collectives take most of it (tp 2: about a quarter).
    CHECK(bound >= 0.2 * simulated);
  }
}

TEST_CASE("sim::LayoutBound: per-iteration jitter leaves no bound", "[sim][layout]") {
  ParallelLayout l;
  l.pp = 2;
  l.micro_batches = 2;
  auto point = layout_point(2, l);
  CHECK(layout_iteration_lower_bound_s(blocks_profile(4), point) > 0);
  point.variability.jitter_cv = 0.05;
  CHECK(layout_iteration_lower_bound_s(blocks_profile(4), point) == 0);
}

TEST_CASE("sim::LayoutBound: the schedules give the longest path of the programs themselves", "[sim][layout]") {
  // Uneven blocks (8 blocks over 3 or 6 chunks), every schedule, ZeRO stage and recomputation.
  const auto profile = blocks_profile(8);
  for (const char* schedule : {"1f1b", "gpipe"})
    for (int pp : {1, 2, 3})
      for (int vp : {1, 2})
        for (int zero : {0, 1, 3})
          for (const char* recompute : {"none", "full"})
            for (int m : {3, 6}) {
              ParallelLayout l;
              l.pp = pp;
              l.vp = vp;
              l.zero = zero;
              l.recompute = recompute;
              l.schedule = schedule;
              l.micro_batches = m;
              if ((vp > 1 && (pp == 1 || m % pp != 0 || l.schedule == "gpipe"))) continue;
              INFO(schedule << " pp " << pp << " vp " << vp << " zero " << zero << " " << recompute << " m " << m);
              const auto point = layout_point(2 * pp, l);
              const auto fast = layout_schedule_bound(profile, point);
              const auto reference = programs_schedule_bound(plan_layout(profile, point));
              CHECK(fast.rank0_path_s == Approx(reference.rank0_path_s).epsilon(1e-12));
              CHECK(fast.busiest_s == Approx(reference.busiest_s).epsilon(1e-12));
            }
}
