// The transformer ops, one row each: fields, shape rule and cost rule (FLOPs with a multiply-add = 2,
// FP32 bytes, whole batch), plus what each keeps for backward. Derivations: models/README.md.
#include "models/op_rows.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "common/errors.hpp"

namespace dtsim::models {
namespace {

using Type = RowField::Type;

constexpr double FP32_B = 4.0;
// Largest tensor or parameter count (the same bound as models/src/model.cpp).
constexpr std::int64_t MAX_ELEMENTS = std::int64_t{1} << 46;
constexpr std::int64_t MAX_EXPERTS = 1 << 12;
constexpr double INT64_B = 8.0;  // token ids are int64 (PyTorch's index type)

// FLOPs per element (derivations in models/README.md, "Transformer ops").
constexpr double LN_FWD_FLOPS = 7;        // sum x, sum x^2 (FMA), xhat = x*rstd - mean*rstd (FMA), y = xhat*g + b (FMA)
constexpr double LN_BWD_DATA_FLOPS = 10;  // g*dy, two sums (1 + FMA), xhat again (FMA), rstd*(gdy - m1 - xhat*m2)
constexpr double LN_BWD_WEIGHTS_FLOPS = 3;  // dgamma = sum dy*xhat (FMA), dbeta = sum dy
constexpr double RMS_FWD_FLOPS = 4;         // sum x^2 (FMA), y = x*rstd*g (2 multiplies)
constexpr double RMS_BWD_DATA_FLOPS = 6;    // g*dy, sum(g*dy*x) (FMA), rstd*gdy - x*c (mul + FMA)
constexpr double RMS_BWD_WEIGHTS_FLOPS = 3;  // dgamma = sum dy*x*rstd
// GELU, tanh form: x^2, x^3, FMA(0.044715, x^3, x), * sqrt(2/pi), tanh, 1 + t, 0.5*x*(..) = 9.
constexpr double GELU_FWD_FLOPS = 9;
// Recompute up to tanh (6), 1 - t^2 (FMA), du/dx (FMA + mul), 0.5(1+t) + 0.5 x (1-t^2) du/dx (6), * dy.
constexpr double GELU_BWD_FLOPS = 18;
constexpr double SWIGLU_FWD_FLOPS = 5;   // sigmoid (exp, add, divide), * g, * u
constexpr double SWIGLU_BWD_FLOPS = 11;  // sigmoid again (3), silu, du = dy*silu, dsilu/dg (4), dg = dy*u*dsilu (2)
constexpr double ROPE_FLOPS = 3;         // x*cos + rotate_half(x)*sin: a multiply and an FMA per element
constexpr double SOFTMAX_FWD_FLOPS = 5;  // max, subtract, exp, sum, divide
constexpr double SOFTMAX_BWD_FLOPS = 4;  // sum(dp*p) (FMA), dp - sum, * p
constexpr double SOFTMAX_LSE_RECOMPUTE_FLOPS = 2;  // flash backward: p = exp(s - lse)
constexpr double DROPOUT_FWD_FLOPS = 2, DROPOUT_BWD_FLOPS = 1;  // compare + scale; scale
constexpr double XENT_BWD_FLOPS = 2;      // (p - onehot) / n
constexpr double TANH_BWD_FLOPS = 3;      // dy*(1 - y*y)

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw InputError(fmt::format("{}: {}", where, what));
}

std::int64_t mul(std::int64_t a, std::int64_t b, const std::string& where) {
  if (a < 0 || b < 0) fail(where, "negative size");
  if (a != 0 && b > MAX_ELEMENTS / a)
    fail(where, fmt::format("tensor or parameter count too large (limit {} elements)", MAX_ELEMENTS));
  return a * b;
}

std::int64_t positive(std::int64_t v, std::string_view field, const std::string& where) {
  if (v < 1) fail(where, fmt::format("field '{}' must be >= 1, got {}", field, v));
  if (v > MAX_ELEMENTS) fail(where, fmt::format("field '{}' must be <= {}, got {}", field, MAX_ELEMENTS, v));
  return v;
}

// A sequence tensor [batch, hidden, seq, 1].
const Shape& sequence_src(const Layer& l, std::size_t i, const std::string& where) {
  const Shape& s = l.src_shapes.at(i);
  if (s.w != 1)
    fail(where, fmt::format("{} takes a sequence tensor batch x hidden x seq x 1, but input '{}' is {}",
                            op_name(l), l.inputs.at(i), to_string(s)));
  return s;
}

double el(const Shape& s) { return static_cast<double>(s.elements()); }

void set_dst(Layer& l, const Shape& dst, const std::string& where) {
  mul(mul(mul(dst.n, dst.c, where), dst.h, where), dst.w, where);
  l.dst_shape = dst;
  l.costs.activation_bytes = FP32_B * el(dst);
  l.costs.weight_bytes = FP32_B * static_cast<double>(l.costs.params);
}

// GEMM-like bookkeeping: bwd-data reads dy and W and writes dx; bwd-weights reads x and dy and writes dW.
void gemm_bytes(Layer& l, double src_el, double dst_el, double weights) {
  l.costs.fwd_bytes = FP32_B * (src_el + weights + dst_el);
  l.row_bytes.bwd_data = l.needs_data_grad ? FP32_B * (dst_el + weights + src_el) : 0.0;
  l.row_bytes.bwd_weights = FP32_B * (src_el + dst_el + weights);
  l.costs.bwd_bytes = l.row_bytes.bwd_data + l.row_bytes.bwd_weights;
}

// Elementwise-like bookkeeping (one backward kernel): fwd and bwd traffic in elements.
void fused_bytes(Layer& l, double fwd_el, double bwd_el) {
  l.costs.fwd_bytes = FP32_B * fwd_el;
  l.row_bytes.bwd_data = FP32_B * bwd_el;
  l.costs.bwd_bytes = l.row_bytes.bwd_data;
}

// --- rows ------------------------------------------------------------------------------------------

void infer_embedding(Layer& l, const std::string& where) {
  const SeqParams& p = l.params.seq;
  const Shape& src = sequence_src(l, 0, where);
  if (src.c != 1) fail(where, fmt::format("embedding takes token ids batch x 1 x seq x 1, got {}", to_string(src)));
  const std::int64_t vocab = positive(p.vocab, "vocab", where), hidden = positive(p.hidden, "hidden", where);
  if (p.positions < 0 || p.token_types < 0) fail(where, "fields 'positions' and 'token_types' must be >= 0");
  if (p.positions > 0 && src.h > p.positions)
    fail(where, fmt::format("sequence length {} exceeds the {} learned positions", src.h, p.positions));
  const double tables = 1.0 + (p.positions > 0) + (p.token_types > 0);
  l.costs.params = mul(vocab + p.positions + p.token_types, hidden, where);
  set_dst(l, Shape{src.n, hidden, src.h, 1}, where);
  const double e = el(l.dst_shape), tokens = el(src);
  l.costs.fwd_flops = (tables - 1) * e;  // gathers, then adds of the position/segment rows
  l.costs.bwd_weights_flops = tables * e;  // scatter-add of dy into each table
  l.costs.fwd_bytes = FP32_B * (tokens + tables * e + e);
  l.row_bytes.bwd_weights = FP32_B * (e + 2 * tables * e + static_cast<double>(l.costs.params));  // + zeroed dW
  l.costs.bwd_bytes = l.row_bytes.bwd_weights;
  l.saved.fixed_bytes = INT64_B * tokens;
}

void infer_linear(Layer& l, const std::string& where) {
  const SeqParams& p = l.params.seq;
  const Shape& src = sequence_src(l, 0, where);
  const std::int64_t out = positive(p.out_features, "out_features", where);
  l.costs.params = mul(src.c, out, where) + (p.bias ? out : 0);
  set_dst(l, Shape{src.n, out, src.h, 1}, where);
  const double tokens = static_cast<double>(src.n) * static_cast<double>(src.h);
  const double macs = tokens * static_cast<double>(src.c) * static_cast<double>(out);
  const double bias = p.bias ? tokens * static_cast<double>(out) : 0.0;
  l.costs.fwd_flops = 2 * macs + bias;
  l.costs.bwd_data_flops = l.needs_data_grad ? 2 * macs : 0.0;
  l.costs.bwd_weights_flops = 2 * macs + bias;
  gemm_bytes(l, el(src), el(l.dst_shape), static_cast<double>(l.costs.params));
  l.saved.gemm_input_elements = el(src);
}

void infer_norm(Layer& l, const std::string& where, bool rms) {
  const Shape& src = sequence_src(l, 0, where);
  const bool bias = !rms && l.params.seq.bias;
  l.costs.params = mul(src.c, bias ? 2 : 1, where);
  set_dst(l, src, where);
  const double e = el(src), tokens = static_cast<double>(src.n) * static_cast<double>(src.h);
  l.costs.fwd_flops = (rms ? RMS_FWD_FLOPS : LN_FWD_FLOPS) * e;
  l.costs.bwd_data_flops = l.needs_data_grad ? (rms ? RMS_BWD_DATA_FLOPS : LN_BWD_DATA_FLOPS) * e : 0.0;
  l.costs.bwd_weights_flops = (rms ? RMS_BWD_WEIGHTS_FLOPS : LN_BWD_WEIGHTS_FLOPS) * e;
  const double w = static_cast<double>(l.costs.params);
  fused_bytes(l, 2 * e + w, 3 * e + 2 * w);  // x, dy, dx, gamma (and beta) and their gradients
  l.saved.act_elements = e;
  l.saved.fixed_bytes = FP32_B * tokens * (rms ? 1 : 2);  // rstd (and mean)
}

void infer_layer_norm(Layer& l, const std::string& where) { infer_norm(l, where, false); }
void infer_rms_norm(Layer& l, const std::string& where) { infer_norm(l, where, true); }

struct Heads {
  std::int64_t q, kv, dim;
};

// Heads of a fused QKV tensor of `channels` = (q + 2 kv) x head_dim.
Heads qkv_heads(const SeqParams& p, std::int64_t channels, const std::string& where) {
  const std::int64_t q = positive(p.heads, "heads", where);
  const std::int64_t kv = p.kv_heads == 0 ? q : p.kv_heads;
  if (kv < 1 || kv > q || q % kv != 0)
    fail(where, fmt::format("kv_heads must divide heads ({}), got {}", q, p.kv_heads));
  if (channels % (q + 2 * kv) != 0)
    fail(where, fmt::format("input channels {} are not (heads + 2 kv_heads) x head_dim = ({} + 2x{}) x d", channels, q,
                            kv));
  return {q, kv, channels / (q + 2 * kv)};
}

void infer_rotary(Layer& l, const std::string& where) {
  const Shape& src = sequence_src(l, 0, where);
  const Heads h = qkv_heads(l.params.seq, src.c, where);
  set_dst(l, src, where);
  const double tokens = static_cast<double>(src.n) * static_cast<double>(src.h);
  const double rotated = tokens * static_cast<double>((h.q + h.kv) * h.dim);  // q and k; v untouched
  const double table = 2.0 * static_cast<double>(src.h) * static_cast<double>(h.dim);  // cos, sin
  l.costs.fwd_flops = ROPE_FLOPS * rotated;
  l.costs.bwd_data_flops = l.needs_data_grad ? ROPE_FLOPS * rotated : 0.0;  // rotation by -theta
  fused_bytes(l, 2 * rotated + table, 2 * rotated + table);
  // Nothing saved: cos/sin are constants and the backward is the inverse rotation of dy.
}

void infer_attention(Layer& l, const std::string& where) {
  const SeqParams& p = l.params.seq;
  const Shape& src = sequence_src(l, 0, where);
  const Heads h = qkv_heads(p, src.c, where);
  if (!(p.dropout >= 0 && p.dropout < 1)) fail(where, fmt::format("dropout must be in [0, 1), got {}", p.dropout));
  set_dst(l, Shape{src.n, h.q * h.dim, src.h, 1}, where);
  const double b = static_cast<double>(src.n), s = static_cast<double>(src.h), d = static_cast<double>(h.dim);
  const double a = static_cast<double>(h.q);
  // Score pairs per (sample, head): all s^2 (a dense kernel masks after computing), or the causal
  // triangle s(s+1)/2 for a flash kernel that skips masked work.
  // Context parallelism (ring attention): the local queries meet the keys of all cp chunks.
  const double cp = static_cast<double>(std::max<std::int64_t>(1, p.context_parallel));
  const double pairs = (p.flash && p.causal ? s * (s + 1) / 2 : s * s) * cp;
  const double scores = b * a * pairs;
  const double mm = 2 * scores * d;  // one of QK^T, PV
  const bool drop = p.dropout > 0;
  const double qkv = el(src), out = el(l.dst_shape), lse = b * a * s;
  if (p.flash) {
    l.costs.fwd_flops = 2 * mm + (SOFTMAX_FWD_FLOPS + (drop ? DROPOUT_FWD_FLOPS : 0)) * scores;
    // Recomputes S = QK^T and P from the log-sum-exp, then dV, dP, dQ, dK.
    l.costs.bwd_data_flops =
        5 * mm + (SOFTMAX_LSE_RECOMPUTE_FLOPS + SOFTMAX_BWD_FLOPS + (drop ? DROPOUT_BWD_FLOPS : 0)) * scores;
    fused_bytes(l, qkv + out + lse, 2 * qkv + 2 * out + 2 * lse);
    l.saved.act_elements = qkv;  // Q, K, V (O is the out-projection's saved input)
    l.saved.fixed_bytes = FP32_B * lse;
  } else {
    l.costs.fwd_flops = 2 * mm + (SOFTMAX_FWD_FLOPS + (drop ? DROPOUT_FWD_FLOPS : 0)) * scores;
    l.costs.bwd_data_flops = 4 * mm + (SOFTMAX_BWD_FLOPS + (drop ? DROPOUT_BWD_FLOPS : 0)) * scores;
    // S written and read, P written and read (+ dropped P written and read, mask written).
    fused_bytes(l, qkv + out + scores * (drop ? 7.0 : 4.0), 2 * qkv + out + scores * (drop ? 7.0 : 5.0));
    if (drop) {
      l.costs.fwd_bytes += scores;  // the 1-byte mask
      l.costs.bwd_bytes += scores;
      l.row_bytes.bwd_data += scores;
    }
    // Korthikanti et al. 2023: Q, K (4sbh), V (2sbh), softmax output (2as^2b), mask (as^2b), dropout output (2as^2b).
    const double s2 = scores * (drop ? 2.0 : 1.0);
    l.saved.act_elements = qkv + s2;
    l.saved.mask_bytes = drop ? scores : 0.0;
    l.saved.selective_elements = s2;
    l.saved.selective_mask_bytes = l.saved.mask_bytes;
  }
  if (!l.needs_data_grad) {
    l.costs.bwd_data_flops = 0;
    l.costs.bwd_bytes = l.row_bytes.bwd_data = 0;
  }
}

void infer_gelu(Layer& l, const std::string& where) {
  const Shape& src = sequence_src(l, 0, where);
  set_dst(l, src, where);
  const double e = el(src);
  l.costs.fwd_flops = GELU_FWD_FLOPS * e;
  l.costs.bwd_data_flops = GELU_BWD_FLOPS * e;
  fused_bytes(l, 2 * e, 3 * e);
  l.saved.act_elements = e;  // its input
}

void infer_swiglu(Layer& l, const std::string& where) {
  const Shape& src = sequence_src(l, 0, where);
  if (src.c % 2 != 0) fail(where, fmt::format("swiglu takes gate and up halves, but the input has {} channels", src.c));
  set_dst(l, Shape{src.n, src.c / 2, src.h, 1}, where);
  const double e = el(l.dst_shape);
  l.costs.fwd_flops = SWIGLU_FWD_FLOPS * e;
  l.costs.bwd_data_flops = SWIGLU_BWD_FLOPS * e;
  fused_bytes(l, 3 * e, 5 * e);  // fwd: g, u, y; bwd: dy, g, u, dg, du
  l.saved.act_elements = 2 * e;  // g and u
}

void infer_hidden_dropout(Layer& l, const std::string& where) {
  const double ratio = l.params.seq.dropout;
  if (!(ratio > 0 && ratio < 1)) fail(where, fmt::format("field 'dropout' must be in (0, 1), got {}", ratio));
  const Shape& src = sequence_src(l, 0, where);
  set_dst(l, src, where);
  const double e = el(src);
  l.costs.fwd_flops = DROPOUT_FWD_FLOPS * e;
  l.costs.bwd_data_flops = DROPOUT_BWD_FLOPS * e;
  fused_bytes(l, 2 * e, 2 * e);
  l.costs.fwd_bytes += e;  // mask written (1 byte each)
  l.costs.bwd_bytes += e;
  l.row_bytes.bwd_data += e;
  l.saved.mask_bytes = e;
}

void infer_residual_add(Layer& l, const std::string& where) {
  const Shape& a = sequence_src(l, 0, where);
  const Shape& b = sequence_src(l, 1, where);
  if (!(a == b))
    fail(where, fmt::format("residual_add needs inputs of one shape, but '{}' is {} and '{}' is {}", l.inputs[0],
                            to_string(a), l.inputs[1], to_string(b)));
  set_dst(l, a, where);
  const double e = el(a);
  l.costs.fwd_flops = e;
  fused_bytes(l, 3 * e, 3 * e);  // dy passes to both inputs unchanged: no arithmetic
}

void infer_moe_router(Layer& l, const std::string& where) {
  const SeqParams& p = l.params.seq;
  const Shape& src = sequence_src(l, 0, where);
  const std::int64_t x = positive(p.experts, "experts", where);
  if (x > MAX_EXPERTS) fail(where, fmt::format("field 'experts' must be <= {}, got {}", MAX_EXPERTS, x));
  if (p.top_k < 1 || p.top_k > x) fail(where, fmt::format("field 'top_k' must be in 1..{}, got {}", x, p.top_k));
  l.costs.params = mul(src.c, x, where);  // no bias (Mixtral's gate)
  set_dst(l, Shape{src.n, x, src.h, 1}, where);
  const double tokens = static_cast<double>(src.n) * static_cast<double>(src.h);
  const double macs = tokens * static_cast<double>(src.c) * static_cast<double>(x);
  const double logits = tokens * static_cast<double>(x);
  l.costs.fwd_flops = 2 * macs + SOFTMAX_FWD_FLOPS * logits + static_cast<double>(p.top_k) * logits;  // + top-k scans
  l.costs.bwd_data_flops = l.needs_data_grad ? 2 * macs + SOFTMAX_BWD_FLOPS * logits : 0.0;
  l.costs.bwd_weights_flops = 2 * macs;
  gemm_bytes(l, el(src), logits, static_cast<double>(l.costs.params));
  l.saved.gemm_input_elements = el(src);
  l.saved.fixed_bytes = FP32_B * logits;  // routing probabilities
}

void infer_moe_experts(Layer& l, const std::string& where) {
  const SeqParams& p = l.params.seq;
  const Shape& src = sequence_src(l, 0, where);
  const Shape& router = sequence_src(l, 1, where);
  const std::int64_t x = positive(p.experts, "experts", where), f = positive(p.ffn, "ffn", where);
  if (p.top_k < 1 || p.top_k > x) fail(where, fmt::format("field 'top_k' must be in 1..{}, got {}", x, p.top_k));
  const std::int64_t ep = std::max<std::int64_t>(1, p.expert_parallel);
  if (x % ep != 0) fail(where, fmt::format("expert parallelism {} must divide the {} experts", ep, x));
  const std::int64_t local = x / ep;  // experts on this rank; it computes its share of every rank's tokens
  if (router.c != x || router.n != src.n || router.h != src.h)
    fail(where, fmt::format("the second input must be the router's batch x {} x seq x 1 output, got {}", x,
                            to_string(router)));
  const std::int64_t h = src.c;
  l.costs.params = mul(local, mul(3, mul(h, f, where), where), where);  // gate, up, down per expert, no bias
  set_dst(l, src, where);
  const double tokens = static_cast<double>(src.n) * static_cast<double>(src.h);
  const double routed = tokens * static_cast<double>(p.top_k);  // token copies sent to experts
  const double hd = static_cast<double>(h), fd = static_cast<double>(f);
  const double macs = routed * 3 * hd * fd;
  l.costs.fwd_flops = 2 * macs + SWIGLU_FWD_FLOPS * routed * fd + 2 * routed * hd;  // + weighted combine
  l.costs.bwd_data_flops = 2 * macs + SWIGLU_BWD_FLOPS * routed * fd + 3 * routed * hd;  // + combine (dx, dweight)
  l.costs.bwd_weights_flops = 2 * macs;
  const double w = static_cast<double>(l.costs.params);
  // Tokens in, dispatched copies, every expert's weights, gate/up and SwiGLU outputs, combined out.
  l.costs.fwd_bytes = FP32_B * (2 * tokens * hd + routed * hd + w + 3 * routed * fd + routed * hd);
  l.row_bytes.bwd_data = FP32_B * (tokens * hd + 2 * routed * hd + w + 5 * routed * fd + tokens * hd);
  l.row_bytes.bwd_weights = FP32_B * (routed * hd + 3 * routed * fd + routed * hd + w);
  l.costs.bwd_bytes = l.row_bytes.bwd_data + l.row_bytes.bwd_weights;
  // Dispatched tokens and SwiGLU outputs are GEMM inputs; gate/up outputs feed SwiGLU's backward.
  l.saved.gemm_input_elements = routed * (hd + fd);
  l.saved.act_elements = routed * 2 * fd;
  l.saved.fixed_bytes = FP32_B * routed;  // combine weights
}

void infer_lm_head(Layer& l, const std::string& where) {
  const SeqParams& p = l.params.seq;
  const Shape& src = sequence_src(l, 0, where);
  const std::int64_t v = positive(p.vocab, "vocab", where);
  l.costs.params = (p.tied ? 0 : mul(src.c, v, where)) + (p.head_bias ? v : 0);
  set_dst(l, Shape{src.n, v, src.h, 1}, where);
  const double tokens = static_cast<double>(src.n) * static_cast<double>(src.h);
  const double logits = el(l.dst_shape);
  const double macs = logits * static_cast<double>(src.c);
  const double bias = p.head_bias ? logits : 0.0;
  l.costs.fwd_flops = 2 * macs + bias + SOFTMAX_FWD_FLOPS * logits;  // logits, softmax cross-entropy
  l.costs.bwd_data_flops = l.needs_data_grad ? 2 * macs + XENT_BWD_FLOPS * logits : 0.0;
  l.costs.bwd_weights_flops = 2 * macs + bias;  // into the embedding's gradient when tied
  const double w = static_cast<double>(mul(src.c, v, where));  // read even when tied
  gemm_bytes(l, el(src), logits, w);
  l.costs.fwd_bytes += FP32_B * (logits + tokens);  // softmax pass over the logits, labels
  l.saved.gemm_input_elements = el(src);
  l.saved.fixed_bytes = FP32_B * logits + INT64_B * tokens;  // FP32 logits for the loss backward, labels
}

void infer_gather_tokens(Layer& l, const std::string& where) {
  const Shape& src = sequence_src(l, 0, where);
  const std::int64_t keep = positive(l.params.seq.keep_tokens, "keep_tokens", where);
  if (keep > src.h)
    fail(where, fmt::format("field 'keep_tokens' {} exceeds the sequence length {}", keep, src.h));
  set_dst(l, Shape{src.n, src.c, keep, 1}, where);
  const double out = el(l.dst_shape), picked = static_cast<double>(src.n) * static_cast<double>(keep);
  // Forward reads the kept rows and their int64 indices and writes them out; backward zero-fills dx over
  // the whole sequence and scatters dy into it (no arithmetic either way).
  l.costs.fwd_bytes = FP32_B * 2 * out + INT64_B * picked;
  l.row_bytes.bwd_data = l.needs_data_grad ? FP32_B * (el(src) + 2 * out) + INT64_B * picked : 0.0;
  l.costs.bwd_bytes = l.row_bytes.bwd_data;
  l.saved.fixed_bytes = INT64_B * picked;  // the indices
}

void infer_patch_embed(Layer& l, const std::string& where) {
  const SeqParams& p = l.params.seq;
  const Shape& src = l.src_shapes.front();
  const std::int64_t hidden = positive(p.hidden, "hidden", where), patch = positive(p.patch, "patch", where);
  if (src.h % patch != 0 || src.w % patch != 0)
    fail(where, fmt::format("image {}x{} is not a whole number of {}x{} patches", src.h, src.w, patch, patch));
  const std::int64_t patches = (src.h / patch) * (src.w / patch);
  const std::int64_t seq = patches + (p.cls_token ? 1 : 0);
  const std::int64_t per_patch = mul(src.c, mul(patch, patch, where), where);
  // Patch projection (a stride-p convolution) + bias, class token, learned positions.
  l.costs.params = mul(per_patch, hidden, where) + hidden + (p.cls_token ? hidden : 0) + mul(seq, hidden, where);
  set_dst(l, Shape{src.n, hidden, seq, 1}, where);
  const double b = static_cast<double>(src.n);
  const double macs = b * static_cast<double>(patches) * static_cast<double>(per_patch) * static_cast<double>(hidden);
  const double adds = b * static_cast<double>(patches) * static_cast<double>(hidden) + el(l.dst_shape);  // bias, positions
  l.costs.fwd_flops = 2 * macs + adds;
  l.costs.bwd_data_flops = l.needs_data_grad ? 2 * macs : 0.0;
  l.costs.bwd_weights_flops = 2 * macs + adds;
  gemm_bytes(l, el(src), el(l.dst_shape), static_cast<double>(l.costs.params));
  l.saved.gemm_input_elements = el(src);  // the image, for dW
}

void infer_cls_head(Layer& l, const std::string& where) {
  const SeqParams& p = l.params.seq;
  const Shape& src = sequence_src(l, 0, where);
  const std::int64_t classes = positive(p.classes, "classes", where);
  const std::int64_t h = src.c;
  l.costs.params = (p.pooler ? mul(h, h, where) + h : 0) + mul(h, classes, where) + classes;
  set_dst(l, Shape{src.n, classes, 1, 1}, where);
  const double b = static_cast<double>(src.n), hd = static_cast<double>(h), c = static_cast<double>(classes);
  const double pool_macs = p.pooler ? b * hd * hd : 0.0, cls_macs = b * hd * c;
  l.costs.fwd_flops = 2 * pool_macs + (p.pooler ? 2 * b * hd : 0.0) + 2 * cls_macs + b * c + SOFTMAX_FWD_FLOPS * b * c;
  l.costs.bwd_data_flops = l.needs_data_grad ? 2 * pool_macs + (p.pooler ? TANH_BWD_FLOPS * b * hd : 0.0) +
                                                   2 * cls_macs + XENT_BWD_FLOPS * b * c
                                             : 0.0;
  l.costs.bwd_weights_flops = 2 * pool_macs + (p.pooler ? b * hd : 0.0) + 2 * cls_macs + b * c;
  const double first = b * hd;  // the first token of every sample
  gemm_bytes(l, first * (p.pooler ? 2 : 1), b * c, static_cast<double>(l.costs.params));
  l.saved.gemm_input_elements = first * (p.pooler ? 2 : 1);
  l.saved.fixed_bytes = FP32_B * b * c;
}

// --- kernels per pass (tensor-kernel model) ----------------------------------------------------------

using Kind = RowKernel::Kind;
using Kernels = std::vector<RowKernel>;

RowKernel gemm(double m, double n, double k, double calls = 1) {
  RowKernel r;
  r.kind = Kind::GEMM;
  r.m = m, r.n = n, r.k = k, r.calls = calls;
  return r;
}

RowKernel memory(std::string_view op, double bytes) {
  RowKernel r;
  r.kind = Kind::MEMORY;
  r.memory_op = op;
  r.bytes = bytes;
  return r;
}

// A linear map of `tokens` rows from `in` to `out` features (cuBLAS layouts): forward y = x w^T
// (tokens x out over in), backward-data dx = dy w (tokens x in over out), backward-weights dw = dy^T x
// (out x in over the tokens).
void linear_gemms(Kernels& out_k, double tokens, double in, double out, RowPass pass, bool data_grad,
                  double calls = 1) {
  if (pass == RowPass::FWD) out_k.push_back(gemm(tokens, out, in, calls));
  else if (pass == RowPass::BWD_DATA) {
    if (data_grad) out_k.push_back(gemm(tokens, in, out, calls));
  } else {
    out_k.push_back(gemm(out, in, tokens, calls));
  }
}

double tokens_of(const Shape& s) { return static_cast<double>(s.n) * static_cast<double>(s.h); }

// One memory-bound kernel per pass over the row's own per-pass bytes.
Kernels memory_pass(const Layer& l, RowPass pass, std::string_view op) {
  const double bytes = pass == RowPass::FWD        ? l.costs.fwd_bytes
                       : pass == RowPass::BWD_DATA ? l.row_bytes.bwd_data
                                                   : l.row_bytes.bwd_weights;
  if (!(bytes > 0)) return {};
  return {memory(op, bytes)};
}

Kernels kernels_linear(const Layer& l, RowPass pass) {
  Kernels k;
  const Shape& src = l.src_shapes.front();
  linear_gemms(k, tokens_of(src), static_cast<double>(src.c), static_cast<double>(l.dst_shape.c), pass,
               l.needs_data_grad);
  return k;
}

Kernels kernels_attention(const Layer& l, RowPass pass) {
  if (pass == RowPass::BWD_WEIGHTS) return {};
  const SeqParams& p = l.params.seq;
  const Shape& src = l.src_shapes.front();
  const Heads h = qkv_heads(p, src.c, l.name);
  const double b = static_cast<double>(src.n), s = static_cast<double>(src.h), d = static_cast<double>(h.dim);
  const double a = static_cast<double>(h.q);
  if (p.flash) {
    RowKernel r;
    r.kind = Kind::ATTENTION;
    r.batch = b, r.heads = a, r.kv_heads = static_cast<double>(h.kv), r.seq = s, r.head_dim = d;
    r.causal = p.causal;
    r.calls = static_cast<double>(std::max<std::int64_t>(1, p.context_parallel));  // one per ring step
    return {r};
  }
  // Dense: batched GEMMs over batch x heads (one call, its rows stacked), softmax and dropout over the
  // s^2 scores (read and write each; the dropout mask is 1 byte).
  const double rows = b * a * s, scores = b * a * s * s;
  const bool drop = p.dropout > 0;
  Kernels k;
  if (pass == RowPass::FWD) {
    k.push_back(gemm(rows, s, d));  // S = Q K^T
    k.push_back(memory("softmax", FP32_B * 2 * scores));
    if (drop) k.push_back(memory("dropout", FP32_B * 2 * scores + scores));
    k.push_back(gemm(rows, d, s));  // O = P V
  } else {
    k.push_back(gemm(rows, d, s));  // dV = P^T dO
    k.push_back(gemm(rows, s, d));  // dP = dO V^T
    if (drop) k.push_back(memory("dropout", FP32_B * 2 * scores + scores));
    k.push_back(memory("softmax", FP32_B * 3 * scores));  // P, dP -> dS
    k.push_back(gemm(rows, d, s));  // dQ = dS K
    k.push_back(gemm(rows, d, s));  // dK = dS^T Q
  }
  return k;
}

// A linear over every token to `dst_shape.c` outputs, then a softmax over them: forward reads the outputs
// and writes the probabilities; backward moves `bwd_moves` passes over them.
Kernels linear_softmax(const Layer& l, RowPass pass, double bwd_moves) {
  Kernels k;
  const Shape& src = l.src_shapes.front();
  const double tokens = tokens_of(src), out = static_cast<double>(l.dst_shape.c);
  linear_gemms(k, tokens, static_cast<double>(src.c), out, pass, l.needs_data_grad);
  if (pass == RowPass::FWD) k.push_back(memory("softmax", FP32_B * 2 * tokens * out));
  if (pass == RowPass::BWD_DATA && l.needs_data_grad) k.push_back(memory("softmax", FP32_B * bwd_moves * tokens * out));
  return k;
}

// Router: softmax backward reads P and dP, writes dS.
Kernels kernels_moe_router(const Layer& l, RowPass pass) { return linear_softmax(l, pass, 3); }

// Each expert runs its gate+up and down GEMMs over its share of the routed tokens (an even split).
Kernels kernels_moe_experts(const Layer& l, RowPass pass) {
  const SeqParams& p = l.params.seq;
  const Shape& src = l.src_shapes.front();
  // With expert parallelism each rank's experts take their share of the whole group's tokens: in balance,
  // as many routed copies as the rank sent out.
  const double x = static_cast<double>(p.experts / std::max<std::int64_t>(1, p.expert_parallel));
  const double hd = static_cast<double>(src.c), f = static_cast<double>(p.ffn);
  const double routed = tokens_of(src) * static_cast<double>(p.top_k), per_expert = routed / x;
  Kernels k;
  linear_gemms(k, per_expert, hd, 2 * f, pass, true, x);  // gate and up, fused
  linear_gemms(k, per_expert, f, hd, pass, true, x);      // down
  if (pass == RowPass::FWD) k.push_back(memory("silu_mul", FP32_B * 3 * routed * f));
  if (pass == RowPass::BWD_DATA) k.push_back(memory("silu_mul", FP32_B * 5 * routed * f));
  return k;
}

// Softmax cross-entropy: backward reads the probabilities and writes dlogits.
Kernels kernels_lm_head(const Layer& l, RowPass pass) { return linear_softmax(l, pass, 2); }

Kernels kernels_patch_embed(const Layer& l, RowPass pass) {
  const SeqParams& p = l.params.seq;
  const Shape& src = l.src_shapes.front();
  const double patches = static_cast<double>(src.n) * static_cast<double>((src.h / p.patch) * (src.w / p.patch));
  const double per_patch = static_cast<double>(src.c) * static_cast<double>(p.patch) * static_cast<double>(p.patch);
  Kernels k;
  linear_gemms(k, patches, per_patch, static_cast<double>(p.hidden), pass, l.needs_data_grad);
  return k;
}

Kernels kernels_cls_head(const Layer& l, RowPass pass) {
  const SeqParams& p = l.params.seq;
  const Shape& src = l.src_shapes.front();
  const double b = static_cast<double>(src.n), hd = static_cast<double>(src.c);
  Kernels k;
  if (p.pooler) linear_gemms(k, b, hd, hd, pass, l.needs_data_grad);
  linear_gemms(k, b, hd, static_cast<double>(p.classes), pass, l.needs_data_grad);
  return k;
}

Kernels kernels_embedding(const Layer& l, RowPass pass) { return memory_pass(l, pass, "embedding"); }
Kernels kernels_gather_tokens(const Layer& l, RowPass pass) { return memory_pass(l, pass, "gather"); }
Kernels kernels_layer_norm(const Layer& l, RowPass pass) { return memory_pass(l, pass, "layer_norm"); }
Kernels kernels_rms_norm(const Layer& l, RowPass pass) { return memory_pass(l, pass, "rms_norm_fused"); }
Kernels kernels_rotary(const Layer& l, RowPass pass) { return memory_pass(l, pass, "rotary"); }
Kernels kernels_gelu(const Layer& l, RowPass pass) { return memory_pass(l, pass, "gelu_tanh"); }
Kernels kernels_swiglu(const Layer& l, RowPass pass) { return memory_pass(l, pass, "silu_mul"); }
Kernels kernels_dropout(const Layer& l, RowPass pass) { return memory_pass(l, pass, "dropout"); }
Kernels kernels_residual_add(const Layer& l, RowPass pass) { return memory_pass(l, pass, "residual_add"); }

RowField int_field(std::string_view name, std::int64_t SeqParams::*f, bool required) {
  return RowField{name, Type::INT, f, nullptr, nullptr, required};
}
RowField bool_field(std::string_view name, bool SeqParams::*f) {
  return RowField{name, Type::BOOL, nullptr, f, nullptr, false};
}
RowField ratio_field(std::string_view name, double SeqParams::*f, bool required) {
  return RowField{name, Type::RATIO, nullptr, nullptr, f, required};
}

const RowField BLOCK = int_field("block", &SeqParams::block, false);
// Megatron's sequence-parallel region (SeqParams::sequence_parallel_region): the memory estimate splits what
// the layer keeps over the tensor-parallel ranks under sequence parallelism.
const RowField SP_REGION = bool_field("sequence_parallel_region", &SeqParams::sequence_parallel_region);

}  // namespace

const std::vector<OpRow>& op_rows() {
  using S = SeqParams;
  static const std::vector<OpRow> rows = {
      {"embedding", "token (+ learned position, + segment) embedding of batch x 1 x seq x 1 token ids", 1, 1,
       {int_field("vocab", &S::vocab, true), int_field("hidden", &S::hidden, true),
        int_field("positions", &S::positions, false), int_field("token_types", &S::token_types, false), BLOCK},
       "eltwise", true, infer_embedding, kernels_embedding},
      {"linear", "x W (+ b) over every token", 1, 1,
       {int_field("out_features", &S::out_features, true), bool_field("bias", &S::bias), SP_REGION, BLOCK}, "fc", true,
       infer_linear, kernels_linear},
      {"layer_norm", "LayerNorm over the hidden dimension", 1, 1, {bool_field("bias", &S::bias), SP_REGION, BLOCK}, "batch_norm",
       false, infer_layer_norm, kernels_layer_norm},
      {"rms_norm", "RMSNorm over the hidden dimension", 1, 1, {SP_REGION, BLOCK}, "batch_norm", false, infer_rms_norm, kernels_rms_norm},
      {"rotary", "rotary position embedding of the q and k parts of a fused QKV tensor", 1, 1,
       {int_field("heads", &S::heads, true), int_field("kv_heads", &S::kv_heads, false), BLOCK}, "eltwise", false,
       infer_rotary, kernels_rotary},
      {"attention", "softmax(Q K^T / sqrt(d)) V of a fused QKV tensor; multi-head, grouped- or multi-query", 1, 1,
       {int_field("heads", &S::heads, true), int_field("kv_heads", &S::kv_heads, false), bool_field("causal", &S::causal),
        bool_field("flash", &S::flash), ratio_field("dropout", &S::dropout, false), BLOCK},
       "fc", false, infer_attention, kernels_attention},
      {"gelu", "GELU (tanh form)", 1, 1, {BLOCK}, "eltwise", false, infer_gelu, kernels_gelu},
      {"swiglu", "silu(gate) * up of a fused [gate, up] tensor", 1, 1, {BLOCK}, "eltwise", false, infer_swiglu, kernels_swiglu},
      {"hidden_dropout", "dropout of a hidden-state tensor", 1, 1, {ratio_field("dropout", &S::dropout, true), SP_REGION, BLOCK},
       "dropout", false, infer_hidden_dropout, kernels_dropout},
      {"residual_add", "x + f(x)", 2, 2, {SP_REGION, BLOCK}, "add", false, infer_residual_add, kernels_residual_add},
      {"moe_router", "linear gate to the experts, softmax, top-k", 1, 1,
       {int_field("experts", &S::experts, true), int_field("top_k", &S::top_k, true), BLOCK}, "fc", true,
       infer_moe_router, kernels_moe_router},
      {"moe_experts", "top-k of `experts` SwiGLU MLPs per token, weighted sum; inputs [hidden, router]", 2, 2,
       {int_field("experts", &S::experts, true), int_field("top_k", &S::top_k, true), int_field("ffn", &S::ffn, true),
        BLOCK},
       "fc", true, infer_moe_experts, kernels_moe_experts},
      {"lm_head", "logits over the vocabulary and softmax cross-entropy", 1, 1,
       {int_field("vocab", &S::vocab, true), bool_field("tied", &S::tied), bool_field("bias", &S::head_bias), BLOCK}, "fc",
       true, infer_lm_head, kernels_lm_head},
      {"gather_tokens", "the hidden states at `keep_tokens` positions of every sequence (an index_select)", 1, 1,
       {int_field("keep_tokens", &S::keep_tokens, true), BLOCK}, "eltwise", false, infer_gather_tokens,
       kernels_gather_tokens},
      {"patch_embed", "ViT patches (stride-p projection), class token, learned positions", 1, 1,
       {int_field("hidden", &S::hidden, true), int_field("patch", &S::patch, true), bool_field("cls_token", &S::cls_token),
        BLOCK},
       "fc", true, infer_patch_embed, kernels_patch_embed},
      {"cls_head", "first token (optional dense + tanh pooler), classifier, softmax cross-entropy", 1, 1,
       {int_field("classes", &S::classes, true), bool_field("pooler", &S::pooler), BLOCK}, "fc", true, infer_cls_head, kernels_cls_head},
  };
  return rows;
}

const OpRow* op_row_by_name_or_null(std::string_view name) {
  for (const auto& r : op_rows())
    if (r.name == name) return &r;
  return nullptr;
}

}  // namespace dtsim::models
