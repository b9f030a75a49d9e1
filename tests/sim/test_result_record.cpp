// The result record: one field list, one JSON round trip, used by the child process, sweeps and
// `predict --format json`.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "common/errors.hpp"
#include "sim/training.hpp"

using namespace dtsim;

namespace {
// A result whose every numeric field holds a distinct value, so that a swapped field shows.
sim::PointResult distinct_result() {
  sim::PointResult r;
  r.workers = 1;
  r.nodes = 2;
  r.ps_servers = 3;
  r.throughput = 4.5;
  r.efficiency = 0.625;
  r.iteration_time_s = 7.25;
  r.breakdown.compute_s = 8.5;
  r.breakdown.communication_s = 9.5;
  r.breakdown.exposed_communication_s = 10.5;
  r.breakdown.io_stall_s = 11.5;
  r.breakdown.exposed_before_forward_s = 12.25;
  r.breakdown.exposed_after_backward_s = 12.75;
  r.bottleneck = "compute: \"quoted\", with a comma";
  r.wall_s = 13.125;
  r.inter_node_bytes = 14e9;
  r.intra_node_bytes = 15e9;
  r.buckets = 16;
  r.activities = 17'000'000'000LL;
  r.flows = 18;
  r.gradient_bytes = 19.75;
  r.busiest_nic_node = 20;
  r.busiest_nic_bytes = 21.5;
  r.busiest_nic_busy = 0.22;
  r.busiest_nic_server = 23;
  r.resources = {{"node 3 NIC (sending)", "nic", 3, 1, 24.5, 25e9, 0.26}, {"PS shard 2 CPU", "ps-cpu", 2, 2, 0, 0, 0.27}};
  return r;
}
}  // namespace

TEST_CASE("sim::ResultRecord: every field survives the JSON round trip unchanged", "[sim][results]") {
  const sim::PointResult a = distinct_result();
  const sim::PointResult b = sim::point_result_from_json(nlohmann::json::parse(sim::to_json(a).dump()));
  // Compared through the field list and member by member, so a field missing from the list fails too.
  for (const auto& f : sim::result_fields()) CHECK(f.get(a) == f.get(b));
  CHECK(b.workers == 1);
  CHECK(b.nodes == 2);
  CHECK(b.ps_servers == 3);
  CHECK(b.throughput == 4.5);
  CHECK(b.efficiency == 0.625);
  CHECK(b.iteration_time_s == 7.25);
  CHECK(b.breakdown.compute_s == 8.5);
  CHECK(b.breakdown.communication_s == 9.5);
  CHECK(b.breakdown.exposed_communication_s == 10.5);
  CHECK(b.breakdown.io_stall_s == 11.5);
  CHECK(b.bottleneck == a.bottleneck);
  CHECK(b.wall_s == 13.125);
  CHECK(b.inter_node_bytes == 14e9);
  CHECK(b.intra_node_bytes == 15e9);
  CHECK(b.buckets == 16);
  CHECK(b.activities == 17'000'000'000LL);
  CHECK(b.flows == 18);
  CHECK(b.gradient_bytes == 19.75);
  CHECK(b.busiest_nic_node == 20);
  CHECK(b.busiest_nic_bytes == 21.5);
  CHECK(b.busiest_nic_busy == 0.22);
  CHECK(b.busiest_nic_server == 23);
  CHECK(b.breakdown.exposed_before_forward_s == 12.25);
  CHECK(b.breakdown.exposed_after_backward_s == 12.75);
  REQUIRE(b.resources.size() == 2);
  CHECK(b.resources[0].name == "node 3 NIC (sending)");
  CHECK(b.resources[0].kind == "nic");
  CHECK(b.resources[0].node == 3);
  CHECK(b.resources[0].server == 1);
  CHECK(b.resources[0].bytes == 24.5);
  CHECK(b.resources[0].capacity_Bps == 25e9);
  CHECK(b.resources[0].utilisation == 0.26);
  CHECK(b.resources[1].kind == "ps-cpu");
}

TEST_CASE("sim::ResultRecord: one key per field, names unique, throughput carries its unit", "[sim][results]") {
  const nlohmann::json j = sim::to_json(distinct_result());
  std::set<std::string> names;
  for (const auto& f : sim::result_fields()) CHECK(names.insert(f.name).second);
  CHECK(j.size() == names.size());
  CHECK(j.at("throughput_samples_per_s").get<double>() == 4.5);
  CHECK_FALSE(j.contains("throughput"));
}

TEST_CASE("sim::ResultRecord: a missing or mistyped field is a Failure naming it", "[sim][results]") {
  nlohmann::json j = sim::to_json(distinct_result());
  j.erase("buckets");
  CHECK_THROWS_WITH(sim::point_result_from_json(j), Catch::Contains("'buckets'") && Catch::Contains("missing"));
  j = sim::to_json(distinct_result());
  j["workers"] = "eight";
  CHECK_THROWS_AS(sim::point_result_from_json(j), Failure);
  CHECK_THROWS_WITH(sim::point_result_from_json(j), Catch::Contains("'workers'"));
}
