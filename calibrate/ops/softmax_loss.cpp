// softmax_loss: softmax over the classes forward; backward is the gradient of the mean cross-entropy,
// (probabilities - one-hot TARGET) / batch, one binary subtraction with the scale fused as a post-op.
#include "calibrate/ops/driver_util.hpp"

namespace dtsim::ops::detail {

void build_softmax_loss(PlanBuilder& b) {
  using SF = dnnl::softmax_forward;
  const auto& s = b.layer().src_shapes.front();
  const memory::desc data({s.n, s.per_sample()}, memory::data_type::f32, memory::format_tag::nc);
  const SF::primitive_desc fwd(SF::desc(dnnl::prop_kind::forward_training, data, 1), b.engine());
  const std::size_t probs = b.tensor(Role::DST, data);
  b.step(Stage::FWD, SF(fwd), {{DNNL_ARG_SRC, b.tensor(Role::SRC, data)}, {DNNL_ARG_DST, probs}}, fwd.impl_info_str());
  if (!b.problem().bwd_data) return;
  dnnl::post_ops mean;
  mean.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, 1.f / static_cast<float>(s.n), 0.f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(mean);
  const dnnl::binary::primitive_desc bwd(dnnl::binary::desc(dnnl::algorithm::binary_sub, data, data, data), attr,
                                         b.engine());
  b.step(Stage::BWD_DATA, dnnl::binary(bwd),
         {{DNNL_ARG_SRC_0, probs}, {DNNL_ARG_SRC_1, b.tensor(Role::TARGET, data)},
          {DNNL_ARG_DST, b.tensor(Role::DIFF_SRC, data)}},
         bwd.impl_info_str());
}

}  // namespace dtsim::ops::detail
