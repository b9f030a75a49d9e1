// add: forward sums the inputs. Backward hands diff_dst to every input unchanged; the work it costs is
// accumulating it into the gradient of the branch point that feeds the shortcut (input 0), one
// in-place 2-input sum: diff_src_0 += diff_dst.
#include "calibrate/ops/driver_util.hpp"

namespace dtsim::ops::detail {

void build_add(PlanBuilder& b) {
  const auto& l = b.layer();
  const memory::desc data = act_md(l.dst_shape, b.problem().layout);
  const std::vector<memory::desc> srcs(l.src_shapes.size(), data);
  const dnnl::sum::primitive_desc fwd(data, std::vector<float>(srcs.size(), 1.f), srcs, b.engine());
  Args fa{{DNNL_ARG_DST, b.tensor(Role::DST, data)}};
  for (std::size_t i = 0; i < srcs.size(); ++i)
    fa.emplace_back(DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), b.tensor(Role::SRC, data, static_cast<int>(i)));
  b.step(Stage::FWD, dnnl::sum(fwd), std::move(fa), fwd.impl_info_str());
  if (!b.problem().bwd_data) return;
  const dnnl::sum::primitive_desc bwd(data, {1.f, 1.f}, {data, data}, b.engine());
  const std::size_t acc = b.tensor(Role::DIFF_SRC, data, 0);
  b.step(Stage::BWD_DATA, dnnl::sum(bwd),
         {{DNNL_ARG_MULTIPLE_SRC, acc}, {DNNL_ARG_MULTIPLE_SRC + 1, b.tensor(Role::DIFF_DST, data)},
          {DNNL_ARG_DST, acc}},
         bwd.impl_info_str());
}

}  // namespace dtsim::ops::detail
