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

}  // namespace dtsim::ops::detail
