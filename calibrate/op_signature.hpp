// Op signatures: the key under which one layer shape is timed once and shared by every model that
// contains it, the passes a layer runs in a training step, and the FLOPs/bytes of each pass.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/model.hpp"

namespace dtsim::calibrate {

// One timed piece of a layer's training step. BN backward (data + scale/shift) is one oneDNN
// primitive and is stored as BWD_DATA; UPDATE is the SGD-momentum step of the whole model.
enum class Pass { FWD, BWD_DATA, BWD_WEIGHTS };

std::string_view to_string(Pass pass);                          // "fwd", "bwd_data", "bwd_weights"
std::optional<Pass> pass_by_name_or_null(std::string_view name);

// Classes of ops that share one efficiency in the device model (fallback and GPU mapping).
enum class OpClass { CONV, FC, BATCH_NORM, ELTWISE, POOL, LRN, SOFTMAX, ADD, CONCAT, DROPOUT, UPDATE, NONE };
std::string_view to_string(OpClass op_class);
OpClass op_class_of(models::OpKind op);  // NONE for OpKind::ROW: ask the layer
// The class of a layer: its row's cost_class for row (transformer) ops, else op_class_of(layer.op).
OpClass op_class_of(const models::Layer& layer);
// The class named `name` ("fc", "eltwise", ...), or nullopt.
std::optional<OpClass> op_class_by_name_or_null(std::string_view name);
// True for classes whose time is usually bound by arithmetic (conv, fc), false for memory-bound ones.
bool is_compute_class(OpClass op_class);

// Key of a layer's shape and hyper-parameters that determine its kernels, batch included, e.g.
// "conv2d src=32x64x56x56 dst=32x64x56x56 k=3x3 s=1x1 p=1x1 d=1x1 g=1 bias=1".
std::string op_signature(const models::Layer& layer);
// Key of the optimizer step over `params` FP32 parameters: "sgd_momentum params=N".
std::string update_signature(std::int64_t params);

// The passes this layer runs in a training step (empty for input and flatten).
std::vector<Pass> passes_of(const models::Layer& layer);

// Work of one pass: FLOPs (multiply-add = 2) and minimum memory traffic in bytes.
struct PassWork {
  double flops = 0;
  double bytes = 0;
};
PassWork pass_work(const models::Layer& layer, Pass pass);
// The optimizer step: v = mu*v + g; w -= lr*v over `params` elements (3 FLOPs, 5 x 4 bytes each).
PassWork update_work(std::int64_t params);

}  // namespace dtsim::calibrate
