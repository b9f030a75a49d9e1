// conv2d: convolution forward, backward data and backward weights (+ bias), grouped or not. BLOCKED
// lets oneDNN pick src/dst layouts (format_tag::any); NHWC fixes them channels-last.
#include "calibrate/ops/driver_util.hpp"

namespace dtsim::ops::detail {

void build_conv(PlanBuilder& b) {
  using CF = dnnl::convolution_forward;
  using CD = dnnl::convolution_backward_data;
  using CW = dnnl::convolution_backward_weights;
  const auto& l = b.layer();
  const auto& p = l.params;
  const auto& s = l.src_shapes.front();
  const auto& d = l.dst_shape;
  const auto f32 = memory::data_type::f32;
  const memory::dims strides{p.stride_h, p.stride_w}, dil{p.dilation_h - 1, p.dilation_w - 1}, pl{p.pad_h, p.pad_w},
      pr{pad_r(s.h, d.h, p.kernel_h, p.stride_h, p.dilation_h, p.pad_h),
         pad_r(s.w, d.w, p.kernel_w, p.stride_w, p.dilation_w, p.pad_w)};
  const bool grouped = p.groups > 1;
  const memory::dims wdims = grouped ? memory::dims{p.groups, d.c / p.groups, s.c / p.groups, p.kernel_h, p.kernel_w}
                                     : memory::dims{d.c, s.c, p.kernel_h, p.kernel_w};
  const bool blocked = b.problem().layout == Layout::BLOCKED;
  const memory::desc src = blocked ? memory::desc(dims4(s), f32, memory::format_tag::any) : act_md(s, Layout::NHWC);
  const memory::desc dst = blocked ? memory::desc(dims4(d), f32, memory::format_tag::any) : act_md(d, Layout::NHWC);
  const memory::desc wei(wdims, f32, memory::format_tag::any), bias({d.c}, f32, memory::format_tag::a);
  const auto alg = dnnl::algorithm::convolution_direct;
  b.param(Role::WEIGHTS, memory::desc(wdims, f32, grouped ? memory::format_tag::goihw : memory::format_tag::oihw));
  if (p.bias) b.param(Role::BIAS, bias);

  const CF::primitive_desc fwd(
      p.bias ? CF::desc(dnnl::prop_kind::forward_training, alg, src, wei, bias, dst, strides, dil, pl, pr)
             : CF::desc(dnnl::prop_kind::forward_training, alg, src, wei, dst, strides, dil, pl, pr),
      b.engine());
  Args fa{{DNNL_ARG_SRC, b.tensor(Role::SRC, fwd.src_desc())},
          {DNNL_ARG_WEIGHTS, b.tensor(Role::WEIGHTS, fwd.weights_desc())},
          {DNNL_ARG_DST, b.tensor(Role::DST, fwd.dst_desc())}};
  if (p.bias) fa.emplace_back(DNNL_ARG_BIAS, b.tensor(Role::BIAS, fwd.bias_desc()));
  b.step(Stage::FWD, CF(fwd), std::move(fa), fwd.impl_info_str());

  if (b.problem().bwd_data) {
    const CD::primitive_desc bd(CD::desc(alg, src, wei, dst, strides, dil, pl, pr), b.engine(), fwd);
    b.step(Stage::BWD_DATA, CD(bd),
           {{DNNL_ARG_DIFF_SRC, b.tensor(Role::DIFF_SRC, bd.diff_src_desc())},
            {DNNL_ARG_WEIGHTS, b.tensor(Role::WEIGHTS, bd.weights_desc())},
            {DNNL_ARG_DIFF_DST, b.tensor(Role::DIFF_DST, bd.diff_dst_desc())}},
           bd.impl_info_str());
  }
  const CW::primitive_desc bw(p.bias ? CW::desc(alg, src, wei, bias, dst, strides, dil, pl, pr)
                                     : CW::desc(alg, src, wei, dst, strides, dil, pl, pr),
                              b.engine(), fwd);
  Args wa{{DNNL_ARG_SRC, b.tensor(Role::SRC, bw.src_desc())},
          {DNNL_ARG_DIFF_WEIGHTS, b.tensor(Role::DIFF_WEIGHTS, bw.diff_weights_desc())},
          {DNNL_ARG_DIFF_DST, b.tensor(Role::DIFF_DST, bw.diff_dst_desc())}};
  if (p.bias) wa.emplace_back(DNNL_ARG_DIFF_BIAS, b.tensor(Role::DIFF_BIAS, bw.diff_bias_desc()));
  b.step(Stage::BWD_WEIGHTS, CW(bw), std::move(wa), bw.impl_info_str());
}

}  // namespace dtsim::ops::detail
