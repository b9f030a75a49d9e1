// oneDNN execution of a models::Model: each layer's primitives come from its op driver
// (calibrate/ops, shared with the calibrator), activations in NHWC, master weights in plain layouts
// inside one flat buffer (reordered to whatever layout each primitive picked), gradients written into
// the matching flat buffer so buckets are contiguous. This file owns only the graph: which buffers a
// layer's roles bind to, gradient routing between layers, batch-norm running statistics and the loss.
#include "validate/src/net.hpp"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <tuple>
#include <random>
#include <unordered_map>

#include "calibrate/ops/op_driver.hpp"
#include "common/errors.hpp"

namespace dtsim::validate {
namespace {

using dnnl::memory;
using models::OpKind;
using ops::Role;
using ops::Stage;
using Clock = std::chrono::steady_clock;

// Running statistics of batch_norm follow PyTorch's default update rate.
constexpr float BN_RUNNING_MOMENTUM = 0.1f;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string_view stage_name(Stage stage) {
  switch (stage) {
    case Stage::FWD: return "fwd";
    case Stage::FWD_INFERENCE: return "fwd_inference";
    case Stage::BWD_DATA: return "bwd_d";
    case Stage::BWD_WEIGHTS: return "bwd_w";
  }
  return "?";
}

bool is_param_role(Role role) {
  const Role r = ops::param_role_of(role);
  return r == Role::WEIGHTS || r == Role::BIAS || r == Role::SCALE || r == Role::SHIFT;
}

}  // namespace

struct Net::Impl {
  using Call = std::pair<dnnl::primitive, std::unordered_map<int, memory>>;
  struct Node {
    const models::Layer* layer = nullptr;
    std::vector<std::size_t> inputs;
    int consumers = 0;
    std::vector<float> dst, diff;
    std::vector<std::vector<float>> scratch;  // per input: diff_src when the producer has other consumers
    ops::OpPlan plan;                         // empty for flatten
    std::function<void()> fwd_train, fwd_eval, bwd;
    double fwd_s = 0, bwd_s = 0;
    int slice = -1;
  };

  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  NetOptions options;
  models::Model model;
  std::vector<Node> nodes;
  std::vector<ParamSlice> slices;
  std::vector<float> params, grads, velocity;
  std::vector<int> labels;
  std::vector<std::string> impls;
  std::int64_t classes = 0;

  explicit Impl(const models::Model& m, const NetOptions& o) : options(o), model(m) {}

  // Where layer `i`'s backward writes the gradient for its input k: the producer's diff buffer when it
  // has a single consumer, else a private scratch buffer added into it afterwards.
  float* diff_target(Node& n, std::size_t k) {
    Node& p = nodes[n.inputs[k]];
    if (p.consumers == 1) return p.diff.data();
    return n.scratch[k].data();
  }
  void finish_diff(Node& n, std::size_t k) {
    Node& p = nodes[n.inputs[k]];
    if (p.consumers == 1) return;
    const auto& s = n.scratch[k];
    float* d = p.diff.data();
    for (std::size_t e = 0; e < s.size(); ++e) d[e] += s[e];
  }
  bool wants_diff(const Node& n, std::size_t k) const {
    return nodes[n.inputs[k]].layer->op != OpKind::INPUT;
  }
  bool wants_any_diff(const Node& n) const {
    for (std::size_t k = 0; k < n.inputs.size(); ++k)
      if (wants_diff(n, k)) return true;
    return false;
  }

  void build();
  void bind_driven(Node& n);
  void build_flatten(Node& n);
  void init_params();
};

void Net::Impl::build() {
  const auto& layers = model.layers();
  if (layers.size() < 2 || layers.back().op != OpKind::SOFTMAX_LOSS)
    throw InputError(fmt::format("model '{}': dtsim-train needs a final softmax_loss layer", model.name()));
  nodes.resize(layers.size());
  for (std::size_t i = 0; i < layers.size(); ++i) {
    Node& n = nodes[i];
    n.layer = &layers[i];
    for (const auto& in : layers[i].inputs) {
      const auto* p = model.by_name_or_null(in);
      const auto idx = static_cast<std::size_t>(p - layers.data());
      n.inputs.push_back(idx);
      nodes[idx].consumers++;
    }
  }
  // Plans first (primitives, no memory): their parameter tensors size the flat buffers, which never
  // move once primitives point into them.
  std::int64_t offset = 0;
  for (std::size_t i = 1; i < layers.size(); ++i) {
    Node& n = nodes[i];
    const auto& l = *n.layer;
    if (l.op == OpKind::FLATTEN) continue;
    if (l.op == OpKind::SOFTMAX_LOSS && i + 1 != layers.size())
      throw InputError(fmt::format("model '{}': softmax_loss '{}' must be the last layer", model.name(), l.name));
    // Dropout needs a fresh random mask every step, which the trainer does not draw.
    if (l.op == OpKind::DROPOUT || !ops::has_driver(l.op)) {
      std::vector<std::string> supported;
      for (auto& name : ops::driver_names())
        if (name != models::to_string(OpKind::DROPOUT)) supported.push_back(name);
      supported.emplace_back(models::to_string(OpKind::FLATTEN));
      throw InputError(fmt::format("model '{}': layer '{}' has op '{}', which dtsim-train does not support "
                                   "(supported: {})",
                                   model.name(), l.name, models::to_string(l.op), fmt::join(supported, ", ")));
    }
    // An add hands its gradient on unchanged (routed below), so it needs no backward primitive here.
    n.plan = ops::build_op(eng, {&l, ops::Layout::NHWC, wants_any_diff(n) && l.op != OpKind::ADD, true});
    std::int64_t count = 0;
    for (const auto& t : n.plan.params) count += static_cast<std::int64_t>(t.desc.get_size() / sizeof(float));
    if (count != l.costs.params)
      throw Failure(fmt::format("layer '{}': trainer counts {} parameters, the model {}", l.name, count, l.costs.params));
    if (count > 0) {
      n.slice = static_cast<int>(slices.size());
      slices.push_back({i, l.name, offset, count});
      offset += count;
    }
  }
  params.assign(offset, 0.f);
  grads.assign(offset, 0.f);
  velocity.assign(offset, 0.f);

  for (std::size_t i = 0; i < layers.size(); ++i) {
    Node& n = nodes[i];
    n.dst.assign(n.layer->dst_shape.elements(), 0.f);
    n.diff.assign(n.layer->dst_shape.elements(), 0.f);
  }
  for (std::size_t i = 1; i < layers.size(); ++i) {
    Node& n = nodes[i];
    n.scratch.resize(n.inputs.size());
    for (std::size_t k = 0; k < n.inputs.size(); ++k)
      if (nodes[n.inputs[k]].consumers > 1) n.scratch[k].assign(n.layer->src_shapes[k].elements(), 0.f);
  }
  for (std::size_t i = 1; i < layers.size(); ++i) {
    Node& n = nodes[i];
    if (n.layer->op == OpKind::FLATTEN) build_flatten(n);
    else bind_driven(n);
  }
  init_params();
}

void Net::Impl::bind_driven(Node& n) {
  const auto& l = *n.layer;
  const ops::OpPlan& plan = n.plan;
  // Plain parameter (and gradient) tensors inside the flat buffers, by role.
  std::map<Role, std::pair<memory::desc, std::int64_t>> plain;
  std::int64_t at = n.slice >= 0 ? slices[static_cast<std::size_t>(n.slice)].offset : 0;
  for (const auto& t : plan.params) {
    plain[t.role] = {t.desc, at};
    at += static_cast<std::int64_t>(t.desc.get_size() / sizeof(float));
  }
  using Reorder = std::tuple<dnnl::reorder, memory, memory>;
  std::vector<Reorder> to_layout, to_plain;  // weights before forward, gradients after backward
  const auto wrap = [&](const ops::Tensor& t, float* data, std::int64_t elements) {
    if (t.desc.get_size() != static_cast<std::size_t>(elements) * sizeof(float))
      throw Failure(fmt::format("layer '{}': oneDNN tensor of {} B for a buffer of {} floats", l.name,
                                t.desc.get_size(), elements));
    return memory(t.desc, eng, data);
  };
  const auto memories = ops::bind(eng, plan, [&](const ops::Tensor& t) -> memory {
    const auto k = static_cast<std::size_t>(t.index);
    switch (t.role) {
      case Role::SRC: return wrap(t, nodes[n.inputs[k]].dst.data(), l.src_shapes[k].elements());
      case Role::DST: return wrap(t, n.dst.data(), l.dst_shape.elements());
      case Role::DIFF_DST: return wrap(t, n.diff.data(), l.dst_shape.elements());
      case Role::DIFF_SRC:
        // The gradient w.r.t. the raw input (batch_norm computes it anyway) goes to a private buffer.
        return wants_diff(n, k) ? wrap(t, diff_target(n, k), l.src_shapes[k].elements()) : memory(t.desc, eng);
      default: break;
    }
    if (!is_param_role(t.role)) return memory(t.desc, eng);
    const bool gradient = ops::param_role_of(t.role) != t.role;
    const auto& [desc, offset] = plain.at(ops::param_role_of(t.role));
    memory user(desc, eng, (gradient ? grads : params).data() + offset);
    if (t.desc == desc) return user;
    memory own(t.desc, eng);
    if (gradient) to_plain.emplace_back(dnnl::reorder(own, user), own, user);
    else to_layout.emplace_back(dnnl::reorder(user, own), user, own);
    return own;
  });
  std::map<Stage, std::vector<Call>> calls;
  for (const auto& [stage, steps] : plan.stages)
    for (const auto& step : steps) {
      calls[stage].emplace_back(step.primitive, ops::args_of(step, memories));
      impls.push_back(fmt::format("{} {}: {}", l.name, stage_name(stage), step.impl));
    }
  const auto run = [this, calls](Stage stage) {
    auto it = calls.find(stage);
    if (it == calls.end()) return false;
    for (const auto& [primitive, args] : it->second) primitive.execute(strm, args);
    return true;
  };
  const auto reorder = [this](const std::vector<Reorder>& reorders) {
    for (const auto& [primitive, from, to] : reorders) primitive.execute(strm, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
  };
  n.fwd_train = [run, reorder, to_layout] {
    reorder(to_layout);
    run(Stage::FWD);
  };
  n.fwd_eval = [run, reorder, to_layout] {
    reorder(to_layout);
    if (!run(Stage::FWD_INFERENCE)) run(Stage::FWD);
  };
  if (l.op == OpKind::BATCH_NORM) {
    // Running statistics (PyTorch's update, unbiased variance) for evaluation.
    const memory mean = memories[static_cast<std::size_t>(ops::find(plan, Role::MEAN))];
    const memory var = memories[static_cast<std::size_t>(ops::find(plan, Role::VARIANCE))];
    const memory rmean = memories[static_cast<std::size_t>(ops::find(plan, Role::RUNNING_MEAN))];
    const memory rvar = memories[static_cast<std::size_t>(ops::find(plan, Role::RUNNING_VARIANCE))];
    const std::int64_t c = l.src_shapes[0].c;
    std::fill_n(static_cast<float*>(rmean.get_data_handle()), c, 0.f);
    std::fill_n(static_cast<float*>(rvar.get_data_handle()), c, 1.f);
    const double m = static_cast<double>(l.src_shapes[0].n * l.src_shapes[0].h * l.src_shapes[0].w);
    const float unbias = m > 1 ? static_cast<float>(m / (m - 1)) : 1.f;
    n.fwd_train = [this, train = n.fwd_train, mean, var, rmean, rvar, c, unbias] {
      train();
      strm.wait();
      const auto* mu = static_cast<const float*>(mean.get_data_handle());
      const auto* sigma2 = static_cast<const float*>(var.get_data_handle());
      auto* rm = static_cast<float*>(rmean.get_data_handle());
      auto* rv = static_cast<float*>(rvar.get_data_handle());
      for (std::int64_t k = 0; k < c; ++k) {
        rm[k] = (1 - BN_RUNNING_MOMENTUM) * rm[k] + BN_RUNNING_MOMENTUM * mu[k];
        rv[k] = (1 - BN_RUNNING_MOMENTUM) * rv[k] + BN_RUNNING_MOMENTUM * sigma2[k] * unbias;
      }
    };
  }
  if (l.op == OpKind::SOFTMAX_LOSS) classes = l.src_shapes[0].per_sample();
  const int target = ops::find(plan, Role::TARGET);
  float* one_hot = target >= 0 ? static_cast<float*>(memories[static_cast<std::size_t>(target)].get_data_handle()) : nullptr;
  // The memories outlive this function: a view's base may be referenced by no primitive argument.
  auto keep = std::make_shared<std::vector<memory>>(memories);
  n.bwd = [this, &n, run, reorder, to_plain, one_hot, keep] {
    if (one_hot != nullptr) {
      // The loss gradient's target: one-hot labels.
      std::fill_n(one_hot, labels.size() * static_cast<std::size_t>(classes), 0.f);
      for (std::size_t i = 0; i < labels.size(); ++i) one_hot[i * static_cast<std::size_t>(classes) + static_cast<std::size_t>(labels[i])] = 1.f;
    }
    run(Stage::BWD_WEIGHTS);
    run(Stage::BWD_DATA);
    reorder(to_plain);
    strm.wait();
    for (std::size_t k = 0; k < n.inputs.size(); ++k) {
      if (!wants_diff(n, k)) continue;
      // d(a + b) passes the same gradient to every input.
      if (n.layer->op == OpKind::ADD) std::copy(n.diff.begin(), n.diff.end(), diff_target(n, k));
      finish_diff(n, k);
    }
  };
}

void Net::Impl::build_flatten(Node& n) {
  // NHWC memory read as (n, h*w*c): flatten is a copy. The feature order differs from NCHW, which only
  // relabels the following layer's weights.
  n.fwd_train = [this, &n] {
    const auto& src = nodes[n.inputs[0]].dst;
    std::copy(src.begin(), src.end(), n.dst.begin());
  };
  n.fwd_eval = n.fwd_train;
  n.bwd = [this, &n] {
    if (!wants_diff(n, 0)) return;
    std::copy(n.diff.begin(), n.diff.end(), diff_target(n, 0));
    finish_diff(n, 0);
  };
}

void Net::Impl::init_params() {
  // PyTorch's default initialisation: weights and bias uniform in +-1/sqrt(fan_in); BN gamma 1, beta 0.
  std::mt19937_64 rng(options.seed);
  for (const auto& sl : slices) {
    const auto& l = *nodes[sl.layer].layer;
    float* w = params.data() + sl.offset;
    if (l.op == OpKind::BATCH_NORM) {
      const std::int64_t c = sl.count / 2;
      std::fill(w, w + c, 1.f);
      std::fill(w + c, w + 2 * c, 0.f);
      continue;
    }
    const std::int64_t fan_in = l.op == OpKind::CONV2D
                                    ? l.src_shapes[0].c / l.params.groups * l.params.kernel_h * l.params.kernel_w
                                    : l.src_shapes[0].per_sample();
    const float bound = 1.f / std::sqrt(static_cast<float>(fan_in));
    std::uniform_real_distribution<float> u(-bound, bound);
    for (std::int64_t e = 0; e < sl.count; ++e) w[e] = u(rng);
  }
}

Net::Net(const models::Model& model, const NetOptions& options) : impl_(std::make_unique<Impl>(model, options)) {
  if (options.threads < 1) throw InputError(fmt::format("--threads must be >= 1, got {}", options.threads));
  omp_set_num_threads(options.threads);  // part of the primitive-cache key: set before creating primitives
  try {
    impl_->build();
  } catch (const dnnl::error& e) {
    throw Failure(fmt::format("model '{}': oneDNN could not create a primitive: {}", model.name(), e.what()));
  }
}
Net::~Net() = default;

std::int64_t Net::batch() const { return impl_->model.batch(); }
std::int64_t Net::input_elements() const { return impl_->model.input_shape().elements(); }
std::int64_t Net::classes() const { return impl_->classes; }
float* Net::input() { return impl_->nodes[0].dst.data(); }
std::int64_t Net::param_count() const { return static_cast<std::int64_t>(impl_->params.size()); }
float* Net::params() { return impl_->params.data(); }
float* Net::grads() { return impl_->grads.data(); }
const std::vector<ParamSlice>& Net::slices() const { return impl_->slices; }
std::vector<std::string> Net::implementations() const { return impl_->impls; }

StepStats Net::forward(const std::vector<int>& labels, bool training) {
  auto& m = *impl_;
  if (static_cast<std::int64_t>(labels.size()) != batch())
    throw Failure(fmt::format("forward: {} labels for a batch of {}", labels.size(), batch()));
  for (int y : labels)
    if (y < 0 || y >= m.classes) throw InputError(fmt::format("label {} outside [0, {})", y, m.classes));
  m.labels = labels;
  for (std::size_t i = 1; i < m.nodes.size(); ++i) {
    auto& n = m.nodes[i];
    const auto t0 = Clock::now();
    (training ? n.fwd_train : n.fwd_eval)();
    if (m.options.time_layers) {
      m.strm.wait();
      n.fwd_s += seconds_since(t0);
    }
  }
  m.strm.wait();
  const auto& prob = m.nodes.back().dst;
  StepStats stats;
  for (std::int64_t i = 0; i < batch(); ++i) {
    const float* p = prob.data() + i * m.classes;
    stats.loss -= std::log(std::max(p[labels[i]], 1e-30f));
    if (std::max_element(p, p + m.classes) - p == labels[i]) stats.correct++;
  }
  stats.loss /= static_cast<double>(batch());
  return stats;
}

void Net::backward(const std::function<void(std::size_t)>& on_layer_done) {
  auto& m = *impl_;
  for (auto& n : m.nodes)
    if (n.consumers > 1) std::fill(n.diff.begin(), n.diff.end(), 0.f);
  for (std::size_t i = m.nodes.size() - 1; i >= 1; --i) {
    auto& n = m.nodes[i];
    const auto t0 = Clock::now();
    n.bwd();
    m.strm.wait();
    if (m.options.time_layers) n.bwd_s += seconds_since(t0);
    if (n.slice >= 0 && on_layer_done) on_layer_done(static_cast<std::size_t>(n.slice));
  }
}

void Net::sgd_update(float lr, float momentum) {
  auto& m = *impl_;
  float* w = m.params.data();
  float* v = m.velocity.data();
  const float* g = m.grads.data();
  const std::int64_t count = param_count();
#pragma omp parallel for num_threads(m.options.threads) schedule(static)
  for (std::int64_t e = 0; e < count; ++e) {
    v[e] = momentum * v[e] + g[e];
    w[e] -= lr * v[e];
  }
}

std::vector<LayerTiming> Net::layer_timings() const {
  std::vector<LayerTiming> out;
  for (std::size_t i = 1; i < impl_->nodes.size(); ++i) {
    const auto& n = impl_->nodes[i];
    out.push_back({n.layer->name, std::string(models::to_string(n.layer->op)), n.fwd_s, n.bwd_s});
  }
  return out;
}

void Net::reset_layer_timings() {
  for (auto& n : impl_->nodes) n.fwd_s = n.bwd_s = 0;
}

}  // namespace dtsim::validate
