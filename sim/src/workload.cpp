// The iteration workload of one worker: bucket boundaries in backward order and PS variable placement.
#include "sim/src/workload.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/errors.hpp"

namespace dtsim::sim {

double IterationPlan::step_s() const {
  return fwd_s + std::accumulate(bwd_segment_s.begin(), bwd_segment_s.end(), 0.0) + bwd_tail_s + update_s;
}

namespace {
void check_time(double t, const calibrate::LayerTime& l, const char* what) {
  if (!std::isfinite(t) || t < 0)
    throw InputError(fmt::format("compute profile: layer '{}' has an invalid {} time {} (expected >= 0 s)",
                                 l.name, what, t));
}

// The plan of `profile`, its buckets filled in backward order: the open bucket closes before layer i
// (with `bytes` of gradient) when closes_before(i, bytes, open bucket, its backward time so far).
template <typename ClosesBefore>
IterationPlan plan_by(const calibrate::ComputeProfile& profile, ClosesBefore closes_before) {
  if (!std::isfinite(profile.update_s) || profile.update_s < 0)
    throw InputError(fmt::format("compute profile: update time must be >= 0 s, got {}", profile.update_s));
  IterationPlan plan;
  plan.update_s = profile.update_s;
  for (const auto& l : profile.layers) {
    check_time(l.fwd_s, l, "forward");
    check_time(l.bwd_data_s, l, "backward-data");
    check_time(l.bwd_weights_s, l, "backward-weights");
    if (l.grad_bytes < 0) throw InputError(fmt::format("compute profile: layer '{}' has negative gradient bytes", l.name));
    plan.fwd_s += l.fwd_s;
  }
  Bucket open;
  double since_last_ready_s = 0;   // backward time since the previous bucket boundary
  double open_until_s = 0;         // backward time up to the open bucket's last gradient
  auto close = [&] {
    if (open.layers.empty()) return;
    plan.bwd_segment_s.push_back(open_until_s);
    plan.grad_bytes += open.bytes;
    plan.buckets.push_back(std::move(open));
    open = Bucket{};
    since_last_ready_s -= open_until_s;
    open_until_s = 0;
  };
  for (int i = static_cast<int>(profile.layers.size()) - 1; i >= 0; --i) {
    const auto& l = profile.layers[static_cast<std::size_t>(i)];
    since_last_ready_s += l.bwd_s();
    if (l.grad_bytes <= 0) continue;
    const double bytes = static_cast<double>(l.grad_bytes);
    if (!open.layers.empty() && closes_before(i, bytes, open, open_until_s)) close();
    open.layers.push_back(i);
    open.bytes += bytes;
    open_until_s = since_last_ready_s;  // this gradient is ready when its layer's backward ends
  }
  close();
  plan.bwd_tail_s = std::max(0.0, since_last_ready_s);
  return plan;
}
}  // namespace

IterationPlan plan_iteration(const calibrate::ComputeProfile& profile, double fusion_bytes, double min_segment_s) {
  if (!std::isfinite(fusion_bytes) || fusion_bytes < 0)
    throw InputError(fmt::format("fusion size must be >= 0 bytes, got {}", fusion_bytes));
  if (!std::isfinite(min_segment_s) || min_segment_s < 0)
    throw InputError(fmt::format("minimum backward segment must be >= 0 s, got {}", min_segment_s));
  return plan_by(profile, [&](int, double bytes, const Bucket& open, double open_until_s) {
    return open.bytes + bytes > fusion_bytes || (min_segment_s > 0 && open_until_s >= min_segment_s);
  });
}

IterationPlan plan_iteration_ddp(const calibrate::ComputeProfile& profile, double first_bucket_bytes, double cap_bytes) {
  if (!(std::isfinite(first_bucket_bytes) && first_bucket_bytes > 0 && std::isfinite(cap_bytes) && cap_bytes > 0))
    throw InputError(fmt::format("DDP bucket limits must be > 0 bytes, got {} and {}", first_bucket_bytes, cap_bytes));
  // Forward order: each layer with a gradient gets its bucket number; a bucket closes once it reaches
  // its limit, the layer that crosses it included.
  std::vector<int> bucket_of(profile.layers.size(), -1);
  int bucket = 0;
  double size = 0;
  for (std::size_t i = 0; i < profile.layers.size(); ++i) {
    if (profile.layers[i].grad_bytes <= 0) continue;
    bucket_of[i] = bucket;
    size += static_cast<double>(profile.layers[i].grad_bytes);
    if (size >= (bucket == 0 ? first_bucket_bytes : cap_bytes)) {
      ++bucket;
      size = 0;
    }
  }
  // Reduced in reverse: walking backward, a bucket closes where the next gradient belongs to another one.
  return plan_by(profile, [&](int i, double, const Bucket& open, double) {
    return bucket_of[static_cast<std::size_t>(i)] != bucket_of[static_cast<std::size_t>(open.layers.back())];
  });
}

void add_placed(std::vector<double>& per_server, int placed, double amount) {
  if (placed == PLACED_ON_ALL_SERVERS) {
    for (double& x : per_server) x += amount / static_cast<double>(per_server.size());
  } else if (placed >= 0) {
    per_server[static_cast<std::size_t>(placed)] += amount;
  }
}

std::vector<int> place_variables(const calibrate::ComputeProfile& profile, int servers, PsBalance balance) {
  if (servers < 1) throw InputError(fmt::format("parameter servers must be >= 1, got {}", servers));
  std::vector<int> placement(profile.layers.size(), -1);
  if (balance == PsBalance::MXNET) {
    constexpr long long KEY_HASH = 9973;  // ps-lite's "simple heuristic for load balance"
    constexpr double BYTES_PER_VALUE = 4;  // FP32 arrays, as MXNet's ps-lite trainers of the studies sent
    long long key = 0;
    for (std::size_t i = 0; i < profile.layers.size(); ++i) {
      if (profile.layers[i].grad_bytes <= 0) continue;
      const bool big = static_cast<double>(profile.layers[i].grad_bytes) / BYTES_PER_VALUE >= MXNET_BIGARRAY_BOUND;
      placement[i] = big ? PLACED_ON_ALL_SERVERS : static_cast<int>((key * KEY_HASH) % servers);
      ++key;
    }
    return placement;
  }
  if (balance == PsBalance::ROUND_ROBIN) {
    int next = 0;
    for (std::size_t i = 0; i < profile.layers.size(); ++i) {
      if (profile.layers[i].grad_bytes <= 0) continue;
      placement[i] = next;
      next = (next + 1) % servers;
    }
    return placement;
  }
  // TensorFlow's GreedyLoadBalancingStrategy (tf.contrib.training, device_setter.py), the ps_strategy of
  // tf_cnn_benchmarks' parameter-server modes: each variable, as the model creates it (forward order),
  // goes to the server least loaded so far (np.argmin: the lowest index on a tie), by byte_size_load_fn.
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < profile.layers.size(); ++i)
    if (profile.layers[i].grad_bytes > 0) order.push_back(i);
  std::vector<double> load(static_cast<std::size_t>(servers), 0.0);
  for (std::size_t i : order) {
    const auto least = std::min_element(load.begin(), load.end()) - load.begin();
    placement[i] = static_cast<int>(least);
    load[static_cast<std::size_t>(least)] += static_cast<double>(profile.layers[i].grad_bytes);
  }
  return placement;
}

std::vector<double> server_bytes(const calibrate::ComputeProfile& profile, const std::vector<int>& placement,
                                 int servers) {
  std::vector<double> bytes(static_cast<std::size_t>(std::max(servers, 0)), 0.0);
  for (std::size_t i = 0; i < placement.size() && i < profile.layers.size(); ++i)
    add_placed(bytes, placement[i], static_cast<double>(profile.layers[i].grad_bytes));
  return bytes;
}

std::vector<std::vector<double>> bucket_server_bytes(const calibrate::ComputeProfile& profile,
                                                     const IterationPlan& plan, const std::vector<int>& placement,
                                                     int servers) {
  std::vector<std::vector<double>> out(plan.buckets.size(), std::vector<double>(static_cast<std::size_t>(servers), 0.0));
  for (std::size_t b = 0; b < plan.buckets.size(); ++b)
    for (int li : plan.buckets[b].layers) {
      add_placed(out[b], placement[static_cast<std::size_t>(li)],
                 static_cast<double>(profile.layers[static_cast<std::size_t>(li)].grad_bytes));
    }
  return out;
}

std::string bucket_layer_range(const calibrate::ComputeProfile& profile, const Bucket& bucket) {
  if (bucket.layers.empty()) return "no layers";
  const auto& first = profile.layers.at(static_cast<std::size_t>(bucket.layers.front())).name;
  const auto& last = profile.layers.at(static_cast<std::size_t>(bucket.layers.back())).name;
  return bucket.layers.size() == 1 ? first : first + " .. " + last;
}

}  // namespace dtsim::sim
