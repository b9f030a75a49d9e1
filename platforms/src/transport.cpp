// The transport table (one row per file in transports/), name lookup with errors generated from it,
// the host-staged pipeline closed form and the documented per-technology defaults.
#include "platforms/transport.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "common/errors.hpp"
#include "platforms/src/transports/transports.hpp"

namespace dtsim::platforms {

const FactorBand& Transport::band(double bytes) const {
  const FactorBand* b = &bands.front();
  for (const auto& x : bands)
    if (bytes >= x.min_size_B) b = &x;
  return *b;
}

double Transport::rpc_cost_s(double calls, double bytes) const {
  if (model != TransportModel::RPC) return 0;
  const double per_byte = rpc_software_Bps > 0 ? std::max(bytes, 0.0) / rpc_software_Bps : 0.0;
  return std::max(calls, 0.0) * rpc_per_call_s + per_byte;
}

RpcServerQueue::RpcServerQueue(int threads, double per_call_s)
    : free_at_s_(static_cast<std::size_t>(std::max(threads, 1)), 0.0), per_call_s_(std::max(per_call_s, 0.0)) {}

double RpcServerQueue::admit(double now_s, double calls) {
  const long long n = std::llround(std::max(calls, 0.0));
  if (n == 0 || per_call_s_ <= 0) return now_s;
  double last_s = now_s;
  for (long long i = 0; i < n; ++i) {
    auto it = std::min_element(free_at_s_.begin(), free_at_s_.end());
    *it = std::max(*it, now_s) + per_call_s_;
    last_s = std::max(last_s, *it);
  }
  return last_s;
}

StagedPipeline staged_pipeline(double bytes, double chunk_B, int copies, double copy_latency_s, double copy_Bps,
                               double wire_Bps) {
  if (!(chunk_B > 0 && copy_Bps > 0 && wire_Bps > 0 && copies >= 0 && copies <= 2 && bytes >= 0))
    throw Failure(fmt::format("staged_pipeline: bad arguments (chunk {} B, copies {}, copy {} B/s, wire {} B/s)",
                              chunk_B, copies, copy_Bps, wire_Bps));
  const double c = std::min(chunk_B, std::max(bytes, 1.0));  // a message smaller than a chunk is one chunk
  const double copy_s = copy_latency_s + c / copy_Bps;
  const double wire_s = c / wire_Bps;
  const double slowest = copies > 0 ? std::max(copy_s, wire_s) : wire_s;
  StagedPipeline p;
  p.fill_s = copies * copy_s + wire_s - slowest;
  p.stage_rate_Bps = c / slowest;
  return p;
}

const std::vector<Transport>& transports() {
  static const std::vector<Transport> table = {
      transport_rows::rdma(), transport_rows::rdma_host_staged(), transport_rows::tcp(),
      transport_rows::shm(),  transport_rows::pcie(),             transport_rows::nvlink(),
      transport_rows::ideal(), transport_rows::grpc(),       transport_rows::grpc_2016(),
      transport_rows::zeromq(),
  };
  return table;
}

bool transport_allowed(const Transport& t, TransportScope scope) {
  // RPC layers are never a platform's wire, and a wire is never an RPC layer.
  if ((scope == TransportScope::RPC) != (t.scope == TransportScope::RPC)) return scope == TransportScope::ANY;
  return scope == TransportScope::ANY || t.scope == TransportScope::ANY || t.scope == scope;
}

const Transport* transport_by_name_or_null(const std::string& name) {
  for (const auto& t : transports())
    if (t.name == name) return &t;
  return nullptr;
}

std::string transport_names(TransportScope scope) {
  std::string out;
  for (const auto& t : transports())
    if (transport_allowed(t, scope)) out += (out.empty() ? "" : ", ") + t.name;
  return out;
}

std::string transport_help(TransportScope scope) {
  std::string out;
  for (const auto& t : transports())
    if (transport_allowed(t, scope)) out += fmt::format("  {:<17} {}\n", t.name, t.description);
  return out;
}

const Transport& transport_by_name(const std::string& name, TransportScope scope) {
  const Transport* t = transport_by_name_or_null(name);
  if (t == nullptr || !transport_allowed(*t, scope))
    throw InputError(fmt::format("unknown transport '{}' (expected one of {})", name, transport_names(scope)));
  return *t;
}

std::string default_network_transport(const std::string& technology) {
  std::string s = technology;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  auto has = [&](const char* w) { return s.find(w) != std::string::npos; };
  if (has("infiniband") || has("omni-path") || has("aries") || has("roce")) return "rdma";
  if (has("tcp") || has("gbe") || has("ethernet")) return "tcp";
  return "";
}

std::string default_intra_transport(const std::string& intra_kind_name) {
  if (intra_kind_name == "shared-memory") return "shm";
  if (intra_kind_name == "pcie") return "pcie";
  if (intra_kind_name == "nvlink-hybrid-cube-mesh" || intra_kind_name == "nvlink" || intra_kind_name == "nvswitch")
    return "nvlink";
  return "";
}

}  // namespace dtsim::platforms
