// attention (a row op): the core softmax(Q K^T / sqrt(d) + causal mask) V of a fused token-major QKV
// tensor {tokens, 3 x heads x d}, as oneDNN batched matmuls over (batch, head) on strided views of it,
// a softmax, and (with dropout) a multiply by a pre-drawn scaled MASK. The s x s scores and
// probabilities are materialised, as PyTorch 1.13's eager attention (and dtsim's dense row) keeps them.
// Backward (one stage): dV = P'^T dO, dP' = dO V^T (times the mask), dS = softmax backward, dQ = dS K / sqrt(d),
// dK = dS^T Q / sqrt(d). A CPU has no fused (flash) kernel here: a flash layer times the same kernels.
// Multi-head only: grouped/multi-query layers (kv_heads < heads) have no driver (supports_attention).
#include <fmt/format.h>

#include <cmath>

#include "calibrate/ops/driver_util.hpp"
#include "common/errors.hpp"

namespace dtsim::ops::detail {

bool supports_attention(const models::Layer& layer) {
  const auto& p = layer.params.seq;
  return p.kv_heads == 0 || p.kv_heads == p.heads;
}

void build_attention(PlanBuilder& b) {
  const auto& l = b.layer();
  const auto& p = l.params.seq;
  if (!supports_attention(l))
    throw InputError(fmt::format("layer '{}': the oneDNN attention driver is multi-head only (kv_heads {} < heads {})",
                                 l.name, p.kv_heads, p.heads));
  const auto f32 = memory::data_type::f32;
  const auto& s_shape = l.src_shapes.front();
  const memory::dim B = s_shape.n, S = s_shape.h, C = s_shape.c, A = p.heads, H = l.dst_shape.c, D = H / A;
  const bool drop = p.dropout > 0;
  const float scale = 1.f / std::sqrt(static_cast<float>(D));
  const std::size_t F = sizeof(float);
  // Views: [B, A, S, D] of Q, K, V inside the fused src (K^T as [B, A, D, S]), O inside dst [B*S, H].
  const memory::desc heads_in({B, A, S, D}, f32, memory::dims{S * C, D, C, 1});
  const memory::desc heads_in_t({B, A, D, S}, f32, memory::dims{S * C, D, 1, C});
  const memory::desc heads_out({B, A, S, D}, f32, memory::dims{S * H, D, H, 1});
  const memory::desc scores({B, A, S, S}, f32, memory::format_tag::abcd);
  const memory::desc scores_t({B, A, S, S}, f32, memory::dims{A * S * S, S * S, 1, S});
  const memory::desc mask_md({1, 1, S, S}, f32, memory::format_tag::abcd);

  const std::size_t src = b.tensor(Role::SRC, tokens_md(s_shape));
  const std::size_t q = b.view(src, heads_in, 0, Role::SRC, 0);
  const std::size_t kt = b.view(src, heads_in_t, H * F, Role::SRC, 0);
  const std::size_t k = b.view(src, heads_in, H * F, Role::SRC, 0);
  const std::size_t v = b.view(src, heads_in, 2 * H * F, Role::SRC, 0);
  const std::size_t dst = b.tensor(Role::DST, tokens_md(l.dst_shape));
  const std::size_t o = b.view(dst, heads_out, 0, Role::DST, 0);
  const std::size_t probs = b.tensor(Role::WORKSPACE, scores, 0);
  const std::size_t probs_t = b.view(probs, scores_t, 0, Role::WORKSPACE, 0);
  const std::size_t dropped = drop ? b.tensor(Role::WORKSPACE, scores, 1) : probs;
  const std::size_t dropped_t = drop ? b.view(dropped, scores_t, 0, Role::WORKSPACE, 1) : probs_t;
  const std::size_t mask = drop ? b.tensor(Role::MASK, scores) : 0;

  // S = Q K^T / sqrt(d), + the causal mask (a broadcast binary add, in place: as a matmul post-op it sends
  // oneDNN 2.6 to its reference matmul), softmax in place, (dropout), O = P' V.
  dnnl::primitive_attr qk_attr;
  qk_attr.set_output_scales(0, {scale});
  const dnnl::matmul::primitive_desc qk(dnnl::matmul::desc(heads_in, heads_in_t, scores), qk_attr, b.engine());
  b.step(Stage::FWD, dnnl::matmul(qk), {{DNNL_ARG_SRC, q}, {DNNL_ARG_WEIGHTS, kt}, {DNNL_ARG_DST, probs}},
         qk.impl_info_str());
  if (p.causal) {
    const dnnl::binary::primitive_desc add(dnnl::binary::desc(dnnl::algorithm::binary_add, scores, mask_md, scores),
                                           b.engine());
    b.step(Stage::FWD, dnnl::binary(add),
           {{DNNL_ARG_SRC_0, probs}, {DNNL_ARG_SRC_1, b.tensor(Role::ATTN_MASK, mask_md)}, {DNNL_ARG_DST, probs}},
           add.impl_info_str());
  }
  using SF = dnnl::softmax_forward;
  const SF::primitive_desc sm(SF::desc(dnnl::prop_kind::forward_training, scores, 3), b.engine());
  b.step(Stage::FWD, SF(sm), {{DNNL_ARG_SRC, probs}, {DNNL_ARG_DST, probs}}, sm.impl_info_str());
  const dnnl::binary::primitive_desc mul(dnnl::binary::desc(dnnl::algorithm::binary_mul, scores, scores, scores),
                                         b.engine());
  if (drop)
    b.step(Stage::FWD, dnnl::binary(mul), {{DNNL_ARG_SRC_0, probs}, {DNNL_ARG_SRC_1, mask}, {DNNL_ARG_DST, dropped}},
           mul.impl_info_str());
  const dnnl::matmul::primitive_desc pv(dnnl::matmul::desc(scores, heads_in, heads_out), b.engine());
  b.step(Stage::FWD, dnnl::matmul(pv), {{DNNL_ARG_SRC, dropped}, {DNNL_ARG_WEIGHTS, v}, {DNNL_ARG_DST, o}},
         pv.impl_info_str());
  if (!b.problem().bwd_data) return;

  const std::size_t diff_dst = b.tensor(Role::DIFF_DST, tokens_md(l.dst_shape));
  const std::size_t d_o = b.view(diff_dst, heads_out, 0, Role::DIFF_DST, 0);
  const std::size_t diff_src = b.tensor(Role::DIFF_SRC, tokens_md(s_shape));
  const std::size_t d_q = b.view(diff_src, heads_in, 0, Role::DIFF_SRC, 0);
  const std::size_t d_k = b.view(diff_src, heads_in, H * F, Role::DIFF_SRC, 0);
  const std::size_t d_v = b.view(diff_src, heads_in, 2 * H * F, Role::DIFF_SRC, 0);
  const std::size_t vt = b.view(src, heads_in_t, 2 * H * F, Role::SRC, 0);
  const std::size_t d_probs = b.tensor(Role::WORKSPACE, scores, 2);
  const std::size_t d_scores = b.tensor(Role::WORKSPACE, scores, 3);
  const std::size_t d_scores_t = b.view(d_scores, scores_t, 0, Role::WORKSPACE, 3);
  // dV = P'^T dO
  const dnnl::matmul::primitive_desc dv(dnnl::matmul::desc(scores_t, heads_out, heads_in), b.engine());
  b.step(Stage::BWD_DATA, dnnl::matmul(dv), {{DNNL_ARG_SRC, dropped_t}, {DNNL_ARG_WEIGHTS, d_o}, {DNNL_ARG_DST, d_v}},
         dv.impl_info_str());
  // dP' = dO V^T (then times the mask)
  const dnnl::matmul::primitive_desc dp(dnnl::matmul::desc(heads_out, heads_in_t, scores), b.engine());
  b.step(Stage::BWD_DATA, dnnl::matmul(dp), {{DNNL_ARG_SRC, d_o}, {DNNL_ARG_WEIGHTS, vt}, {DNNL_ARG_DST, d_probs}},
         dp.impl_info_str());
  if (drop)
    b.step(Stage::BWD_DATA, dnnl::binary(mul), {{DNNL_ARG_SRC_0, d_probs}, {DNNL_ARG_SRC_1, mask}, {DNNL_ARG_DST, d_probs}},
           mul.impl_info_str());
  using SB = dnnl::softmax_backward;
  const SB::primitive_desc smb(SB::desc(scores, scores, 3), b.engine(), sm);
  b.step(Stage::BWD_DATA, SB(smb), {{DNNL_ARG_DST, probs}, {DNNL_ARG_DIFF_DST, d_probs}, {DNNL_ARG_DIFF_SRC, d_scores}},
         smb.impl_info_str());
  // dQ = dS K / sqrt(d), dK = dS^T Q / sqrt(d)
  dnnl::primitive_attr scaled;
  scaled.set_output_scales(0, {scale});
  const dnnl::matmul::primitive_desc dq(dnnl::matmul::desc(scores, heads_in, heads_in), scaled, b.engine());
  b.step(Stage::BWD_DATA, dnnl::matmul(dq), {{DNNL_ARG_SRC, d_scores}, {DNNL_ARG_WEIGHTS, k}, {DNNL_ARG_DST, d_q}},
         dq.impl_info_str());
  const dnnl::matmul::primitive_desc dk(dnnl::matmul::desc(scores_t, heads_in, heads_in), scaled, b.engine());
  b.step(Stage::BWD_DATA, dnnl::matmul(dk), {{DNNL_ARG_SRC, d_scores_t}, {DNNL_ARG_WEIGHTS, q}, {DNNL_ARG_DST, d_k}},
         dk.impl_info_str());
}

}  // namespace dtsim::ops::detail
