// fully_connected: inner product forward, backward data and backward weights (+ bias). BLOCKED keeps a
// 4-D src (oneDNN picks layouts); NHWC reads the channels-last src as (n, h*w*c) with plain weights.
#include "calibrate/ops/driver_util.hpp"

namespace dtsim::ops::detail {

void build_inner_product(PlanBuilder& b) {
  using IF = dnnl::inner_product_forward;
  using ID = dnnl::inner_product_backward_data;
  using IW = dnnl::inner_product_backward_weights;
  const auto& l = b.layer();
  const auto& s = l.src_shapes.front();
  const auto& d = l.dst_shape;
  const bool has_bias = l.params.bias;
  const auto f32 = memory::data_type::f32;
  using tag = memory::format_tag;
  const bool flat = b.problem().layout == Layout::NHWC || (s.h == 1 && s.w == 1);
  const memory::dims sdims = flat ? memory::dims{s.n, s.per_sample()} : dims4(s);
  const memory::dims wdims = flat ? memory::dims{d.c, s.per_sample()} : memory::dims{d.c, s.c, s.h, s.w};
  const tag fixed = b.problem().layout == Layout::NHWC ? tag::nc : tag::any;
  const memory::desc src(sdims, f32, fixed), wei(wdims, f32, tag::any), dst({d.n, d.c}, f32, fixed),
      bias({d.c}, f32, tag::a);
  b.param(Role::WEIGHTS, memory::desc(wdims, f32, flat ? tag::oi : tag::oihw));
  if (has_bias) b.param(Role::BIAS, bias);

  const IF::primitive_desc fwd(has_bias ? IF::desc(dnnl::prop_kind::forward_training, src, wei, bias, dst)
                                        : IF::desc(dnnl::prop_kind::forward_training, src, wei, dst),
                               b.engine());
  Args fa{{DNNL_ARG_SRC, b.tensor(Role::SRC, fwd.src_desc())},
          {DNNL_ARG_WEIGHTS, b.tensor(Role::WEIGHTS, fwd.weights_desc())},
          {DNNL_ARG_DST, b.tensor(Role::DST, fwd.dst_desc())}};
  if (has_bias) fa.emplace_back(DNNL_ARG_BIAS, b.tensor(Role::BIAS, fwd.bias_desc()));
  b.step(Stage::FWD, IF(fwd), std::move(fa), fwd.impl_info_str());

  if (b.problem().bwd_data) {
    const ID::primitive_desc bd(ID::desc(src, wei, dst), b.engine(), fwd);
    b.step(Stage::BWD_DATA, ID(bd),
           {{DNNL_ARG_DIFF_SRC, b.tensor(Role::DIFF_SRC, bd.diff_src_desc())},
            {DNNL_ARG_WEIGHTS, b.tensor(Role::WEIGHTS, bd.weights_desc())},
            {DNNL_ARG_DIFF_DST, b.tensor(Role::DIFF_DST, bd.diff_dst_desc())}},
           bd.impl_info_str());
  }
  const IW::primitive_desc bw(has_bias ? IW::desc(src, wei, bias, dst) : IW::desc(src, wei, dst), b.engine(), fwd);
  Args wa{{DNNL_ARG_SRC, b.tensor(Role::SRC, bw.src_desc())},
          {DNNL_ARG_DIFF_WEIGHTS, b.tensor(Role::DIFF_WEIGHTS, bw.diff_weights_desc())},
          {DNNL_ARG_DIFF_DST, b.tensor(Role::DIFF_DST, bw.diff_dst_desc())}};
  if (has_bias) wa.emplace_back(DNNL_ARG_DIFF_BIAS, b.tensor(Role::DIFF_BIAS, bw.diff_bias_desc()));
  b.step(Stage::BWD_WEIGHTS, IW(bw), std::move(wa), bw.impl_info_str());
}

}  // namespace dtsim::ops::detail
