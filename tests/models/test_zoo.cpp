// Tests of models/zoo.hpp: every zoo parameter count equals its published reference figure, ResNet-50
// multiply-adds, the CIFAR/MNIST input variants, and errors for unknown names and bad options.
#include <catch2/catch.hpp>

#include <map>

#include "common/errors.hpp"
#include "models/zoo.hpp"

using namespace dtsim::models;

namespace {
// Multiply-adds of convolutions and fully connected layers (bias adds excluded), the usual "MACs".
double macs_of(const Model& m) {
  double macs = 0;
  for (const auto& l : m.layers())
    if (l.op == OpKind::CONV2D || l.op == OpKind::FULLY_CONNECTED)
      macs += (l.costs.fwd_flops - (l.params.bias ? static_cast<double>(l.dst_shape.elements()) : 0.0)) / 2;
  return macs;
}
}  // namespace

TEST_CASE("models::Zoo: parameter counts equal the published reference implementations", "[models]") {
  // Sources in models/README.md (torchvision num_params; imgclsmob/keras-hub for the Inceptions).
  const std::map<std::string, std::int64_t> published = {
      {"lenet5", 61'706},          {"alexnet", 61'100'840},      {"vgg16", 138'357'544},
      {"resnet18", 11'689'512},    {"resnet34", 21'797'672},     {"resnet50", 25'557'032},
      {"resnet101", 44'549'160},   {"resnet152", 60'192'808},    {"densenet121", 7'978'856},
      {"inception_v3", 23'834'568}, {"inception_v4", 42'679'816},
  };
  for (const auto& [name, params] : published) {
    INFO(name);
    CHECK(build_zoo_model(name, ModelOptions{}).totals().params == params);
  }
  // Cadene pretrainedmodels / TF-slim Inception-v4 with the 1001-class (background) classifier.
  ModelOptions tf;
  tf.classes = 1001;
  CHECK(build_zoo_model("inception_v4", tf).totals().params == 42'681'353);
}

TEST_CASE("models::Zoo: every listed name builds and ends in a loss of the class count", "[models]") {
  for (const auto& name : zoo_names()) {
    INFO(name);
    ModelOptions o;
    o.batch = 2;
    o.classes = 7;
    const Model m = build_zoo_model(name, o);
    CHECK(m.layers().back().op == OpKind::SOFTMAX_LOSS);
    CHECK(m.layers().back().dst_shape == Shape{2, 7, 1, 1});
    CHECK(m.topological_order().size() == m.layers().size());
  }
}

TEST_CASE("models::Zoo: ResNet-50 forward is about 4.1 G multiply-adds at 224x224", "[models]") {
  const Model m = build_zoo_model("resnet50", ModelOptions{});
  CHECK(macs_of(m) == Approx(4.1e9).epsilon(0.03));
  // Costs are for the whole batch: 32 samples cost 32 times one, parameters do not change.
  ModelOptions b32;
  b32.batch = 32;
  const Model m32 = build_zoo_model("resnet50", b32);
  CHECK(m32.totals().fwd_flops == Approx(32 * m.totals().fwd_flops));
  CHECK(m32.totals().params == m.totals().params);
}

TEST_CASE("models::Zoo: forward multiply-adds match torchvision's published GFLOPS", "[models]") {
  // torchvision weights metadata "_ops" (G multiply-adds of conv and linear layers at the default input).
  const std::map<std::string, double> published_gmacs = {
      {"alexnet", 0.714},  {"vgg16", 15.47},     {"resnet18", 1.814},     {"resnet34", 3.664},
      {"resnet50", 4.089}, {"resnet101", 7.801}, {"resnet152", 11.514},   {"inception_v3", 5.713},
      {"densenet121", 2.834},
  };
  for (const auto& [name, gmacs] : published_gmacs) {
    INFO(name);
    CHECK(macs_of(build_zoo_model(name, ModelOptions{})) / 1e9 == Approx(gmacs).epsilon(0.01));
  }
}

TEST_CASE("models::Zoo: resnet20 (CIFAR) works on 32x32x3 and 28x28x1", "[models]") {
  const Model cifar = build_zoo_model("resnet20", ModelOptions{});
  CHECK(cifar.input_shape() == Shape{1, 3, 32, 32});
  CHECK(cifar.by_name("layer3.2.relu").dst_shape == Shape{1, 64, 8, 8});
  // 0.27 M as in He et al. 2016 table 6, plus the two 1x1 projection shortcuts (with BN).
  CHECK(cifar.totals().params == 272'474);
  ModelOptions fashion;
  fashion.input_h = fashion.input_w = 28;
  fashion.channels = 1;
  const Model f = build_zoo_model("resnet20", fashion);
  CHECK(f.by_name("layer3.2.relu").dst_shape == Shape{1, 64, 7, 7});
  CHECK(f.totals().params == 272'474 - 2 * 16 * 9);
}

TEST_CASE("models::Zoo: alexnet_cifar (CIFAR port) takes 32x32 and has the published 2.47M parameters", "[models]") {
  const Model m = build_zoo_model("alexnet_cifar", ModelOptions{});
  CHECK(m.input_shape() == Shape{1, 3, 32, 32});
  // (32 + 2x5 - 11) / 4 + 1 = 8, pooled to 4, 2 and 1.
  CHECK(m.by_name("relu1").dst_shape == Shape{1, 64, 8, 8});
  CHECK(m.by_name("pool5").dst_shape == Shape{1, 256, 1, 1});
  // Conv weights + biases: 23,296 + 307,392 + 663,936 + 884,992 + 590,080; classifier 2,570.
  CHECK(m.totals().params == 2'472'266);
}

TEST_CASE("models::Zoo: lenet5 pads conv1 on 28x28 so the rest is unchanged", "[models]") {
  ModelOptions mnist;
  mnist.input_h = mnist.input_w = 28;
  const Model m = build_zoo_model("lenet5", mnist);
  CHECK(m.by_name("conv1").dst_shape == Shape{1, 6, 28, 28});
  CHECK(m.totals().params == 61'706);
}

TEST_CASE("models::Zoo: CIFAR-sized inputs work for the ImageNet ResNets and DenseNet", "[models]") {
  ModelOptions cifar;
  cifar.input_h = cifar.input_w = 32;
  cifar.classes = 10;
  CHECK(build_zoo_model("resnet50", cifar).by_name("avgpool").dst_shape == Shape{1, 2048, 1, 1});
  CHECK(build_zoo_model("densenet121", cifar).by_name("avgpool").dst_shape == Shape{1, 1024, 1, 1});
}

TEST_CASE("models::Zoo: unknown names and absurd options are InputErrors", "[models]") {
  CHECK_THROWS_WITH(build_zoo_model("resnet51", ModelOptions{}), Catch::Contains("unknown model 'resnet51'") &&
                                                                     Catch::Contains("resnet50"));
  ModelOptions zero;
  zero.batch = 0;
  CHECK_THROWS_WITH(build_zoo_model("resnet50", zero), Catch::Contains("batch must be >= 1"));
  ModelOptions negative;
  negative.input_h = negative.input_w = -5;
  CHECK_THROWS_AS(build_zoo_model("resnet50", negative), dtsim::InputError);
  ModelOptions tiny;
  tiny.input_h = tiny.input_w = 8;
  CHECK_THROWS_WITH(build_zoo_model("inception_v3", tiny), Catch::Contains("too small"));
  CHECK_THROWS_WITH(build_zoo_model("alexnet", tiny), Catch::Contains("too small"));
  ModelOptions huge;
  huge.batch = 1 << 30;
  huge.input_h = huge.input_w = 1 << 14;
  CHECK_THROWS_AS(build_zoo_model("vgg16", huge), dtsim::InputError);
  CHECK_THROWS_AS(load_model("no-such-dir/model.yaml", ModelOptions{}), dtsim::InputError);
}
