// Framework runtime profiles: the defaults a framework sets (fusion or bucket size, cycle time) and
// what its runtime adds around each collective. One row per profile; sources in docs/frameworks.md.
#include <fmt/format.h>

#include "common/errors.hpp"
#include "sim/training.hpp"

namespace dtsim::sim {
namespace {
constexpr double MIB = 1024.0 * 1024.0;
// torch.distributed's _DEFAULT_FIRST_BUCKET_BYTES (1 MiB), DistributedDataParallel's first bucket limit:
// "so their gradients don't spill into a much larger bucket, adding unnecessary latency after gradient
// computation finishes. Experiments showed 1MB is a reasonable value" (torch/nn/parallel/distributed.py).
constexpr double DDP_FIRST_BUCKET_BYTES = 1 * MIB;
// DDP's reducer copies every gradient into its bucket, a bucket of one tensor too: mark_variable_ready_dense
// writes `at::mul_out(bucket_view, grad, 1 / world_size)` (the averaging fused into the copy) unless the
// gradient already aliases its bucket view (gradient_as_bucket_view=True, off by default), and
// finalize_bucket_dense copies each bucket view back into .grad (copy_bucket_to_grad) after the allreduce
// (torch/csrc/distributed/c10d/reducer.cpp, v1.10 to 2.x).
constexpr int DDP_COPY_MIN_TENSORS = 1;
// Horovod fuses through its buffer only when a response holds more than one tensor.
constexpr int HOROVOD_COPY_MIN_TENSORS = 2;
}  // namespace

const std::vector<FrameworkProfile>& framework_profiles() {
  static const std::vector<FrameworkProfile> table{
      {"none", "no framework runtime: buckets of --fusion-mb exchanged as soon as ready, nothing added",
       64 * MIB, 0, {.name = "none"}},
      // Horovod < 0.21: HOROVOD_FUSION_THRESHOLD 64 MB, HOROVOD_CYCLE_TIME 5 ms (docs/tensor-fusion.rst);
      // each cycle rank 0 negotiates which tensors every rank has ready; fused tensors are copied into
      // the fusion buffer and back out (steps 3 and 5 of the tensor-fusion algorithm), only when more than
      // one is fused: `if (entries.size() > 1) MemcpyInFusionBuffer(...)`, else the tensor is reduced in
      // place (AllreduceOp::Execute of horovod/common/ops/mpi_operations.cc, nccl_operations.cc).
      {"horovod-0.16", "Horovod before 0.21: 64 MiB fusion buffer, 5 ms cycle, negotiation, fusion copies",
       64 * MIB, 5e-3,
       {.name = "horovod-0.16", .negotiation = true, .copy_min_items = HOROVOD_COPY_MIN_TENSORS, .gpu_library = "nccl-2.7"}},
      // Libraries: Horovod reduces GPU tensors with NCCL (HOROVOD_GPU_OPERATIONS=NCCL, docs/gpus.rst) and
      // CPU tensors with the MPI it was built against (the platform's). PyTorch's distributed docs: "Use the
      // NCCL backend for distributed GPU training. Use the Gloo backend for distributed CPU training."
      // Horovod >= 0.21 changed the defaults to 1 ms and 128 MB (release notes of v0.21.0, PR #2468).
      {"horovod", "Horovod 0.21 and later: 128 MiB fusion buffer, 1 ms cycle, negotiation, fusion copies",
       128 * MIB, 1e-3,
       {.name = "horovod", .negotiation = true, .copy_min_items = HOROVOD_COPY_MIN_TENSORS, .gpu_library = "nccl-2.7"}},
      // PyTorch DistributedDataParallel: bucket_cap_mb 25 (torch.nn.parallel.DistributedDataParallel
      // documentation), buckets formed in forward order with a 1 MiB first one and reduced in reverse
      // (plan_iteration_ddp); every gradient is copied into its bucket and back (DDP_COPY_MIN_TENSORS);
      // allreduce launched when a bucket is ready, no negotiation. Compute is PyTorch's eager ops: libtorch
      // calibration entries where the database has them.
      {"pytorch-ddp",
       "PyTorch DistributedDataParallel: 25 MiB buckets, copies into buckets, no negotiation, libtorch-calibrated compute",
       25 * MIB, 0,
       {.name = "pytorch-ddp",
        .copy_min_items = DDP_COPY_MIN_TENSORS,
        .calibration = "libtorch",
        .gpu_library = "nccl-2.7",
        .cpu_library = "gloo",
        .ddp_first_bucket_bytes = DDP_FIRST_BUCKET_BYTES}},
      // Intel Caffe with Intel MLSL (intel/caffe scripts/set_env.sh): on a run across nodes MLSL starts
      // MLSL_NUM_SERVERS endpoint servers, 2 on Broadwell/Skylake Xeons and 4 on Xeon Phi, pinned to their
      // own cores, and OMP_NUM_THREADS is the cores left; a single-node run starts none. Gradients go layer
      // by layer as MLSL operations: dtsim's buckets (64 MiB, as `none`) stand for them.
      {"intel-caffe-mlsl",
       "Intel Caffe + MLSL: on runs across nodes 2 cores per process (4 on Xeon Phi) run MLSL's endpoint servers, not compute",
       64 * MIB, 0, {.name = "intel-caffe-mlsl", .comm_cores = 2, .comm_cores_xeon_phi = 4}},
  };
  return table;
}

const FrameworkProfile& framework_by_name(const std::string& name, const std::string& what) {
  std::string known;
  for (const auto& f : framework_profiles()) {
    if (f.name == name) return f;
    known += (known.empty() ? "" : ", ") + f.name;
  }
  throw InputError(fmt::format("{}: unknown framework '{}' (expected one of: {})", what, name, known));
}

std::string framework_help() {
  std::string out;
  for (const auto& f : framework_profiles()) out += fmt::format("  {}: {}\n", f.name, f.description);
  return out;
}

int FrameworkRuntime::comm_cores_on(const platforms::Device& cpu) const {
  if (!cpu.is_cpu()) return 0;
  return cpu.microarchitecture == "knights-landing" ? comm_cores_xeon_phi : comm_cores;
}

void apply_framework(TrainingPoint& point, const FrameworkProfile& profile) {
  point.runtime.fusion_bytes = profile.fusion_bytes;
  point.runtime.cycle_s = profile.cycle_s;
  point.runtime.framework = profile.runtime;
}

}  // namespace dtsim::sim
