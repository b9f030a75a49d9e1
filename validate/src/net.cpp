// oneDNN execution of a models::Model: one forward/backward primitive set per layer, activations in
// NHWC, master weights in plain OIHW/OI inside one flat buffer (reordered to whatever layout each
// primitive picked), gradients written into the matching flat buffer so buckets are contiguous.
#include "validate/src/net.hpp"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <unordered_map>

#include "common/errors.hpp"

namespace dtsim::validate {
namespace {

using dnnl::memory;
using models::OpKind;
using Clock = std::chrono::steady_clock;
using Tag = memory::format_tag;
constexpr auto F32 = memory::data_type::f32;

// Running statistics of batch_norm follow PyTorch's default update rate.
constexpr float BN_RUNNING_MOMENTUM = 0.1f;

memory::desc md4(const models::Shape& s) { return memory::desc({s.n, s.c, s.h, s.w}, F32, Tag::nhwc); }
memory::desc md2(std::int64_t n, std::int64_t k) { return memory::desc({n, k}, F32, Tag::nc); }
memory::desc md1(std::int64_t k) { return memory::desc({k}, F32, Tag::x); }

// Right padding that makes oneDNN's output-size formula give the model's dst size (floor or ceil mode).
std::int64_t pad_right(std::int64_t src, std::int64_t dst, int kernel, int stride, int dilation, int pad_l) {
  const std::int64_t extent = static_cast<std::int64_t>(kernel - 1) * dilation + 1;
  return std::max<std::int64_t>(0, (dst - 1) * stride + extent - src - pad_l);
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

struct Net::Impl {
  struct Node {
    const models::Layer* layer = nullptr;
    std::vector<std::size_t> inputs;
    int consumers = 0;
    std::vector<float> dst, diff;
    std::vector<std::vector<float>> scratch;  // per input: diff_src when the producer has other consumers
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

  void run(dnnl::primitive& p, const std::unordered_map<int, memory>& args) { p.execute(strm, args); }

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

  void note(const std::string& layer, const char* what, const dnnl::primitive_desc_base& pd) {
    impls.push_back(fmt::format("{} {}: {}", layer, what, pd.impl_info_str()));
  }

  void build();
  void build_conv(Node& n);
  void build_fc(Node& n);
  void build_bn(Node& n);
  void build_eltwise(Node& n, dnnl::algorithm alg, bool use_dst);
  void build_pool(Node& n);
  void build_add(Node& n);
  void build_flatten(Node& n);
  void build_loss(Node& n);
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
  // Parameter slices first so the flat buffers never move once primitives point into them.
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const auto& l = layers[i];
    std::int64_t count = 0;
    switch (l.op) {
      case OpKind::CONV2D:
        count = l.params.out_channels * (l.src_shapes[0].c / l.params.groups) * l.params.kernel_h * l.params.kernel_w +
                (l.params.bias ? l.params.out_channels : 0);
        break;
      case OpKind::FULLY_CONNECTED:
        count = l.params.out_channels * l.src_shapes[0].per_sample() + (l.params.bias ? l.params.out_channels : 0);
        break;
      case OpKind::BATCH_NORM: count = 2 * l.src_shapes[0].c; break;
      default: break;
    }
    if (count != l.costs.params)
      throw Failure(fmt::format("layer '{}': trainer counts {} parameters, the model {}", l.name, count, l.costs.params));
    if (count > 0) {
      nodes[i].slice = static_cast<int>(slices.size());
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
    switch (n.layer->op) {
      case OpKind::CONV2D: build_conv(n); break;
      case OpKind::FULLY_CONNECTED: build_fc(n); break;
      case OpKind::BATCH_NORM: build_bn(n); break;
      case OpKind::RELU: build_eltwise(n, dnnl::algorithm::eltwise_relu, false); break;
      case OpKind::TANH: build_eltwise(n, dnnl::algorithm::eltwise_tanh_use_dst_for_bwd, true); break;
      case OpKind::MAX_POOL:
      case OpKind::AVG_POOL:
      case OpKind::GLOBAL_AVG_POOL: build_pool(n); break;
      case OpKind::ADD: build_add(n); break;
      case OpKind::FLATTEN: build_flatten(n); break;
      case OpKind::SOFTMAX_LOSS:
        if (i + 1 != layers.size())
          throw InputError(fmt::format("model '{}': softmax_loss '{}' must be the last layer", model.name(), n.layer->name));
        build_loss(n);
        break;
      default:
        throw InputError(fmt::format(
            "model '{}': layer '{}' has op '{}', which dtsim-train does not support (supported: conv2d, batch_norm, "
            "relu, tanh, max_pool, avg_pool, global_avg_pool, fully_connected, add, flatten, softmax_loss)",
            model.name(), n.layer->name, models::to_string(n.layer->op)));
    }
  }
  init_params();
}

void Net::Impl::build_conv(Node& n) {
  const auto& l = *n.layer;
  const auto& p = l.params;
  if (p.groups != 1)
    throw InputError(fmt::format("model '{}': conv2d '{}' has groups={}, dtsim-train supports groups=1 only", model.name(),
                                 l.name, p.groups));
  const auto& s = l.src_shapes[0];
  const auto& d = l.dst_shape;
  const std::int64_t o = p.out_channels, ic = s.c;
  const memory::dims strides{p.stride_h, p.stride_w}, dil{p.dilation_h - 1, p.dilation_w - 1}, pl{p.pad_h, p.pad_w};
  const memory::dims pr{pad_right(s.h, d.h, p.kernel_h, p.stride_h, p.dilation_h, p.pad_h),
                        pad_right(s.w, d.w, p.kernel_w, p.stride_w, p.dilation_w, p.pad_w)};
  const memory::desc src = md4(s), dst = md4(d), b = md1(o);
  const memory::desc w_any({o, ic, p.kernel_h, p.kernel_w}, F32, Tag::any);
  const memory::desc w_plain({o, ic, p.kernel_h, p.kernel_w}, F32, Tag::oihw);
  const auto alg = dnnl::algorithm::convolution_direct;
  const auto& sl = slices[n.slice];
  float* w_ptr = params.data() + sl.offset;
  float* gw_ptr = grads.data() + sl.offset;
  const std::int64_t w_count = o * ic * p.kernel_h * p.kernel_w;

  using CF = dnnl::convolution_forward;
  auto fwd_pd = p.bias ? CF::primitive_desc(CF::desc(dnnl::prop_kind::forward_training, alg, src, w_any, b, dst, strides,
                                                     dil, pl, pr),
                                            eng)
                       : CF::primitive_desc(
                             CF::desc(dnnl::prop_kind::forward_training, alg, src, w_any, dst, strides, dil, pl, pr), eng);
  note(l.name, "fwd", fwd_pd);
  memory src_m(src, eng, nodes[n.inputs[0]].dst.data());
  memory dst_m(dst, eng, n.dst.data());
  memory w_user(w_plain, eng, w_ptr);
  memory b_m(b, eng, w_ptr + w_count);
  memory w_fwd = w_user;
  std::shared_ptr<dnnl::reorder> w_fwd_reorder;
  if (fwd_pd.weights_desc() != w_plain) {
    w_fwd = memory(fwd_pd.weights_desc(), eng);
    w_fwd_reorder = std::make_shared<dnnl::reorder>(w_user, w_fwd);
  }
  auto fwd = std::make_shared<CF>(fwd_pd);
  std::unordered_map<int, memory> fargs{{DNNL_ARG_SRC, src_m}, {DNNL_ARG_WEIGHTS, w_fwd}, {DNNL_ARG_DST, dst_m}};
  if (p.bias) fargs[DNNL_ARG_BIAS] = b_m;
  n.fwd_train = [this, fwd, fargs, w_fwd_reorder, w_user, w_fwd]() mutable {
    if (w_fwd_reorder) w_fwd_reorder->execute(strm, w_user, w_fwd);
    fwd->execute(strm, fargs);
  };
  n.fwd_eval = n.fwd_train;

  // Backward weights (and bias).
  using CW = dnnl::convolution_backward_weights;
  auto bw_pd = p.bias ? CW::primitive_desc(CW::desc(alg, src, w_any, b, dst, strides, dil, pl, pr), eng, fwd_pd)
                      : CW::primitive_desc(CW::desc(alg, src, w_any, dst, strides, dil, pl, pr), eng, fwd_pd);
  note(l.name, "bwd_w", bw_pd);
  memory gw_user(w_plain, eng, gw_ptr);
  memory gb_m(b, eng, gw_ptr + w_count);
  memory gw = gw_user;
  std::shared_ptr<dnnl::reorder> gw_reorder;
  if (bw_pd.diff_weights_desc() != w_plain) {
    gw = memory(bw_pd.diff_weights_desc(), eng);
    gw_reorder = std::make_shared<dnnl::reorder>(gw, gw_user);
  }
  memory ddst_m(dst, eng, n.diff.data());
  auto bw = std::make_shared<CW>(bw_pd);
  std::unordered_map<int, memory> wargs{{DNNL_ARG_SRC, src_m}, {DNNL_ARG_DIFF_DST, ddst_m}, {DNNL_ARG_DIFF_WEIGHTS, gw}};
  if (p.bias) wargs[DNNL_ARG_DIFF_BIAS] = gb_m;

  // Backward data, unless the input is the data layer.
  std::shared_ptr<dnnl::convolution_backward_data> bd;
  std::unordered_map<int, memory> dargs;
  std::shared_ptr<dnnl::reorder> w_bwd_reorder;
  memory w_bwd = w_user;
  if (wants_diff(n, 0)) {
    using CD = dnnl::convolution_backward_data;
    auto bd_pd = CD::primitive_desc(CD::desc(alg, src, w_any, dst, strides, dil, pl, pr), eng, fwd_pd);
    note(l.name, "bwd_d", bd_pd);
    if (bd_pd.weights_desc() == fwd_pd.weights_desc()) {
      w_bwd = w_fwd;
    } else if (bd_pd.weights_desc() != w_plain) {
      w_bwd = memory(bd_pd.weights_desc(), eng);
      w_bwd_reorder = std::make_shared<dnnl::reorder>(w_user, w_bwd);
    }
    memory dsrc_m(src, eng, diff_target(n, 0));
    bd = std::make_shared<CD>(bd_pd);
    dargs = {{DNNL_ARG_DIFF_DST, ddst_m}, {DNNL_ARG_WEIGHTS, w_bwd}, {DNNL_ARG_DIFF_SRC, dsrc_m}};
  }
  n.bwd = [this, &n, bw, wargs, gw_reorder, gw, gw_user, bd, dargs, w_bwd_reorder, w_user, w_bwd]() mutable {
    bw->execute(strm, wargs);
    if (gw_reorder) gw_reorder->execute(strm, gw, gw_user);
    if (bd) {
      if (w_bwd_reorder) w_bwd_reorder->execute(strm, w_user, w_bwd);
      bd->execute(strm, dargs);
      strm.wait();
      finish_diff(n, 0);
    }
  };
}

void Net::Impl::build_fc(Node& n) {
  const auto& l = *n.layer;
  const std::int64_t batch = l.src_shapes[0].n, in = l.src_shapes[0].per_sample(), o = l.params.out_channels;
  const memory::desc src = md2(batch, in), dst = md2(batch, o), b = md1(o);
  const memory::desc w_any({o, in}, F32, Tag::any), w_plain({o, in}, F32, Tag::oi);
  const auto& sl = slices[n.slice];
  float* w_ptr = params.data() + sl.offset;
  float* gw_ptr = grads.data() + sl.offset;
  const std::int64_t w_count = o * in;
  const bool bias = l.params.bias;

  using IF = dnnl::inner_product_forward;
  auto fwd_pd = bias ? IF::primitive_desc(IF::desc(dnnl::prop_kind::forward_training, src, w_any, b, dst), eng)
                     : IF::primitive_desc(IF::desc(dnnl::prop_kind::forward_training, src, w_any, dst), eng);
  note(l.name, "fwd", fwd_pd);
  memory src_m(src, eng, nodes[n.inputs[0]].dst.data()), dst_m(dst, eng, n.dst.data());
  memory w_user(w_plain, eng, w_ptr), b_m(b, eng, w_ptr + w_count);
  memory w_fwd = w_user;
  std::shared_ptr<dnnl::reorder> w_reorder;
  if (fwd_pd.weights_desc() != w_plain) {
    w_fwd = memory(fwd_pd.weights_desc(), eng);
    w_reorder = std::make_shared<dnnl::reorder>(w_user, w_fwd);
  }
  auto fwd = std::make_shared<IF>(fwd_pd);
  std::unordered_map<int, memory> fargs{{DNNL_ARG_SRC, src_m}, {DNNL_ARG_WEIGHTS, w_fwd}, {DNNL_ARG_DST, dst_m}};
  if (bias) fargs[DNNL_ARG_BIAS] = b_m;
  n.fwd_train = [this, fwd, fargs, w_reorder, w_user, w_fwd]() mutable {
    if (w_reorder) w_reorder->execute(strm, w_user, w_fwd);
    fwd->execute(strm, fargs);
  };
  n.fwd_eval = n.fwd_train;

  using IW = dnnl::inner_product_backward_weights;
  auto bw_pd = bias ? IW::primitive_desc(IW::desc(src, w_any, b, dst), eng, fwd_pd)
                    : IW::primitive_desc(IW::desc(src, w_any, dst), eng, fwd_pd);
  note(l.name, "bwd_w", bw_pd);
  memory gw_user(w_plain, eng, gw_ptr), gb_m(b, eng, gw_ptr + w_count);
  memory gw = gw_user;
  std::shared_ptr<dnnl::reorder> gw_reorder;
  if (bw_pd.diff_weights_desc() != w_plain) {
    gw = memory(bw_pd.diff_weights_desc(), eng);
    gw_reorder = std::make_shared<dnnl::reorder>(gw, gw_user);
  }
  memory ddst_m(dst, eng, n.diff.data());
  auto bw = std::make_shared<IW>(bw_pd);
  std::unordered_map<int, memory> wargs{{DNNL_ARG_SRC, src_m}, {DNNL_ARG_DIFF_DST, ddst_m}, {DNNL_ARG_DIFF_WEIGHTS, gw}};
  if (bias) wargs[DNNL_ARG_DIFF_BIAS] = gb_m;

  std::shared_ptr<dnnl::inner_product_backward_data> bd;
  std::unordered_map<int, memory> dargs;
  if (wants_diff(n, 0)) {
    using ID = dnnl::inner_product_backward_data;
    auto bd_pd = ID::primitive_desc(ID::desc(src, w_any, dst), eng, fwd_pd);
    note(l.name, "bwd_d", bd_pd);
    memory w_bwd = bd_pd.weights_desc() == fwd_pd.weights_desc() ? w_fwd : memory();
    if (!w_bwd) {
      w_bwd = memory(bd_pd.weights_desc(), eng);
      // Weights change every step; keep a reorder in the closure when the layouts differ.
      auto r = std::make_shared<dnnl::reorder>(w_user, w_bwd);
      bd = std::make_shared<ID>(bd_pd);
      memory dsrc_m(src, eng, diff_target(n, 0));
      dargs = {{DNNL_ARG_DIFF_DST, ddst_m}, {DNNL_ARG_WEIGHTS, w_bwd}, {DNNL_ARG_DIFF_SRC, dsrc_m}};
      n.bwd = [this, &n, bw, wargs, gw_reorder, gw, gw_user, bd, dargs, r, w_user, w_bwd]() mutable {
        bw->execute(strm, wargs);
        if (gw_reorder) gw_reorder->execute(strm, gw, gw_user);
        r->execute(strm, w_user, w_bwd);
        bd->execute(strm, dargs);
        strm.wait();
        finish_diff(n, 0);
      };
      return;
    }
    bd = std::make_shared<ID>(bd_pd);
    memory dsrc_m(src, eng, diff_target(n, 0));
    dargs = {{DNNL_ARG_DIFF_DST, ddst_m}, {DNNL_ARG_WEIGHTS, w_bwd}, {DNNL_ARG_DIFF_SRC, dsrc_m}};
  }
  n.bwd = [this, &n, bw, wargs, gw_reorder, gw, gw_user, bd, dargs]() mutable {
    bw->execute(strm, wargs);
    if (gw_reorder) gw_reorder->execute(strm, gw, gw_user);
    if (bd) {
      bd->execute(strm, dargs);
      strm.wait();
      finish_diff(n, 0);
    }
  };
}

void Net::Impl::build_bn(Node& n) {
  const auto& l = *n.layer;
  const auto& s = l.src_shapes[0];
  const float eps = static_cast<float>(l.params.bn_epsilon);
  const memory::desc data = md4(s), c1 = md1(s.c);
  const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  using BF = dnnl::batch_normalization_forward;
  auto fwd_pd = BF::primitive_desc(BF::desc(dnnl::prop_kind::forward_training, data, eps, flags), eng);
  auto inf_pd = BF::primitive_desc(
      BF::desc(dnnl::prop_kind::forward_inference, data, eps, flags | dnnl::normalization_flags::use_global_stats), eng);
  note(l.name, "fwd", fwd_pd);
  const auto& sl = slices[n.slice];
  memory src_m(data, eng, nodes[n.inputs[0]].dst.data()), dst_m(data, eng, n.dst.data());
  memory scale_m(c1, eng, params.data() + sl.offset), shift_m(c1, eng, params.data() + sl.offset + s.c);
  memory mean_m(fwd_pd.mean_desc(), eng), var_m(fwd_pd.variance_desc(), eng);
  auto running = std::make_shared<std::vector<float>>(2 * s.c, 0.f);
  std::fill(running->begin() + s.c, running->end(), 1.f);
  memory rmean_m(c1, eng, running->data()), rvar_m(c1, eng, running->data() + s.c);
  auto fwd = std::make_shared<BF>(fwd_pd);
  auto inf = std::make_shared<BF>(inf_pd);
  const std::unordered_map<int, memory> fargs{{DNNL_ARG_SRC, src_m},     {DNNL_ARG_DST, dst_m},
                                              {DNNL_ARG_SCALE, scale_m}, {DNNL_ARG_SHIFT, shift_m},
                                              {DNNL_ARG_MEAN, mean_m},   {DNNL_ARG_VARIANCE, var_m}};
  const std::unordered_map<int, memory> iargs{{DNNL_ARG_SRC, src_m},     {DNNL_ARG_DST, dst_m},
                                              {DNNL_ARG_SCALE, scale_m}, {DNNL_ARG_SHIFT, shift_m},
                                              {DNNL_ARG_MEAN, rmean_m},  {DNNL_ARG_VARIANCE, rvar_m}};
  const std::int64_t c = s.c;
  const double m = static_cast<double>(s.n * s.h * s.w);
  const float unbias = m > 1 ? static_cast<float>(m / (m - 1)) : 1.f;
  n.fwd_train = [this, fwd, fargs, running, mean_m, var_m, c, unbias] {
    fwd->execute(strm, fargs);
    strm.wait();
    const float* mean = static_cast<const float*>(mean_m.get_data_handle());
    const float* var = static_cast<const float*>(var_m.get_data_handle());
    float* r = running->data();
    for (std::int64_t k = 0; k < c; ++k) {
      r[k] = (1 - BN_RUNNING_MOMENTUM) * r[k] + BN_RUNNING_MOMENTUM * mean[k];
      r[c + k] = (1 - BN_RUNNING_MOMENTUM) * r[c + k] + BN_RUNNING_MOMENTUM * var[k] * unbias;
    }
  };
  n.fwd_eval = [this, inf, iargs] { inf->execute(strm, iargs); };

  using BB = dnnl::batch_normalization_backward;
  auto bwd_pd = BB::primitive_desc(BB::desc(dnnl::prop_kind::backward, data, data, eps, flags), eng, fwd_pd);
  note(l.name, "bwd", bwd_pd);
  memory ddst_m(data, eng, n.diff.data());
  // The gradient w.r.t. the raw input is computed into a private buffer and discarded.
  memory dsrc_m = wants_diff(n, 0) ? memory(data, eng, diff_target(n, 0)) : memory(data, eng);
  memory dscale_m(c1, eng, grads.data() + sl.offset), dshift_m(c1, eng, grads.data() + sl.offset + s.c);
  auto bwd = std::make_shared<BB>(bwd_pd);
  const std::unordered_map<int, memory> bargs{
      {DNNL_ARG_SRC, src_m},         {DNNL_ARG_MEAN, mean_m},           {DNNL_ARG_VARIANCE, var_m},
      {DNNL_ARG_DIFF_DST, ddst_m},   {DNNL_ARG_SCALE, scale_m},         {DNNL_ARG_SHIFT, shift_m},
      {DNNL_ARG_DIFF_SRC, dsrc_m},   {DNNL_ARG_DIFF_SCALE, dscale_m},   {DNNL_ARG_DIFF_SHIFT, dshift_m}};
  const bool propagate = wants_diff(n, 0);
  n.bwd = [this, &n, bwd, bargs, propagate] {
    bwd->execute(strm, bargs);
    strm.wait();
    if (propagate) finish_diff(n, 0);
  };
}

void Net::Impl::build_eltwise(Node& n, dnnl::algorithm alg, bool use_dst) {
  const memory::desc data = md4(n.layer->dst_shape);
  using EF = dnnl::eltwise_forward;
  using EB = dnnl::eltwise_backward;
  auto fwd_pd = EF::primitive_desc(EF::desc(dnnl::prop_kind::forward_training, alg, data, 0.f, 0.f), eng);
  auto bwd_pd = EB::primitive_desc(EB::desc(alg, data, data, 0.f, 0.f), eng, fwd_pd);
  note(n.layer->name, "fwd", fwd_pd);
  memory src_m(data, eng, nodes[n.inputs[0]].dst.data()), dst_m(data, eng, n.dst.data());
  auto fwd = std::make_shared<EF>(fwd_pd);
  const std::unordered_map<int, memory> fargs{{DNNL_ARG_SRC, src_m}, {DNNL_ARG_DST, dst_m}};
  n.fwd_train = [this, fwd, fargs] { fwd->execute(strm, fargs); };
  n.fwd_eval = n.fwd_train;
  if (!wants_diff(n, 0)) {
    n.bwd = [] {};
    return;
  }
  memory ddst_m(data, eng, n.diff.data()), dsrc_m(data, eng, diff_target(n, 0));
  auto bwd = std::make_shared<EB>(bwd_pd);
  const std::unordered_map<int, memory> bargs{
      {use_dst ? DNNL_ARG_DST : DNNL_ARG_SRC, use_dst ? dst_m : src_m}, {DNNL_ARG_DIFF_DST, ddst_m}, {DNNL_ARG_DIFF_SRC, dsrc_m}};
  n.bwd = [this, &n, bwd, bargs] {
    bwd->execute(strm, bargs);
    strm.wait();
    finish_diff(n, 0);
  };
}

void Net::Impl::build_pool(Node& n) {
  const auto& l = *n.layer;
  const auto& s = l.src_shapes[0];
  const auto& d = l.dst_shape;
  memory::dims kernel, strides, pl, pr;
  dnnl::algorithm alg;
  if (l.op == OpKind::GLOBAL_AVG_POOL) {
    kernel = {s.h, s.w};
    strides = {1, 1};
    pl = pr = {0, 0};
    alg = dnnl::algorithm::pooling_avg_exclude_padding;
  } else {
    const auto& p = l.params;
    kernel = {p.kernel_h, p.kernel_w};
    strides = {p.stride_h, p.stride_w};
    pl = {p.pad_h, p.pad_w};
    pr = {pad_right(s.h, d.h, p.kernel_h, p.stride_h, 1, p.pad_h), pad_right(s.w, d.w, p.kernel_w, p.stride_w, 1, p.pad_w)};
    alg = l.op == OpKind::MAX_POOL          ? dnnl::algorithm::pooling_max
          : p.count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                : dnnl::algorithm::pooling_avg_exclude_padding;
  }
  const memory::desc src = md4(s), dst = md4(d);
  using PF = dnnl::pooling_forward;
  using PB = dnnl::pooling_backward;
  auto fwd_pd =
      PF::primitive_desc(PF::desc(dnnl::prop_kind::forward_training, alg, src, dst, strides, kernel, pl, pr), eng);
  note(l.name, "fwd", fwd_pd);
  memory src_m(src, eng, nodes[n.inputs[0]].dst.data()), dst_m(dst, eng, n.dst.data());
  std::unordered_map<int, memory> fargs{{DNNL_ARG_SRC, src_m}, {DNNL_ARG_DST, dst_m}};
  memory ws;
  if (alg == dnnl::algorithm::pooling_max) {
    ws = memory(fwd_pd.workspace_desc(), eng);
    fargs[DNNL_ARG_WORKSPACE] = ws;
  }
  auto fwd = std::make_shared<PF>(fwd_pd);
  n.fwd_train = [this, fwd, fargs] { fwd->execute(strm, fargs); };
  n.fwd_eval = n.fwd_train;
  if (!wants_diff(n, 0)) {
    n.bwd = [] {};
    return;
  }
  auto bwd_pd = PB::primitive_desc(PB::desc(alg, src, dst, strides, kernel, pl, pr), eng, fwd_pd);
  memory ddst_m(dst, eng, n.diff.data()), dsrc_m(src, eng, diff_target(n, 0));
  std::unordered_map<int, memory> bargs{{DNNL_ARG_DIFF_DST, ddst_m}, {DNNL_ARG_DIFF_SRC, dsrc_m}};
  if (ws) bargs[DNNL_ARG_WORKSPACE] = ws;
  auto bwd = std::make_shared<PB>(bwd_pd);
  n.bwd = [this, &n, bwd, bargs] {
    bwd->execute(strm, bargs);
    strm.wait();
    finish_diff(n, 0);
  };
}

void Net::Impl::build_add(Node& n) {
  const auto& l = *n.layer;
  const memory::desc a = md4(l.src_shapes[0]), b = md4(l.src_shapes[1]), d = md4(l.dst_shape);
  using BIN = dnnl::binary;
  auto pd = BIN::primitive_desc(BIN::desc(dnnl::algorithm::binary_add, a, b, d), eng);
  note(l.name, "fwd", pd);
  auto prim = std::make_shared<BIN>(pd);
  const std::unordered_map<int, memory> args{{DNNL_ARG_SRC_0, memory(a, eng, nodes[n.inputs[0]].dst.data())},
                                             {DNNL_ARG_SRC_1, memory(b, eng, nodes[n.inputs[1]].dst.data())},
                                             {DNNL_ARG_DST, memory(d, eng, n.dst.data())}};
  n.fwd_train = [this, prim, args] { prim->execute(strm, args); };
  n.fwd_eval = n.fwd_train;
  // d(a + b) passes the same gradient to both inputs.
  n.bwd = [this, &n] {
    for (std::size_t k = 0; k < n.inputs.size(); ++k) {
      if (!wants_diff(n, k)) continue;
      float* t = diff_target(n, k);
      std::copy(n.diff.begin(), n.diff.end(), t);
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

void Net::Impl::build_loss(Node& n) {
  const auto& s = n.layer->src_shapes[0];
  classes = s.per_sample();
  const memory::desc data = md2(s.n, classes);
  using SF = dnnl::softmax_forward;
  auto pd = SF::primitive_desc(SF::desc(dnnl::prop_kind::forward_training, data, 1), eng);
  note(n.layer->name, "fwd", pd);
  auto prim = std::make_shared<SF>(pd);
  const std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(data, eng, nodes[n.inputs[0]].dst.data())},
                                             {DNNL_ARG_DST, memory(data, eng, n.dst.data())}};
  n.fwd_train = [this, prim, args] { prim->execute(strm, args); };
  n.fwd_eval = n.fwd_train;
  // d(mean cross-entropy)/d(logits) = (softmax - one_hot) / batch.
  n.bwd = [this, &n] {
    const std::int64_t batch = n.layer->src_shapes[0].n;
    float* t = diff_target(n, 0);
    const float inv = 1.f / static_cast<float>(batch);
    for (std::int64_t i = 0; i < batch; ++i)
      for (std::int64_t k = 0; k < classes; ++k)
        t[i * classes + k] = (n.dst[i * classes + k] - (labels[i] == k ? 1.f : 0.f)) * inv;
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
                                    ? l.src_shapes[0].c * l.params.kernel_h * l.params.kernel_w
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
