// Tests of the oneDNN trainer network (validate/src/net.hpp): gradients against finite differences on a
// small graph using every supported op, learning on a fixed batch, and clear errors for unsupported ops.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "common/errors.hpp"
#include "models/model.hpp"
#include "models/zoo.hpp"
#include "validate/src/net.hpp"

using dtsim::models::Model;
using dtsim::models::OpKind;
using dtsim::models::LayerParams;

namespace {

// data -> conv -> bn -> relu -> conv -> add(relu, conv) -> tanh -> lrn -> max_pool -> concat(pool, relu(pool))
//      -> avg_pool -> global_avg_pool -> flatten -> fc -> loss: every op the trainer supports, at a size
//      finite differences can check.
Model tiny_model(int batch) {
  Model m("tiny", {batch, 2, 6, 6});
  LayerParams conv;
  conv.out_channels = 3;
  conv.kernel_h = conv.kernel_w = 3;
  conv.pad_h = conv.pad_w = 1;
  m.add("conv1", OpKind::CONV2D, conv, {"data"});
  m.add("bn1", OpKind::BATCH_NORM, {}, {"conv1"});
  m.add("relu1", OpKind::RELU, {}, {"bn1"});
  m.add("conv2", OpKind::CONV2D, conv, {"relu1"});
  m.add("add1", OpKind::ADD, {}, {"relu1", "conv2"});
  m.add("tanh1", OpKind::TANH, {}, {"add1"});
  LayerParams lrn;
  lrn.lrn_size = 3;
  m.add("lrn1", OpKind::LRN, lrn, {"tanh1"});
  LayerParams pool;
  pool.kernel_h = pool.kernel_w = 2;
  pool.stride_h = pool.stride_w = 2;
  m.add("pool1", OpKind::MAX_POOL, pool, {"lrn1"});
  m.add("relu2", OpKind::RELU, {}, {"pool1"});
  m.add("cat", OpKind::CONCAT, {}, {"pool1", "relu2"});
  LayerParams avg;
  avg.kernel_h = avg.kernel_w = 3;
  avg.pad_h = avg.pad_w = 1;
  m.add("pool2", OpKind::AVG_POOL, avg, {"cat"});
  m.add("gap", OpKind::GLOBAL_AVG_POOL, {}, {"pool2"});
  m.add("flat", OpKind::FLATTEN, {}, {"gap"});
  LayerParams fc;
  fc.out_channels = 4;
  m.add("fc", OpKind::FULLY_CONNECTED, fc, {"flat"});
  m.add("loss", OpKind::SOFTMAX_LOSS, {}, {"fc"});
  return m;
}

void fill_input(dtsim::validate::Net& net, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.f, 1.f);
  for (std::int64_t i = 0; i < net.input_elements(); ++i) net.input()[i] = n(rng);
}

}  // namespace

TEST_CASE("validate::Net: backward matches central finite differences on every op", "[validate]") {
  const Model model = tiny_model(3);
  dtsim::validate::Net net(model, {1, 7, false});
  fill_input(net, 3);
  const std::vector<int> labels{0, 2, 3};
  net.forward(labels, true);
  net.backward();
  const std::vector<float> analytic(net.grads(), net.grads() + net.param_count());
  REQUIRE(net.slices().size() == 4);  // conv1, bn1, conv2, fc
  // Probe the first and last parameter of every slice.
  const float eps = 1e-2f;
  int checked = 0;
  for (const auto& s : net.slices())
    for (std::int64_t e : {s.offset, s.offset + s.count - 1}) {
      float* w = net.params() + e;
      const float keep = *w;
      *w = keep + eps;
      const double up = net.forward(labels, true).loss;
      *w = keep - eps;
      const double down = net.forward(labels, true).loss;
      *w = keep;
      const double numeric = (up - down) / (2 * eps);
      INFO(s.name << " element " << e << ": analytic " << analytic[e] << " numeric " << numeric);
      CHECK(std::abs(analytic[e] - numeric) <= 2e-3 + 0.05 * std::abs(numeric));
      ++checked;
    }
  CHECK(checked == 8);
}

TEST_CASE("validate::Net: SGD with momentum drives the loss down on a fixed batch", "[validate]") {
  dtsim::models::ModelOptions mo;
  mo.batch = 8;
  mo.input_h = mo.input_w = 28;
  mo.channels = 1;
  mo.classes = 10;
  dtsim::validate::Net net(dtsim::models::build_zoo_model("lenet5", mo), {1, 1, false});
  fill_input(net, 5);
  const std::vector<int> labels{0, 1, 2, 3, 4, 5, 6, 7};
  const double first = net.forward(labels, true).loss;
  double last = first;
  for (int step = 0; step < 30; ++step) {
    net.backward();
    net.sgd_update(0.05f, 0.9f);
    last = net.forward(labels, true).loss;
  }
  CHECK(first > 2.0);
  CHECK(last < 0.5 * first);
}

TEST_CASE("validate::Net: unsupported ops and bad labels are clear input errors", "[validate]") {
  Model m("with_dropout", {2, 3, 8, 8});
  m.add("drop", OpKind::DROPOUT, {}, {"data"});
  m.add("flat", OpKind::FLATTEN, {}, {"drop"});
  LayerParams fc;
  fc.out_channels = 2;
  m.add("fc", OpKind::FULLY_CONNECTED, fc, {"flat"});
  m.add("loss", OpKind::SOFTMAX_LOSS, {}, {"fc"});
  CHECK_THROWS_WITH(dtsim::validate::Net(m, {1, 1, false}), Catch::Contains("'drop'") && Catch::Contains("dropout"));

  Model no_loss("no_loss", {2, 3, 8, 8});
  no_loss.add("relu", OpKind::RELU, {}, {"data"});
  CHECK_THROWS_AS(dtsim::validate::Net(no_loss, {1, 1, false}), dtsim::InputError);

  dtsim::validate::Net net(tiny_model(2), {1, 1, false});
  CHECK_THROWS_AS(net.forward({0, 9}, true), dtsim::InputError);
  CHECK_THROWS_AS(dtsim::validate::Net(tiny_model(2), {0, 1, false}), dtsim::InputError);
}
