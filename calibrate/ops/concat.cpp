// concat along channels: forward is oneDNN's concat; backward is the real split, one reorder per input
// from its channel slice of diff_dst into diff_src_k. The slice is a view with explicit strides whose
// data handle already points at the slice (no submemory_desc offset: oneDNN 2.6.3's reorders crashed on
// those at batch 32). When slice and diff_src_k share a byte order (plain NCHW, or blocked with the
// offset on a block boundary), each sample's slice is one contiguous run: a 2-D (n, c_k*h*w) copy.
#include "calibrate/ops/driver_util.hpp"

namespace dtsim::ops::detail {

void build_concat(PlanBuilder& b) {
  using tag = memory::format_tag;
  const auto f32 = memory::data_type::f32;
  const auto& l = b.layer();
  const auto& d = l.dst_shape;
  const Layout layout = b.problem().layout;
  std::vector<memory::desc> srcs;
  bool aligned = true;
  for (const auto& in : l.src_shapes) {
    srcs.push_back(act_md(in, layout));
    aligned = aligned && in.c % channel_block() == 0;
  }
  const memory::desc dst = layout == Layout::NHWC || aligned ? act_md(d, layout) : memory::desc(dims4(d), f32, tag::nchw);
  const dnnl::concat::primitive_desc fwd(dst, 1, srcs, b.engine());
  Args fa{{DNNL_ARG_DST, b.tensor(Role::DST, dst)}};
  for (std::size_t i = 0; i < srcs.size(); ++i)
    fa.emplace_back(DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), b.tensor(Role::SRC, srcs[i], static_cast<int>(i)));
  b.step(Stage::FWD, dnnl::concat(fwd), std::move(fa), fwd.impl_info_str());
  if (!b.problem().bwd_data) return;

  const std::size_t diff_dst = b.tensor(Role::DIFF_DST, dst);
  const bool nhwc = layout == Layout::NHWC;
  const memory::dim hw = d.h * d.w, elem_B = sizeof(float);
  memory::dim offset_c = 0;
  for (std::size_t i = 0; i < srcs.size(); ++i) {
    const auto& in = l.src_shapes[i];
    const int k = static_cast<int>(i);
    const std::size_t diff_src = b.tensor(Role::DIFF_SRC, srcs[i], k);
    std::size_t from = 0, to = diff_src;
    if (nhwc) {
      const memory::desc slice(dims4(in), f32, memory::dims{hw * d.c, 1, d.w * d.c, d.c});
      from = b.view(diff_dst, slice, static_cast<std::size_t>(offset_c * elem_B), Role::DIFF_DST, k);
    } else if ((dst.data.format_desc.blocking.inner_nblks == 0) == (srcs[i].data.format_desc.blocking.inner_nblks == 0)) {
      // Same byte order per sample: copy (n, c_k*h*w) rows out of (n, c*h*w) rows.
      const memory::desc rows({in.n, in.c * hw}, f32, memory::dims{d.c * hw, 1});
      from = b.view(diff_dst, rows, static_cast<std::size_t>(offset_c * hw * elem_B), Role::DIFF_DST, k);
      to = b.view(diff_src, memory::desc({in.n, in.c * hw}, f32, tag::nc), 0, Role::DIFF_SRC, k);
    } else {
      const memory::desc slice(dims4(in), f32, memory::dims{d.c * hw, hw, d.w, 1});
      from = b.view(diff_dst, slice, static_cast<std::size_t>(offset_c * hw * elem_B), Role::DIFF_DST, k);
    }
    const dnnl::reorder::primitive_desc split(b.engine(), b.desc_of(from), b.engine(), b.desc_of(to));
    b.step(Stage::BWD_DATA, dnnl::reorder(split), {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}}, split.impl_info_str());
    offset_c += in.c;
  }
}

}  // namespace dtsim::ops::detail
