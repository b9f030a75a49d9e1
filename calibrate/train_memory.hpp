// Training memory of one data-parallel worker of a transformer (a model of row ops): weights, gradients
// and optimizer state per precision and ZeRO stage, activations kept for backward under a recompute
// policy, workspace. Formulas and sources: docs/calibration.md "Transformer memory", models/README.md.
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "models/model.hpp"
#include "platforms/device.hpp"

namespace dtsim::calibrate {

// Bytes per element of one training precision (a row of the precision table).
struct TrainingPrecision {
  std::string_view name;
  double weight_B;          // the copy the kernels read
  double grad_B;            // one gradient per parameter
  double master_B;          // FP32 master weights held by the optimizer (0 when the weights are FP32)
  double fp8_weight_cache_B;  // FP8 weight (+ transpose) copies Transformer Engine keeps (fp8 only)
  double act_B;             // activations kept for backward
  double gemm_input_B;      // activations kept as GEMM inputs (FP8 under Transformer Engine)
};
// fp32, tf32, fp16-mixed, bf16-mixed, fp8; throws InputError listing them for any other name.
const TrainingPrecision& training_precision_by_name(std::string_view name);
std::vector<std::string> training_precision_names();

enum class Recompute { NONE, SELECTIVE, FULL };
Recompute recompute_by_name(std::string_view name);  // none|selective|full; InputError otherwise
enum class Optimizer { ADAM, SGD };
Optimizer optimizer_by_name(std::string_view name);  // adam|sgd; InputError otherwise

struct TrainMemoryOptions {
  std::string precision = "bf16-mixed";
  Optimizer optimizer = Optimizer::ADAM;
  Recompute recompute = Recompute::NONE;
  int zero_stage = 0;  // 0..3: ZeRO partitions optimizer state (1), + gradients (2), + weights (3) over dp
  int dp = 1;          // data-parallel size
  // A pipeline stage: the layers it holds (null: every layer), and how many micro-batches' activations
  // it keeps at once (1F1B's first stage: up to the pipeline depth; layouts.cpp's in_flight).
  std::function<bool(const models::Layer&)> include;
  double activation_sets = 1;
  // Megatron's sequence parallelism over `sequence_parallel` tensor-parallel ranks: the activations of
  // layers in its region (SeqParams::sequence_parallel_region: norms, dropout, residual adds, the inputs of
  // the column-parallel linears) are split over the sequence (Korthikanti et al. 2022, sbh(34/t + 5as/ht)).
  int sequence_parallel = 1;
};

struct TrainMemory {
  double params = 0;
  double weights_B = 0, gradients_B = 0, optimizer_B = 0, activations_B = 0, workspace_B = 0, runtime_B = 0;
  double total_B() const { return weights_B + gradients_B + optimizer_B + activations_B + workspace_B + runtime_B; }
};

// What `layer` (a row op) keeps for backward at `precision` under `recompute` (FULL: as NONE; the per-block
// checkpointing is applied over the model by estimate_train_memory). 0 for non-row layers.
double saved_bytes(const models::Layer& layer, const TrainingPrecision& precision, Recompute recompute);

// Memory of training `model` (built at the micro-batch and sequence) on `device`. Throws InputError for a
// model without row ops, a bad ZeRO stage or dp.
TrainMemory estimate_train_memory(const models::Model& model, const TrainMemoryOptions& options,
                                  const platforms::Device& device);

// "weights 12.6 GiB, gradients ..., = total 115.2 GiB"
std::string describe(const TrainMemory& memory);

}  // namespace dtsim::calibrate
