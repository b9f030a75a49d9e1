// Tests of the op drivers (calibrate/ops/op_driver.hpp), benchdnn-style: every driver's forward is
// checked against a naive loop and both backward passes against central finite differences of that
// forward, at small shapes, in the calibrator's BLOCKED layout and the trainer's NHWC layout.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>

#include "calibrate/ops/op_driver.hpp"
#include "common/errors.hpp"
#include "models/op_rows.hpp"
#include "models/zoo.hpp"

namespace {

using dnnl::memory;
using dtsim::models::Layer;
using dtsim::models::OpKind;
using dtsim::models::Shape;
using dtsim::ops::Layout;
using dtsim::ops::Role;
using dtsim::ops::Stage;
using Values = std::vector<float>;

// Logical (plain, row-major) values of a tensor of `dims`: NCHW for activations, OIHW / GOIHW weights.
memory::desc plain_md(const memory::dims& dims) {
  memory::dims strides(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * dims[i + 1];
  return memory::desc(dims, memory::data_type::f32, strides);
}

std::int64_t count(const memory::dims& dims) {
  return std::accumulate(dims.begin(), dims.end(), std::int64_t{1}, std::multiplies<>());
}

// Distinct values spaced 0.05 apart and at least 0.05 from zero, shuffled: no ties for max pooling, no
// relu input near its kink, so a finite-difference step of 0.01 never crosses a non-smooth point.
Values distinct(std::int64_t n, std::uint64_t seed, float scale = 1.f) {
  Values v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    v[static_cast<std::size_t>(i)] = scale * static_cast<float>((i % 2 ? 1 : -1) * (0.05 + 0.05 * (i / 2)));
  std::shuffle(v.begin(), v.end(), std::mt19937_64(seed));
  return v;
}

// One driver's plan with memory, read and written through plain logical values.
class Harness {
 public:
  Harness(const Layer& layer, Layout layout)
      : plan_(dtsim::ops::build_op(engine_, {&layer, layout, true, true})),
        memories_(dtsim::ops::bind(engine_, plan_, [&](const dtsim::ops::Tensor& t) { return memory(t.desc, engine_); })) {}

  const dtsim::ops::OpPlan& plan() const { return plan_; }
  bool has(Role role, int index = 0) const { return dtsim::ops::find(plan_, role, index) >= 0; }
  // Writes `v` (logical order) into every tensor with this role and index (a weight may have a layout per pass).
  void set(Role role, const Values& v, int index = 0) {
    bool found = false;
    for (std::size_t i = 0; i < plan_.tensors.size(); ++i) {
      const auto& t = plan_.tensors[i];
      if (t.role != role || t.index != index || t.view_of >= 0) continue;
      memory user(plain_md(t.desc.dims()), engine_, const_cast<float*>(v.data()));
      REQUIRE(static_cast<std::int64_t>(v.size()) == count(t.desc.dims()));
      dnnl::reorder(user, memories_[i]).execute(stream_, user, memories_[i]);
      found = true;
    }
    stream_.wait();
    REQUIRE(found);
  }
  Values get(Role role, int index = 0) {
    const int i = dtsim::ops::find(plan_, role, index);
    REQUIRE(i >= 0);
    auto& m = memories_[static_cast<std::size_t>(i)];
    Values v(static_cast<std::size_t>(count(m.get_desc().dims())));
    memory user(plain_md(m.get_desc().dims()), engine_, v.data());
    dnnl::reorder(m, user).execute(stream_, m, user);
    stream_.wait();
    return v;
  }
  memory::dims dims(Role role, int index = 0) const {
    return plan_.tensors[static_cast<std::size_t>(dtsim::ops::find(plan_, role, index))].desc.dims();
  }
  // Elements of a dense tensor.
  std::int64_t elements(Role role, int index = 0) const {
    const auto& t = plan_.tensors[static_cast<std::size_t>(dtsim::ops::find(plan_, role, index))];
    return static_cast<std::int64_t>(t.desc.get_size() / sizeof(float));
  }
  void run(Stage stage) {
    for (const auto& step : plan_.stages.at(stage)) step.primitive.execute(stream_, dtsim::ops::args_of(step, memories_));
    stream_.wait();
  }

 private:
  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream_{engine_};
  dtsim::ops::OpPlan plan_;
  std::vector<memory> memories_;
};

using Reference = std::function<Values(const std::vector<Values>& srcs, const std::vector<Values>& params)>;

// True for the ops whose backward accumulates diff_dst into input 0's gradient (add, residual_add).
bool accumulates(const Layer& layer) {
  return layer.op == OpKind::ADD || (layer.row != nullptr && layer.row->name == "residual_add");
}

// The causal mask attention adds to its scores, [s, s]: 0 on and below the diagonal, -1e9 above.
Values causal_mask(std::int64_t s) {
  Values m(static_cast<std::size_t>(s * s));
  for (std::int64_t r = 0; r < s; ++r)
    for (std::int64_t c = 0; c < s; ++c) m[static_cast<std::size_t>(r * s + c)] = c <= r ? 0.f : -1e9f;
  return m;
}

// Checks one layer in one layout: forward against `reference`, then diff_src of every input and the
// gradient of every parameter against central differences of L = sum(dst * r) (r random, = diff_dst).
void check_op(const Layer& layer, Layout layout, const Reference& reference) {
  Harness h(layer, layout);
  if (h.has(Role::ATTN_MASK)) h.set(Role::ATTN_MASK, causal_mask(h.dims(Role::ATTN_MASK).back()));
  std::vector<Values> srcs, params;
  for (std::size_t k = 0; k < layer.src_shapes.size(); ++k) {
    srcs.push_back(distinct(layer.src_shapes[k].elements(), 11 + k));
    h.set(Role::SRC, srcs.back(), static_cast<int>(k));
  }
  for (const auto& p : h.plan().params) {
    params.push_back(p.role == Role::SCALE ? distinct(count(p.desc.dims()), 7, 4.f)
                                           : distinct(count(p.desc.dims()), 5 + params.size(), 0.2f));
    h.set(p.role, params.back());
  }
  if (h.has(Role::MASK)) {
    Values mask(static_cast<std::size_t>(h.elements(Role::MASK)));
    for (std::size_t i = 0; i < mask.size(); ++i) mask[i] = i % 3 == 0 ? 0.f : 2.f;  // scaled keep mask
    h.set(Role::MASK, mask);
    params.push_back(mask);
  }
  const auto forward = [&](const std::vector<Values>& s, const std::vector<Values>& p) {
    for (std::size_t k = 0; k < s.size(); ++k) h.set(Role::SRC, s[k], static_cast<int>(k));
    for (std::size_t j = 0; j < h.plan().params.size(); ++j) h.set(h.plan().params[j].role, p[j]);
    h.run(Stage::FWD);
    return h.get(Role::DST);
  };
  const Values dst = forward(srcs, params);
  const Values expect = reference(srcs, params);
  REQUIRE(dst.size() == expect.size());
  for (std::size_t i = 0; i < dst.size(); ++i) {
    INFO("forward element " << i);
    REQUIRE(dst[i] == Approx(expect[i]).margin(1e-4).epsilon(1e-4));
  }

  const Values r = distinct(static_cast<std::int64_t>(dst.size()), 3);
  h.set(Role::DIFF_DST, r);
  if (accumulates(layer)) h.set(Role::DIFF_SRC, Values(r.size(), 0.f), 0);  // the accumulator starts empty
  if (h.plan().stages.count(Stage::BWD_WEIGHTS)) h.run(Stage::BWD_WEIGHTS);
  h.run(Stage::BWD_DATA);
  const auto loss = [&](const std::vector<Values>& s, const std::vector<Values>& p) {
    const Values d = forward(s, p);
    double sum = 0;
    for (std::size_t i = 0; i < d.size(); ++i) sum += static_cast<double>(d[i]) * r[i];
    return sum;
  };
  const auto compare = [](const Values& analytic, const std::function<double(std::size_t, float)>& at) {
    constexpr float STEP = 1e-2f;
    for (std::size_t i = 0; i < analytic.size(); ++i) {
      const double numeric = (at(i, STEP) - at(i, -STEP)) / (2 * STEP);
      INFO("element " << i << ": analytic " << analytic[i] << ", numeric " << numeric);
      REQUIRE(std::abs(analytic[i] - numeric) <= 2e-3 + 2e-2 * std::abs(numeric));
    }
  };
  // diff_src: for add, only input 0 receives the accumulated gradient (the others get diff_dst as it is).
  const std::size_t inputs = accumulates(layer) ? 1 : srcs.size();
  std::vector<Values> grads;
  for (std::size_t k = 0; k < inputs; ++k) grads.push_back(h.get(Role::DIFF_SRC, static_cast<int>(k)));
  std::vector<Values> param_grads;
  for (const auto& p : h.plan().params)
    param_grads.push_back(h.get(p.role == Role::WEIGHTS  ? Role::DIFF_WEIGHTS
                                : p.role == Role::BIAS   ? Role::DIFF_BIAS
                                : p.role == Role::SCALE  ? Role::DIFF_SCALE
                                                         : Role::DIFF_SHIFT));
  for (std::size_t k = 0; k < inputs; ++k) {
    INFO("diff_src " << k);
    compare(grads[k], [&](std::size_t i, float step) {
      auto s = srcs;
      s[k][i] += step;
      return loss(s, params);
    });
  }
  for (std::size_t j = 0; j < param_grads.size(); ++j) {
    INFO("parameter " << j);
    compare(param_grads[j], [&](std::size_t i, float step) {
      auto p = params;
      p[j][i] += step;
      return loss(srcs, p);
    });
  }
}

Layer layer_of(OpKind op, std::vector<Shape> srcs, Shape dst, dtsim::models::LayerParams params = {}) {
  Layer l;
  l.name = std::string(dtsim::models::to_string(op));
  l.op = op;
  l.params = params;
  l.src_shapes = std::move(srcs);
  l.dst_shape = dst;
  return l;
}

// Index of (n, c, h, w) in an NCHW tensor of shape s.
std::size_t at(const Shape& s, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
  return static_cast<std::size_t>(((n * s.c + c) * s.h + h) * s.w + w);
}

// Naive pooling over windows; `max` or average (dividing by the whole window or the valid part).
Values pool_ref(const Shape& s, const Shape& d, int k, int stride, int pad, bool max, bool include_pad, const Values& x) {
  Values y(static_cast<std::size_t>(d.elements()));
  for (std::int64_t n = 0; n < d.n; ++n)
    for (std::int64_t c = 0; c < d.c; ++c)
      for (std::int64_t oh = 0; oh < d.h; ++oh)
        for (std::int64_t ow = 0; ow < d.w; ++ow) {
          double acc = max ? -1e30 : 0;
          int valid = 0;
          for (int i = 0; i < k; ++i)
            for (int j = 0; j < k; ++j) {
              const std::int64_t ih = oh * stride - pad + i, iw = ow * stride - pad + j;
              if (ih < 0 || iw < 0 || ih >= s.h || iw >= s.w) continue;
              ++valid;
              const double v = x[at(s, n, c, ih, iw)];
              acc = max ? std::max(acc, v) : acc + v;
            }
          y[at(d, n, c, oh, ow)] = static_cast<float>(max ? acc : acc / (include_pad ? k * k : valid));
        }
  return y;
}

const Layout LAYOUTS[] = {Layout::BLOCKED, Layout::NHWC};

}  // namespace

TEST_CASE("ops::conv2d: forward, backward data and weights match a naive loop and finite differences", "[calibrate]") {
  for (int groups : {1, 2}) {
    dtsim::models::LayerParams p;
    p.out_channels = 4;
    p.kernel_h = p.kernel_w = 3;
    p.stride_h = p.stride_w = 2;
    p.pad_h = p.pad_w = 1;
    p.groups = groups;
    const Shape s{2, 4, 5, 5}, d{2, 4, 3, 3};
    const Layer l = layer_of(OpKind::CONV2D, {s}, d, p);
    for (Layout layout : LAYOUTS)
      check_op(l, layout, [&](const std::vector<Values>& x, const std::vector<Values>& w) {
        const std::int64_t icg = s.c / groups, ocg = d.c / groups;
        Values y(static_cast<std::size_t>(d.elements()));
        for (std::int64_t n = 0; n < d.n; ++n)
          for (std::int64_t o = 0; o < d.c; ++o)
            for (std::int64_t oh = 0; oh < d.h; ++oh)
              for (std::int64_t ow = 0; ow < d.w; ++ow) {
                double acc = w[1][static_cast<std::size_t>(o)];
                const std::int64_t g = o / ocg;
                for (std::int64_t ic = 0; ic < icg; ++ic)
                  for (int i = 0; i < 3; ++i)
                    for (int j = 0; j < 3; ++j) {
                      const std::int64_t ih = oh * 2 - 1 + i, iw = ow * 2 - 1 + j;
                      if (ih < 0 || iw < 0 || ih >= s.h || iw >= s.w) continue;
                      acc += static_cast<double>(x[0][at(s, n, g * icg + ic, ih, iw)]) *
                             w[0][static_cast<std::size_t>(((o * icg + ic) * 3 + i) * 3 + j)];
                    }
                y[at(d, n, o, oh, ow)] = static_cast<float>(acc);
              }
        return y;
      });
  }
}

TEST_CASE("ops::fully_connected: forward, backward data and weights match a naive loop and finite differences",
          "[calibrate]") {
  dtsim::models::LayerParams p;
  p.out_channels = 3;
  for (const Shape s : {Shape{2, 4, 2, 2}, Shape{3, 5, 1, 1}}) {
    const Shape d{s.n, 3, 1, 1};
    const Layer l = layer_of(OpKind::FULLY_CONNECTED, {s}, d, p);
    for (Layout layout : LAYOUTS) {
      if (layout == Layout::NHWC && s.h > 1) continue;  // NHWC flattens channels-last: another feature order
      check_op(l, layout, [&](const std::vector<Values>& x, const std::vector<Values>& w) {
        const std::int64_t in = s.per_sample();
        Values y(static_cast<std::size_t>(d.elements()));
        for (std::int64_t n = 0; n < s.n; ++n)
          for (std::int64_t o = 0; o < 3; ++o) {
            double acc = w[1][static_cast<std::size_t>(o)];
            for (std::int64_t i = 0; i < in; ++i)
              acc += static_cast<double>(x[0][static_cast<std::size_t>(n * in + i)]) * w[0][static_cast<std::size_t>(o * in + i)];
            y[static_cast<std::size_t>(n * 3 + o)] = static_cast<float>(acc);
          }
        return y;
      });
    }
  }
}

TEST_CASE("ops::batch_norm: forward, backward data and scale/shift match a naive loop and finite differences",
          "[calibrate]") {
  const Shape s{3, 4, 2, 2};
  const Layer l = layer_of(OpKind::BATCH_NORM, {s}, s);
  for (Layout layout : LAYOUTS)
    check_op(l, layout, [&](const std::vector<Values>& x, const std::vector<Values>& w) {
      Values y(x[0].size());
      const double m = static_cast<double>(s.n * s.h * s.w);
      for (std::int64_t c = 0; c < s.c; ++c) {
        double mean = 0, var = 0;
        for (std::int64_t n = 0; n < s.n; ++n)
          for (std::int64_t i = 0; i < s.h * s.w; ++i) mean += x[0][at(s, n, c, 0, 0) + static_cast<std::size_t>(i)];
        mean /= m;
        for (std::int64_t n = 0; n < s.n; ++n)
          for (std::int64_t i = 0; i < s.h * s.w; ++i) var += std::pow(x[0][at(s, n, c, 0, 0) + static_cast<std::size_t>(i)] - mean, 2);
        var /= m;
        for (std::int64_t n = 0; n < s.n; ++n)
          for (std::int64_t i = 0; i < s.h * s.w; ++i) {
            const auto e = at(s, n, c, 0, 0) + static_cast<std::size_t>(i);
            y[e] = static_cast<float>(w[0][static_cast<std::size_t>(c)] * (x[0][e] - mean) / std::sqrt(var + 1e-5) +
                                      w[1][static_cast<std::size_t>(c)]);
          }
      }
      return y;
    });
}

TEST_CASE("ops::relu and ops::tanh: forward and backward match a naive loop and finite differences", "[calibrate]") {
  const Shape s{2, 3, 3, 3};
  for (OpKind op : {OpKind::RELU, OpKind::TANH})
    for (Layout layout : LAYOUTS)
      check_op(layer_of(op, {s}, s), layout, [&](const std::vector<Values>& x, const std::vector<Values>&) {
        Values y(x[0].size());
        for (std::size_t i = 0; i < y.size(); ++i) y[i] = op == OpKind::RELU ? std::max(0.f, x[0][i]) : std::tanh(x[0][i]);
        return y;
      });
}

TEST_CASE("ops::pooling: max, average and global average match a naive loop and finite differences", "[calibrate]") {
  const Shape s{2, 3, 5, 5};
  dtsim::models::LayerParams p;
  p.kernel_h = p.kernel_w = 3;
  p.stride_h = p.stride_w = 2;
  p.pad_h = p.pad_w = 1;
  const Shape d{2, 3, 3, 3};
  for (Layout layout : LAYOUTS) {
    check_op(layer_of(OpKind::MAX_POOL, {s}, d, p), layout, [&](const std::vector<Values>& x, const std::vector<Values>&) {
      return pool_ref(s, d, 3, 2, 1, true, false, x[0]);
    });
    for (bool include : {true, false}) {
      p.count_include_pad = include;
      check_op(layer_of(OpKind::AVG_POOL, {s}, d, p), layout, [&](const std::vector<Values>& x, const std::vector<Values>&) {
        return pool_ref(s, d, 3, 2, 1, false, include, x[0]);
      });
    }
    const Shape g{2, 3, 1, 1};
    check_op(layer_of(OpKind::GLOBAL_AVG_POOL, {s}, g), layout,
             [&](const std::vector<Values>& x, const std::vector<Values>&) { return pool_ref(s, g, 5, 1, 0, false, true, x[0]); });
  }
}

TEST_CASE("ops::lrn: forward and backward match a naive loop and finite differences", "[calibrate]") {
  const Shape s{2, 6, 2, 2};
  dtsim::models::LayerParams p;
  p.lrn_size = 3;
  p.lrn_alpha = 0.5;
  p.lrn_beta = 0.75;
  p.lrn_k = 2.0;
  for (Layout layout : LAYOUTS)
    check_op(layer_of(OpKind::LRN, {s}, s, p), layout, [&](const std::vector<Values>& x, const std::vector<Values>&) {
      Values y(x[0].size());
      for (std::int64_t n = 0; n < s.n; ++n)
        for (std::int64_t c = 0; c < s.c; ++c)
          for (std::int64_t h = 0; h < s.h; ++h)
            for (std::int64_t w = 0; w < s.w; ++w) {
              double sum = 0;  // oneDNN: alpha is divided by the window size
              for (std::int64_t j = std::max<std::int64_t>(0, c - 1); j <= std::min<std::int64_t>(s.c - 1, c + 1); ++j)
                sum += std::pow(x[0][at(s, n, j, h, w)], 2);
              y[at(s, n, c, h, w)] = static_cast<float>(x[0][at(s, n, c, h, w)] / std::pow(2.0 + 0.5 / 3 * sum, 0.75));
            }
      return y;
    });
}

TEST_CASE("ops::add: forward sums the inputs, backward accumulates diff_dst into input 0's gradient", "[calibrate]") {
  const Shape s{2, 16, 2, 2};
  for (Layout layout : LAYOUTS)
    check_op(layer_of(OpKind::ADD, {s, s}, s), layout, [&](const std::vector<Values>& x, const std::vector<Values>&) {
      Values y(x[0].size());
      for (std::size_t i = 0; i < y.size(); ++i) y[i] = x[0][i] + x[1][i];
      return y;
    });
}

TEST_CASE("ops::concat: forward joins channels, backward splits diff_dst (aligned, unaligned, NHWC)", "[calibrate]") {
  // 16-channel inputs fill whole blocks (the 2-D row copy path), 3 and 5 channels do not (4-D strided view).
  for (const std::vector<std::int64_t>& channels : {std::vector<std::int64_t>{16, 32, 16}, std::vector<std::int64_t>{3, 16, 5}}) {
    std::vector<Shape> srcs;
    std::int64_t total = 0;
    for (auto c : channels) {
      srcs.push_back({2, c, 2, 3});
      total += c;
    }
    const Shape d{2, total, 2, 3};
    for (Layout layout : LAYOUTS)
      check_op(layer_of(OpKind::CONCAT, srcs, d), layout, [&](const std::vector<Values>& x, const std::vector<Values>&) {
        Values y(static_cast<std::size_t>(d.elements()));
        for (std::int64_t n = 0; n < d.n; ++n) {
          std::int64_t offset = 0;
          for (std::size_t k = 0; k < srcs.size(); ++k) {
            for (std::int64_t c = 0; c < srcs[k].c; ++c)
              for (std::int64_t i = 0; i < d.h * d.w; ++i)
                y[at(d, n, offset + c, 0, 0) + static_cast<std::size_t>(i)] = x[k][at(srcs[k], n, c, 0, 0) + static_cast<std::size_t>(i)];
            offset += srcs[k].c;
          }
        }
        return y;
      });
  }
}

TEST_CASE("ops::concat: the backward split runs at Inception-v3's first concat, batch 32", "[calibrate]") {
  // The shape at which oneDNN 2.6.3 crashed on submemory_desc channel slices (docs/calibration.md).
  const std::vector<Shape> srcs{{32, 64, 35, 35}, {32, 64, 35, 35}, {32, 96, 35, 35}, {32, 32, 35, 35}};
  const Shape d{32, 256, 35, 35};
  Harness h(layer_of(OpKind::CONCAT, srcs, d), Layout::BLOCKED);
  Values g(static_cast<std::size_t>(d.elements()));
  std::iota(g.begin(), g.end(), 0.f);  // exact in float below 2^24
  h.set(Role::DIFF_DST, g);
  h.run(Stage::BWD_DATA);
  std::int64_t offset = 0;
  for (std::size_t k = 0; k < srcs.size(); ++k) {
    const Values got = h.get(Role::DIFF_SRC, static_cast<int>(k));
    std::size_t wrong = 0;
    for (std::int64_t n = 0; n < d.n; ++n)
      for (std::int64_t c = 0; c < srcs[k].c; ++c)
        for (std::int64_t i = 0; i < d.h * d.w; ++i)
          wrong += got[at(srcs[k], n, c, 0, 0) + static_cast<std::size_t>(i)] != g[at(d, n, offset + c, 0, 0) + static_cast<std::size_t>(i)];
    INFO("input " << k);
    CHECK(wrong == 0);
    offset += srcs[k].c;
  }
}

TEST_CASE("ops::softmax_loss: softmax forward, backward is (probabilities - one-hot) / batch", "[calibrate]") {
  const Shape s{3, 4, 1, 1};
  const Layer l = layer_of(OpKind::SOFTMAX_LOSS, {s}, s);
  for (Layout layout : LAYOUTS) {
    Harness h(l, layout);
    const Values x = distinct(s.elements(), 2);
    const std::vector<int> labels{1, 3, 0};
    Values target(x.size(), 0.f);
    for (std::size_t i = 0; i < labels.size(); ++i) target[i * 4 + static_cast<std::size_t>(labels[i])] = 1.f;
    const auto mean_ce = [&](const Values& logits) {
      h.set(Role::SRC, logits);
      h.run(Stage::FWD);
      const Values p = h.get(Role::DST);
      double loss = 0;
      for (std::size_t i = 0; i < labels.size(); ++i) loss -= std::log(p[i * 4 + static_cast<std::size_t>(labels[i])]);
      return loss / static_cast<double>(labels.size());
    };
    mean_ce(x);
    const Values p = h.get(Role::DST);
    for (std::int64_t n = 0; n < s.n; ++n) {
      double z = 0;
      for (int c = 0; c < 4; ++c) z += std::exp(x[static_cast<std::size_t>(n * 4 + c)]);
      for (int c = 0; c < 4; ++c)
        CHECK(p[static_cast<std::size_t>(n * 4 + c)] == Approx(std::exp(x[static_cast<std::size_t>(n * 4 + c)]) / z).epsilon(1e-5));
    }
    h.set(Role::TARGET, target);
    h.run(Stage::BWD_DATA);
    const Values g = h.get(Role::DIFF_SRC);
    for (std::size_t i = 0; i < x.size(); ++i) {
      Values up = x, down = x;
      up[i] += 1e-2f;
      down[i] -= 1e-2f;
      const double numeric = (mean_ce(up) - mean_ce(down)) / 2e-2;
      INFO("element " << i);
      CHECK(g[i] == Approx(numeric).margin(2e-3).epsilon(2e-2));
    }
  }
}

TEST_CASE("ops::dropout: forward and backward multiply by the mask", "[calibrate]") {
  const Shape s{2, 3, 2, 2};
  for (Layout layout : LAYOUTS)
    check_op(layer_of(OpKind::DROPOUT, {s}, s), layout, [&](const std::vector<Values>& x, const std::vector<Values>& m) {
      Values y(x[0].size());
      for (std::size_t i = 0; i < y.size(); ++i) y[i] = x[0][i] * m[0][i];
      return y;
    });
}

TEST_CASE("ops::registry: every op kind with a training pass has a driver, others are clear errors", "[calibrate]") {
  for (const auto& name : dtsim::models::op_kind_names()) {
    const OpKind op = *dtsim::models::op_kind_by_name_or_null(name);
    INFO(name);
    CHECK(dtsim::ops::has_driver(op) == (op != OpKind::INPUT && op != OpKind::FLATTEN));
  }
  const Layer flatten = layer_of(OpKind::FLATTEN, {{2, 3, 1, 1}}, {2, 3, 1, 1});
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  CHECK_THROWS_AS(dtsim::ops::build_op(engine, {&flatten, Layout::BLOCKED, true, false}), dtsim::InputError);
}

// --- row (transformer) ops: token-major {batch x seq, features} tensors ---------------------------------

namespace {

Layer row_layer(std::string_view row, std::vector<Shape> srcs, Shape dst, dtsim::models::SeqParams p = {}) {
  Layer l;
  l.name = std::string(row);
  l.op = OpKind::ROW;
  l.row = dtsim::models::op_row_by_name_or_null(row);
  REQUIRE(l.row != nullptr);
  l.params.seq = p;
  l.src_shapes = std::move(srcs);
  l.dst_shape = dst;
  l.needs_data_grad = true;
  return l;
}

std::size_t tok(std::int64_t token, std::int64_t channels, std::int64_t c) {
  return static_cast<std::size_t>(token * channels + c);
}

}  // namespace

TEST_CASE("ops::linear: forward, backward data and weights over batch x sequence rows match a naive loop and "
          "finite differences", "[calibrate]") {
  for (bool bias : {true, false}) {
    dtsim::models::SeqParams p;
    p.out_features = 3;
    p.bias = bias;
    const Shape s{2, 4, 3, 1}, d{2, 3, 3, 1};
    check_op(row_layer("linear", {s}, d, p), Layout::BLOCKED, [&](const std::vector<Values>& x, const std::vector<Values>& w) {
      Values y(static_cast<std::size_t>(d.elements()));
      for (std::int64_t t = 0; t < s.n * s.h; ++t)
        for (std::int64_t o = 0; o < 3; ++o) {
          double acc = bias ? w[1][static_cast<std::size_t>(o)] : 0.0;
          for (std::int64_t i = 0; i < s.c; ++i) acc += static_cast<double>(x[0][tok(t, s.c, i)]) * w[0][tok(o, s.c, i)];
          y[tok(t, 3, o)] = static_cast<float>(acc);
        }
      return y;
    });
  }
}

TEST_CASE("ops::layer_norm: forward, backward data and scale/shift over each token match a naive loop and finite "
          "differences", "[calibrate]") {
  for (bool bias : {true, false}) {
    dtsim::models::SeqParams p;
    p.bias = bias;
    const Shape s{2, 5, 3, 1};
    check_op(row_layer("layer_norm", {s}, s, p), Layout::BLOCKED, [&](const std::vector<Values>& x, const std::vector<Values>& w) {
      Values y(x[0].size());
      for (std::int64_t t = 0; t < s.n * s.h; ++t) {
        double mean = 0, var = 0;
        for (std::int64_t c = 0; c < s.c; ++c) mean += x[0][tok(t, s.c, c)];
        mean /= static_cast<double>(s.c);
        for (std::int64_t c = 0; c < s.c; ++c) var += std::pow(x[0][tok(t, s.c, c)] - mean, 2);
        var /= static_cast<double>(s.c);
        for (std::int64_t c = 0; c < s.c; ++c)
          y[tok(t, s.c, c)] = static_cast<float>(w[0][static_cast<std::size_t>(c)] * (x[0][tok(t, s.c, c)] - mean) /
                                                     std::sqrt(var + 1e-5) +
                                                 (bias ? w[1][static_cast<std::size_t>(c)] : 0.f));
      }
      return y;
    });
  }
}

TEST_CASE("ops::attention: softmax(Q K^T / sqrt(d) + causal mask) V of a fused QKV tensor, with and without dropout, "
          "matches a naive loop and finite differences", "[calibrate]") {
  for (const bool causal : {true, false})
    for (const double dropout : {0.0, 0.1}) {
      dtsim::models::SeqParams p;
      p.heads = 2;
      p.causal = causal;
      p.dropout = dropout;
      const std::int64_t B = 2, S = 3, A = 2, D = 2, H = A * D, C = 3 * H;
      const Shape s{B, C, S, 1}, d{B, H, S, 1};
      INFO("causal " << causal << ", dropout " << dropout);
      check_op(row_layer("attention", {s}, d, p), Layout::BLOCKED, [&](const std::vector<Values>& x, const std::vector<Values>& m) {
        Values y(static_cast<std::size_t>(d.elements()));
        for (std::int64_t b = 0; b < B; ++b)
          for (std::int64_t a = 0; a < A; ++a)
            for (std::int64_t i = 0; i < S; ++i) {
              std::vector<double> w(static_cast<std::size_t>(S));
              double top = -1e300, z = 0;
              for (std::int64_t j = 0; j < S; ++j) {
                double acc = 0;
                for (std::int64_t e = 0; e < D; ++e)
                  acc += static_cast<double>(x[0][tok(b * S + i, C, a * D + e)]) * x[0][tok(b * S + j, C, H + a * D + e)];
                w[static_cast<std::size_t>(j)] = acc / std::sqrt(static_cast<double>(D)) + (causal && j > i ? -1e9 : 0.0);
                top = std::max(top, w[static_cast<std::size_t>(j)]);
              }
              for (auto& v : w) z += v = std::exp(v - top);
              for (std::int64_t e = 0; e < D; ++e) {
                double acc = 0;
                for (std::int64_t j = 0; j < S; ++j) {
                  const double keep = dropout > 0 ? m[0][static_cast<std::size_t>(((b * A + a) * S + i) * S + j)] : 1.0;
                  acc += w[static_cast<std::size_t>(j)] / z * keep * x[0][tok(b * S + j, C, 2 * H + a * D + e)];
                }
                y[tok(b * S + i, H, a * D + e)] = static_cast<float>(acc);
              }
            }
        return y;
      });
    }
}

TEST_CASE("ops::gelu, swiglu, residual_add and hidden_dropout rows: forward and backward match a naive loop and "
          "finite differences", "[calibrate]") {
  const Shape s{2, 4, 3, 1};
  check_op(row_layer("gelu", {s}, s), Layout::BLOCKED, [&](const std::vector<Values>& x, const std::vector<Values>&) {
    Values y(x[0].size());
    for (std::size_t i = 0; i < y.size(); ++i) {
      const double v = x[0][i];
      y[i] = static_cast<float>(0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
    }
    return y;
  });
  const Shape half{2, 2, 3, 1};
  check_op(row_layer("swiglu", {s}, half), Layout::BLOCKED, [&](const std::vector<Values>& x, const std::vector<Values>&) {
    Values y(static_cast<std::size_t>(half.elements()));
    for (std::int64_t t = 0; t < s.n * s.h; ++t)
      for (std::int64_t c = 0; c < 2; ++c) {
        const double g = x[0][tok(t, 4, c)], u = x[0][tok(t, 4, 2 + c)];
        y[tok(t, 2, c)] = static_cast<float>(g / (1 + std::exp(-g)) * u);
      }
    return y;
  });
  check_op(row_layer("residual_add", {s, s}, s), Layout::BLOCKED, [&](const std::vector<Values>& x, const std::vector<Values>&) {
    Values y(x[0].size());
    for (std::size_t i = 0; i < y.size(); ++i) y[i] = x[0][i] + x[1][i];
    return y;
  });
  dtsim::models::SeqParams p;
  p.dropout = 0.1;
  check_op(row_layer("hidden_dropout", {s}, s, p), Layout::BLOCKED, [&](const std::vector<Values>& x, const std::vector<Values>& m) {
    Values y(x[0].size());
    for (std::size_t i = 0; i < y.size(); ++i) y[i] = x[0][i] * m[0][i];
    return y;
  });
}

TEST_CASE("ops::lm_head: logits and softmax forward; backward is the mean cross-entropy's gradient through the "
          "vocabulary projection", "[calibrate]") {
  dtsim::models::SeqParams p;
  p.vocab = 5;
  p.tied = true;
  const Shape s{2, 3, 2, 1}, d{2, 5, 2, 1};
  const std::int64_t T = 4, V = 5, Hd = 3;
  Harness h(row_layer("lm_head", {s}, d, p), Layout::BLOCKED);
  const Values x = distinct(T * Hd, 2), w = distinct(V * Hd, 3, 0.5f);
  const std::vector<int> labels{1, 4, 0, 2};
  Values target(static_cast<std::size_t>(T * V), 0.f);
  for (std::size_t t = 0; t < labels.size(); ++t) target[t * V + static_cast<std::size_t>(labels[t])] = 1.f;
  const auto mean_ce = [&](const Values& src, const Values& wei) {
    h.set(Role::SRC, src);
    h.set(Role::WEIGHTS, wei);
    h.run(Stage::FWD);
    const Values probs = h.get(Role::DST);
    double loss = 0;
    for (std::size_t t = 0; t < labels.size(); ++t) loss -= std::log(probs[t * V + static_cast<std::size_t>(labels[t])]);
    return loss / static_cast<double>(T);
  };
  mean_ce(x, w);
  const Values probs = h.get(Role::DST);
  for (std::int64_t t = 0; t < T; ++t) {
    std::vector<double> z(static_cast<std::size_t>(V));
    double sum = 0;
    for (std::int64_t v = 0; v < V; ++v) {
      for (std::int64_t c = 0; c < Hd; ++c) z[static_cast<std::size_t>(v)] += static_cast<double>(x[tok(t, Hd, c)]) * w[tok(v, Hd, c)];
      sum += std::exp(z[static_cast<std::size_t>(v)]);
    }
    for (std::int64_t v = 0; v < V; ++v) CHECK(probs[tok(t, V, v)] == Approx(std::exp(z[static_cast<std::size_t>(v)]) / sum).epsilon(1e-4));
  }
  h.set(Role::TARGET, target);
  h.run(Stage::BWD_DATA);
  h.run(Stage::BWD_WEIGHTS);
  const Values dx = h.get(Role::DIFF_SRC), dw = h.get(Role::DIFF_WEIGHTS);
  for (std::size_t i = 0; i < x.size(); ++i) {
    Values up = x, down = x;
    up[i] += 1e-2f;
    down[i] -= 1e-2f;
    INFO("diff_src " << i);
    CHECK(dx[i] == Approx((mean_ce(up, w) - mean_ce(down, w)) / 2e-2).margin(2e-3).epsilon(2e-2));
  }
  for (std::size_t i = 0; i < w.size(); ++i) {
    Values up = w, down = w;
    up[i] += 1e-2f;
    down[i] -= 1e-2f;
    INFO("diff_weights " << i);
    CHECK(dw[i] == Approx((mean_ce(x, up) - mean_ce(x, down)) / 2e-2).margin(2e-3).epsilon(2e-2));
  }
}

TEST_CASE("ops::registry: GPT-2's rows have drivers; grouped-query attention and rows without one are clear errors",
          "[calibrate]") {
  const auto m = dtsim::models::load_model("gpt2", [] {
    dtsim::models::ModelOptions o;
    o.seq_len = 8;
    return o;
  }());
  for (const auto& l : m.layers()) {
    if (!l.row) continue;
    INFO(l.name);
    CHECK(dtsim::ops::has_driver(l) == (l.row->name != "embedding"));
  }
  dtsim::models::SeqParams p;
  p.heads = 4;
  p.kv_heads = 2;
  const Layer gqa = row_layer("attention", {{1, 16, 3, 1}}, {1, 8, 3, 1}, p);
  CHECK_FALSE(dtsim::ops::has_driver(gqa));
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  CHECK_THROWS_AS(dtsim::ops::build_op(engine, {&gqa, Layout::BLOCKED, true, false}), dtsim::InputError);
  const Layer rotary = row_layer("rotary", {{1, 24, 3, 1}}, {1, 24, 3, 1}, p);
  CHECK_FALSE(dtsim::ops::has_driver(rotary));
  CHECK_THROWS_AS(dtsim::ops::build_op(engine, {&rotary, Layout::BLOCKED, true, false}), dtsim::InputError);
}
