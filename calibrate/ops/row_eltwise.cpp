// The elementwise row ops over a token-major {tokens, features} tensor: gelu (tanh form: oneDNN
// eltwise_gelu_tanh forward and backward), swiglu (silu(gate) * up of a fused [gate, up] tensor: an
// eltwise_swish and a binary multiply forward; two multiplies and the swish backward), residual_add
// (a sum; backward accumulates diff_dst into input 0's gradient as the CNN add) and hidden_dropout
// (a multiply by a pre-drawn, scaled MASK, forward and backward).
#include "calibrate/ops/driver_util.hpp"

namespace dtsim::ops::detail {

void build_gelu(PlanBuilder& b) {
  eltwise_steps(b, tokens_md(b.layer().src_shapes.front()), dnnl::algorithm::eltwise_gelu_tanh);
}

void build_swiglu(PlanBuilder& b) {
  using EF = dnnl::eltwise_forward;
  using EB = dnnl::eltwise_backward;
  const auto f32 = memory::data_type::f32;
  const memory::desc tokens = tokens_md(b.layer().src_shapes.front());
  const memory::dim T = tokens.dims()[0], F = tokens.dims()[1] / 2;
  // The fused [gate, up] tensor {T, 2F} is held as its two halves one after the other (logical (t, half, f),
  // physical half-major), as Hugging Face's separate gate_proj and up_proj outputs are: both halves are
  // dense, which oneDNN 2.6's binary primitive needs (it hangs creating one over a strided column view).
  const memory::desc fused({T, 2, F}, f32, memory::dims{F, T * F, 1});
  const memory::desc part({T, F}, f32, memory::format_tag::ab);
  const std::size_t half_B = static_cast<std::size_t>(T * F) * sizeof(float);
  const std::size_t src = b.tensor(Role::SRC, fused);
  const std::size_t gate = b.view(src, part, 0, Role::SRC, 0), up = b.view(src, part, half_B, Role::SRC, 0);
  const std::size_t silu = b.tensor(Role::WORKSPACE, part), dst = b.tensor(Role::DST, part);
  const auto swish = dnnl::algorithm::eltwise_swish;  // x * sigmoid(alpha x), alpha = 1: SiLU
  const EF::primitive_desc act(EF::desc(dnnl::prop_kind::forward_training, swish, part, 1.f, 0.f), b.engine());
  b.step(Stage::FWD, EF(act), {{DNNL_ARG_SRC, gate}, {DNNL_ARG_DST, silu}}, act.impl_info_str());
  const dnnl::binary::primitive_desc mul(dnnl::binary::desc(dnnl::algorithm::binary_mul, part, part, part), b.engine());
  b.step(Stage::FWD, dnnl::binary(mul), {{DNNL_ARG_SRC_0, silu}, {DNNL_ARG_SRC_1, up}, {DNNL_ARG_DST, dst}},
         mul.impl_info_str());
  if (!b.problem().bwd_data) return;
  const std::size_t diff = b.tensor(Role::DIFF_SRC, fused), dy = b.tensor(Role::DIFF_DST, part);
  const std::size_t d_gate = b.view(diff, part, 0, Role::DIFF_SRC, 0), d_up = b.view(diff, part, half_B, Role::DIFF_SRC, 0);
  const std::size_t d_silu = b.tensor(Role::WORKSPACE, part, 1);
  b.step(Stage::BWD_DATA, dnnl::binary(mul), {{DNNL_ARG_SRC_0, dy}, {DNNL_ARG_SRC_1, silu}, {DNNL_ARG_DST, d_up}},
         mul.impl_info_str());
  b.step(Stage::BWD_DATA, dnnl::binary(mul), {{DNNL_ARG_SRC_0, dy}, {DNNL_ARG_SRC_1, up}, {DNNL_ARG_DST, d_silu}},
         mul.impl_info_str());
  const EB::primitive_desc act_b(EB::desc(swish, part, part, 1.f, 0.f), b.engine(), act);
  b.step(Stage::BWD_DATA, EB(act_b), {{DNNL_ARG_SRC, gate}, {DNNL_ARG_DIFF_DST, d_silu}, {DNNL_ARG_DIFF_SRC, d_gate}},
         act_b.impl_info_str());
}

void build_residual_add(PlanBuilder& b) {
  const memory::desc data = tokens_md(b.layer().dst_shape);
  const dnnl::sum::primitive_desc sum(data, {1.f, 1.f}, {data, data}, b.engine());
  b.step(Stage::FWD, dnnl::sum(sum),
         {{DNNL_ARG_MULTIPLE_SRC, b.tensor(Role::SRC, data, 0)}, {DNNL_ARG_MULTIPLE_SRC + 1, b.tensor(Role::SRC, data, 1)},
          {DNNL_ARG_DST, b.tensor(Role::DST, data)}},
         sum.impl_info_str());
  if (!b.problem().bwd_data) return;
  const std::size_t acc = b.tensor(Role::DIFF_SRC, data, 0);
  b.step(Stage::BWD_DATA, dnnl::sum(sum),
         {{DNNL_ARG_MULTIPLE_SRC, acc}, {DNNL_ARG_MULTIPLE_SRC + 1, b.tensor(Role::DIFF_DST, data)}, {DNNL_ARG_DST, acc}},
         sum.impl_info_str());
}

void build_hidden_dropout(PlanBuilder& b) { mask_multiply_steps(b, tokens_md(b.layer().src_shapes.front())); }

}  // namespace dtsim::ops::detail
