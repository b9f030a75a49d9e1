// Plain-words explanation of one predicted point (--explain, the sweep's bottleneck column), written
// from the measured quantities the simulation reports: the presentation of a result, not part of it.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "sim/training.hpp"

namespace dtsim::scenarios {

struct ExplainContext {
  bool parameter_servers = false;  // the strategy uses parameter servers
  double batch_input_bytes = 0;    // bytes read per batch (real data)
  std::string network;             // the platform's network technology
  std::string device;              // the worker device
  bool dedicated_servers = false;  // PS shards on their own nodes
  bool single_node = false;        // data-parallel-single-node (no network exchange)
  double fusion_bytes = 0;         // fusion-buffer size (allreduce)
  int most_servers_tried = 0;      // `ps: auto`: the largest count its search tried (0: not searched)
  // The 1-worker point the efficiency is measured against (reasons for an efficiency above 1).
  std::optional<sim::PointResult> baseline;
};

// What limits a point, decided from its measured shares and its busiest resource.
enum class Limit {
  COMPUTE,          // compute fills the iteration; the exchange is (nearly) hidden
  INPUT_IO,         // workers wait for input
  PS_SERVER_NIC,    // a parameter-server shard's NIC (or its switch port) carries the traffic
  PS_SERVER_CPU,    // a shard's CPU applying the update
  NETWORK,          // a worker-side network link runs at line rate
  INTRA_NODE,       // a PCIe switch, device link or NVLink runs at line rate
  LATENCY,          // exposed communication with no link busy: per-exchange latency and synchronisation
};

struct Diagnosis {
  double compute_share = 0, io_share = 0, exposed_share = 0;
  double before_forward_share = 0, after_backward_share = 0;  // the parts of exposed_share
  std::optional<sim::ResourceUse> busiest;  // the busiest measured resource
  std::optional<sim::ResourceUse> busiest_reverse;  // the other direction of the same NIC or port
  Limit limit = Limit::COMPUTE;
};

// The shares of rank 0's measured iteration and the limit they point to.
Diagnosis diagnose(const sim::PointResult& r, const ExplainContext& context);
// "compute 12.0 ms (16%), slowest-device factor 0.2 ms (0%), ..., exposed gradient push and server update
// 52.5 ms (70%), ...": every part of the iteration that shows at 0.1 ms, adding up to it.
std::string shares_sentence(const sim::PointResult& r, const Diagnosis& d, const ExplainContext& context);
// Where the iteration's time beyond one worker's goes, part by part (compute, slowest-device factor,
// overlap slowdown, exposed communication, input I/O): empty without a baseline, for one worker or an
// efficiency above 1 (efficiency_note says why).
std::string scaling_gap_sentence(const sim::PointResult& r, const ExplainContext& context);
// The remark when one bucket holds every gradient of an allreduce (the exchange cannot overlap
// backward), else empty.
std::string bucket_sentence(const sim::PointResult& r, const ExplainContext& context);
// "Busiest resource: node 0 NIC ..." as one sentence (empty when nothing was measured); a link's
// utilisation is over the exchange window (Breakdown::communication_s).
std::string resource_sentence(const Diagnosis& d);
// One sentence of advice that follows from the diagnosis.
std::string advice_sentence(const sim::PointResult& r, const Diagnosis& d, const ExplainContext& context);
// Why the efficiency is above 1, from the measured baseline (empty when it is not above 1).
std::string efficiency_note(const sim::PointResult& r, const ExplainContext& context);
// Why a server-count search (`ps: auto`) found several counts alike: `tied` are the searched points
// whose throughput is within `tolerance` of the best, fewest servers first (the one reported). Names
// the resource that limits them all alike ("the workers' own NIC (sending) limits 11, 16 and 32
// servers alike ..."), or says that their limits differ. Empty for fewer than two points.
std::string ps_tie_sentence(const std::vector<sim::PointResult>& tied, const ExplainContext& context,
                            double tolerance);
// The paragraph: shares, the gap to one worker, busiest resource, `search_note` (why a server count was
// chosen), the bucket remark, advice and any efficiency note, in that order.
std::string explain_point(const sim::PointResult& r, const ExplainContext& context,
                          const std::string& search_note = "");

// The efficiency sentence of an explanation written by explain_point, or empty.
std::string efficiency_note_in(const std::string& explanation);
// `text` broken into lines of at most `columns` characters at spaces, each line ending in '\n'.
std::string wrap_paragraph(const std::string& text, std::size_t columns);

}  // namespace dtsim::scenarios
