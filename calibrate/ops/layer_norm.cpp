// layer_norm (a row op): oneDNN layer normalization over each token's hidden vector, forward training
// (mean and variance kept) and one backward primitive giving the data gradient and the scale (and
// shift) gradients (stage BWD_DATA, as the row's single backward kernel).
#include "calibrate/ops/driver_util.hpp"

namespace dtsim::ops::detail {

namespace {
// torch.nn.LayerNorm's default eps (GPT-2's layer_norm_epsilon and BERT's layer_norm_eps are 1e-5 and 1e-12;
// the value does not change the kernel's time).
constexpr float LAYER_NORM_EPSILON = 1e-5f;
}  // namespace

void build_layer_norm(PlanBuilder& b) {
  using LF = dnnl::layer_normalization_forward;
  using LB = dnnl::layer_normalization_backward;
  const auto& l = b.layer();
  const memory::desc data = tokens_md(l.src_shapes.front());
  const memory::desc cvec({data.dims()[1]}, memory::data_type::f32, memory::format_tag::a);
  const bool shift = l.params.seq.bias;
  const auto flags = shift ? dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift
                           : dnnl::normalization_flags::use_scale;
  b.param(Role::SCALE, cvec);
  if (shift) b.param(Role::SHIFT, cvec);
  const LF::primitive_desc fwd(LF::desc(dnnl::prop_kind::forward_training, data, LAYER_NORM_EPSILON, flags), b.engine());
  const std::size_t src = b.tensor(Role::SRC, data), scale = b.tensor(Role::SCALE, cvec);
  const std::size_t mean = b.tensor(Role::MEAN, fwd.mean_desc()), var = b.tensor(Role::VARIANCE, fwd.variance_desc());
  Args fa{{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, b.tensor(Role::DST, data)}, {DNNL_ARG_SCALE, scale},
          {DNNL_ARG_MEAN, mean}, {DNNL_ARG_VARIANCE, var}};
  if (shift) fa.emplace_back(DNNL_ARG_SHIFT, b.tensor(Role::SHIFT, cvec));
  b.step(Stage::FWD, LF(fwd), std::move(fa), fwd.impl_info_str());
  const LB::primitive_desc bwd(LB::desc(dnnl::prop_kind::backward, data, data, LAYER_NORM_EPSILON, flags), b.engine(),
                               fwd);
  Args ba{{DNNL_ARG_SRC, src}, {DNNL_ARG_MEAN, mean}, {DNNL_ARG_VARIANCE, var},
          {DNNL_ARG_DIFF_DST, b.tensor(Role::DIFF_DST, data)}, {DNNL_ARG_SCALE, scale},
          {DNNL_ARG_DIFF_SRC, b.tensor(Role::DIFF_SRC, data)}, {DNNL_ARG_DIFF_SCALE, b.tensor(Role::DIFF_SCALE, cvec)}};
  if (shift) {
    ba.emplace_back(DNNL_ARG_SHIFT, b.tensor(Role::SHIFT, cvec));
    ba.emplace_back(DNNL_ARG_DIFF_SHIFT, b.tensor(Role::DIFF_SHIFT, cvec));
  }
  b.step(Stage::BWD_DATA, LB(bwd), std::move(ba), bwd.impl_info_str());
}

}  // namespace dtsim::ops::detail
