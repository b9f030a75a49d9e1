// dropout: forward multiplies by a pre-drawn, scaled MASK; backward multiplies the gradient by it.
#include "calibrate/ops/driver_util.hpp"

namespace dtsim::ops::detail {

void mask_multiply_steps(PlanBuilder& b, const memory::desc& data) {
  const dnnl::binary::primitive_desc mul(dnnl::binary::desc(dnnl::algorithm::binary_mul, data, data, data), b.engine());
  const std::size_t mask = b.tensor(Role::MASK, data);
  b.step(Stage::FWD, dnnl::binary(mul),
         {{DNNL_ARG_SRC_0, b.tensor(Role::SRC, data)}, {DNNL_ARG_SRC_1, mask}, {DNNL_ARG_DST, b.tensor(Role::DST, data)}},
         mul.impl_info_str());
  if (!b.problem().bwd_data) return;
  b.step(Stage::BWD_DATA, dnnl::binary(mul),
         {{DNNL_ARG_SRC_0, b.tensor(Role::DIFF_DST, data)}, {DNNL_ARG_SRC_1, mask},
          {DNNL_ARG_DST, b.tensor(Role::DIFF_SRC, data)}},
         mul.impl_info_str());
}

void build_dropout(PlanBuilder& b) { mask_multiply_steps(b, act_md(b.layer().src_shapes.front(), b.problem().layout)); }

}  // namespace dtsim::ops::detail
