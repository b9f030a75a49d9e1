// A DNN as a DAG of layers (Boost.Graph inside) with inferred shapes and exact per-layer costs.
// Convention: FLOPs count a multiply-add as 2; bytes are FP32 (4 B per element); all costs are for
// the whole batch the model was built with (shape dimension n). Formulas per op: models/README.md.
// Layers with nothing trainable upstream have bwd_data_flops = 0 (see Layer::needs_data_grad).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dtsim::models {

enum class OpKind {
  INPUT,
  CONV2D,
  BATCH_NORM,
  RELU,
  TANH,
  LRN,
  MAX_POOL,
  AVG_POOL,
  GLOBAL_AVG_POOL,
  FULLY_CONNECTED,
  ADD,
  CONCAT,
  DROPOUT,
  FLATTEN,
  SOFTMAX_LOSS,
};

// "conv2d", "batch_norm", ... (the names used in YAML model files and in output).
std::string_view to_string(OpKind op);
// Inverse of to_string; nullopt for an unknown name.
std::optional<OpKind> op_kind_by_name_or_null(std::string_view name);
// Every op name, in enum order (for error messages).
std::vector<std::string> op_kind_names();

// NCHW tensor shape; a fully connected output is (n, c, 1, 1).
struct Shape {
  std::int64_t n = 1, c = 1, h = 1, w = 1;
  std::int64_t elements() const { return n * c * h * w; }
  std::int64_t per_sample() const { return c * h * w; }
  bool operator==(const Shape&) const = default;
};
std::string to_string(const Shape& s);  // "32x64x56x56"

// Hyper-parameters of a layer; fields that do not apply to an op keep their defaults.
struct LayerParams {
  std::int64_t out_channels = 0;  // conv2d, fully_connected (out features)
  int kernel_h = 1, kernel_w = 1;
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;
  int dilation_h = 1, dilation_w = 1;
  int groups = 1;
  bool bias = true;           // conv2d, fully_connected
  bool ceil_mode = false;     // max_pool, avg_pool output rounding
  bool count_include_pad = true;  // avg_pool
  int lrn_size = 5;
  double lrn_alpha = 1e-4, lrn_beta = 0.75, lrn_k = 1.0;
  double dropout_ratio = 0.5;
  double bn_epsilon = 1e-5;
  bool operator==(const LayerParams&) const = default;
};

// Costs of one layer for the whole batch. params and weight bytes do not depend on the batch.
struct LayerCosts {
  std::int64_t params = 0;       // trainable parameters (weights + bias, BN gamma + beta)
  double fwd_flops = 0;          // forward
  double bwd_data_flops = 0;     // gradient w.r.t. the layer's inputs
  double bwd_weights_flops = 0;  // gradient w.r.t. the layer's parameters
  double fwd_bytes = 0;          // minimum memory traffic of the forward pass (src + weights + dst)
  double bwd_bytes = 0;          // minimum memory traffic of backward (data + weights)
  double activation_bytes = 0;   // the dst tensor
  double weight_bytes = 0;       // params * 4
  LayerCosts& operator+=(const LayerCosts& o);
};

struct Layer {
  std::string name;
  OpKind op = OpKind::INPUT;
  LayerParams params;
  std::vector<std::string> inputs;  // producer layer names, in order (concat order matters)
  std::vector<Shape> src_shapes;    // one per input
  Shape dst_shape;
  LayerCosts costs;
  // True when a layer upstream has parameters, so backward must compute the gradient w.r.t. this
  // layer's inputs; false for layers fed (through parameter-free layers) only by the input, whose
  // bwd_data_flops are then 0 (frameworks do not differentiate w.r.t. the images).
  bool needs_data_grad = false;
};

// A model: layers in insertion order, which is a topological order (inputs must already exist).
class Model {
 public:
  // Creates a model whose first layer is an INPUT layer named "data" of shape `input` (n = batch).
  Model(std::string name, Shape input);
  ~Model();
  Model(const Model&);
  Model& operator=(const Model&);
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;

  // Appends a layer fed by `inputs` (existing layer names), infers its shape and costs.
  // Throws InputError on unknown inputs, duplicate names, wrong arity or shape mismatch.
  const Layer& add(std::string name, OpKind op, const LayerParams& params, std::vector<std::string> inputs);

  const std::string& name() const;
  std::int64_t batch() const;
  const Shape& input_shape() const;
  const std::vector<Layer>& layers() const;        // insertion (topological) order, layers()[0] is the input
  const Layer& by_name(std::string_view name) const;  // throws InputError
  const Layer* by_name_or_null(std::string_view name) const;
  std::vector<std::size_t> predecessors(std::size_t index) const;  // via the Boost.Graph DAG
  std::vector<std::size_t> successors(std::size_t index) const;
  std::vector<std::size_t> topological_order() const;  // boost::topological_sort of the DAG
  LayerCosts totals() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dtsim::models
