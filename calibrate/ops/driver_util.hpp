// Private to calibrate/ops: the builder each op driver fills, layout helpers, and the driver table.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "calibrate/ops/op_driver.hpp"

namespace dtsim::ops::detail {

using dnnl::memory;
using Args = std::vector<std::pair<int, std::size_t>>;

class PlanBuilder {
 public:
  PlanBuilder(const dnnl::engine& engine, const Problem& problem) : engine_(engine), problem_(problem) {}
  const dnnl::engine& engine() const { return engine_; }
  const models::Layer& layer() const { return *problem_.layer; }
  const Problem& problem() const { return problem_; }
  // The tensor with this role, index and desc (added on first use, shared afterwards).
  std::size_t tensor(Role role, const memory::desc& desc, int index = 0);
  // A tensor that views `base` through `desc` from `offset_B` bytes on (not shared).
  std::size_t view(std::size_t base, const memory::desc& desc, std::size_t offset_B, Role role, int index);
  void step(Stage stage, dnnl::primitive primitive, Args args, std::string impl);
  void param(Role role, const memory::desc& desc) { plan_.params.push_back(Tensor{role, 0, desc, -1, 0}); }
  const memory::desc& desc_of(std::size_t tensor) const { return plan_.tensors[tensor].desc; }
  // The steps of one stage so far (a driver may put a step before those a shared helper added).
  std::vector<Step>& stage_steps(Stage stage) { return plan_.stages[stage]; }
  OpPlan take() { return std::move(plan_); }

 private:
  const dnnl::engine& engine_;
  const Problem& problem_;
  OpPlan plan_;
};

memory::dims dims4(const models::Shape& s);
// Layout of an activation tensor: BLOCKED is nChw16c (AVX-512) / nChw8c when the channels fill whole
// blocks, else nchw; NHWC is nhwc.
memory::desc act_md(const models::Shape& s, Layout layout);
// Right padding that makes oneDNN's output size equal the model's (covers ceil mode).
memory::dim pad_r(memory::dim in, memory::dim out, memory::dim kernel, memory::dim stride, memory::dim dilation,
                  memory::dim pad_l);
// Adds the forward's workspace (if the primitive has one) to both the forward and the backward args.
void share_workspace(PlanBuilder& b, const memory::desc& workspace, Args& fwd, Args& bwd);
// Channel block of BLOCKED activations on this ISA (16 with AVX-512, else 8).
memory::dim channel_block();
// A sequence tensor [batch, hidden, seq, 1] as PyTorch holds it, token-major: plain {batch x seq, hidden}.
memory::desc tokens_md(const models::Shape& s);
// The inner products of a row linear map: {tokens, in} src to {tokens, out} (written as `dst_role`),
// weights [out, in] (+ bias); forward, backward data (when the problem asks) and backward weights.
void add_token_matmuls(PlanBuilder& b, const memory::desc& src_plain, memory::dim out, bool has_bias,
                       Role dst_role = Role::DST);

// One driver per op kind (one file each under calibrate/ops/).
void build_conv(PlanBuilder& b);
void build_inner_product(PlanBuilder& b);
void build_batch_norm(PlanBuilder& b);
void build_eltwise(PlanBuilder& b);
void build_pooling(PlanBuilder& b);
void build_lrn(PlanBuilder& b);
void build_softmax_loss(PlanBuilder& b);
void build_add(PlanBuilder& b);
void build_concat(PlanBuilder& b);
void build_dropout(PlanBuilder& b);
// Shared steps: an eltwise forward and backward of `alg` over `data` (eltwise.cpp); dropout as a multiply by
// a pre-drawn, scaled MASK forward and of the gradient backward (dropout.cpp).
void eltwise_steps(PlanBuilder& b, const memory::desc& data, dnnl::algorithm alg);
void mask_multiply_steps(PlanBuilder& b, const memory::desc& data);
// Row (transformer) ops, one file each; a row without a driver is left to the device model.
void build_linear(PlanBuilder& b);
void build_lm_head(PlanBuilder& b);
void build_layer_norm(PlanBuilder& b);
void build_attention(PlanBuilder& b);
bool supports_attention(const models::Layer& layer);  // multi-head only
void build_gelu(PlanBuilder& b);
void build_swiglu(PlanBuilder& b);
void build_residual_add(PlanBuilder& b);
void build_hidden_dropout(PlanBuilder& b);

}  // namespace dtsim::ops::detail
