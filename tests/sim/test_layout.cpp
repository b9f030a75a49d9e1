// The parallel-layout planner (sim/src/plan/layout.cpp): closed forms of the pipeline schedules on an ideal
// network, tensor-parallel bytes per layer, ZeRO-3's two gathers per step, the folds against the unfolded
// run, and the layout checks.
#include <catch2/catch.hpp>

#include <numeric>

#include "common/errors.hpp"
#include "sim/src/executor.hpp"
#include "sim/src/plan/planners.hpp"
#include "tests/sim/comm_test_platforms.hpp"
#include "tests/sim/layout_fixtures.hpp"

using namespace dtsim;
using namespace dtsim::sim;

namespace {
using test_layouts::MS;

calibrate::ComputeProfile blocks_profile(int blocks, std::int64_t grad = 1000) {
  return test_layouts::blocks_profile(blocks, grad);
}

TrainingPoint layout_point(int workers, ParallelLayout layout) {
  return test_layouts::layout_point(workers, std::move(layout), 2, false);
}

// An ideal network: messages of a few bytes over 1 TB/s with 1 ns latency.
PointResult run_ideal(int workers, const ParallelLayout& layout, int blocks) {
  const auto profile = blocks_profile(blocks);
  const auto point = layout_point(workers, layout);
  return simulate_programs(test_platforms::uniform_star(workers, 1e12, 1e-9), profile, point, plan_layout(profile, point));
}

double inline_bus_bytes(const StepPrograms& pr, int rank, TaskPhase phase, int tp) {
  double bus = 0;
  for (const Task& t : pr.of(rank).tasks)
    if (t.phase == phase)
      for (const auto& c : t.inline_collectives) {
        const double factor = c.operation == "allreduce" ? 2.0 * (tp - 1) / tp : 1.0 * (tp - 1) / tp;
        bus += factor * c.bytes * c.count;
      }
  return bus;
}
}  // namespace

TEST_CASE("sim::Layout: 1F1B on an ideal network idles (pp - 1) / (m + pp - 1) of the iteration", "[sim][layout]") {
  for (const auto& [pp, m] : {std::pair{2, 4}, std::pair{4, 8}, std::pair{4, 3}}) {
    ParallelLayout l;
    l.pp = pp;
    l.micro_batches = m;
    l.pp_bytes = 8;
    const auto r = run_ideal(pp, l, 2 * pp);
    const double per_micro = 2 * (1 + 2) * MS;  // two blocks per stage, 1 ms forward + 2 ms backward each
    CHECK(r.iteration_time_s == Approx((m + pp - 1) * per_micro).epsilon(1e-4));
    CHECK(r.breakdown.bubble_s == Approx((pp - 1) * per_micro).epsilon(1e-9));
  }
}

TEST_CASE("sim::Layout: GPipe's bubble is 1F1B's; the interleaved schedule divides it by vp", "[sim][layout]") {
  ParallelLayout g;
  g.pp = 4;
  g.micro_batches = 8;
  g.pp_bytes = 8;
  g.schedule = "gpipe";
  const double per_micro = 2 * 3 * MS;
  CHECK(run_ideal(4, g, 8).iteration_time_s == Approx((8 + 3) * per_micro).epsilon(1e-4));
  ParallelLayout v = g;
  v.schedule = "1f1b";
  v.vp = 2;
  const auto r = run_ideal(4, v, 8);
  // Megatron-LM's interleaved schedule: bubble (pp - 1) x (t_f + t_b) / vp (Narayanan et al. SC'21, §2.2.2).
  CHECK(r.iteration_time_s == Approx(8 * per_micro + 3 * per_micro / 2).epsilon(1e-3));
  CHECK(r.breakdown.bubble_s == Approx(3 * per_micro / 2));
}

TEST_CASE("sim::Layout: tensor parallelism moves 4 (tp-1)/tp x b s h x bytes per layer in forward and in backward",
          "[sim][layout]") {
  const double bsh_bytes = 4 * 1024 * 768 * 2.0;  // b 4, s 1024, h 768, bf16
  for (bool sp : {false, true}) {
    ParallelLayout l;
    l.tp = 4;
    l.tp_bytes = bsh_bytes;
    l.sequence_parallel = sp;
    const auto profile = blocks_profile(3);
    const auto pr = plan_layout(profile, layout_point(4, l));
    const double per_layer = 4.0 * 3 / 4 * bsh_bytes;
    CHECK(inline_bus_bytes(pr, 0, TaskPhase::FORWARD, 4) == Approx(3 * per_layer));
    CHECK(inline_bus_bytes(pr, 0, TaskPhase::BACKWARD, 4) == Approx(3 * per_layer));
    // Full recompute runs the forward's collectives again in backward.
    l.recompute = "full";
    const auto again = plan_layout(profile, layout_point(4, l));
    CHECK(inline_bus_bytes(again, 0, TaskPhase::BACKWARD, 4) == Approx(6 * per_layer));
  }
}

TEST_CASE("sim::Layout: a replicated embedding and output layer run no tensor-parallel collective of their own",
          "[sim][layout]") {
  auto profile = blocks_profile(2);
  calibrate::LayerTime embed;
  embed.name = "embed";
  embed.op = "embedding";
  embed.fwd_s = 0.5 * MS;
  embed.grad_bytes = 500;
  calibrate::LayerTime head = embed;
  head.name = "lm_head";
  head.op = "lm_head";
  head.grad_bytes = 0;
  profile.layers.insert(profile.layers.begin(), embed);
  profile.layers.push_back(head);
  ParallelLayout l;
  l.tp = 2;
  l.tp_bytes = 1000;
  const double per_call = 2.0 * 1 / 2 * 1000;  // an allreduce's bus bytes over 2 ranks
  // Megatron's vocab-parallel embedding adds one allreduce in forward, its output layer one in backward.
  auto pr = plan_layout(profile, layout_point(2, l));
  CHECK(inline_bus_bytes(pr, 0, TaskPhase::FORWARD, 2) == Approx((2 * 2 + 1) * per_call));
  CHECK(inline_bus_bytes(pr, 0, TaskPhase::BACKWARD, 2) == Approx((2 * 2 + 1) * per_call));
  l.replicated_vocab = true;
  pr = plan_layout(profile, layout_point(2, l));
  CHECK(inline_bus_bytes(pr, 0, TaskPhase::FORWARD, 2) == Approx(2 * 2 * per_call));
  CHECK(inline_bus_bytes(pr, 0, TaskPhase::BACKWARD, 2) == Approx(2 * 2 * per_call));
}

TEST_CASE("sim::Layout: a pipeline rank's stage times are its chunks' share of the profile", "[sim][layout]") {
  auto profile = blocks_profile(4, 1000);
  calibrate::LayerTime embed;
  embed.name = "embed";
  embed.op = "embedding";
  embed.fwd_s = 0.5 * MS;
  embed.bwd_weights_s = 0.25 * MS;
  embed.grad_bytes = 2000;
  profile.layers.insert(profile.layers.begin(), embed);
  profile.update_s = 6 * MS;  // over 6,000 gradient bytes
  ParallelLayout l;
  l.pp = 2;
  l.micro_batches = 4;
  const auto first = layout_stage_times(profile, l, 2, 0), second = layout_stage_times(profile, l, 2, 1);
  CHECK(first.fwd_s == Approx(2.5 * MS));  // the embedding and blocks 0-1
  CHECK(first.bwd_s == Approx(4.25 * MS));
  CHECK(second.fwd_s == Approx(2 * MS));
  CHECK(first.update_s == Approx(4 * MS));  // 4,000 of the 6,000 gradient bytes
  CHECK(second.update_s == Approx(2 * MS));
  CHECK_THROWS_AS(layout_stage_times(profile, l, 2, 2), InputError);
}

TEST_CASE("sim::Layout: ZeRO-3 gathers each parameter twice per micro-batch and reduce-scatters its gradient once",
          "[sim][layout]") {
  for (int m : {1, 3}) {
    ParallelLayout l;
    l.zero = 3;
    l.micro_batches = m;
    l.fold_replicas = false;
    const auto profile = blocks_profile(4, 1000);
    const auto pr = plan_layout(profile, layout_point(4, l));
    double gathered = 0, scattered = 0;
    for (const Task& t : pr.of(0).tasks) {
      if (t.kind != TaskKind::COLLECTIVE) continue;
      if (t.operation == "allgather") gathered += t.bytes;
      if (t.operation == "reduce-scatter") scattered += t.bytes;
    }
    CHECK(gathered == Approx(2.0 * m * 4000));
    CHECK(scattered == Approx(1.0 * m * 4000));
  }
}

TEST_CASE("sim::Layout: gradients and ZeRO shards span the data- and context-parallel ranks together",
          "[sim][layout]") {
  // tp 1, cp 2, dp 2 on 4 ranks (order tp-cp-dp-pp): context-parallel ranks hold the same weights, so the
  // gradient collectives run on the 4-rank dp-cp group, as Megatron-LM's DDP and distributed optimizer do.
  for (int zero : {0, 1, 3}) {
    ParallelLayout l;
    l.cp = 2;
    l.zero = zero;
    l.micro_batches = 2;
    l.fold_replicas = false;
    const auto profile = blocks_profile(4, 1000);
    const auto pr = plan_layout(profile, layout_point(4, l));
    int gradient_collectives = 0;
    for (const Task& t : pr.of(1).tasks) {
      if (t.kind != TaskKind::COLLECTIVE) continue;  // no attention: no context-parallel kv exchange
      const auto& g = pr.groups[static_cast<std::size_t>(pr.group_of(1, t))];
      CHECK(g.ranks == std::vector<int>{0, 1, 2, 3});
      ++gradient_collectives;
    }
    CHECK(gradient_collectives > 0);
  }
  // With cp 2 and dp 1 the gradients are still reduced (over the two context-parallel ranks).
  ParallelLayout l;
  l.cp = 2;
  l.micro_batches = 1;
  const auto pr = plan_layout(blocks_profile(2, 1000), layout_point(2, l));
  double reduced = 0;
  for (const Task& t : pr.of(0).tasks)
    if (t.kind == TaskKind::COLLECTIVE && t.operation == "allreduce") reduced += t.bytes;
  CHECK(reduced == Approx(2000));
}

TEST_CASE("sim::Layout: the folds match the unfolded run on a network without shared links", "[sim][layout]") {
  const auto profile = blocks_profile(4, 1 << 20);
  // Tensor-parallel pairs inside a node (per_node 2); replicas each on a node of their own (per_node 1), as
  // rail-optimised clusters give each GPU its own NIC.
  auto run = [&](ParallelLayout l, int workers, int per_node, bool fold) {
    l.fold_local_collectives = l.fold_replicas = fold;
    auto point = layout_point(workers, l);
    point.workers_per_node = per_node;
    return simulate_programs(test_platforms::uniform_star(workers / per_node, 1.25e9, 5e-6), profile, point,
                             plan_layout(profile, point));
  };
  SECTION("tensor-parallel collectives priced once") {
    ParallelLayout l;
    l.tp = 2;
    l.pp = 2;
    l.micro_batches = 4;
    l.tp_bytes = 4e9;  // over the intra-node path: 3.2 ms per call
    l.pp_bytes = 8;    // the pair shares its node's one port: the fold assumes a NIC per GPU (rails)
    const auto folded = run(l, 4, 2, true), unfolded = run(l, 4, 2, false);
    CHECK(folded.iteration_time_s == Approx(unfolded.iteration_time_s).epsilon(1e-3));
    CHECK(folded.breakdown.local_collectives_s > 0);
    CHECK(folded.activities < unfolded.activities);
  }
  SECTION("ZeRO-3 gathers and reduce-scatters priced once") {
    ParallelLayout l;
    l.zero = 3;
    l.micro_batches = 2;
    const auto folded = run(l, 4, 1, true), unfolded = run(l, 4, 1, false);
    CHECK(folded.iteration_time_s == Approx(unfolded.iteration_time_s).epsilon(1e-3));
    CHECK(folded.activities < unfolded.activities);
  }
  SECTION("data-parallel replicas folded onto one") {
    ParallelLayout l;
    l.pp = 2;
    l.micro_batches = 4;
    l.pp_bytes = 2e6;
    const auto folded = run(l, 8, 1, true), unfolded = run(l, 8, 1, false);
    CHECK(folded.iteration_time_s == Approx(unfolded.iteration_time_s).epsilon(1e-3));
    CHECK(folded.activities < unfolded.activities);
  }
}

TEST_CASE("sim::Layout: a layout the ranks cannot hold is an error naming its flag", "[sim][layout]") {
  ParallelLayout l;
  l.tp = 3;
  CHECK_THROWS_WITH(check_layout(l, 8), Catch::Contains("--workers") && Catch::Contains("tp x pp x cp"));
  l = {};
  l.pp = 8;
  CHECK_THROWS_WITH(layout_chunk_blocks(l, 4), Catch::Contains("--pp") && Catch::Contains("more than the model's 4"));
  l = {};
  l.ep = 3;
  CHECK_THROWS_WITH(check_layout(l, 8), Catch::Contains("--ep"));
  l = {};
  l.pp = 2;
  l.vp = 2;
  l.micro_batches = 3;
  CHECK_THROWS_WITH(check_layout(l, 2), Catch::Contains("--vp") && Catch::Contains("multiples of --pp"));
  l = {};
  l.order = "tp-dp-pp";
  CHECK_THROWS_WITH(check_layout(l, 1), Catch::Contains("--order"));
  l = {};
  l.pp = 2;
  l.stage_layers = {3, 2};
  CHECK_THROWS_WITH(layout_chunk_blocks(l, 4), Catch::Contains("--stage-layers"));
  // Uneven splits spread the remainder after the first chunk: 70 layers on 12 stages, 126 on 16 x 8 chunks.
  l = {};
  l.pp = 12;
  const auto split = layout_chunk_blocks(l, 70);
  CHECK(split.front() == 5);
  CHECK(std::accumulate(split.begin(), split.end(), 0) == 70);
  l.pp = 16;
  l.vp = 8;
  const auto fine = layout_chunk_blocks(l, 126);
  CHECK(fine.size() == 128);
  CHECK(fine.front() == 0);
  CHECK(fine.back() == 0);
  CHECK(std::accumulate(fine.begin(), fine.end(), 0) == 126);
}
