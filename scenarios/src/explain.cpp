// The bottleneck sentence of a point, from the shares of its iteration and the busiest NIC.
#include "scenarios/explain.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace dtsim::scenarios {
namespace {
// A share of the iteration at or above this is worth naming as the limit.
constexpr double NOTABLE_SHARE = 0.1;
}  // namespace

std::string explain_point(const sim::PointResult& r, const ExplainContext& c) {
  // Rank 0's measured iteration: the breakdown's three parts add up to it.
  const auto& b = r.breakdown;
  const double iter = std::max(b.compute_s + b.io_stall_s + b.exposed_communication_s, 1e-12);
  const double compute_share = b.compute_s / iter;
  const double io_share = b.io_stall_s / iter;
  const double exposed_share = b.exposed_communication_s / iter;
  const double nic_busy = std::min(1.0, r.busiest_nic_busy);
  if (io_share >= exposed_share && io_share >= NOTABLE_SHARE)
    return fmt::format("input I/O: worker 0 waits {:.0f}% of the iteration for data ({:.1f} MB per batch)",
                       100 * io_share, c.batch_input_bytes / 1e6);
  if (exposed_share >= NOTABLE_SHARE && c.parameter_servers) {
    const std::string who = r.busiest_nic_server >= 0
                                ? fmt::format("PS shard {}'s NIC (node {})", r.busiest_nic_server, r.busiest_nic_node)
                                : fmt::format("node {}'s NIC", r.busiest_nic_node);
    return fmt::format("{} is busy {:.0f}% of the iteration ({:.1f} MB per direction); "
                       "{:.0f}% of the iteration is exposed communication",
                       who, 100 * nic_busy, r.busiest_nic_bytes / 1e6, 100 * exposed_share);
  }
  if (exposed_share >= NOTABLE_SHARE)
    return fmt::format("gradient exchange: {:.0f}% of the iteration is exposed communication "
                       "({} buckets, {:.1f} MB of gradients per worker over {}; busiest NIC {:.0f}% busy)",
                       100 * exposed_share, r.buckets, r.gradient_bytes / 1e6,
                       c.network.empty() ? "the network" : c.network, 100 * nic_busy);
  return fmt::format("compute: forward, backward and update fill {:.0f}% of the iteration on {}", 100 * compute_share,
                     c.device.empty() ? "the device" : c.device);
}

}  // namespace dtsim::scenarios
