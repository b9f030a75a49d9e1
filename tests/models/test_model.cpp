// Tests of models/model.hpp: shape inference (stride, padding, dilation, groups, ceil_mode), the cost
// formulas of models/README.md in closed form, the Boost.Graph DAG, and one-line errors on bad layers.
#include <catch2/catch.hpp>

#include <string>

#include "common/errors.hpp"
#include "models/model.hpp"

using namespace dtsim::models;

namespace {
LayerParams conv_params(std::int64_t out, int k, int s = 1, int pad = 0, int dilation = 1, int groups = 1,
                        bool bias = true) {
  LayerParams p;
  p.out_channels = out;
  p.kernel_h = p.kernel_w = k;
  p.stride_h = p.stride_w = s;
  p.pad_h = p.pad_w = pad;
  p.dilation_h = p.dilation_w = dilation;
  p.groups = groups;
  p.bias = bias;
  return p;
}
LayerParams pool_params(int k, int s, int pad = 0, bool ceil_mode = false) {
  LayerParams p;
  p.kernel_h = p.kernel_w = k;
  p.stride_h = p.stride_w = s;
  p.pad_h = p.pad_w = pad;
  p.ceil_mode = ceil_mode;
  return p;
}
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const dtsim::InputError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("models::Model: conv2d shape with stride, padding and dilation", "[models]") {
  Model m("t", Shape{2, 3, 32, 32});
  CHECK(m.add("c1", OpKind::CONV2D, conv_params(8, 3, 1, 1), {"data"}).dst_shape == Shape{2, 8, 32, 32});
  CHECK(m.add("c2", OpKind::CONV2D, conv_params(8, 3, 2, 1), {"c1"}).dst_shape == Shape{2, 8, 16, 16});
  // dilation 2: effective kernel 5 -> 16 - 5 + 1 = 12
  CHECK(m.add("c3", OpKind::CONV2D, conv_params(4, 3, 1, 0, 2), {"c2"}).dst_shape == Shape{2, 4, 12, 12});
  LayerParams asym = conv_params(4, 1);
  asym.kernel_h = 1, asym.kernel_w = 7, asym.pad_w = 3;
  CHECK(m.add("c4", OpKind::CONV2D, asym, {"c3"}).dst_shape == Shape{2, 4, 12, 12});
}

TEST_CASE("models::Model: conv2d costs follow the documented formulas", "[models]") {
  Model m("t", Shape{4, 8, 10, 10});
  m.add("pre", OpKind::BATCH_NORM, {}, {"data"});  // trainable, so conv needs its data gradient
  const Layer& c = m.add("c", OpKind::CONV2D, conv_params(16, 3, 1, 1, 1, 2, true), {"pre"});
  // params = Cout * Cin/groups * k * k + bias
  CHECK(c.costs.params == 16 * 4 * 9 + 16);
  const double macs = 4.0 * 16 * 10 * 10 * 4 * 9;
  CHECK(c.costs.fwd_flops == Approx(2 * macs + 4.0 * 16 * 100));
  CHECK(c.costs.bwd_data_flops == Approx(2 * macs));
  CHECK(c.costs.bwd_weights_flops == Approx(2 * macs + 4.0 * 16 * 100));
  CHECK(c.costs.activation_bytes == Approx(4.0 * 4 * 16 * 100));
  CHECK(c.costs.weight_bytes == Approx(4.0 * c.costs.params));
  CHECK(c.costs.fwd_bytes == Approx(4.0 * (4 * 8 * 100 + c.costs.params + 4 * 16 * 100)));
}

TEST_CASE("models::Model: layers with nothing trainable upstream need no data gradient", "[models]") {
  Model m("t", Shape{1, 3, 8, 8});
  const Layer& c = m.add("c", OpKind::CONV2D, conv_params(4, 3), {"data"});
  CHECK(c.costs.bwd_data_flops == 0);
  CHECK(c.costs.bwd_weights_flops > 0);
  const Layer& c2 = m.add("c2", OpKind::CONV2D, conv_params(4, 3), {"c"});
  CHECK(c2.costs.bwd_data_flops > 0);
  CHECK(c2.needs_data_grad);
  // Through parameter-free layers too: data -> relu -> pool -> conv needs no data gradient anywhere.
  Model n("t", Shape{1, 3, 8, 8});
  const Layer& r = n.add("r", OpKind::RELU, {}, {"data"});
  CHECK(r.costs.bwd_data_flops == 0);
  CHECK(r.costs.bwd_bytes == 0);
  n.add("p", OpKind::MAX_POOL, pool_params(2, 2), {"r"});
  const Layer& c3 = n.add("c3", OpKind::CONV2D, conv_params(4, 3), {"p"});
  CHECK_FALSE(c3.needs_data_grad);
  CHECK(c3.costs.bwd_data_flops == 0);
  CHECK(n.add("r2", OpKind::RELU, {}, {"c3"}).costs.bwd_data_flops > 0);
}

TEST_CASE("models::Model: groups must divide channels", "[models]") {
  Model m("t", Shape{1, 6, 8, 8});
  const Layer& dw = m.add("dw", OpKind::CONV2D, conv_params(6, 3, 1, 1, 1, 6, false), {"data"});
  CHECK(dw.costs.params == 6 * 9);
  const auto msg = error_of([&] { m.add("bad", OpKind::CONV2D, conv_params(8, 3, 1, 1, 1, 4), {"dw"}); });
  CHECK(msg.find("layer 'bad'") != std::string::npos);
  CHECK(msg.find("groups 4") != std::string::npos);
}

TEST_CASE("models::Model: pooling floor and ceil_mode", "[models]") {
  Model m("t", Shape{1, 2, 112, 112});
  CHECK(m.add("p1", OpKind::MAX_POOL, pool_params(3, 2, 1), {"data"}).dst_shape == Shape{1, 2, 56, 56});
  Model n("t", Shape{1, 2, 6, 6});
  CHECK(n.add("floor", OpKind::MAX_POOL, pool_params(3, 2), {"data"}).dst_shape.h == 2);
  CHECK(n.add("ceil", OpKind::MAX_POOL, pool_params(3, 2, 0, true), {"data"}).dst_shape.h == 3);
  // ceil_mode never starts a window in the right padding: 5 + 2*1 pad, k 2, s 2 -> ceil gives 4, kept 3
  Model q("t", Shape{1, 1, 5, 5});
  CHECK(q.add("c", OpKind::AVG_POOL, pool_params(2, 2, 1, true), {"data"}).dst_shape.h == 3);
  const Layer& mp = n.by_name("floor");
  CHECK(mp.costs.fwd_flops == Approx(2 * 2 * 2 * 9));
  CHECK(mp.costs.params == 0);
}

TEST_CASE("models::Model: fully connected, flatten, global pool, concat and add", "[models]") {
  Model m("t", Shape{3, 4, 5, 5});
  CHECK(m.add("gap", OpKind::GLOBAL_AVG_POOL, {}, {"data"}).dst_shape == Shape{3, 4, 1, 1});
  CHECK(m.add("flat", OpKind::FLATTEN, {}, {"data"}).dst_shape == Shape{3, 100, 1, 1});
  LayerParams fc;
  fc.out_channels = 10;
  const Layer& f = m.add("fc", OpKind::FULLY_CONNECTED, fc, {"flat"});
  CHECK(f.costs.params == 100 * 10 + 10);
  CHECK(f.costs.fwd_flops == Approx(2.0 * 3 * 100 * 10 + 3 * 10));
  CHECK(m.add("cat", OpKind::CONCAT, {}, {"data", "data"}).dst_shape == Shape{3, 8, 5, 5});
  const Layer& a = m.add("sum", OpKind::ADD, {}, {"data", "data"});
  CHECK(a.dst_shape == Shape{3, 4, 5, 5});
  CHECK(a.costs.fwd_flops == Approx(300));
  const Layer& bn = m.add("bn", OpKind::BATCH_NORM, {}, {"sum"});
  CHECK(bn.costs.params == 8);
  CHECK(m.add("loss", OpKind::SOFTMAX_LOSS, {}, {"fc"}).dst_shape == Shape{3, 10, 1, 1});
}

TEST_CASE("models::Model: the Boost.Graph DAG gives predecessors, successors and a topological order", "[models]") {
  Model m("t", Shape{1, 2, 4, 4});
  m.add("a", OpKind::RELU, {}, {"data"});
  m.add("b", OpKind::TANH, {}, {"data"});
  m.add("c", OpKind::ADD, {}, {"a", "b"});
  CHECK(m.predecessors(3) == std::vector<std::size_t>{1, 2});
  CHECK(m.successors(0) == std::vector<std::size_t>{1, 2});
  const auto order = m.topological_order();
  REQUIRE(order.size() == 4);
  CHECK(order.front() == 0);
  CHECK(order.back() == 3);
  CHECK(m.totals().fwd_flops == Approx(32 + 32 + 32));
}

TEST_CASE("models::Model: bad layers give one-line InputErrors", "[models]") {
  Model m("t", Shape{1, 2, 4, 4});
  m.add("a", OpKind::RELU, {}, {"data"});
  LayerParams fc;
  fc.out_channels = 3;
  m.add("f", OpKind::FULLY_CONNECTED, fc, {"a"});
  const auto mismatch = error_of([&] { m.add("s", OpKind::ADD, {}, {"a", "f"}); });
  CHECK(mismatch.find("add needs inputs of one shape") != std::string::npos);
  CHECK(mismatch.find('\n') == std::string::npos);
  CHECK(error_of([&] { m.add("x", OpKind::RELU, {}, {"nope"}); }).find("unknown input 'nope'") != std::string::npos);
  CHECK(error_of([&] { m.add("a", OpKind::RELU, {}, {"data"}); }).find("duplicate") != std::string::npos);
  CHECK(error_of([&] { m.add("y", OpKind::RELU, {}, {"a", "a"}); }).find("exactly one input") != std::string::npos);
  CHECK(error_of([&] { m.add("z", OpKind::CONCAT, {}, {"a"}); }).find("two or more") != std::string::npos);
  CHECK(error_of([&] { m.add("i", OpKind::INPUT, {}, {"a"}); }).find("first layer") != std::string::npos);
  CHECK(error_of([&] { m.add("k", OpKind::CONV2D, conv_params(0, 3), {"a"}); }).find("out_channels") !=
        std::string::npos);
  CHECK(error_of([&] { m.add("k", OpKind::CONV2D, conv_params(2, 3, -1), {"a"}); }).find("stride") !=
        std::string::npos);
  CHECK(error_of([&] { m.add("k", OpKind::CONV2D, conv_params(2, 5), {"a"}); }).find("too small") !=
        std::string::npos);
  LayerParams drop;
  drop.dropout_ratio = 1.5;
  CHECK(error_of([&] { m.add("d", OpKind::DROPOUT, drop, {"a"}); }).find("dropout_ratio") != std::string::npos);
  // nothing was added by the failed calls
  CHECK(m.layers().size() == 3);
}

TEST_CASE("models::Model: absurd input sizes are rejected", "[models]") {
  CHECK_THROWS_AS(Model("t", Shape{0, 3, 8, 8}), dtsim::InputError);
  CHECK_THROWS_AS(Model("t", Shape{1, -3, 8, 8}), dtsim::InputError);
  CHECK_THROWS_AS(Model("t", Shape{1 << 30, 1 << 30, 1 << 30, 8}), dtsim::InputError);
  Model m("t", Shape{1, 1 << 20, 1, 1});
  LayerParams fc;
  fc.out_channels = std::int64_t{1} << 40;
  CHECK_THROWS_AS(m.add("huge", OpKind::FULLY_CONNECTED, fc, {"data"}), dtsim::InputError);
}

TEST_CASE("models::OpKind: names round-trip", "[models]") {
  for (const auto& name : op_kind_names()) {
    const auto op = op_kind_by_name_or_null(name);
    REQUIRE(op.has_value());
    CHECK(to_string(*op) == name);
  }
  CHECK_FALSE(op_kind_by_name_or_null("conv3d").has_value());
}
