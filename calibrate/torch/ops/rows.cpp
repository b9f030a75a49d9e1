// The transformer (row) ops as PyTorch 1.13 runs them eagerly, on token-major [batch, seq, hidden]
// tensors: linear (F.linear), layer_norm (F.layer_norm), rms_norm (Hugging Face's LlamaRMSNorm),
// attention (Hugging Face GPT2Attention's matmul / where(causal) / softmax / dropout / matmul; PyTorch
// 1.13 has no fused kernel), gelu (tanh), swiglu (silu(gate) * up), residual_add, hidden_dropout,
// embedding (token + learned position tables) and lm_head (logits and F.cross_entropy).
#include <ATen/ATen.h>

#include <cmath>

#include "calibrate/torch/ops/driver_util.hpp"
#include "models/op_rows.hpp"

namespace dtsim::torch_ops::detail {
namespace {

// torch.nn.LayerNorm's default eps and LlamaRMSNorm's rms_norm_eps (values do not change kernel times).
constexpr double LAYER_NORM_EPSILON = 1e-5;
constexpr double RMS_NORM_EPSILON = 1e-6;

// [batch, seq, hidden] of a sequence tensor [batch, hidden, seq, 1].
std::vector<std::int64_t> token_sizes(const models::Shape& s) { return {s.n, s.h, s.c}; }

std::vector<at::Tensor> row_srcs(const models::Layer& layer) {
  std::vector<at::Tensor> srcs;
  for (const auto& s : layer.src_shapes) {
    at::Tensor t = at::empty(token_sizes(s), at::kFloat);
    fill_pattern(t);
    srcs.push_back(t);
  }
  return srcs;
}

// A parameter of `module`, filled with the calibrator's pattern.
at::Tensor param(torch::nn::Module& module, const std::string& name, std::vector<std::int64_t> sizes) {
  at::Tensor t = at::empty(sizes, at::kFloat);
  fill_pattern(t);
  return module.register_parameter(name, t);
}

TorchOp op_of(const models::Layer& layer, std::shared_ptr<torch::nn::Module> module, std::string impl) {
  TorchOp op;
  op.module = std::move(module);
  op.srcs = row_srcs(layer);
  op.impl = std::move(impl);
  return op;
}

}  // namespace

TorchOp build_row_linear(const models::Layer& layer) {
  auto m = std::make_shared<torch::nn::Module>("Linear");
  const std::int64_t in = layer.src_shapes.front().c, out = layer.dst_shape.c;
  at::Tensor w = param(*m, "weight", {out, in});
  at::Tensor b = layer.params.seq.bias ? param(*m, "bias", {out}) : at::Tensor();
  TorchOp op = op_of(layer, m, "nn.Linear");
  op.forward = [w, b](const std::vector<at::Tensor>& srcs) { return at::linear(srcs.front(), w, b); };
  return op;
}

TorchOp build_row_layer_norm(const models::Layer& layer) {
  auto m = std::make_shared<torch::nn::Module>("LayerNorm");
  const std::int64_t h = layer.src_shapes.front().c;
  at::Tensor w = param(*m, "weight", {h});
  at::Tensor b = layer.params.seq.bias ? param(*m, "bias", {h}) : at::Tensor();
  TorchOp op = op_of(layer, m, "nn.LayerNorm");
  op.forward = [w, b, h](const std::vector<at::Tensor>& srcs) {
    return at::layer_norm(srcs.front(), {h}, w, b, LAYER_NORM_EPSILON);
  };
  return op;
}

TorchOp build_row_rms_norm(const models::Layer& layer) {
  auto m = std::make_shared<torch::nn::Module>("RMSNorm");
  at::Tensor w = param(*m, "weight", {layer.src_shapes.front().c});
  TorchOp op = op_of(layer, m, "LlamaRMSNorm");
  op.forward = [w](const std::vector<at::Tensor>& srcs) {
    const at::Tensor& x = srcs.front();
    return w * (x * at::rsqrt(x.pow(2).mean(-1, true) + RMS_NORM_EPSILON));
  };
  return op;
}

TorchOp build_row_attention(const models::Layer& layer) {
  const auto& p = layer.params.seq;
  const auto& s = layer.src_shapes.front();
  const std::int64_t a = p.heads, kv = p.kv_heads == 0 ? p.heads : p.kv_heads, d = layer.dst_shape.c / a;
  const bool causal = p.causal;
  const double drop = p.dropout;
  const at::Tensor mask = at::ones({s.h, s.h}, at::kBool).tril();
  TorchOp op;
  op.srcs = row_srcs(layer);
  op.impl = "matmul+where+softmax+matmul";
  op.forward = [=](const std::vector<at::Tensor>& srcs) {
    const at::Tensor& qkv = srcs.front();
    const std::int64_t b = qkv.size(0), sq = qkv.size(1);
    auto parts = qkv.split_with_sizes({a * d, kv * d, kv * d}, 2);
    at::Tensor q = parts[0].view({b, sq, a, d}).permute({0, 2, 1, 3});
    at::Tensor k = parts[1].view({b, sq, kv, d}).permute({0, 2, 1, 3});
    at::Tensor v = parts[2].view({b, sq, kv, d}).permute({0, 2, 1, 3});
    if (kv != a) {  // Hugging Face's repeat_kv: each key/value head serves a / kv query heads
      k = k.repeat_interleave(a / kv, 1);
      v = v.repeat_interleave(a / kv, 1);
    }
    at::Tensor w = at::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(d));
    if (causal) w = at::where(mask, w, at::scalar_tensor(std::numeric_limits<float>::lowest(), at::kFloat));
    w = at::softmax(w, -1);
    if (drop > 0) w = at::dropout(w, drop, true);
    return at::matmul(w, v).permute({0, 2, 1, 3}).contiguous().view({b, sq, a * d});
  };
  return op;
}

TorchOp build_row_gelu(const models::Layer& layer) {
  TorchOp op;
  op.srcs = row_srcs(layer);
  op.impl = "nn.GELU(tanh)";
  op.forward = [](const std::vector<at::Tensor>& srcs) { return at::gelu(srcs.front(), "tanh"); };
  return op;
}

TorchOp build_row_swiglu(const models::Layer& layer) {
  TorchOp op;
  op.srcs = row_srcs(layer);
  op.impl = "silu(gate)*up";
  op.forward = [](const std::vector<at::Tensor>& srcs) {
    auto parts = srcs.front().chunk(2, -1);
    return at::silu(parts[0]) * parts[1];
  };
  return op;
}

TorchOp build_row_residual_add(const models::Layer& layer) {
  TorchOp op;
  op.srcs = row_srcs(layer);
  op.impl = "torch.add";
  op.forward = [](const std::vector<at::Tensor>& srcs) { return srcs[0] + srcs[1]; };
  return op;
}

TorchOp build_row_hidden_dropout(const models::Layer& layer) {
  TorchOp op;
  op.srcs = row_srcs(layer);
  op.impl = "nn.Dropout";
  const double ratio = layer.params.seq.dropout;
  op.forward = [ratio](const std::vector<at::Tensor>& srcs) { return at::dropout(srcs.front(), ratio, true); };
  return op;
}

TorchOp build_row_embedding(const models::Layer& layer) {
  const auto& p = layer.params.seq;
  const auto& s = layer.src_shapes.front();
  auto m = std::make_shared<torch::nn::Module>("Embedding");
  at::Tensor wte = param(*m, "wte", {p.vocab, p.hidden});
  at::Tensor wpe = p.positions > 0 ? param(*m, "wpe", {p.positions, p.hidden}) : at::Tensor();
  at::Tensor wtt = p.token_types > 0 ? param(*m, "wtt", {p.token_types, p.hidden}) : at::Tensor();
  TorchOp op;
  op.module = m;
  op.srcs = {at::arange(s.n * s.h, at::kLong).mul(7919).remainder(p.vocab).view({s.n, s.h})};  // token ids
  op.impl = "nn.Embedding";
  const at::Tensor positions = at::arange(s.h, at::kLong), segments = at::zeros({s.n, s.h}, at::kLong);
  op.forward = [=](const std::vector<at::Tensor>& srcs) {
    at::Tensor x = at::embedding(wte, srcs.front());
    if (wpe.defined()) x = x + at::embedding(wpe, positions);
    if (wtt.defined()) x = x + at::embedding(wtt, segments);
    return x;
  };
  return op;
}

TorchOp build_row_lm_head(const models::Layer& layer) {
  const auto& p = layer.params.seq;
  const auto& s = layer.src_shapes.front();
  auto m = std::make_shared<torch::nn::Module>("LMHead");
  // Tied or not, the head multiplies by a [vocab, hidden] weight and computes its gradient (into the
  // embedding's when tied): it is a parameter here either way.
  at::Tensor w = param(*m, "weight", {p.vocab, s.c});
  at::Tensor b = p.head_bias ? param(*m, "bias", {p.vocab}) : at::Tensor();
  TorchOp op = op_of(layer, m, "F.linear+F.cross_entropy");
  const at::Tensor labels = at::arange(s.n * s.h, at::kLong).mul(31).remainder(p.vocab);
  const std::int64_t vocab = p.vocab;
  op.forward = [w, b, labels, vocab](const std::vector<at::Tensor>& srcs) {
    return at::cross_entropy_loss(at::linear(srcs.front(), w, b).view({-1, vocab}), labels);
  };
  return op;
}

}  // namespace dtsim::torch_ops::detail
