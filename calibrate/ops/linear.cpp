// linear (a row op): y = x W^T (+ b) over every token, as oneDNN inner products over the batch x sequence
// rows of a token-major {tokens, features} tensor: forward, backward data and backward weights (+ bias).
#include "calibrate/ops/driver_util.hpp"

namespace dtsim::ops::detail {

void build_linear(PlanBuilder& b) {
  const auto& l = b.layer();
  const auto& s = l.src_shapes.front();
  add_token_matmuls(b, tokens_md(s), l.dst_shape.c, l.params.seq.bias);
}

// Shared with lm_head: the inner products of a {tokens, in} src to `out` features.
void add_token_matmuls(PlanBuilder& b, const memory::desc& src_plain, memory::dim out, bool has_bias, Role dst_role) {
  using IF = dnnl::inner_product_forward;
  using ID = dnnl::inner_product_backward_data;
  using IW = dnnl::inner_product_backward_weights;
  using tag = memory::format_tag;
  const auto f32 = memory::data_type::f32;
  const memory::dim tokens = src_plain.dims()[0], in = src_plain.dims()[1];
  const memory::desc dst({tokens, out}, f32, tag::ab), wei({out, in}, f32, tag::any), bias({out}, f32, tag::a);
  // PyTorch's nn.Linear stores W as [out, in]: the trainer's plain layout.
  b.param(Role::WEIGHTS, memory::desc({out, in}, f32, tag::ab));
  if (has_bias) b.param(Role::BIAS, bias);
  const IF::primitive_desc fwd(has_bias ? IF::desc(dnnl::prop_kind::forward_training, src_plain, wei, bias, dst)
                                        : IF::desc(dnnl::prop_kind::forward_training, src_plain, wei, dst),
                               b.engine());
  const std::size_t src_t = b.tensor(Role::SRC, src_plain), dst_t = b.tensor(dst_role, dst);
  Args fa{{DNNL_ARG_SRC, src_t}, {DNNL_ARG_WEIGHTS, b.tensor(Role::WEIGHTS, fwd.weights_desc())}, {DNNL_ARG_DST, dst_t}};
  if (has_bias) fa.emplace_back(DNNL_ARG_BIAS, b.tensor(Role::BIAS, bias));
  b.step(Stage::FWD, IF(fwd), std::move(fa), fwd.impl_info_str());
  if (b.problem().bwd_data) {
    const ID::primitive_desc bd(ID::desc(src_plain, wei, dst), b.engine(), fwd);
    b.step(Stage::BWD_DATA, ID(bd),
           {{DNNL_ARG_DIFF_SRC, b.tensor(Role::DIFF_SRC, src_plain)},
            {DNNL_ARG_WEIGHTS, b.tensor(Role::WEIGHTS, bd.weights_desc())},
            {DNNL_ARG_DIFF_DST, b.tensor(Role::DIFF_DST, dst)}},
           bd.impl_info_str());
  }
  const IW::primitive_desc bw(has_bias ? IW::desc(src_plain, wei, bias, dst) : IW::desc(src_plain, wei, dst), b.engine(),
                              fwd);
  Args wa{{DNNL_ARG_SRC, src_t},
          {DNNL_ARG_DIFF_WEIGHTS, b.tensor(Role::DIFF_WEIGHTS, bw.diff_weights_desc())},
          {DNNL_ARG_DIFF_DST, b.tensor(Role::DIFF_DST, dst)}};
  if (has_bias) wa.emplace_back(DNNL_ARG_DIFF_BIAS, b.tensor(Role::DIFF_BIAS, bias));
  b.step(Stage::BWD_WEIGHTS, IW(bw), std::move(wa), bw.impl_info_str());
}

}  // namespace dtsim::ops::detail
