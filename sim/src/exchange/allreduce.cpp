// Allreduce family: gradients fused into buckets (Horovod's fusion buffer, DDP's buckets) are allreduced in
// backward order by every worker with the strategy's collective, one bucket at a time, overlapped with the
// remaining backward (or after it with overlap off): plan_data_parallel's programs. A framework runtime adds
// task data the executor plays: with a cycle (Horovod) the plan's buckets are the tensors of about one cycle of
// backward, each collective starts at a cycle tick and fuses those then ready on every rank up to the fusion
// threshold (docs/frameworks.md "Cycle and tensor fusion"); a negotiation before each collective, and copies
// into and out of the fusion buffer or bucket (on a CPU worker, work on its cores).
#include <algorithm>

#include "sim/src/coll/collective.hpp"
#include "sim/src/coll/library.hpp"
#include "sim/src/exchange/exchange.hpp"
#include "sim/src/plan/planners.hpp"

namespace dtsim::sim {
namespace {

// Horovod's response cache (0.15+) negotiates with a bit vector, one bit per cached tensor, packed in
// 64-bit words and allreduced among all ranks each cycle (horovod/common/response_cache.cc); the
// message is tiny, so the cost is the small-message allreduce latency, which grows with log2(ranks).
constexpr double NEGOTIATION_WORD_B = 8;
constexpr int TENSORS_PER_WORD = 64;
// A copy reads and writes every byte: it moves at half the memory bandwidth (DDP's mul_out, which scales
// while it copies, reads and writes each byte once too).
constexpr double COPY_TRAFFIC_PER_BYTE = 2;

}  // namespace

StepPrograms plan_allreduce_family(const IterationPlan& plan, const calibrate::ComputeProfile& profile,
                                   const TrainingPoint& point, const platforms::Platform& platform) {
  if (point.layout.active()) return plan_layout(profile, point);
  DataParallelOptions options{.overlap = point.runtime.overlap};
  const auto& fw = point.runtime.framework;
  // Horovod's background cycle: the plan's buckets fuse at each tick up to the fusion threshold.
  if (point.runtime.cycle_s > 0) {
    options.cycle_s = point.runtime.cycle_s;
    options.fuse_up_to_B = point.runtime.fusion_bytes;
  }
  if (fw.negotiation && point.workers > 1) {
    int tensors = 0;
    for (const auto& l : profile.layers) tensors += l.grad_bytes > 0 ? 1 : 0;
    options.negotiation_B = NEGOTIATION_WORD_B * ((tensors + TENSORS_PER_WORD - 1) / TENSORS_PER_WORD);
  }
  // A framework runtime around each collective (Horovod's) stages GPU tensors to host buffers itself where
  // its library is built so (CollectiveLibrary::framework_stages_to_host).
  const bool runtime = point.runtime.cycle_s > 0 || fw.negotiation || fw.copy_min_items > 0;
  const auto& library = collective_library_by_name(resolve_collective_library(platform, point).name, "--collective-library");
  options.host_buffers = runtime && library.framework_stages_to_host;
  // The framework's runtime reduces on the worker process's threads (a library on the worker's cores).
  const int threads = std::max(1, profile.threads);
  if (runtime) options.library_threads = threads;
  if (fw.copy_min_items > 0) {
    options.copy_min_items = fw.copy_min_items;
    const LibraryCall call = library_call(platform, point.workers, 1, 0);
    double copy_Bps = 0;
    if (!platform.has_gpus()) {
      // A CPU worker copies with its own threads (DDP's mul_out and copy_ run on the process's intra-op
      // threads, Horovod's memcpy in its background thread): a computation on the rank's device at one core's
      // bandwidth per thread, the rate Gloo's copies are charged at (CollectiveLibrary::runs_on_worker_cores).
      // 0 where the catalog does not know the CPU: nothing charged, as for Gloo.
      options.copy_on_cores = true;
      copy_Bps = call.rank_core_Bps * threads;
    } else if (library.framework_stages_to_host) {
      // A host fusion buffer (the library's framework_stages_to_host) is filled by one host core's memcpy.
      copy_Bps = call.host_core_Bps;
    } else {
      // A GPU's copy kernels: the device's memory bandwidth, off the compute stream (a delay).
      copy_Bps = platform.worker_device().mem_bandwidth_Bps;
    }
    options.copy_s_per_B = copy_Bps > 0 ? COPY_TRAFFIC_PER_BYTE / copy_Bps : 0;
  }
  return plan_data_parallel(plan, profile, point.workers, options);
}

}  // namespace dtsim::sim
