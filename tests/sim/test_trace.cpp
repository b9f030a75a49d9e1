// Tests of the trace writer (sim/src/trace.hpp): nesting tracks as complete events, tracks of
// concurrent flows as async pairs, counters, and the nesting predicate on closed cases.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "sim/src/trace.hpp"

using namespace dtsim::sim;

TEST_CASE("sim::slices_nest: disjoint and contained slices nest, partial overlaps do not", "[sim][trace]") {
  CHECK(slices_nest({}));
  CHECK(slices_nest({{0, 1}, {1, 2}, {2, 3}}));          // touching is not overlapping
  CHECK(slices_nest({{0, 10}, {1, 2}, {2, 5}, {3, 4}}));  // parent, children, grandchild
  CHECK(slices_nest({{0, 1}, {0, 1}}));                   // identical slices stack
  CHECK_FALSE(slices_nest({{0, 2}, {1, 3}}));             // partial overlap
  CHECK_FALSE(slices_nest({{0, 10}, {1, 5}, {4, 6}}));    // children overlapping inside a parent
}

TEST_CASE("sim::TraceRecorder: nested tracks are complete events, overlapping flows async pairs", "[sim][trace]") {
  TraceRecorder t;
  t.name_track(TraceRecorder::Group::WORKERS, 0, "worker 0");
  t.name_track(TraceRecorder::Group::SERVERS, 0, "PS shard 0");
  t.add(TraceRecorder::Group::WORKERS, 0, "iteration 1", "iteration", 0, 1);
  t.add(TraceRecorder::Group::WORKERS, 0, "forward", "compute", 0, 0.4, {{"bytes", 5}});
  t.add(TraceRecorder::Group::SERVERS, 0, "pull by worker 0", "pull", 0, 0.5);
  t.add(TraceRecorder::Group::SERVERS, 0, "pull by worker 1", "pull", 0.25, 0.75);
  t.counter(TraceRecorder::Group::NETWORK, "node 0 NIC (sending)", 0, 50);
  const auto doc = nlohmann::json::parse(t.to_json());
  int complete = 0, begins = 0, ends = 0, counters = 0;
  for (const auto& e : doc["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "X") {
      ++complete;
      CHECK(e["pid"] == 1);
      if (e["name"] == "forward") CHECK(e["args"]["bytes"] == 5.0);
    } else if (ph == "b" || ph == "e") {
      (ph == "b" ? begins : ends)++;
      CHECK(e["pid"] == 2);
      CHECK(e["name"] == "PS shard 0: pull");
      if (ph == "b") CHECK(e["args"]["what"].get<std::string>().starts_with("pull by worker"));
    } else if (ph == "C") {
      ++counters;
      CHECK(e["args"]["utilisation_pct"] == 50.0);
      CHECK(e["ts"] == 0.0);
    }
  }
  CHECK(complete == 2);
  CHECK(begins == 2);
  CHECK(ends == 2);
  CHECK(counters == 1);
}
