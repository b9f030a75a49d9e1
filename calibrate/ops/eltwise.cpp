// relu and tanh: eltwise forward and backward (the backward reads the forward's src).
#include "calibrate/ops/driver_util.hpp"

namespace dtsim::ops::detail {

void eltwise_steps(PlanBuilder& b, const memory::desc& data, dnnl::algorithm alg) {
  using EF = dnnl::eltwise_forward;
  using EB = dnnl::eltwise_backward;
  const EF::primitive_desc fwd(EF::desc(dnnl::prop_kind::forward_training, alg, data, 0.f, 0.f), b.engine());
  const std::size_t src = b.tensor(Role::SRC, data);
  b.step(Stage::FWD, EF(fwd), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, b.tensor(Role::DST, data)}}, fwd.impl_info_str());
  if (!b.problem().bwd_data) return;
  const EB::primitive_desc bwd(EB::desc(alg, data, data, 0.f, 0.f), b.engine(), fwd);
  b.step(Stage::BWD_DATA, EB(bwd),
         {{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, b.tensor(Role::DIFF_DST, data)},
          {DNNL_ARG_DIFF_SRC, b.tensor(Role::DIFF_SRC, data)}},
         bwd.impl_info_str());
}

void build_eltwise(PlanBuilder& b) {
  const auto& l = b.layer();
  eltwise_steps(b, act_md(l.src_shapes.front(), b.problem().layout),
                l.op == models::OpKind::RELU ? dnnl::algorithm::eltwise_relu : dnnl::algorithm::eltwise_tanh);
}

}  // namespace dtsim::ops::detail
