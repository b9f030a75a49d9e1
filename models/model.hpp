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
  // An op described by one row of the op-row table (models/op_rows.hpp): the transformer ops. Its
  // name, fields, shape rule and cost rule live in the row (Layer::row), not in switches on this enum.
  ROW,
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

// Hyper-parameters of the row ops (models/op_rows.hpp): the fields each row reads are listed in its row.
// Shapes of sequence tensors: [batch, hidden, seq, 1] (n = batch, c = hidden, h = sequence, w = 1).
struct SeqParams {
  std::int64_t out_features = 0;  // linear
  std::int64_t hidden = 0;        // embedding, patch_embed: width of the produced tokens
  std::int64_t vocab = 0;         // embedding, lm_head
  std::int64_t positions = 0;     // embedding: rows of the learned position table (0 = none)
  std::int64_t token_types = 0;   // embedding: rows of the segment table (BERT: 2; 0 = none)
  std::int64_t heads = 0;         // attention, rotary: query heads
  std::int64_t kv_heads = 0;      // attention, rotary: key/value heads (0 = heads; 1 = multi-query)
  std::int64_t experts = 0;       // moe_router, moe_experts
  std::int64_t top_k = 0;         // moe_router, moe_experts: experts per token
  std::int64_t ffn = 0;           // moe_experts: intermediate size of each (SwiGLU) expert
  std::int64_t patch = 0;         // patch_embed: square patch side
  std::int64_t classes = 0;       // cls_head
  std::int64_t keep_tokens = 0;   // gather_tokens: positions kept of every sequence
  std::int64_t block = -1;        // transformer block index (full recompute checkpoints per block); -1 = none
  // Parallel shards (internal: built by ModelOptions, never read from YAML).
  std::int64_t context_parallel = 1;  // attention: the keys/values span this many ranks' sequence chunks
  std::int64_t expert_parallel = 1;   // moe_experts: this rank holds experts / expert_parallel of them
  // In Megatron's sequence-parallel region: the layer reads the full hidden width on every tensor-parallel
  // rank (norms, dropout, residual adds, column-parallel linears' inputs); sequence parallelism splits what
  // it keeps over the sequence.
  bool sequence_parallel_region = false;
  bool bias = true;               // linear, layer_norm
  bool head_bias = false;         // lm_head: a bias per vocabulary entry (BERT's decoder bias)
  bool causal = false;            // attention: causal mask
  bool flash = false;             // attention: fused (FlashAttention) kernel, no s x s matrix in memory
  bool tied = false;              // lm_head: weight shared with the embedding (no parameters of its own)
  bool cls_token = true;          // patch_embed: prepend a learned class token
  bool pooler = false;            // cls_head: dense + tanh on the first token before the classifier (BERT)
  double dropout = 0;             // attention: dropout of the probabilities; hidden_dropout: its ratio
  bool operator==(const SeqParams&) const = default;
};

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
  SeqParams seq;              // row ops
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

// What a layer keeps for its backward pass, by storage type (the memory model prices it per precision).
// Filled by row ops; CNN ops leave it empty (calibrate/memory.hpp has their rule).
struct SavedForBackward {
  double gemm_input_elements = 0;  // inputs kept by GEMMs (FP8 under Transformer Engine, else activation type)
  double act_elements = 0;         // other tensors at the activation precision
  double mask_bytes = 0;           // dropout masks, 1 byte per element
  double fixed_bytes = 0;          // FP32 statistics (norm mean/rstd, softmax log-sum-exp, logits), int64 token ids
  // The part of act_elements and mask_bytes that selective recompute drops (the s x s attention tensors).
  double selective_elements = 0;
  double selective_mask_bytes = 0;
};

// Per-pass traffic of row ops (CNN ops derive theirs from shapes in calibrate/op_signature.cpp).
struct RowPassBytes {
  double bwd_data = 0;
  double bwd_weights = 0;
};

struct OpRow;  // models/op_rows.hpp

struct Layer {
  std::string name;
  OpKind op = OpKind::INPUT;
  const OpRow* row = nullptr;  // the row of an OpKind::ROW layer, else nullptr
  LayerParams params;
  std::vector<std::string> inputs;  // producer layer names, in order (concat order matters)
  std::vector<Shape> src_shapes;    // one per input
  Shape dst_shape;
  LayerCosts costs;
  // True when a layer upstream has parameters, so backward must compute the gradient w.r.t. this
  // layer's inputs; false for layers fed (through parameter-free layers) only by the input, whose
  // bwd_data_flops are then 0 (frameworks do not differentiate w.r.t. the images).
  bool needs_data_grad = false;
  SavedForBackward saved;  // row ops
  RowPassBytes row_bytes;  // row ops
};

// The op's name: to_string(op), or the row's name for OpKind::ROW.
std::string_view op_name(const Layer& layer);

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
  // Appends a layer of a row op (models/op_rows.hpp) by its row name; same errors as add().
  const Layer& add_row(std::string name, std::string_view row_name, const LayerParams& params,
                       std::vector<std::string> inputs);
  // True when the model has row (transformer) ops.
  bool has_rows() const;

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
  const Layer& add_layer(std::string name, OpKind op, const OpRow* row, const LayerParams& params,
                         std::vector<std::string> inputs);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dtsim::models
