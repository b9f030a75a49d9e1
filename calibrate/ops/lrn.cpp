// lrn: local response normalization across channels, forward (with its workspace) and backward.
#include "calibrate/ops/driver_util.hpp"

namespace dtsim::ops::detail {

void build_lrn(PlanBuilder& b) {
  using LF = dnnl::lrn_forward;
  using LB = dnnl::lrn_backward;
  const auto& l = b.layer();
  const auto& p = l.params;
  const memory::desc data = act_md(l.src_shapes.front(), b.problem().layout);
  const auto alg = dnnl::algorithm::lrn_across_channels;
  const auto alpha = static_cast<float>(p.lrn_alpha), beta = static_cast<float>(p.lrn_beta),
             k = static_cast<float>(p.lrn_k);
  const LF::primitive_desc fwd(LF::desc(dnnl::prop_kind::forward_training, alg, data, p.lrn_size, alpha, beta, k),
                               b.engine());
  const std::size_t src = b.tensor(Role::SRC, data);
  Args fa{{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, b.tensor(Role::DST, data)}};
  Args ba{{DNNL_ARG_SRC, src}};
  share_workspace(b, fwd.workspace_desc(), fa, ba);
  b.step(Stage::FWD, LF(fwd), std::move(fa), fwd.impl_info_str());
  if (!b.problem().bwd_data) return;
  const LB::primitive_desc bwd(LB::desc(alg, data, data, p.lrn_size, alpha, beta, k), b.engine(), fwd);
  ba.emplace_back(DNNL_ARG_DIFF_DST, b.tensor(Role::DIFF_DST, data));
  ba.emplace_back(DNNL_ARG_DIFF_SRC, b.tensor(Role::DIFF_SRC, data));
  b.step(Stage::BWD_DATA, LB(bwd), std::move(ba), bwd.impl_info_str());
}

}  // namespace dtsim::ops::detail
