// lm_head (a row op): logits = x W^T (+ b) over the vocabulary, softmax over each token's logits, and
// the mean cross-entropy's gradient (probabilities - one-hot TARGET) / tokens, as oneDNN inner
// products, a softmax and one binary subtraction with the scale fused. Tied or not, the head reads a
// [vocab, hidden] weight; its gradient is what a tied embedding accumulates.
#include "calibrate/ops/driver_util.hpp"

namespace dtsim::ops::detail {

void build_lm_head(PlanBuilder& b) {
  using SF = dnnl::softmax_forward;
  const auto& l = b.layer();
  const memory::desc src = tokens_md(l.src_shapes.front());
  const memory::dim tokens = src.dims()[0], vocab = l.dst_shape.c;
  const memory::desc logits({tokens, vocab}, memory::data_type::f32, memory::format_tag::ab);
  // The inner products write their dst (the logits) to a WORKSPACE tensor; DST is the probabilities.
  add_token_matmuls(b, src, vocab, l.params.seq.head_bias, Role::WORKSPACE);
  const std::size_t z = b.tensor(Role::WORKSPACE, logits), probs = b.tensor(Role::DST, logits);
  const SF::primitive_desc fwd(SF::desc(dnnl::prop_kind::forward_training, logits, 1), b.engine());
  b.step(Stage::FWD, SF(fwd), {{DNNL_ARG_SRC, z}, {DNNL_ARG_DST, probs}}, fwd.impl_info_str());
  dnnl::post_ops mean;
  mean.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, 1.f / static_cast<float>(tokens), 0.f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(mean);
  const dnnl::binary::primitive_desc loss(dnnl::binary::desc(dnnl::algorithm::binary_sub, logits, logits, logits), attr,
                                          b.engine());
  // The loss gradient is the logits' diff_dst: it runs first in backward (data, else weights).
  auto& bwd = b.stage_steps(b.problem().bwd_data ? Stage::BWD_DATA : Stage::BWD_WEIGHTS);
  bwd.insert(bwd.begin(), Step{dnnl::binary(loss), {}, loss.impl_info_str()});
  bwd.front().args = {{DNNL_ARG_SRC_0, probs}, {DNNL_ARG_SRC_1, b.tensor(Role::TARGET, logits)},
                      {DNNL_ARG_DST, b.tensor(Role::DIFF_DST, logits)}};
}

}  // namespace dtsim::ops::detail
