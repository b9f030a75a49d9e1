// Internal to sim/: the per-iteration workload of one worker, built from a ComputeProfile without
// SimGrid: forward as one exec, backward cut at gradient-bucket boundaries, buckets in backward order,
// and parameter-server variable placement. The training replay (training.cpp) plays it just in time.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "calibrate/profile.hpp"
#include "sim/comm.hpp"

namespace dtsim::sim {

// One fused gradient buffer: the gradients of consecutive parameter layers in backward order.
struct Bucket {
  double bytes = 0;
  std::vector<int> layers;  // indices into ComputeProfile::layers, in backward order
};

// Backward is replayed as segments: segment k ends exactly when bucket k's last gradient is ready.
struct IterationPlan {
  double fwd_s = 0;
  std::vector<double> bwd_segment_s;  // one per bucket
  double bwd_tail_s = 0;              // backward after the last gradient (parameter-free first layers)
  double update_s = 0;
  std::vector<Bucket> buckets;        // backward order
  double grad_bytes = 0;              // sum of bucket bytes
  double step_s() const;              // fwd + all backward + update
};

// Builds the plan: buckets are filled in backward order while their size stays <= fusion_bytes (a
// gradient larger than the threshold travels alone, as in Horovod; fusion_bytes 0 = one per layer).
// With min_segment_s > 0 a bucket also closes once its backward segment lasts min_segment_s (Horovod's
// cycle: tensors produced within one cycle are fused at the same tick anyway), so buckets are the
// tensors ready within about one cycle, up to the threshold.
// Throws InputError for a negative fusion size or segment, or a profile with negative times.
IterationPlan plan_iteration(const calibrate::ComputeProfile& profile, double fusion_bytes, double min_segment_s = 0);

// PyTorch DistributedDataParallel's buckets (torch.distributed's compute_bucket_assignment_by_size, as
// DistributedDataParallel calls it): the parameters in forward order, a bucket closing as soon as its size
// reaches its limit (the tensor that crosses it included), the first limit `first_bucket_bytes` and every
// later one `cap_bytes`; the buckets are then reduced in reverse (the last layers' first). So the bucket
// left for after backward, the first layers', is the small one. Buckets and segments in backward order, as
// plan_iteration's. Throws InputError for a non-positive limit or a profile with negative times.
IterationPlan plan_iteration_ddp(const calibrate::ComputeProfile& profile, double first_bucket_bytes, double cap_bytes);

// A bucket's layers in words for traces: "fc8" or "conv5_3 .. fc6" (backward order: first .. last).
std::string bucket_layer_range(const calibrate::ComputeProfile& profile, const Bucket& bucket);

// Variable placement on parameter servers: server index per profile layer (-1 for layers without
// parameters). GREEDY: largest variable first onto the least-loaded server (TF's
// GreedyLoadBalancingStrategy on bytes); ROUND_ROBIN: in forward order; MXNET: MXNet ps-lite's
// kvstore (src/kvstore/kvstore_dist.h, EncodeDefaultKey): an array of MXNET_BIGARRAY_BOUND values or more
// is split evenly over all servers (PLACED_ON_ALL_SERVERS), a smaller one goes whole to server
// (key x 9973) mod servers, its key being its index among the parameter layers in forward order.
// Throws InputError for servers < 1.
inline constexpr int PLACED_ON_ALL_SERVERS = -2;
// MXNET_KVSTORE_BIGARRAY_BOUND's default (MXNet environment-variable docs: "the minimum size of a big
// array ... controls when to partition a single weight to all the servers"), in values of 4 bytes.
inline constexpr double MXNET_BIGARRAY_BOUND = 1e6;
std::vector<int> place_variables(const calibrate::ComputeProfile& profile, int servers, PsBalance balance);

// Adds `amount` (bytes, calls) of a variable placed at `placed` to each server's share: all of it to
// one server, an even part to each for PLACED_ON_ALL_SERVERS, nothing for -1.
void add_placed(std::vector<double>& per_server, int placed, double amount);

// Bytes held by each server under a placement.
std::vector<double> server_bytes(const calibrate::ComputeProfile& profile, const std::vector<int>& placement,
                                 int servers);

// Per-bucket, per-server bytes: result[bucket][server].
std::vector<std::vector<double>> bucket_server_bytes(const calibrate::ComputeProfile& profile,
                                                     const IterationPlan& plan, const std::vector<int>& placement,
                                                     int servers);

}  // namespace dtsim::sim
