// Transports in SimGrid: each flow's latency and bandwidth factors follow its transport and size
// (NetworkModelIntf::set_lat_factor_cb / set_bw_factor_cb), and World::transfer applies FlowPlan.
#include "sim/src/transport.hpp"

#include <simgrid/kernel/resource/NetworkModelIntf.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Link.hpp>
#include <simgrid/s4u/NetZone.hpp>

#include <algorithm>

#include "sim/src/platform_builder.hpp"

namespace dtsim::sim {
namespace s4u = simgrid::s4u;

FlowTransports::FlowTransports(const platforms::Platform& p, const BuiltPlatform& built)
    : network_(&platforms::transport_by_name(p.network.transport, platforms::TransportScope::INTER_NODE)),
      intra_(&platforms::transport_by_name(p.node.intra.transport, platforms::TransportScope::INTRA_NODE)),
      efficiency_(p.network.protocol_efficiency),
      port_Bps_(p.network.link_bandwidth_Bps),
      copy_Bps_((p.node.intra.kind == platforms::IntraNodeKind::NVLINK_HYBRID_CUBE_MESH ? p.node.intra.uplink_bandwidth_Bps
                                                                                        : p.node.intra.link_bandwidth_Bps) *
                (intra_->link_efficiency > 0 ? intra_->link_efficiency : 1.0)),
      copy_latency_s_(p.node.intra.latency_s),
      host_stage_Bps_(p.node.intra.link_bandwidth_Bps * intra_->host_staging_efficiency),
      connections_(p.network.connections_per_peer > 0 ? p.network.connections_per_peer
                                                      : network_->default_connections_per_peer) {
  if (built.rails > 1) one_port_cap_Bps_ = port_Bps_ * efficiency_;
  const bool gpus = p.has_gpus();
  const int per_node = std::max(1, built.workers_per_node);
  for (size_t r = 0; r < built.workers.size(); ++r)
    places_[built.workers[r]] = {static_cast<int>(r) / per_node, gpus, gpus ? static_cast<int>(r) % per_node : -1};
  if (gpus && p.any_gpus_staged()) {
    node_gpus_ = p.node.gpus;
    staged_pairs_.assign(static_cast<size_t>(node_gpus_) * node_gpus_, 0);
    for (int a = 0; a < node_gpus_; ++a)
      for (int b = 0; b < node_gpus_; ++b) staged_pairs_[static_cast<size_t>(a) * node_gpus_ + b] = p.gpus_staged(a, b);
  }
  for (size_t n = 0; n < built.node_hosts.size(); ++n) places_[built.node_hosts[n]] = {static_cast<int>(n), false};
  // A split node's server end is reached over the network even from its own devices: a place of its own.
  for (size_t n = 0; n < built.split_server_hosts.size(); ++n)
    if (built.split_server_hosts[n] != nullptr)
      places_[built.split_server_hosts[n]] = {static_cast<int>(built.node_hosts.size() + n), false};
  for (size_t n = 0; n < built.storage_hosts.size(); ++n)
    if (built.storage_hosts[n] != nullptr) places_[built.storage_hosts[n]] = {static_cast<int>(n), false};
}

const FlowTransports::Place* FlowTransports::place(const s4u::Host* h) const {
  auto it = places_.find(h);
  return it == places_.end() ? nullptr : &it->second;
}

bool FlowTransports::inter_node(const s4u::Host* src, const s4u::Host* dst) const {
  const Place* a = place(src);
  const Place* b = place(dst);
  return a != nullptr && b != nullptr && a->node != b->node;
}

const platforms::Transport& FlowTransports::transport_of(const s4u::Host* src, const s4u::Host* dst) const {
  return inter_node(src, dst) ? *network_ : *intra_;
}

double FlowTransports::latency_factor(double bytes, const s4u::Host* src, const s4u::Host* dst) const {
  return transport_of(src, dst).latency_factor(bytes);
}

double FlowTransports::bandwidth_factor(double bytes, const s4u::Host* src, const s4u::Host* dst,
                                        double route_min_Bps) const {
  const FlowPlan pl = plan(src, dst, bytes);
  const double factor = pl.cap_only ? 1.0 : transport_of(src, dst).bandwidth_factor(bytes, efficiency_);
  const double cap = pl.cap_is_bound ? 0.0 : pl.rate_cap_Bps;  // a bound is set on the flow's action instead
  // SimGrid bounds a flow at factor x its route's slowest link: a cap below that is a smaller factor.
  if (cap > 0 && route_min_Bps > 0) return std::min(factor, cap / route_min_Bps);
  return factor;
}

FlowPlan FlowTransports::plan(const s4u::Host* src, const s4u::Host* dst, double bytes) const {
  FlowPlan plan;
  if (!inter_node(src, dst)) {
    const Place* a = place(src);
    const Place* b = place(dst);
    if (!staged_pairs_.empty() && a != nullptr && b != nullptr && a->device && b->device && a->gpu < node_gpus_ &&
        b->gpu < node_gpus_ && staged_pairs_[static_cast<size_t>(a->gpu) * node_gpus_ + b->gpu]) {
      // D2H copy, host-memory hop, H2D copy, pipelined in chunks (NCCL SHM / CUDA-aware MPI staging).
      const auto pipe = platforms::staged_pipeline(bytes, intra_->chunk_B, 2, copy_latency_s_, copy_Bps_, host_stage_Bps_);
      plan.start_delay_s = pipe.fill_s;
      plan.rate_cap_Bps = pipe.stage_rate_Bps;
      plan.cap_only = true;
      // A bound, not a factor: a factor below 1 would charge every link of the route rate / factor, so a
      // host path's bytes would count 1 / factor times over against the capacity measured in bytes.
      plan.cap_is_bound = true;
    }
    return plan;
  }
  switch (network_->model) {
    case platforms::TransportModel::SOCKET:
      plan.rate_cap_Bps = connections_ * network_->connection_rate_Bps;
      plan.cap_is_bound = true;
      break;
    case platforms::TransportModel::HOST_STAGED: {
      const int copies = static_cast<int>(place(src)->device) + static_cast<int>(place(dst)->device);
      if (copies == 0) break;  // host buffers: plain RDMA
      const auto pipe = platforms::staged_pipeline(bytes, network_->chunk_B, copies, copy_latency_s_, copy_Bps_,
                                                   port_Bps_ * efficiency_);
      plan.start_delay_s = pipe.fill_s;
      plan.rate_cap_Bps = pipe.stage_rate_Bps;
      break;
    }
    default:
      break;
  }
  if (one_port_cap_Bps_ > 0 && (!place(src)->device || !place(dst)->device) &&
      (plan.rate_cap_Bps <= 0 || (plan.cap_is_bound && plan.rate_cap_Bps > one_port_cap_Bps_))) {
    plan.rate_cap_Bps = one_port_cap_Bps_;
    plan.cap_is_bound = true;
  }
  return plan;
}

void install_transport_factors(std::shared_ptr<const FlowTransports> transports,
                               std::shared_ptr<const LinkFolds> folds) {
  auto* model = s4u::Engine::get_instance()->get_netzone_root()->get_network_model();
  model->set_lat_factor_cb([transports](double size, const s4u::Host* src, const s4u::Host* dst,
                                        const std::vector<s4u::Link*>&, const std::unordered_set<s4u::NetZone*>&) {
    return transports->latency_factor(size, src, dst);
  });
  model->set_bw_factor_cb([transports, folds](double size, const s4u::Host* src, const s4u::Host* dst,
                                              const std::vector<s4u::Link*>& links,
                                              const std::unordered_set<s4u::NetZone*>&) {
    return transports->route_bandwidth_factor(size, src, dst, {links.begin(), links.end()}, *folds);
  });
}

double FlowTransports::route_bandwidth_factor(double bytes, const s4u::Host* src, const s4u::Host* dst,
                                              const std::vector<const s4u::Link*>& links, const LinkFolds& folds) const {
  double min_Bps = 0, unfolded_min_Bps = 0, fold = 1;  // this route's slowest link, unscaled, the fold
  for (const auto* l : links) {
    const auto it = folds.find(l);
    const double scale = it == folds.end() ? 1.0 : it->second;
    fold = std::max(fold, scale);
    min_Bps = min_Bps == 0 ? l->get_bandwidth() : std::min(min_Bps, l->get_bandwidth());
    const double own_Bps = l->get_bandwidth() / scale;
    unfolded_min_Bps = unfolded_min_Bps == 0 ? own_Bps : std::min(unfolded_min_Bps, own_Bps);
  }
  if (fold == 1) return bandwidth_factor(bytes, src, dst, min_Bps);
  // SimGrid 3.32 charges a flow rate / factor on every link of its route (measured: a flow of factor 4
  // and one of factor 1 on a 10 GB/s link ran at 20 and 5 GB/s), so the folded flow keeps one
  // flow's factor: it then loads every shared link as its `fold` flows would, and its own links,
  // scaled by fold, as one. The factor's bound (factor x slowest link) is implied by that load.
  return bandwidth_factor(bytes / fold, src, dst, unfolded_min_Bps);
}

}  // namespace dtsim::sim
