// The iteration plan: bucket boundaries in backward order under the fusion threshold, and PS
// variable placement (greedy on bytes vs round-robin).
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>

#include "common/errors.hpp"
#include "sim/comm.hpp"
#include "tests/sim/profile_test_support.hpp"
#include "sim/src/workload.hpp"

using namespace dtsim;

namespace {
using test_profiles::profile_of;
}  // namespace

TEST_CASE("sim::Workload: buckets fill in backward order up to the fusion size", "[sim][workload]") {
  // Forward order: l0 has no parameters; backward visits l5 first.
  const auto prof = profile_of({0, 10, 10, 30, 10, 10});
  const auto plan = sim::plan_iteration(prof, 25);
  REQUIRE(plan.buckets.size() == 3);
  CHECK(plan.buckets[0].layers == std::vector<int>{5, 4});  // 20 bytes; +30 would exceed 25
  CHECK(plan.buckets[1].layers == std::vector<int>{3});     // larger than the threshold: alone
  CHECK(plan.buckets[2].layers == std::vector<int>{2, 1});
  CHECK(plan.grad_bytes == Approx(70));
  // Segment k ends with bucket k's last layer; the parameter-free l0 is the tail.
  CHECK(plan.bwd_segment_s[0] == Approx(4e-3));
  CHECK(plan.bwd_segment_s[1] == Approx(2e-3));
  CHECK(plan.bwd_segment_s[2] == Approx(4e-3));
  CHECK(plan.bwd_tail_s == Approx(2e-3));
  CHECK(plan.fwd_s == Approx(6e-3));
  CHECK(plan.step_s() == Approx(6e-3 + 12e-3 + 5e-4));
}

TEST_CASE("sim::Workload: fusion 0 gives one bucket per parameter layer, huge fusion one bucket", "[sim][workload]") {
  const auto prof = profile_of({0, 10, 10, 30, 10, 10});
  CHECK(sim::plan_iteration(prof, 0).buckets.size() == 5);
  const auto one = sim::plan_iteration(prof, 1e12);
  REQUIRE(one.buckets.size() == 1);
  CHECK(one.bwd_segment_s[0] + one.bwd_tail_s == Approx(12e-3));
  CHECK_THROWS_AS(sim::plan_iteration(prof, -1), InputError);
  auto bad = prof;
  bad.layers[2].fwd_s = -1;
  CHECK_THROWS_AS(sim::plan_iteration(bad, 0), InputError);
}

TEST_CASE("sim::Workload: DDP forms buckets in forward order, a small first one, and reduces them in reverse",
          "[sim][workload]") {
  // Forward order l0 (no parameters) .. l5; first limit 15 bytes, then 25. Forward: l1 (10) stays open,
  // l2 brings it to 20 >= 15: bucket A = {l1, l2}; l3 (30) >= 25 alone: B = {l3}; l4 + l5 = 20 < 25:
  // the leftover C = {l4, l5}. Reduced in reverse: C first, then B, and A, the first layers', last.
  const auto prof = profile_of({0, 10, 10, 30, 10, 10});
  const auto plan = sim::plan_iteration_ddp(prof, 15, 25);
  REQUIRE(plan.buckets.size() == 3);
  CHECK(plan.buckets[0].layers == std::vector<int>{5, 4});
  CHECK(plan.buckets[1].layers == std::vector<int>{3});
  CHECK(plan.buckets[2].layers == std::vector<int>{2, 1});
  // A bucket closes once it reaches its limit, the crossing tensor included (plan_iteration keeps a
  // bucket under the threshold instead): limits 10 and 15 make {l1}, {l2, l3}, {l4, l5}.
  const auto crossing = sim::plan_iteration_ddp(prof, 10, 15);
  REQUIRE(crossing.buckets.size() == 3);
  CHECK(crossing.buckets[0].layers == std::vector<int>{5, 4});
  CHECK(crossing.buckets[1].layers == std::vector<int>{3, 2});
  CHECK(crossing.buckets[2].layers == std::vector<int>{1});
  // Segments end at each bucket's last gradient in backward order, as plan_iteration's.
  CHECK(crossing.bwd_segment_s[0] == Approx(4e-3));
  CHECK(crossing.bwd_segment_s[1] == Approx(4e-3));
  CHECK(crossing.bwd_segment_s[2] == Approx(2e-3));
  CHECK(crossing.bwd_tail_s == Approx(2e-3));
  CHECK(crossing.grad_bytes == Approx(70));
  CHECK_THROWS_AS(sim::plan_iteration_ddp(prof, 0, 25), InputError);
}

TEST_CASE("sim::Workload: a cycle closes buckets after one cycle of backward, within the threshold",
          "[sim][workload]") {
  // Backward 2 ms per layer; l0 has no parameters. A 3 ms cycle: a bucket closes once its segment lasts
  // 3 ms, i.e. every second parameter layer.
  const auto prof = profile_of({0, 10, 10, 10, 10, 10});
  const auto plan = sim::plan_iteration(prof, 1e12, 3e-3);
  REQUIRE(plan.buckets.size() == 3);
  CHECK(plan.buckets[0].layers == std::vector<int>{5, 4});
  CHECK(plan.buckets[1].layers == std::vector<int>{3, 2});
  CHECK(plan.buckets[2].layers == std::vector<int>{1});
  CHECK(plan.bwd_segment_s[0] == Approx(4e-3));
  // The threshold still bounds a bucket.
  CHECK(sim::plan_iteration(prof, 15, 3e-3).buckets.size() == 5);
  // A cycle shorter than a layer: one bucket per parameter layer; 0: fusion only.
  CHECK(sim::plan_iteration(prof, 1e12, 1e-3).buckets.size() == 5);
  CHECK(sim::plan_iteration(prof, 1e12, 0).buckets.size() == 1);
  CHECK_THROWS_AS(sim::plan_iteration(prof, 1e12, -1), InputError);
}

TEST_CASE("sim::Workload: MXNet placement splits big arrays over all servers and hashes the others", "[sim][workload]") {
  // Gradient bytes; 4e6 B = 1e6 FP32 values, MXNet's big-array bound. Keys count parameter layers only.
  const auto prof = profile_of({0, 8000000, 400, 4000000, 3960000, 400});
  const auto p = sim::place_variables(prof, 4, sim::PsBalance::MXNET);
  CHECK(p[0] == -1);
  CHECK(p[1] == sim::PLACED_ON_ALL_SERVERS);  // key 0, 2e6 values
  CHECK(p[2] == (1 * 9973) % 4);              // key 1: server 1
  CHECK(p[3] == sim::PLACED_ON_ALL_SERVERS);  // key 2, exactly 1e6 values
  CHECK(p[4] == (3 * 9973) % 4);              // key 3, just below the bound: server 3
  CHECK(p[5] == (4 * 9973) % 4);              // key 4: server 0
  const auto bytes = sim::server_bytes(prof, p, 4);
  CHECK(bytes[0] == Approx(3e6 + 400));
  CHECK(bytes[1] == Approx(3e6 + 400));
  CHECK(bytes[2] == Approx(3e6));
  CHECK(bytes[3] == Approx(3e6 + 3.96e6));
  const auto plan = sim::plan_iteration(prof, 0);
  const auto per_bucket = sim::bucket_server_bytes(prof, plan, p, 4);
  for (int s = 0; s < 4; ++s) {
    double sum = 0;
    for (const auto& b : per_bucket) sum += b[static_cast<std::size_t>(s)];
    CHECK(sum == Approx(bytes[static_cast<std::size_t>(s)]));
  }
  CHECK(sim::ps_balance_by_name("mxnet") == sim::PsBalance::MXNET);
  CHECK(sim::to_string(sim::PsBalance::MXNET) == "mxnet");
}

TEST_CASE("sim::Workload: greedy placement balances bytes better than round-robin", "[sim][workload]") {
  const auto prof = profile_of({0, 100, 1, 1, 1, 100, 1, 1, 1});
  const auto greedy = sim::place_variables(prof, 2, sim::PsBalance::GREEDY);
  const auto rr = sim::place_variables(prof, 2, sim::PsBalance::ROUND_ROBIN);
  CHECK(greedy[0] == -1);
  const auto gb = sim::server_bytes(prof, greedy, 2);
  const auto rb = sim::server_bytes(prof, rr, 2);
  CHECK(gb[0] == Approx(103));
  CHECK(gb[1] == Approx(103));
  CHECK(*std::max_element(rb.begin(), rb.end()) == Approx(202));  // both big variables on server 0
  CHECK(std::accumulate(gb.begin(), gb.end(), 0.0) == Approx(206));
  CHECK_THROWS_AS(sim::place_variables(prof, 0, sim::PsBalance::GREEDY), InputError);
  // Per-bucket bytes add up to each server's shard.
  const auto plan = sim::plan_iteration(prof, 0);
  const auto per_bucket = sim::bucket_server_bytes(prof, plan, greedy, 2);
  double s0 = 0;
  for (const auto& b : per_bucket) s0 += b[0];
  CHECK(s0 == Approx(gb[0]));
}
