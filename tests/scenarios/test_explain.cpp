// Tests of the explanation (scenarios/explain.hpp): the diagnosis on simulated points whose answer is
// known (compute-bound, PS-server-bound, NIC-bound allreduce, I/O-bound, latency-bound), the advice
// that follows, the efficiency note, and the paragraph's layout.
#include <catch2/catch.hpp>

#include "scenarios/explain.hpp"

using namespace dtsim;
using scenarios::Limit;

namespace {

constexpr std::int64_t LAYER_GRAD_BYTES = 4'000'000;

platforms::Platform star(double nic_Bps, int nodes = 32, double latency_s = 0) {
  platforms::Platform p;
  p.name = "test-star";
  p.file = "test-star.yaml";
  p.nodes = nodes;
  p.node.cpu = "test-cpu";
  p.node.intra.kind = platforms::IntraNodeKind::SHARED_MEMORY;
  p.node.intra.link_bandwidth_Bps = 100e9;
  p.network.technology = "test network";
  p.network.topology = platforms::TopologyKind::STAR;
  p.network.link_bandwidth_Bps = nic_Bps;
  p.network.latency_s = latency_s;
  p.network.protocol_efficiency = 1.0;
  return p;
}

// `layers` layers of 1 ms forward and 2 ms backward (times `scale`), 4 MB of gradient each.
calibrate::ComputeProfile profile(int layers, double scale) {
  calibrate::ComputeProfile prof;
  prof.model = "uniform";
  prof.device = "test-device";
  prof.batch = 32;
  for (int i = 0; i < layers; ++i) {
    calibrate::LayerTime l;
    l.name = "layer" + std::to_string(i);
    l.op = "conv2d";
    l.fwd_s = 1e-3 * scale;
    l.bwd_data_s = 1e-3 * scale;
    l.bwd_weights_s = 1e-3 * scale;
    l.grad_bytes = LAYER_GRAD_BYTES;
    prof.layers.push_back(l);
  }
  prof.update_s = 1e-3 * scale;
  return prof;
}

sim::TrainingPoint point(const std::string& strategy, int workers) {
  sim::TrainingPoint p;
  p.strategy = sim::strategy_by_name(strategy);
  p.workers = workers;
  p.fidelity.iterations = 3;
  return p;
}

scenarios::ExplainContext context(const sim::TrainingPoint& p, const platforms::Platform& plat) {
  scenarios::ExplainContext c;
  c.parameter_servers = sim::uses_servers(p.strategy);
  c.network = plat.network.technology;
  c.device = "test-device";
  c.dedicated_servers = p.ps.placement == sim::PsPlacement::DEDICATED;
  c.fusion_bytes = p.runtime.fusion_bytes;
  return c;
}

}  // namespace

TEST_CASE("scenarios::explain: a compute-bound point says the exchange is hidden", "[scenarios][explain]") {
  const auto plat = star(100e9);
  auto p = point("allreduce-ring", 8);
  const auto r = sim::simulate_training(plat, profile(10, 10), p);  // 0.3 s compute, 40 MB at 100 GB/s
  const auto c = context(p, plat);
  const auto d = scenarios::diagnose(r, c);
  CHECK(d.limit == Limit::COMPUTE);
  CHECK(d.compute_share > 0.95);
  const auto text = scenarios::explain_point(r, c);
  INFO(text);
  CHECK(text.starts_with("8 workers, worker 0's "));
  CHECK(text.find("iteration: compute ") != std::string::npos);
  CHECK(text.find(" (100%)") != std::string::npos);
  CHECK(text.find("Compute-bound on test-device") != std::string::npos);
}

TEST_CASE("scenarios::explain: one PS server on a slow network names its NIC and asks for more servers",
          "[scenarios][explain]") {
  const auto plat = star(1.25e9);  // 10 GbE
  auto p = point("ps", 16);
  p.ps.servers = 1;
  const auto r = sim::simulate_training(plat, profile(10, 0.1), p);
  const auto c = context(p, plat);
  const auto d = scenarios::diagnose(r, c);
  REQUIRE(d.busiest);
  CHECK(d.limit == Limit::PS_SERVER_NIC);
  CHECK(d.busiest->node == 0);
  CHECK(d.busiest->server == 0);
  CHECK(d.busiest->kind == "nic");
  // The server's NIC sends the parameters to 15 remote workers and receives their gradients: each
  // direction moves 15 x 40 MB per iteration at line rate.
  CHECK(d.busiest->bytes == Approx(15 * 10.0 * LAYER_GRAD_BYTES).epsilon(1e-6));
  CHECK(d.busiest->utilisation + d.busiest_reverse->utilisation > 0.8);  // it is busy nearly all the time
  const auto text = scenarios::explain_point(r, c);
  INFO(text);
  CHECK(text.find("exposed gradient push and server update") != std::string::npos);
  // Worker 0 shares node 0 with the server: its own pull crosses no NIC, it waits (nearly) only after
  // backward; the parts, each shown to 0.1 ms, add up to the iteration.
  CHECK(text.find("exposed parameter pull 0.4 ms (0%)") != std::string::npos);
  CHECK(text.find("961.3 ms iteration: compute 3.0 ms (0%), exposed gradient push and server update 957.9 ms") !=
        std::string::npos);
  CHECK(text.find("Busiest resource: node 0 NIC") != std::string::npos);
  CHECK(text.find("which hosts PS shard 0") != std::string::npos);
  CHECK(text.find("more servers (1 now for 16 workers)") != std::string::npos);
  // With a server on every node, more servers no longer spread the load: dedicated servers or allreduce.
  p.workers = 4;
  p.ps.servers = 4;
  auto plat4 = star(1.25e9, 4);
  const auto r4 = sim::simulate_training(plat4, profile(10, 0.1), p);
  const auto d4 = scenarios::diagnose(r4, context(p, plat4));
  CHECK(d4.limit == Limit::PS_SERVER_NIC);
  CHECK(scenarios::advice_sentence(r4, d4, context(p, plat4)).find("dedicated servers") != std::string::npos);
}

TEST_CASE("scenarios::explain: a NIC-bound allreduce asks for a faster network", "[scenarios][explain]") {
  const auto plat = star(1e9);
  auto p = point("allreduce-ring", 8);
  p.runtime.fusion_bytes = 1e9;  // one 40 MB bucket after backward: 70 MB per NIC per iteration at 1 GB/s
  const auto r = sim::simulate_training(plat, profile(10, 0.1), p);
  const auto c = context(p, plat);
  const auto d = scenarios::diagnose(r, c);
  REQUIRE(d.busiest);
  CHECK(d.limit == Limit::NETWORK);
  CHECK(d.busiest->kind == "nic");
  CHECK(d.after_backward_share > 0.8);
  const auto text = scenarios::explain_point(r, c);
  INFO(text);
  CHECK(text.find("exposed gradient allreduce") != std::string::npos);
  CHECK(text.find("a faster network than test network") != std::string::npos);
}

TEST_CASE("scenarios::explain: small buckets on a high-latency network ask for a larger fusion buffer",
          "[scenarios][explain]") {
  const auto plat = star(100e9, 32, 2e-3);  // 2 ms per hop: latency dominates 4 MB messages
  auto p = point("allreduce-ring", 16);
  p.runtime.fusion_bytes = 4e6;  // one bucket per layer
  const auto r = sim::simulate_training(plat, profile(10, 0.1), p);
  const auto c = context(p, plat);
  const auto d = scenarios::diagnose(r, c);
  CHECK(d.limit == Limit::LATENCY);
  CHECK(scenarios::advice_sentence(r, d, c).find("larger fusion buffer") != std::string::npos);
}

TEST_CASE("scenarios::explain: an I/O-bound point names the input and faster storage", "[scenarios][explain]") {
  auto plat = star(10e9);
  plat.storage.kind = platforms::StorageKind::LOCAL_SSD;
  plat.storage.read_bandwidth_Bps = 1e8;
  auto p = point("allreduce-ring", 2);
  p.input.data = sim::DataMode::REAL;
  p.input.sample_bytes = 1e6;  // 32 MB per batch: 0.32 s at 100 MB/s against 0.031 s of compute
  p.fidelity.iterations = 4;
  const auto r = sim::simulate_training(plat, profile(10, 1), p);
  auto c = context(p, plat);
  c.batch_input_bytes = 32e6;
  const auto d = scenarios::diagnose(r, c);
  CHECK(d.limit == Limit::INPUT_IO);
  const auto text = scenarios::explain_point(r, c);
  INFO(text);
  CHECK(text.find("input I/O ") != std::string::npos);
  CHECK(text.find(" ms (8") != std::string::npos);
  CHECK(text.find("Input-bound: worker 0 waits") != std::string::npos);
  CHECK(text.find("faster storage") != std::string::npos);
}

TEST_CASE("scenarios::explain: an efficiency above 1 always comes with its reason", "[scenarios][explain]") {
  sim::PointResult one;
  one.workers = 1;
  one.iteration_time_s = 0.110;
  one.breakdown.compute_s = 0.100;
  one.breakdown.exposed_communication_s = 0.010;
  scenarios::ExplainContext c;
  c.baseline = one;
  sim::PointResult r = one;
  r.workers = 4;
  r.efficiency = 1.0004;
  CHECK(scenarios::efficiency_note(r, c).find("within the simulation's timing resolution") != std::string::npos);
  r.efficiency = 1.05;
  r.iteration_time_s = 0.105;
  r.breakdown.exposed_communication_s = 0.005;
  const auto note = scenarios::efficiency_note(r, c);
  CHECK(note.starts_with("Efficiency 1.050 is above 1 because one worker alone waits longer"));
  CHECK(scenarios::efficiency_note_in(scenarios::explain_point(r, c)) == note);
  r.efficiency = 0.98;
  CHECK(scenarios::efficiency_note(r, c).empty());
}

TEST_CASE("scenarios::explain: server counts that tie name the resource they share", "[scenarios][explain]") {
  // 8 workers, 4 per node, on 2 nodes; dedicated servers on the other nodes of a 10 GbE star. Each
  // worker node's NIC carries its 4 workers' 40 MB each way (160 MB per iteration); a server's NIC, 8
  // workers x its whole 4 MB layers: from 5 servers on at most 2 layers, 64 MB. The workers' NIC limits.
  const auto plat = star(1.25e9, 10);
  auto p = point("ps", 8);
  p.workers_per_node = 4;
  p.ps.placement = sim::PsPlacement::DEDICATED;
  const auto c = context(p, plat);
  std::vector<sim::PointResult> tied;
  for (int servers : {5, 6, 8}) {
    p.ps.servers = servers;
    tied.push_back(sim::simulate_training(plat, profile(10, 0.1), p));
  }
  for (const auto& r : tied) CHECK(r.throughput == Approx(tied[0].throughput).epsilon(1e-3));
  const auto text = scenarios::ps_tie_sentence(tied, c, 1e-3);
  INFO(text);
  CHECK(text.starts_with("The server search found 5, 6 and 8 servers alike (throughput within 0.1% of the best) "
                         "and reports the fewest, 5: the workers' own NIC ("));
  CHECK(text.find("limits 5, 6 and 8 servers alike, moving data at line rate ") != std::string::npos);
  // The sentence goes before the advice in the paragraph; one point alone has no tie to explain.
  const auto paragraph = scenarios::explain_point(tied[0], c, text);
  CHECK(paragraph.find(text) < paragraph.find(scenarios::advice_sentence(tied[0], scenarios::diagnose(tied[0], c), c)));
  CHECK(scenarios::ps_tie_sentence({tied[0]}, c, 1e-3).empty());
  // One server is limited by its own NIC (8 x 40 MB), not by the workers': the limits differ.
  p.ps.servers = 1;
  const auto one = sim::simulate_training(plat, profile(10, 0.1), p);
  CHECK(scenarios::ps_tie_sentence({one, tied[0]}, c, 1e-3).find("their busiest resources differ (1 server: node ") !=
        std::string::npos);
}

TEST_CASE("scenarios::explain: the shard of the largest variable, applied by its server's CPU, limits every count",
          "[scenarios][explain]") {
  // 16 workers on a fast star; layer 0 (the first variable the model creates) holds 40 MB, the other
  // nine 4 MB each. Each server applies every worker's push at 1 ms per MB, so the shard with the 40 MB
  // variable applies 16 x 40 ms per iteration at any server count from 2 on (TensorFlow's greedy
  // placement, in creation order, puts it on server 0 and the rest on the others): that CPU, not a link
  // and not latency, is named, and the tie says the variable cannot be split.
  const auto plat = star(100e9, 40);
  auto prof = profile(10, 1.0);
  prof.layers[0].grad_bytes = 10 * LAYER_GRAD_BYTES;
  auto p = point("ps", 16);
  p.ps.placement = sim::PsPlacement::DEDICATED;
  p.ps.apply_s_per_B = 1e-3 / 1e6;
  const auto c = context(p, plat);
  std::vector<sim::PointResult> tied;
  for (int servers : {2, 4, 8}) {
    p.ps.servers = servers;
    tied.push_back(sim::simulate_training(plat, prof, p));
  }
  for (const auto& r : tied) CHECK(r.throughput == Approx(tied[0].throughput).epsilon(1e-3));
  const auto d = scenarios::diagnose(tied[0], c);
  REQUIRE(d.busiest);
  CHECK(d.busiest->kind == "ps-cpu");
  CHECK(d.limit == Limit::PS_SERVER_CPU);
  CHECK(scenarios::advice_sentence(tied[0], d, c).find("down to the largest variable, which one server applies 16 "
                                                        "times per iteration") != std::string::npos);
  const auto text = scenarios::ps_tie_sentence(tied, c, 1e-3);
  INFO(text);
  CHECK(text.find("reports the fewest, 2: the busiest PS shard's CPU limits each alike") != std::string::npos);
  CHECK(text.find("that shard holds the largest variable, which more servers cannot split") != std::string::npos);
}

TEST_CASE("scenarios::wrap_paragraph: lines stay within the width and keep every word", "[scenarios][explain]") {
  const std::string text = "aaa bbb ccc dddd eeeee f";
  CHECK(scenarios::wrap_paragraph(text, 8) == "aaa bbb\nccc dddd\neeeee f\n");
  CHECK(scenarios::wrap_paragraph("", 8).empty());
}

TEST_CASE("scenarios::explain: the parts of the iteration add up to it, device factor and overlap slowdown "
          "named apart from compute", "[scenarios][explain]") {
  sim::PointResult one;
  one.workers = 1;
  one.iteration_time_s = 0.100;
  one.breakdown.compute_s = 0.100;
  one.efficiency = 1;
  sim::PointResult r;
  r.workers = 64;
  r.iteration_time_s = 0.1124;
  r.breakdown.compute_s = 0.1094;             // 0.100 of kernels
  r.breakdown.compute_variability_s = 0.0030;  // the slowest device
  r.breakdown.overlap_slowdown_s = 0.0064;     // collectives overlapped with backward
  r.breakdown.exposed_communication_s = 0.0030;
  r.breakdown.exposed_after_backward_s = 0.0030;
  r.breakdown.communication_s = 0.040;
  r.buckets = 4;
  r.efficiency = one.iteration_time_s / r.iteration_time_s;
  scenarios::ExplainContext c;
  c.baseline = one;
  const auto text = scenarios::explain_point(r, c);
  INFO(text);
  CHECK(text.starts_with("64 workers, worker 0's 112.4 ms iteration: compute 100.0 ms (89%), slowest-device factor "
                         "3.0 ms (3%), overlap slowdown 6.4 ms (6%), exposed gradient allreduce 3.0 ms (3%)."));
  CHECK(text.find("Against one worker's 100.0 ms iteration (efficiency 0.890), 12.4 ms more: slowest-device factor "
                  "+3.0 ms, overlap slowdown +6.4 ms, exposed communication +3.0 ms.") != std::string::npos);
  CHECK(text.find("One bucket holds") == std::string::npos);
}

TEST_CASE("scenarios::explain: one bucket of every gradient is named, and link use is over the exchange window",
          "[scenarios][explain]") {
  sim::PointResult r;
  r.workers = 64;
  r.iteration_time_s = 0.100;
  r.breakdown.compute_s = 0.070;
  r.breakdown.exposed_communication_s = 0.030;
  r.breakdown.exposed_after_backward_s = 0.030;
  r.breakdown.communication_s = 0.030;  // the exchange runs only after backward
  r.buckets = 1;
  r.gradient_bytes = 51e6;
  sim::ResourceUse nic;
  nic.name = "node 0 NIC (sending)";
  nic.kind = "nic";
  nic.node = 0;
  nic.bytes = 90e6;                // 90 MB per iteration at 12.5 GB/s: 7.2 ms
  nic.capacity_Bps = 12.5e9;
  nic.utilisation = 0.072;         // of the iteration: below the 30% that counts as busy
  r.resources.push_back(nic);
  scenarios::ExplainContext c;
  c.fusion_bytes = 64.0 * 1024 * 1024;
  const auto d = scenarios::diagnose(r, c);
  CHECK(d.busiest->utilisation == Approx(0.24));  // 7.2 ms of the 30 ms window
  CHECK(d.limit == Limit::LATENCY);
  const auto text = scenarios::explain_point(r, c);
  INFO(text);
  CHECK(text.find("line rate 24% of the exchange window") != std::string::npos);
  CHECK(text.find("One bucket holds all 51.0 MB of gradients") != std::string::npos);
  CHECK(text.find("a smaller fusion buffer (--fusion-mb, 67.1 MB now)") != std::string::npos);
  CHECK(text.find("larger messages cannot help") != std::string::npos);
  CHECK(text.find("fewer, larger") == std::string::npos);
  // Saturated over the window: the network limits, whatever the iteration average says.
  r.breakdown.communication_s = 0.0075;
  CHECK(scenarios::diagnose(r, c).limit == Limit::NETWORK);
}
