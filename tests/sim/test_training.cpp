// Closed-form checks of the training replay on hand-built platforms and profiles: infinite bandwidth,
// no overlap, the PS bottleneck NIC, ps-replicated bytes, monotonicity, determinism, trace and errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/errors.hpp"
#include "platforms/transport.hpp"
#include "sim/comm.hpp"
#include "sim/src/world.hpp"
#include "sim/training.hpp"
#include "tests/sim/comm_test_platforms.hpp"

using namespace dtsim;

namespace {

constexpr double LAYER_FWD_S = 1e-3, LAYER_BWD_S = 2e-3, UPDATE_S = 1e-3;
constexpr std::int64_t LAYER_GRAD_BYTES = 4'000'000;

// A star cluster of single-process CPU nodes (or GPU nodes behind PCIe) with the given NIC rate.
platforms::Platform star_platform(double nic_Bps, int nodes = 32, int gpus = 0) {
  platforms::Platform p;
  p.name = "test-star";
  p.file = "test-star.yaml";
  p.nodes = nodes;
  p.node.cpu = "test-cpu";
  p.node.gpus = gpus;
  p.node.gpu = gpus > 0 ? "test-gpu" : "";
  p.node.intra.kind = gpus > 0 ? platforms::IntraNodeKind::PCIE : platforms::IntraNodeKind::SHARED_MEMORY;
  p.node.intra.link_bandwidth_Bps = std::max(10e9, nic_Bps);  // "infinite" network means infinite inside too
  p.node.intra.latency_s = 0;
  p.network.technology = "test network";
  p.network.topology = platforms::TopologyKind::STAR;
  p.network.link_bandwidth_Bps = nic_Bps;
  p.network.latency_s = 0;
  p.network.protocol_efficiency = 1.0;
  return p;
}

calibrate::ComputeProfile uniform_profile(int layers, double scale = 1.0, std::int64_t grad_bytes = LAYER_GRAD_BYTES) {
  calibrate::ComputeProfile prof;
  prof.model = "uniform";
  prof.device = "test-device";
  prof.batch = 32;
  for (int i = 0; i < layers; ++i) {
    calibrate::LayerTime l;
    l.name = "layer" + std::to_string(i);
    l.op = "conv2d";
    l.fwd_s = LAYER_FWD_S * scale;
    l.bwd_data_s = LAYER_BWD_S * scale / 2;
    l.bwd_weights_s = LAYER_BWD_S * scale / 2;
    l.grad_bytes = grad_bytes;
    prof.layers.push_back(l);
  }
  prof.update_s = UPDATE_S * scale;
  return prof;
}

sim::Strategy S(const std::string& name) { return sim::strategy_by_name(name); }

sim::TrainingPoint point(sim::Strategy s, int workers) {
  sim::TrainingPoint p;
  p.strategy = s;
  p.workers = workers;
  p.fidelity.iterations = 3;
  return p;
}

double step_s(const calibrate::ComputeProfile& prof) {
  return prof.layers.size() * (LAYER_FWD_S + LAYER_BWD_S) * (prof.update_s / UPDATE_S) + prof.update_s;
}

}  // namespace

TEST_CASE("sim::Training: one worker runs forward + backward + update", "[sim][training]") {
  const auto plat = star_platform(10e9);
  const auto prof = uniform_profile(10);
  const auto r = sim::simulate_training(plat, prof, point(S("allreduce-ring"), 1));
  CHECK(r.iteration_time_s == Approx(step_s(prof)).epsilon(1e-6));
  CHECK(r.throughput == Approx(32 / step_s(prof)).epsilon(1e-6));
  CHECK(r.breakdown.compute_s == Approx(step_s(prof)).epsilon(1e-6));
  CHECK(r.breakdown.exposed_communication_s == Approx(0).margin(1e-9));
}

TEST_CASE("sim::Training: infinite bandwidth gives efficiency 1", "[sim][training]") {
  const auto plat = star_platform(1e18);
  const auto prof = uniform_profile(10);
  for (auto s : {S("allreduce-ring"), S("allreduce-rhd"), S("allreduce-hier"),
                 S("ps"), S("ps-replicated")}) {
    auto p1 = point(s, 1);
    auto p8 = point(s, 8);
    p1.ps.servers = p8.ps.servers = 4;  // the servers' share of the update is then the same
    const auto r1 = sim::simulate_training(plat, prof, p1);
    const auto r8 = sim::simulate_training(plat, prof, p8);
    INFO(sim::to_string(s));
    CHECK(r8.throughput / (8 * r1.throughput) == Approx(1.0).epsilon(1e-3));
  }
}

TEST_CASE("sim::Training: without overlap the iteration is compute plus exchange", "[sim][training]") {
  const auto plat = star_platform(1e9);
  const auto prof = uniform_profile(10);
  auto p = point(S("allreduce-ring"), 4);
  p.runtime.overlap = false;
  p.runtime.fusion_bytes = 1e12;  // one bucket holding every gradient
  const auto r = sim::simulate_training(plat, prof, p);
  sim::CommRequest req;
  req.pattern = "allreduce-ring";
  req.workers = 4;
  req.bytes = 10.0 * LAYER_GRAD_BYTES;
  const double exchange_s = sim::simulate_comm(plat, req).time_s;
  REQUIRE(exchange_s > 0.01);  // the test means something only if the exchange is visible
  CHECK(r.iteration_time_s == Approx(step_s(prof) + exchange_s).epsilon(0.01));
  CHECK(r.buckets == 1);
  // Overlapping per-layer buckets with the remaining backward is never slower here.
  p.runtime.overlap = true;
  p.runtime.fusion_bytes = 0;
  const auto overlapped = sim::simulate_training(plat, prof, p);
  CHECK(overlapped.iteration_time_s < r.iteration_time_s);
  CHECK(overlapped.buckets == 10);
}

TEST_CASE("sim::Training: a PS strategy is limited by the busiest server NIC", "[sim][training]") {
  const double nic_Bps = 1e9;
  const auto plat = star_platform(nic_Bps);
  const auto prof = uniform_profile(10, 1e-4);  // compute negligible next to the exchange
  const int workers = 8;
  auto p = point(S("ps"), workers);
  p.ps.servers = 1;
  p.ps.placement = sim::PsPlacement::DEDICATED;
  const auto r = sim::simulate_training(plat, prof, p);
  // The server receives every worker's gradients, then sends every worker the parameters.
  const double model_B = 10.0 * LAYER_GRAD_BYTES;
  const double bound_s = 2 * workers * model_B / nic_Bps;
  CHECK(r.iteration_time_s == Approx(bound_s).epsilon(0.05));
  CHECK(r.busiest_nic_server == 0);
  CHECK(r.busiest_nic_busy == Approx(0.5).epsilon(0.06));  // pushes in, then pulls out: half each way
  // Two servers split the variables evenly (greedy on bytes): the busiest NIC carries half.
  p.ps.servers = 2;
  const auto r2 = sim::simulate_training(plat, prof, p);
  CHECK(r2.iteration_time_s == Approx(bound_s / 2).epsilon(0.05));
}

TEST_CASE("sim::Training: a PS RPC layer adds its software time in series (closed form)", "[sim][training]") {
  // One worker and its colocated server on an infinitely fast fabric: every flow takes no time, so the
  // iteration is the compute step plus the pull's RPC time (every variable) plus the RPC time of the last
  // push (layer 0's gradient, ready when backward ends); earlier pushes end under the remaining backward.
  // With no ps_transport (and with zeromq, which has no server-side cost) the server queue is off.
  const auto plat = star_platform(1e18);
  const int layers = 10;
  const auto prof = uniform_profile(layers);
  auto p = point(S("ps"), 1);
  const auto base = sim::simulate_training(plat, prof, p);
  CHECK(base.iteration_time_s == Approx(step_s(prof)).epsilon(1e-6));
  p.ps.transport = "grpc";
  const auto grpc = sim::simulate_training(plat, prof, p);
  const auto& t = platforms::transport_by_name("grpc", platforms::TransportScope::RPC);
  REQUIRE(t.rpc_cost_s(1, LAYER_GRAD_BYTES) < LAYER_BWD_S);  // the earlier pushes are hidden
  // The server's CPU: the pull's 10 calls on 8 serving threads take two call times; the last push's one.
  const double c = t.rpc_server_cpu_per_call_s;
  REQUIRE(t.rpc_server_threads == 8);
  const double expected = step_s(prof) + 2 * c + t.rpc_cost_s(layers, layers * double(LAYER_GRAD_BYTES)) +
                          t.rpc_cost_s(1, LAYER_GRAD_BYTES) + c;
  CHECK(grpc.iteration_time_s == Approx(expected).epsilon(1e-6));
  p.ps.transport = "zeromq";
  const auto zmq = sim::simulate_training(plat, prof, p);
  const auto& z = platforms::transport_by_name("zeromq", platforms::TransportScope::RPC);
  CHECK(zmq.iteration_time_s == Approx(step_s(prof) + z.rpc_cost_s(layers, 0) + z.rpc_cost_s(1, 0)).epsilon(1e-6));
  p.ps.transport = "tcp";
  CHECK_THROWS_AS(sim::simulate_training(plat, prof, p), InputError);
}

TEST_CASE("sim::Training: parameter servers apply every push on their CPU, one after another (closed form)",
          "[sim][training]") {
  // Infinitely fast fabric, one server (on node 0). With server apply each worker's push of a layer is
  // applied as it arrives, W pushes of a layer one after another; the servers' once-per-iteration update
  // is gone. The applies of a layer (W x bytes x a) end under the next layer's backward, so the iteration
  // is the compute step without the update plus the last layer's W applies. The same for ps-async, where
  // each worker waits for its own apply only, queued behind the others' pushes of that layer.
  const auto plat = star_platform(1e18);
  const auto prof = uniform_profile(10);
  const double a = 1.5e-3 / (4 * double(LAYER_GRAD_BYTES));  // 4 applies of a layer: 1.5 ms < 2 ms backward
  for (const int workers : {1, 4}) {
    INFO(workers << " workers");
    auto p = point(S("ps"), workers);
    const auto once = sim::simulate_training(plat, prof, p);
    CHECK(once.iteration_time_s == Approx(step_s(prof)).epsilon(1e-6));
    p.ps.apply_s_per_B = a;
    const auto applied = sim::simulate_training(plat, prof, p);
    CHECK(applied.iteration_time_s == Approx(step_s(prof) - UPDATE_S + workers * LAYER_GRAD_BYTES * a).epsilon(1e-6));
  }
  auto q = point(S("ps-async"), 4);
  q.ps.apply_s_per_B = a;
  const auto async = sim::simulate_training(plat, prof, q);
  // Every worker's iteration ends when its own last push is applied: on average (1 + 4) / 2 applies in.
  CHECK(async.iteration_time_s <= step_s(prof) - UPDATE_S + 4 * LAYER_GRAD_BYTES * a + 1e-9);
  CHECK(async.iteration_time_s >= step_s(prof) - UPDATE_S + LAYER_GRAD_BYTES * a - 1e-9);
  auto bad = point(S("ps"), 2);
  bad.ps.apply_s_per_B = -1;
  CHECK_THROWS_AS(sim::simulate_training(plat, prof, bad), InputError);
}

TEST_CASE("sim::Training: a collective overlapped with backward slows that compute by the interference factor",
          "[sim][training]") {
  // Two GPU nodes, two layers, one bucket per layer: bucket 0's allreduce (T_c) runs under layer 0's
  // backward (2 ms > T_c). For T_c the overlapped compute gets 1/s of the device, so that segment ends
  // T_c (1 - 1/s) later; bucket 1's allreduce and the update run alone.
  // The same for hierarchical allreduce on two GPUs of one node (its inter-node step has nothing to do):
  // with the loads as SimGrid execs, that case paid far more than its collective's time.
  const auto prof = uniform_profile(2);
  struct Case {
    platforms::Platform plat;
    const char* strategy;
  };
  for (const auto& c : {Case{star_platform(8e9, 2, 1), "allreduce-ring"}, Case{star_platform(8e9, 1, 2), "allreduce-hier"}}) {
    INFO(c.strategy);
    auto q = point(S(c.strategy), 2);
    q.runtime.fusion_bytes = 0;
    q.fidelity.interference = false;
    const auto off = sim::simulate_training(c.plat, prof, q);
    q.fidelity.interference = true;
    const auto on = sim::simulate_training(c.plat, prof, q);
    sim::CommRequest req;
    req.pattern = c.strategy;
    req.workers = 2;
    req.bytes = LAYER_GRAD_BYTES;
    const double collective_s = sim::simulate_comm(c.plat, req).time_s;
    REQUIRE(collective_s > 1e-4);
    REQUIRE(collective_s < LAYER_BWD_S);
    CHECK(on.iteration_time_s - off.iteration_time_s ==
          Approx(collective_s * (1 - 1 / sim::OVERLAP_COMPUTE_SLOWDOWN)).epsilon(1e-3));
  }
  auto p = point(S("allreduce-ring"), 2);
  p.runtime.fusion_bytes = 0;
  p.fidelity.interference = true;
  // CPU workers: no GPU kernels to share, nothing changes.
  const auto cpu = star_platform(8e9, 2, 0);
  const auto cpu_on = sim::simulate_training(cpu, prof, p);
  p.fidelity.interference = false;
  CHECK(sim::simulate_training(cpu, prof, p).iteration_time_s == Approx(cpu_on.iteration_time_s).epsilon(1e-12));
}

TEST_CASE("sim::Training: ps-replicated sends 1/8 of ps inter-node bytes on 8-GPU nodes", "[sim][training]") {
  const auto plat = star_platform(10e9, 8, 8);
  const auto prof = uniform_profile(12);
  auto p = point(S("ps"), 32);
  p.ps.servers = 4;
  const auto ps = sim::simulate_training(plat, prof, p);
  p.strategy = S("ps-replicated");
  const auto rep = sim::simulate_training(plat, prof, p);
  REQUIRE(ps.inter_node_bytes > 0);
  CHECK(rep.inter_node_bytes / ps.inter_node_bytes == Approx(1.0 / 8).epsilon(1e-9));
  CHECK(rep.nodes == 4);
}

TEST_CASE("sim::Training: more bandwidth is never slower", "[sim][training]") {
  const auto prof = uniform_profile(16);
  for (auto s : {S("allreduce-ring"), S("allreduce-rhd"), S("ps"),
                 S("ps-async")}) {
    double previous = 0;
    for (double bw : {1e8, 1e9, 1e10, 1e11}) {
      auto p = point(s, 8);
      p.ps.servers = 2;
      const double thr = sim::simulate_training(star_platform(bw), prof, p).throughput;
      INFO(sim::to_string(s) << " at " << bw << " B/s");
      CHECK(thr >= previous * (1 - 1e-9));
      previous = thr;
    }
  }
}

TEST_CASE("sim::Training: predictions are deterministic, jitter included", "[sim][training]") {
  const auto plat = star_platform(1e9);
  const auto prof = uniform_profile(10);
  auto p = point(S("allreduce-ring"), 8);
  p.variability.jitter_cv = 0.1;
  p.variability.straggler_probability = 0.2;
  p.variability.straggler_slowdown = 2;
  p.variability.seed = 7;
  const auto a = sim::simulate_training(plat, prof, p);
  const auto b = sim::simulate_training(plat, prof, p);
  CHECK(a.iteration_time_s == b.iteration_time_s);
  CHECK(a.throughput == b.throughput);
  // Stragglers slow synchronous training.
  auto calm = p;
  calm.variability = sim::Variability{};
  CHECK(sim::simulate_training(plat, prof, calm).throughput > a.throughput);
}

TEST_CASE("sim::Training: Horovod cycle time delays exchanges to cycle ticks", "[sim][training]") {
  const auto plat = star_platform(1e18);
  const auto prof = uniform_profile(10);
  auto p = point(S("allreduce-ring"), 4);
  p.runtime.fusion_bytes = 1e12;
  p.runtime.overlap = false;
  p.fidelity.iterations = 1;
  p.runtime.cycle_s = 0.1;  // the single exchange waits for the tick after backward (t = 0.03 s)
  const auto r = sim::simulate_training(plat, prof, p);
  CHECK(r.iteration_time_s == Approx(0.1 + UPDATE_S).epsilon(1e-3));
}

TEST_CASE("sim::Training: Horovod fuses at each tick what is ready, so a large threshold still overlaps",
          "[sim][training]") {
  // 10 layers of 2 ms backward and 4 MB of gradient; 2 workers on 4 GB/s NICs: a layer's ring allreduce
  // (2 steps of 2 MB each way) takes ~1 ms, less than the next layer's backward.
  const auto plat = star_platform(4e9, 2);
  const auto prof = uniform_profile(10);
  auto p = point(S("allreduce-ring"), 2);
  p.runtime.fusion_bytes = 1e12;  // above the model: one bucket without a cycle
  p.fidelity.iterations = 2;
  const double fwd_bwd = 10 * (LAYER_FWD_S + LAYER_BWD_S);
  const auto whole = sim::simulate_training(plat, prof, p);
  // Without a cycle the one 40 MB bucket starts after backward: ~10 ms exposed.
  CHECK(whole.iteration_time_s > fwd_bwd + UPDATE_S + 9e-3);
  p.runtime.cycle_s = 1e-4;
  const auto hvd = sim::simulate_training(plat, prof, p);
  // With a 0.1 ms cycle each layer's gradient goes at the tick after it is ready: only the last
  // layer's ~1 ms allreduce (and a tick) is exposed.
  CHECK(hvd.iteration_time_s > fwd_bwd + UPDATE_S + 0.9e-3);
  CHECK(hvd.iteration_time_s < fwd_bwd + UPDATE_S + 1.5e-3);
}

TEST_CASE("sim::Training: Horovod on host buffers adds host fusion memcpys, copies out and back and host "
          "reductions around the network allreduce (closed form)",
          "[sim][training]") {
  // 2 GPU nodes, 10 tensors of 4 MB fused into one 40 MB buffer after backward (no overlap, no cycle).
  constexpr double NIC_Bps = 1e9, BYTES = 10 * LAYER_GRAD_BYTES;
  auto plat = star_platform(NIC_Bps, 2, 1);
  plat.node.cpu = "xeon-e5-2680-v4";  // one core: 76.8 GB/s / 14 (platforms/devices.yaml)
  const auto prof = uniform_profile(10);
  auto p = point(S("allreduce-ring"), 2);
  p.runtime.fusion_bytes = 1e12;
  p.runtime.overlap = false;
  p.fidelity.iterations = 1;
  p.runtime.framework.copy_min_items = 2;  // Horovod's
  p.runtime.collective_library = "horovod-host-openmpi-4.0";
  const double core_Bps = 76.8e9 / 14;
  const double dma_Bps = plat.node.intra.link_bandwidth_Bps *
                         platforms::transport_by_name("pcie", platforms::TransportScope::INTRA_NODE).link_efficiency;
  const double fusion = 2 * BYTES / core_Bps;      // memcpy in (read + write), and the same out
  const double staging = 2 * BYTES / dma_Bps;      // device to host, host to device
  const double ring = 2 * (BYTES / 2) / NIC_Bps;   // 2 ranks: 2 steps of half the buffer
  const double reduce = 3 * (BYTES / 2) / core_Bps;  // each rank reduces its half once
  const double fwd_bwd = 10 * (LAYER_FWD_S + LAYER_BWD_S);
  const auto r = sim::simulate_training(plat, prof, p);
  CHECK(r.iteration_time_s == Approx(fwd_bwd + 2 * fusion + staging + ring + reduce + UPDATE_S).epsilon(1e-3));
  // The host collective runs no GPU kernel: a bucket reduced under the backward does not slow it.
  auto q = point(S("allreduce-ring"), 2);
  q.runtime.fusion_bytes = 0;
  q.runtime.collective_library = "horovod-host-openmpi-4.0";
  q.fidelity.interference = false;
  const auto off = sim::simulate_training(plat, uniform_profile(2), q);
  q.fidelity.interference = true;
  CHECK(sim::simulate_training(plat, uniform_profile(2), q).iteration_time_s ==
        Approx(off.iteration_time_s).epsilon(1e-12));
}

TEST_CASE("sim::Training: real data stalls when storage is slower than compute", "[sim][training]") {
  auto plat = star_platform(10e9);
  plat.storage.kind = platforms::StorageKind::LOCAL_SSD;
  plat.storage.read_bandwidth_Bps = 1e8;
  const auto prof = uniform_profile(10);  // 0.031 s per iteration
  auto p = point(S("allreduce-ring"), 2);
  p.input.data = sim::DataMode::REAL;
  p.input.sample_bytes = 1e6;  // 32 MB per batch: 0.32 s at 100 MB/s
  p.fidelity.iterations = 4;
  const auto r = sim::simulate_training(plat, prof, p);
  CHECK(r.iteration_time_s == Approx(0.32).epsilon(0.02));
  CHECK(r.breakdown.io_stall_s > 0.25);
  p.input.sample_bytes = 1e3;  // fast storage: prefetching hides the reads
  const auto fast = sim::simulate_training(plat, prof, p);
  CHECK(fast.breakdown.io_stall_s == Approx(0).margin(1e-6));
}

TEST_CASE("sim::Training: data-parallel-single-node gathers on device 0", "[sim][training]") {
  const auto plat = star_platform(10e9, 1, 8);
  const auto prof = uniform_profile(10);
  auto p = point(S("data-parallel-single-node"), 8);
  p.input.scattered_bytes_per_sample = 3 * 224 * 224 * 4;
  p.input.gathered_bytes_per_sample = 4000;
  const auto r8 = sim::simulate_training(plat, prof, p);
  const auto r1 = sim::simulate_training(plat, prof, point(S("data-parallel-single-node"), 1));
  CHECK(r8.throughput > r1.throughput);
  CHECK(r8.throughput < 8 * r1.throughput);  // device 0 serialises the gradient reduction
  CHECK_THROWS_AS(sim::simulate_training(star_platform(10e9, 2, 8), prof,
                                         point(S("data-parallel-single-node"), 16)),
                  InputError);
}

namespace {
// Checks a Chrome trace the way Perfetto reads it: complete slices of one track nest (no slice ends
// after the slice it starts in), async begin/end pairs match, counters are finite percentages.
void check_trace_structure(const nlohmann::json& doc) {
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> tracks;
  std::map<std::string, double> async_begin;
  std::map<std::string, double> last_counter_ts;
  for (const auto& e : doc["traceEvents"]) {
    REQUIRE(e.contains("ph"));
    REQUIRE(e.contains("pid"));
    REQUIRE(e.contains("name"));
    const std::string ph = e["ph"];
    if (ph == "X") {
      const double ts = e["ts"], dur = e["dur"];
      CHECK(ts >= 0);
      CHECK(dur >= 0);
      tracks[{e["pid"].get<int>(), e["tid"].get<int>()}].emplace_back(ts, ts + dur);
    } else if (ph == "b") {
      async_begin[e["id"].get<std::string>()] = e["ts"].get<double>();
    } else if (ph == "e") {
      const auto it = async_begin.find(e["id"].get<std::string>());
      REQUIRE(it != async_begin.end());
      CHECK(e["ts"].get<double>() >= it->second);
      async_begin.erase(it);
    } else if (ph == "C") {
      const double v = e["args"]["utilisation_pct"];
      CHECK(std::isfinite(v));
      CHECK(v >= 0);
      CHECK(v <= 100 + 1e-6);
      const std::string series = e["name"];
      const double ts = e["ts"];
      if (last_counter_ts.count(series)) CHECK(ts >= last_counter_ts[series]);
      last_counter_ts[series] = ts;
    }
  }
  CHECK(async_begin.empty());
  for (auto& [track, slices] : tracks) {
    std::sort(slices.begin(), slices.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    std::vector<double> open_ends;
    for (const auto& [start, end] : slices) {
      while (!open_ends.empty() && open_ends.back() <= start + 1e-6) open_ends.pop_back();
      INFO("track pid " << track.first << " tid " << track.second << " slice " << start << ".." << end);
      if (!open_ends.empty()) CHECK(end <= open_ends.back() + 1e-6);
      open_ends.push_back(end);
    }
  }
}
}  // namespace

TEST_CASE("sim::Training: the trace nests, names buckets and layers, and counts link utilisation",
          "[sim][training]") {
  const auto plat = star_platform(1e9);
  const auto prof = uniform_profile(6);
  const std::string path = "/tmp/dtsim_test_training_trace.json";
  for (auto s : {S("allreduce-ring"), S("ps")}) {
    auto p = point(s, 8);
    p.ps.servers = 2;
    p.fidelity.trace_path = path;
    p.fidelity.trace_iterations = 2;
    p.runtime.fusion_bytes = 8e6;
    sim::simulate_training(plat, prof, p);
    std::ifstream in(path);
    REQUIRE(in);
    const auto doc = nlohmann::json::parse(in);
    check_trace_structure(doc);
    int iterations = 0, named_backward = 0, exchanges = 0, server_flows = 0;
    std::set<std::string> counters;
    for (const auto& e : doc["traceEvents"]) {
      const std::string name = e["name"], ph = e["ph"];
      if (ph == "X" && e.value("cat", "") == "iteration" && e["pid"] == 1) ++iterations;
      if (ph == "X" && name.starts_with("backward to bucket ")) {
        ++named_backward;
        CHECK(e["args"]["bucket_bytes"].get<double>() > 0);
      }
      if (ph == "X" && e.value("cat", "") == "allreduce") {
        ++exchanges;
        CHECK(name.starts_with("allreduce bucket "));
        CHECK(name.find("layer") != std::string::npos);
        CHECK(e["args"]["bytes"].get<double>() > 0);
      }
      if ((ph == "b" || ph == "X") && e["pid"] == 2) ++server_flows;
      if (ph == "C") counters.insert(name);
    }
    INFO(s.name());
    CHECK(iterations == 8 * 2);  // every worker's last two iterations
    CHECK(named_backward > 0);
    CHECK(counters.count("node 0 NIC (sending)") == 1);
    if (s.exchange == "ps") {
      CHECK(server_flows >= 2 * 8 * 2 * 2);  // 2 iterations of 8 workers' pulls and pushes to 2 shards
    } else {
      CHECK(exchanges >= 2);
    }
  }
  std::remove(path.c_str());
}

TEST_CASE("sim::Training: measured resources name the PS server's NIC at line rate", "[sim][training]") {
  const auto plat = star_platform(1e9);
  const auto prof = uniform_profile(10, 1e-4);  // compute negligible next to the exchange
  auto p = point(S("ps"), 8);
  p.ps.servers = 1;
  p.ps.placement = sim::PsPlacement::DEDICATED;
  const auto r = sim::simulate_training(plat, prof, p);
  REQUIRE(!r.resources.empty());
  const auto& top = r.resources.front();
  CHECK(top.kind == "nic");
  CHECK(top.node == 8);  // the dedicated server node after the 8 worker nodes
  CHECK(top.server == 0);
  // Pushes in, then pulls out, each at line rate: each direction half of the iteration.
  CHECK(top.utilisation == Approx(0.5).epsilon(0.06));
  CHECK(top.bytes == Approx(8 * 10.0 * LAYER_GRAD_BYTES).epsilon(1e-6));
  CHECK(top.capacity_Bps == 1e9);
  // Rank 0 waits for the parameters before forward and for push + update after backward.
  const auto& b = r.breakdown;
  CHECK(b.exposed_before_forward_s > 0.3 * b.exposed_communication_s);
  CHECK(b.exposed_after_backward_s > 0.3 * b.exposed_communication_s);
  CHECK(b.exposed_before_forward_s + b.exposed_after_backward_s ==
        Approx(b.exposed_communication_s).epsilon(0.02));
}

TEST_CASE("sim::Training: measured NIC utilisation of a ring allreduce matches its closed form", "[sim][training]") {
  const double nic_Bps = 1e9;
  const auto plat = star_platform(nic_Bps, 128);
  const auto prof = uniform_profile(10, 1e-3);
  // 8 ranks run fine mode; 96 run coarse mode, where the measured iterations reuse the first
  // iteration's ring (it ran alone on the network) and charge its bytes to the links again.
  for (const int n : {8, 96}) {
    INFO(n << " workers");
    auto p = point(S("allreduce-ring"), n);
    p.runtime.fusion_bytes = 1e9;  // one bucket
    const auto r = sim::simulate_training(plat, prof, p);
    REQUIRE(!r.resources.empty());
    // Every NIC sends and receives 2(n-1)/n x S per iteration, whatever the workers per node.
    const double per_nic_B = 2.0 * (n - 1) / n * 10.0 * LAYER_GRAD_BYTES;
    CHECK(r.resources.front().bytes == Approx(per_nic_B).epsilon(0.01));
    CHECK(r.resources.front().utilisation == Approx(per_nic_B / nic_Bps / r.iteration_time_s).epsilon(0.01));
    CHECK((r.resources.front().kind == "nic" || r.resources.front().kind == "switch-port"));
  }
}

TEST_CASE("sim::Training: a coarse tree solved in closed form gives the iteration its flows give", "[sim][training]") {
  // 96 single-GPU nodes on a 2-level fat tree: each bucket's double binary tree (4 x 95 flows, coarse
  // above 64 ranks) runs alone, so World::transfer_together solves it; SimGrid's own sharing of the
  // same flows must give the same iteration and link bytes.
  const auto plat = test_platforms::gpu_fat_tree(96, 1);
  const auto prof = uniform_profile(10, 1e-3);
  auto p = point(S("allreduce-tree"), 96);
  p.runtime.fusion_bytes = 2.5 * LAYER_GRAD_BYTES;  // buckets of a few layers, overlapped with backward
  sim::World::allow_solving_together(false);
  const auto flows = sim::simulate_training(plat, prof, p);
  sim::World::allow_solving_together(true);
  const auto solved = sim::simulate_training(plat, prof, p);
  REQUIRE(flows.buckets > 1);
  CHECK(solved.iteration_time_s == Approx(flows.iteration_time_s).epsilon(1e-6));
  CHECK(solved.flows == flows.flows);
  REQUIRE(!flows.resources.empty());
  CHECK(solved.resources.front().bytes == Approx(flows.resources.front().bytes).epsilon(1e-9));
}

TEST_CASE("sim::Training: impossible set-ups are input errors", "[sim][training]") {
  const auto plat = star_platform(1e9, 4);
  const auto prof = uniform_profile(4);
  CHECK_THROWS_AS(sim::simulate_training(plat, prof, point(S("allreduce-ring"), 5)), InputError);
  CHECK_THROWS_AS(sim::simulate_training(plat, prof, point(S("allreduce-ring"), 0)), InputError);
  auto p = point(S("ps"), 4);
  p.ps.servers = 1;
  p.ps.placement = sim::PsPlacement::DEDICATED;  // 4 worker nodes + 1 server node > 4
  CHECK_THROWS_AS(sim::simulate_training(plat, prof, p), InputError);
  p = point(S("allreduce-ring"), 2);
  p.runtime.fusion_bytes = -1;
  CHECK_THROWS_AS(sim::simulate_training(plat, prof, p), InputError);
  p = point(S("allreduce-ring"), 2);
  p.input.data = sim::DataMode::REAL;
  p.input.sample_bytes = 1000;
  CHECK_THROWS_AS(sim::simulate_training(plat, prof, p), InputError);  // no storage on this platform
  auto zero_batch = prof;
  zero_batch.batch = 0;
  CHECK_THROWS_AS(sim::simulate_training(plat, zero_batch, point(S("allreduce-ring"), 1)), InputError);
  CHECK_THROWS_AS(sim::strategy_by_name("allreduce-magic"), InputError);
  CHECK_THROWS_AS(sim::strategy_by_name("ps-ring"), InputError);  // ps runs no collective
  auto unknown = point(S("allreduce-ring"), 2);
  unknown.strategy.collective = "magic";  // built in code, never typed: still an error, never a fallback
  CHECK_THROWS_AS(sim::simulate_training(plat, prof, unknown), InputError);
}

TEST_CASE("sim::Training: a point that names no iteration count gets its strategy's", "[sim][training]") {
  sim::TrainingPoint p;
  p.strategy = sim::strategy_by_name("ps");
  CHECK(sim::resolved_iterations(p) == sim::SYNC_ITERATIONS);
  p.strategy = sim::strategy_by_name("ps-async");
  CHECK(sim::resolved_iterations(p) == sim::ASYNC_ITERATIONS);
  p.fidelity.trace_path = "t.json";
  p.fidelity.trace_iterations = sim::ASYNC_ITERATIONS;  // the traced ones follow a warm-up iteration
  CHECK(sim::resolved_iterations(p) == sim::ASYNC_ITERATIONS + 1);
  p.fidelity.iterations = 4;  // named: kept
  CHECK(sim::resolved_iterations(p) == 4);
  // By strategy, the traced iterations and their warm-up stay within the iteration bound (1,000), and
  // the error names that bound, not a count past it.
  p.fidelity.iterations = 0;
  p.fidelity.trace_iterations = std::numeric_limits<int>::max();
  CHECK(sim::resolved_iterations(p) == 1000);
  p.workers = 1;
  try {
    sim::simulate_training(star_platform(1e9, 4), uniform_profile(4), p);
    FAIL("an absurd --trace-iterations was accepted");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()) ==
          "--trace-iterations: expected 1..999 (the simulated iterations, after a warm-up one), got 2147483647");
  }
  // And the replay runs that many: a one-iteration point reports its single iteration.
  const auto plat = star_platform(1e9, 4);
  sim::TrainingPoint async;
  async.strategy = sim::strategy_by_name("ps-async");
  async.workers = 2;
  async.ps.servers = 1;
  async.fidelity.iterations = 1;
  const auto one = sim::simulate_training(plat, uniform_profile(4), async);
  async.fidelity.iterations = 0;
  const auto by_strategy = sim::simulate_training(plat, uniform_profile(4), async);
  CHECK(one.flows > 0);
  CHECK(by_strategy.flows == one.flows * sim::ASYNC_ITERATIONS);  // every iteration moves the same flows
}

TEST_CASE("sim::Training: the breakdown is the mean of the measured iterations, so it adds up to the iteration",
          "[sim][training]") {
  // Stragglers make some iterations longer than others: the reported iteration is their mean, and so
  // are compute and exposed time (the last iteration alone need not contain a straggler).
  const auto plat = star_platform(1e9);
  const auto prof = uniform_profile(10);
  auto p = point(S("allreduce-ring"), 8);
  p.fidelity.iterations = 8;
  p.variability.straggler_probability = 0.1;
  p.variability.straggler_slowdown = 3;
  p.variability.seed = 7;
  const auto r = sim::simulate_training(plat, prof, p);
  const auto& b = r.breakdown;
  CHECK(b.compute_s + b.exposed_communication_s + b.io_stall_s == Approx(r.iteration_time_s).epsilon(1e-9));
  CHECK(b.exposed_before_forward_s + b.exposed_after_backward_s <= b.exposed_communication_s + 1e-12);
  // Rank 0 waits for the stragglers: more exposed time than without them.
  auto calm = p;
  calm.variability = sim::Variability{};
  CHECK(b.exposed_communication_s > sim::simulate_training(plat, prof, calm).breakdown.exposed_communication_s);
}
