// Training memory estimate of one worker and the capacity check (docs/calibration.md, "Memory").
#include "calibrate/memory.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <string>

#include "calibrate/train_memory.hpp"
#include "common/errors.hpp"

namespace dtsim::calibrate {
namespace {

constexpr double FP32_BYTES = 4.0;
constexpr double FP16_BYTES = 2.0;
// SGD with momentum keeps one FP32 velocity per parameter (dtsim's update model, op_signature.hpp).
constexpr double MOMENTUM_BYTES_PER_PARAM = FP32_BYTES;
// Assumption: a CUDA context with cuDNN and cuBLAS loaded holds ~0.5 GiB of device memory before the
// framework allocates anything (nvidia-smi shows 300-700 MB per process on Pascal/Volta, depending on
// the CUDA version and libraries loaded).
constexpr double GPU_RUNTIME_RESERVE_B = 0.5 * 1024 * 1024 * 1024;

std::string gib(double b) { return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024)); }

}  // namespace

MemoryEstimate estimate_memory(const models::Model& model, Precision precision, const platforms::Device& device) {
  MemoryEstimate m;
  if (model.has_rows()) {
    // Transformers: their ops say what they keep (calibrate/train_memory.hpp), with dtsim's SGD-momentum update.
    TrainMemoryOptions o;
    o.precision = std::string(to_string(precision));
    o.optimizer = Optimizer::SGD;
    const TrainMemory t = estimate_train_memory(model, o, device);
    m.weights_B = t.weights_B;
    m.gradients_B = t.gradients_B;
    m.optimizer_B = t.optimizer_B;
    m.activations_B = t.activations_B;
    m.workspace_B = t.workspace_B;
    m.runtime_B = t.runtime_B;
    return m;
  }
  const double elem = element_bytes(precision);
  const double scale = elem / FP32_BYTES;
  double params = 0;
  // An output is kept for backward when its own layer's backward reads it, or a consumer's backward reads
  // its input (cuDNN/TensorFlow gradient signatures: conv and FC read x for dW; batch norm reads x; ReLU and
  // tanh read y; max pool and LRN read x and y; softmax reads its probabilities; add, concat, flatten,
  // average pooling read neither). Dropout keeps its mask, counted as its output.
  std::set<std::string> read_as_input;
  for (const auto& layer : model.layers()) {
    using models::OpKind;
    const OpKind op = layer.op;
    if (op == OpKind::CONV2D || op == OpKind::FULLY_CONNECTED || op == OpKind::BATCH_NORM || op == OpKind::MAX_POOL ||
        op == OpKind::LRN)
      for (const auto& in : layer.inputs) read_as_input.insert(in);
  }
  for (const auto& layer : model.layers()) {
    using models::OpKind;
    params += static_cast<double>(layer.costs.params);
    const double dst_B = static_cast<double>(layer.dst_shape.elements()) * FP32_BYTES * scale;
    const OpKind op = layer.op;
    const bool reads_own_output = op == OpKind::RELU || op == OpKind::TANH || op == OpKind::MAX_POOL ||
                                  op == OpKind::LRN || op == OpKind::SOFTMAX_LOSS || op == OpKind::DROPOUT;
    if (reads_own_output || read_as_input.count(layer.name)) m.activations_B += dst_B;
    if (layer.op == models::OpKind::CONV2D) {
      double largest = dst_B;
      for (const auto& s : layer.src_shapes) largest = std::max(largest, static_cast<double>(s.elements()) * elem);
      m.workspace_B = std::max(m.workspace_B, largest);
    }
  }
  m.weights_B = params * FP32_BYTES + (precision_row(precision).mixed ? params * FP16_BYTES : 0.0);
  m.gradients_B = params * elem;
  m.optimizer_B = params * MOMENTUM_BYTES_PER_PARAM;
  if (device.kind == platforms::DeviceKind::GPU) m.runtime_B = GPU_RUNTIME_RESERVE_B;
  return m;
}

std::string describe(const MemoryEstimate& m) {
  return fmt::format("weights {}, gradients {}, optimizer {}, activations {}, workspace {}, runtime {} = total {}",
                     gib(m.weights_B), gib(m.gradients_B), gib(m.optimizer_B), gib(m.activations_B),
                     gib(m.workspace_B), gib(m.runtime_B), gib(m.total_B()));
}

void check_memory_fits(const MemoryEstimate& m, const models::Model& model, const platforms::Device& device) {
  // CPU capacities in devices.yaml are the socket's maximum, not what a node has installed: GPUs only.
  if (device.kind != platforms::DeviceKind::GPU || !(device.mem_capacity_B > 0) || m.total_B() <= device.mem_capacity_B)
    return;
  throw InputError(fmt::format("model '{}' at batch {} does not fit on '{}' ({} of memory): {} "
                               "(use --allow-oversubscribe to predict anyway)",
                               model.name(), model.batch(), device.name, gib(device.mem_capacity_B), describe(m)));
}

}  // namespace dtsim::calibrate
