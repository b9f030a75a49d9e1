// Transformer training memory (calibrate/train_memory.hpp): the precision table, ZeRO division and the
// recompute policies over the per-op saved tensors of models/op_rows.hpp.
#include "calibrate/train_memory.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "common/errors.hpp"
#include "common/text.hpp"

namespace dtsim::calibrate {
namespace {

// Mixed precision keeps 16-bit weights and gradients and FP32 master weights in the optimizer
// (Micikevicius et al. 2018; the ZeRO paper's accounting, Rajbhandari et al. SC'20: 2 + 2 + K=12 bytes per
// parameter with Adam). TF32 is a Tensor Core math mode over FP32 storage: its memory is FP32's.
// FP8 (Transformer Engine on Hopper): FP8 GEMMs whose inputs are saved in FP8 (TE Linear saves the cast
// input), BF16 elsewhere, FP32 master weights; TE caches the FP8 weight and its transpose across
// micro-batches (assumption: 2 bytes per parameter; 1 without the transpose on Blackwell).
constexpr TrainingPrecision PRECISIONS[] = {
    {"fp32", 4, 4, 0, 0, 4, 4},
    {"tf32", 4, 4, 0, 0, 4, 4},
    {"fp16-mixed", 2, 2, 4, 0, 2, 2},
    {"bf16-mixed", 2, 2, 4, 0, 2, 2},
    {"fp8", 2, 2, 4, 2, 2, 1},
};
// Adam keeps two FP32 moments per parameter; SGD with momentum one FP32 velocity.
constexpr double ADAM_STATE_B = 8.0;
constexpr double SGD_MOMENTUM_B = 4.0;
// A CUDA context with cuDNN and cuBLAS loaded (same assumption as calibrate/src/memory.cpp).
constexpr double GPU_RUNTIME_RESERVE_B = 0.5 * 1024 * 1024 * 1024;
// cuBLAS workspace NVIDIA recommends on Hopper (cuBLAS docs, cublasSetWorkspace: 32 MiB).
constexpr double CUBLAS_WORKSPACE_B = 32.0 * 1024 * 1024;
constexpr int MAX_DP = 1 << 20;

std::string gib(double b) { return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024)); }

}  // namespace

const TrainingPrecision& training_precision_by_name(std::string_view name) {
  for (const auto& p : PRECISIONS)
    if (p.name == name) return p;
  std::string known;
  for (const auto& n : training_precision_names()) known += (known.empty() ? "" : ", ") + n;
  throw InputError(fmt::format("unknown precision '{}' (known: {})", printable(name), known));
}

std::vector<std::string> training_precision_names() {
  std::vector<std::string> v;
  for (const auto& p : PRECISIONS) v.emplace_back(p.name);
  return v;
}

Recompute recompute_by_name(std::string_view name) {
  if (name == "none") return Recompute::NONE;
  if (name == "selective") return Recompute::SELECTIVE;
  if (name == "full") return Recompute::FULL;
  throw InputError(fmt::format("unknown recompute '{}' (known: none, selective, full)", printable(name)));
}

Optimizer optimizer_by_name(std::string_view name) {
  if (name == "adam") return Optimizer::ADAM;
  if (name == "sgd") return Optimizer::SGD;
  throw InputError(fmt::format("unknown optimizer '{}' (known: adam, sgd)", printable(name)));
}

double saved_bytes(const models::Layer& l, const TrainingPrecision& p, Recompute recompute) {
  const auto& s = l.saved;
  double b = s.gemm_input_elements * p.gemm_input_B + s.act_elements * p.act_B + s.mask_bytes + s.fixed_bytes;
  if (recompute == Recompute::SELECTIVE) b -= s.selective_elements * p.act_B + s.selective_mask_bytes;
  return b;
}

TrainMemory estimate_train_memory(const models::Model& model, const TrainMemoryOptions& o,
                                  const platforms::Device& device) {
  if (!model.has_rows())
    throw InputError(fmt::format("model '{}' has no transformer ops: its memory follows the CNN model "
                                 "(--zero, --dp, --recompute and --optimizer apply to transformers)",
                                 model.name()));
  if (o.zero_stage < 0 || o.zero_stage > 3)
    throw InputError(fmt::format("ZeRO stage must be 0, 1, 2 or 3, got {}", o.zero_stage));
  if (o.dp < 1 || o.dp > MAX_DP) throw InputError(fmt::format("dp must be in 1..{}, got {}", MAX_DP, o.dp));
  const TrainingPrecision& p = training_precision_by_name(o.precision);
  TrainMemory m;
  double largest_output = 0;
  // Full recompute keeps each block's input and re-runs one block at a time in backward.
  std::map<std::int64_t, double> block_saved, block_input;
  double outside = 0;
  if (!(o.activation_sets >= 1 && o.activation_sets < 1e9))
    throw InputError(fmt::format("activation sets must be in [1, 1e9), got {}", o.activation_sets));
  if (o.sequence_parallel < 1) throw InputError("sequence-parallel ranks must be >= 1");
  for (const auto& l : model.layers()) {
    if (o.include && !o.include(l)) continue;
    m.params += static_cast<double>(l.costs.params);
    if (l.op == models::OpKind::INPUT) continue;
    largest_output = std::max(largest_output, static_cast<double>(l.dst_shape.elements()));
    double saved = saved_bytes(l, p, o.recompute == Recompute::FULL ? Recompute::NONE : o.recompute);
    if (o.sequence_parallel > 1 && l.row && l.params.seq.sequence_parallel_region) saved /= o.sequence_parallel;
    const std::int64_t block = l.row ? l.params.seq.block : -1;
    if (block < 0) {
      outside += saved;
      continue;
    }
    if (!block_input.count(block))  // the first layer of a block reads the block's input
      block_input[block] = static_cast<double>(l.src_shapes.front().elements()) * p.act_B / o.sequence_parallel;
    block_saved[block] += saved;
  }
  double activations = outside;
  double recomputed_block = 0;  // full recompute: one block's activations, rebuilt in backward, one at a time
  if (o.recompute == Recompute::FULL) {
    for (const auto& [b, in] : block_input) activations += in;
    for (const auto& [b, saved] : block_saved) recomputed_block = std::max(recomputed_block, saved);
  } else {
    for (const auto& [b, saved] : block_saved) activations += saved;
  }
  const double dp = o.dp;
  const double state_B = (o.optimizer == Optimizer::ADAM ? ADAM_STATE_B : SGD_MOMENTUM_B) + p.master_B;
  m.weights_B = m.params * (p.weight_B + p.fp8_weight_cache_B) / (o.zero_stage >= 3 ? dp : 1.0);
  m.gradients_B = m.params * p.grad_B / (o.zero_stage >= 2 ? dp : 1.0);
  m.optimizer_B = m.params * state_B / (o.zero_stage >= 1 ? dp : 1.0);
  m.activations_B = activations * o.activation_sets + recomputed_block;
  // One activation gradient of the largest output is alive in backward, plus the GEMM library workspace.
  m.workspace_B = largest_output * p.act_B + CUBLAS_WORKSPACE_B;
  if (device.kind == platforms::DeviceKind::GPU) m.runtime_B = GPU_RUNTIME_RESERVE_B;
  return m;
}

std::string describe(const TrainMemory& m) {
  return fmt::format("weights {}, gradients {}, optimizer {}, activations {}, workspace {}, runtime {} = total {}",
                     gib(m.weights_B), gib(m.gradients_B), gib(m.optimizer_B), gib(m.activations_B),
                     gib(m.workspace_B), gib(m.runtime_B), gib(m.total_B()));
}

}  // namespace dtsim::calibrate
