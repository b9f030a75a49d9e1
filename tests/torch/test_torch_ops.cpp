// Tests of the libtorch drivers (calibrate/torch/torch_ops.hpp): the torch module built for every op of
// the zoo has its dtsim layer's parameter count and output shape, and its backward gives the gradients
// the calibrator times (input, weights) with the shapes of the tensors they belong to.
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "calibrate/op_signature.hpp"
#include "calibrate/torch/torch_ops.hpp"
#include "common/errors.hpp"
#include "models/op_rows.hpp"
#include "models/transformer.hpp"
#include "models/zoo.hpp"

namespace {

using namespace dtsim;

// The zoo at small inputs (the ops and their hyper-parameters are the same as at full size) plus a
// model with the one op kind the zoo lacks (lrn, in AlexNet's original form).
std::vector<models::Model> zoo_at_small_size() {
  std::vector<models::Model> out;
  for (const auto& name : models::zoo_names()) {
    models::ModelOptions o;
    o.batch = 2;
    o.classes = 10;
    if (name == "inception_v3" || name == "inception_v4") o.input_h = o.input_w = 107;
    else if (name != "lenet5" && name != "resnet20") o.input_h = o.input_w = 64;
    out.push_back(models::build_zoo_model(name, o));
  }
  models::Model lrn("lrn_net", models::Shape{2, 3, 16, 16});
  models::LayerParams conv;
  conv.out_channels = 8;
  conv.kernel_h = conv.kernel_w = 3;
  lrn.add("conv", models::OpKind::CONV2D, conv, {"data"});
  lrn.add("norm", models::OpKind::LRN, {}, {"conv"});
  out.push_back(std::move(lrn));
  return out;
}

}  // namespace

TEST_CASE("torch::TorchOp: every zoo op's module has the layer's parameter count and output shape", "[torch]") {
  std::set<std::string> seen_signatures, seen_ops;
  for (const auto& model : zoo_at_small_size()) {
    for (const auto& layer : model.layers()) {
      if (!torch_ops::has_torch_driver(layer.op)) continue;
      if (!seen_signatures.insert(calibrate::op_signature(layer)).second) continue;
      seen_ops.insert(std::string(models::to_string(layer.op)));
      INFO(model.name() << " layer " << layer.name << " (" << models::to_string(layer.op) << ")");
      torch_ops::TorchOp op = torch_ops::build_torch_op(layer);
      CHECK(op.parameter_count() == layer.costs.params);
      REQUIRE(op.srcs.size() == layer.src_shapes.size());
      at::Tensor dst = op.forward(op.srcs);
      if (layer.op == models::OpKind::SOFTMAX_LOSS) {
        CHECK(dst.dim() == 0);  // the mean loss; dtsim's dst is the probabilities, of the input's shape
        CHECK(layer.dst_shape == layer.src_shapes.front());
      } else {
        CHECK(dst.sizes().vec() == torch_ops::torch_sizes(layer.dst_shape, layer.op));
      }
    }
  }
  // Every driver of a kind was exercised (row drivers: the next test).
  for (const auto& name : torch_ops::torch_driver_names()) {
    if (!models::op_kind_by_name_or_null(name)) continue;
    INFO("op " << name);
    CHECK(seen_ops.count(name) == 1);
  }
}

TEST_CASE("torch::TorchOp: every transformer row of small GPT and Llama models has its layer's parameters and "
          "token-major output shape", "[torch]") {
  std::set<std::string> seen_ops;
  std::vector<models::Model> models_;
  for (const auto family : {models::TransformerFamily::GPT, models::TransformerFamily::LLAMA}) {
    models::TransformerConfig c;
    c.name = family == models::TransformerFamily::GPT ? "tiny_gpt" : "tiny_llama";
    c.family = family;
    c.vocab = 50;
    c.hidden = 16;
    c.layers = 1;
    c.heads = 4;
    c.kv_heads = family == models::TransformerFamily::LLAMA ? 2 : 0;
    c.ffn = 24;
    c.positions = family == models::TransformerFamily::GPT ? 12 : 0;
    c.default_seq = 6;
    c.tied = family == models::TransformerFamily::GPT;
    c.hidden_dropout = c.attention_dropout = family == models::TransformerFamily::GPT ? 0.1 : 0.0;
    models::ModelOptions o;
    o.batch = 2;
    models_.push_back(models::build_transformer(c, o));
  }
  for (const auto& model : models_)
    for (const auto& layer : model.layers()) {
      if (!layer.row || !torch_ops::has_torch_driver(layer)) continue;
      seen_ops.insert(std::string(models::op_name(layer)));
      INFO(model.name() << " layer " << layer.name);
      torch_ops::TorchOp op = torch_ops::build_torch_op(layer);
      const bool tied_head = layer.row->name == "lm_head" && layer.params.seq.tied;
      // A tied head computes the gradient of the embedding's [vocab, hidden] table: a parameter here, none in dtsim.
      CHECK(op.parameter_count() == (tied_head ? layer.params.seq.vocab * layer.src_shapes.front().c : layer.costs.params));
      at::Tensor dst = op.forward(op.srcs);
      if (layer.row->name == "lm_head") CHECK(dst.dim() == 0);  // the mean cross-entropy
      else CHECK(dst.sizes().vec() == (std::vector<std::int64_t>{layer.dst_shape.n, layer.dst_shape.h, layer.dst_shape.c}));
      if (layer.row->name == "embedding") continue;  // token ids: no input gradient
      for (auto& s : op.srcs) s.requires_grad_(true);
      dst = op.forward(op.srcs);
      dst.backward(at::ones_like(dst));
      for (const auto& s : op.srcs) CHECK(s.grad().sizes() == s.sizes());
      for (auto& s : op.srcs) s.requires_grad_(false);
    }
  for (const auto& name : torch_ops::torch_driver_names()) {
    if (models::op_kind_by_name_or_null(name)) continue;
    INFO("row " << name);
    CHECK(seen_ops.count(name) == 1);
  }
}

TEST_CASE("torch::TorchOp: backward gives the input and weight gradients in their tensors' shapes", "[torch]") {
  models::ModelOptions o;
  o.batch = 2;
  o.classes = 10;
  o.input_h = o.input_w = 32;
  const models::Model m = models::build_zoo_model("resnet18", o);
  const models::Layer& conv = m.by_name("layer1.0.conv1");
  torch_ops::TorchOp op = torch_ops::build_torch_op(conv);
  op.srcs.front().requires_grad_(true);
  at::Tensor dst = op.forward(op.srcs);
  dst.backward(at::ones_like(dst));
  REQUIRE(op.srcs.front().grad().defined());
  CHECK(op.srcs.front().grad().sizes() == op.srcs.front().sizes());
  for (const auto& p : op.parameters()) {
    REQUIRE(p.grad().defined());
    CHECK(p.grad().sizes() == p.sizes());
  }
  // The gradient of a bias-free 3x3 convolution's input under an all-ones output gradient is, at an
  // interior pixel, the sum of the weights over output channels and kernel positions (closed form).
  const at::Tensor w = op.parameters().front();
  const double expected = w.sum({0, 2, 3})[0].item<double>();
  CHECK(op.srcs.front().grad()[0][0][5][5].item<double>() == Approx(expected).epsilon(1e-4));
}

TEST_CASE("torch::TorchOp: a kind without a driver is an InputError naming the layer", "[torch]") {
  models::Model m("flat", models::Shape{2, 3, 4, 4});
  const models::Layer& flatten = m.add("flatten", models::OpKind::FLATTEN, {}, {"data"});
  CHECK_FALSE(torch_ops::has_torch_driver(models::OpKind::FLATTEN));
  CHECK_THROWS_AS(torch_ops::build_torch_op(flatten), InputError);
  CHECK_THROWS_WITH(torch_ops::build_torch_op(flatten), Catch::Contains("'flatten'"));
}
