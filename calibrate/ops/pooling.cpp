// max_pool, avg_pool and global_avg_pool: pooling forward (with its workspace for max) and backward.
#include "calibrate/ops/driver_util.hpp"

namespace dtsim::ops::detail {

void build_pooling(PlanBuilder& b) {
  using PF = dnnl::pooling_forward;
  using PB = dnnl::pooling_backward;
  using models::OpKind;
  const auto& l = b.layer();
  const auto& p = l.params;
  const auto& s = l.src_shapes.front();
  const auto& d = l.dst_shape;
  const bool global = l.op == OpKind::GLOBAL_AVG_POOL;
  const memory::dim kh = global ? s.h : p.kernel_h, kw = global ? s.w : p.kernel_w;
  const memory::dim sh = global ? 1 : p.stride_h, sw = global ? 1 : p.stride_w;
  const memory::dim ph = global ? 0 : p.pad_h, pw = global ? 0 : p.pad_w;
  const memory::dims strides{sh, sw}, kernel{kh, kw}, pl{ph, pw},
      pr{pad_r(s.h, d.h, kh, sh, 1, ph), pad_r(s.w, d.w, kw, sw, 1, pw)};
  const auto alg = l.op == OpKind::MAX_POOL                   ? dnnl::algorithm::pooling_max
                   : (global || p.count_include_pad) ? dnnl::algorithm::pooling_avg_include_padding
                                                     : dnnl::algorithm::pooling_avg_exclude_padding;
  const memory::desc src = act_md(s, b.problem().layout), dst = act_md(d, b.problem().layout);
  const PF::primitive_desc fwd(PF::desc(dnnl::prop_kind::forward_training, alg, src, dst, strides, kernel, pl, pr),
                               b.engine());
  Args fa{{DNNL_ARG_SRC, b.tensor(Role::SRC, src)}, {DNNL_ARG_DST, b.tensor(Role::DST, dst)}};
  Args ba;
  share_workspace(b, fwd.workspace_desc(), fa, ba);
  b.step(Stage::FWD, PF(fwd), std::move(fa), fwd.impl_info_str());
  if (!b.problem().bwd_data) return;
  const PB::primitive_desc bwd(PB::desc(alg, src, dst, strides, kernel, pl, pr), b.engine(), fwd);
  ba.emplace_back(DNNL_ARG_DIFF_DST, b.tensor(Role::DIFF_DST, dst));
  ba.emplace_back(DNNL_ARG_DIFF_SRC, b.tensor(Role::DIFF_SRC, src));
  b.step(Stage::BWD_DATA, PB(bwd), std::move(ba), bwd.impl_info_str());
}

}  // namespace dtsim::ops::detail
