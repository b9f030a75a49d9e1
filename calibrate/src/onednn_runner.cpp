// oneDNN primitives per layer and pass (see onednn_runner.hpp). Shapes come from models::Layer.
#include "calibrate/src/onednn_runner.hpp"

#include <fmt/format.h>

#include <cpuid.h>
#include <omp.h>
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "common/errors.hpp"

namespace dtsim::calibrate {
namespace {

using dnnl::algorithm;
using dnnl::memory;
using dnnl::prop_kind;
using tag = memory::format_tag;
using dt = memory::data_type;
using models::OpKind;

// SGD hyper-parameters of the timed update (values do not change the time).
constexpr float SGD_MOMENTUM = 0.9f;
constexpr float SGD_LEARNING_RATE = 0.01f;
// The optimizer step is timed on chunks of at most this many parameters (memory bound, linear).
constexpr std::int64_t UPDATE_CHUNK_PARAMS = 16 * 1024 * 1024;

bool avx512() {
  const auto isa = dnnl::get_effective_cpu_isa();
  return isa == dnnl::cpu_isa::avx512_core || isa == dnnl::cpu_isa::avx512_core_vnni ||
         isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

// Layout of activations between layers: the blocked layout oneDNN's convolutions produce on this ISA
// when the channels allow it (what a oneDNN-backed framework keeps between layers), else plain NCHW.
tag activation_tag(std::int64_t channels) {
  const std::int64_t block = avx512() ? 16 : 8;
  if (channels % block == 0) return block == 16 ? tag::nChw16c : tag::nChw8c;
  return tag::nchw;
}

memory::dims dims4(const models::Shape& s) { return {s.n, s.c, s.h, s.w}; }

memory::desc act_md(const models::Shape& s) { return memory::desc(dims4(s), dt::f32, activation_tag(s.c)); }

// Right padding that makes oneDNN's output size equal the model's (covers ceil mode).
memory::dim pad_r(memory::dim in, memory::dim out, memory::dim k, memory::dim stride, memory::dim dil,
                  memory::dim pad_l) {
  return (out - 1) * stride + (k - 1) * dil + 1 - in - pad_l;
}

}  // namespace

std::string onednn_isa_name() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic: return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "unknown";
  }
}

std::string onednn_version_string() {
  const auto* v = dnnl::version();
  return fmt::format("oneDNN {}.{}.{}", v->major, v->minor, v->patch);
}

void OpRunner::check_budget(std::int64_t more) {
  if (bytes_ + more > max_bytes_)
    throw InputError(fmt::format("--batch: the tensors of one layer would need {:.2f} GiB, over the {:.2f} GiB "
                                 "calibration limit; calibrate at a smaller batch (build_profile carries a "
                                 "shape's efficiency across batches)",
                                 static_cast<double>(bytes_ + more) / (1 << 30),
                                 static_cast<double>(max_bytes_) / (1 << 30)));
}

memory OpRunner::make(const memory::desc& desc) {
  const auto size = static_cast<std::int64_t>(desc.get_size());
  check_budget(size);
  memory m(desc, engine_);
  bytes_ += size;
  // Values in [-1, 1] (never denormal, never zero everywhere); the pattern does not change kernel times.
  if (desc.data_type() == dt::f32) {
    // The pattern has period FILL_PERIOD: compute one period, copy it with every thread (first touch of
    // gigabytes of tensors dominates building a large model's runners).
    constexpr std::int64_t FILL_PERIOD = 2001;
    auto* p = static_cast<float*>(m.get_data_handle());
    const auto n = static_cast<std::int64_t>(desc.get_size() / sizeof(float));
    std::vector<float> period(FILL_PERIOD);
    for (std::int64_t i = 0; i < FILL_PERIOD; ++i)
      period[static_cast<std::size_t>(i)] = static_cast<float>(static_cast<int>((i * 7919) % FILL_PERIOD) - 1000) * 1e-3f;
    const std::int64_t periods = (n + FILL_PERIOD - 1) / FILL_PERIOD;
#pragma omp parallel for schedule(static) if (n > (1 << 20))
    for (std::int64_t k = 0; k < periods; ++k) {
      const std::int64_t lo = k * FILL_PERIOD, len = std::min(FILL_PERIOD, n - lo);
      std::memcpy(p + lo, period.data(), static_cast<std::size_t>(len) * sizeof(float));
    }
  } else {
    std::memset(m.get_data_handle(), 0, desc.get_size());
  }
  return m;
}

void OpRunner::add(Pass pass, dnnl::primitive primitive, std::unordered_map<int, memory> args,
                   const std::string& impl, int repeat) {
  steps_[pass].push_back(Step{std::move(primitive), std::move(args), repeat});
  std::string& name = impl_[pass];
  if (name.find(impl) == std::string::npos) name += name.empty() ? impl : "+" + impl;
}

void OpRunner::run(Pass pass, dnnl::stream& stream) {
  auto it = steps_.find(pass);
  if (it == steps_.end()) return;
  for (auto& step : it->second)
    for (int r = 0; r < step.repeat; ++r) step.primitive.execute(stream, step.args);
  stream.wait();
}

namespace {

bool has_clflushopt() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) != 0 && (ebx & (1u << 23)) != 0;
}

// clflushopt is weakly ordered and ~25x faster than clflush here (12-27 vs 0.5 GB/s of dirty lines).
__attribute__((target("clflushopt"))) void flush_lines_opt(const char* base, std::int64_t lines) {
  for (std::int64_t i = 0; i < lines; ++i) _mm_clflushopt(const_cast<char*>(base) + i * 64);
}

void flush_lines(const char* base, std::int64_t lines) {
  for (std::int64_t i = 0; i < lines; ++i) _mm_clflush(base + i * 64);
}

}  // namespace

void OpRunner::flush(Pass pass) {
  auto it = steps_.find(pass);
  if (it == steps_.end()) return;
  static const bool opt = has_clflushopt();
  constexpr std::size_t LINE_BYTES = 64;
  constexpr std::int64_t PARALLEL_FLUSH_LINES = 16384;  // 1 MiB: below it a thread team costs more than it saves
  for (auto& step : it->second) {
    for (auto& [arg, m] : step.args) {
      const auto* base = static_cast<const char*>(m.get_data_handle());
      const auto lines = static_cast<std::int64_t>((m.get_desc().get_size() + LINE_BYTES - 1) / LINE_BYTES);
      // Large tensors are flushed by every thread, so the disturbance check (own CPU time against
      // wall x threads) does not see a one-thread flush as lost CPU.
      const int chunks = lines >= PARALLEL_FLUSH_LINES ? omp_get_max_threads() : 1;
#pragma omp parallel for num_threads(chunks) schedule(static) if (chunks > 1)
      for (int c = 0; c < chunks; ++c) {
        const std::int64_t lo = lines * c / chunks, hi = lines * (c + 1) / chunks;
        if (opt) flush_lines_opt(base + lo * 64, hi - lo);
        else flush_lines(base + lo * 64, hi - lo);
      }
    }
  }
  _mm_mfence();  // every flush is complete before the timed run starts
}

std::string OpRunner::impl(Pass pass) const {
  auto it = impl_.find(pass);
  return it == impl_.end() ? "" : it->second;
}

OpRunner::OpRunner(const dnnl::engine& engine, std::int64_t params, std::int64_t max_bytes)
    : engine_(engine), max_bytes_(max_bytes) {
  if (params < 1) throw InputError(fmt::format("update: parameter count must be >= 1, got {}", params));
  const std::int64_t chunk = std::min(params, UPDATE_CHUNK_PARAMS);
  const std::int64_t full = params / chunk;
  const std::int64_t rest = params - full * chunk;
  auto add_chunk = [&](std::int64_t n, int repeat) {
    const memory::desc md({n}, dt::f32, tag::a);
    memory w = make(md), v = make(md), g = make(md);
    dnnl::sum::primitive_desc velocity(md, {SGD_MOMENTUM, 1.0f}, {md, md}, engine_);
    dnnl::sum::primitive_desc weights(md, {1.0f, -SGD_LEARNING_RATE}, {md, md}, engine_);
    add(Pass::FWD, dnnl::sum(velocity),
        {{DNNL_ARG_MULTIPLE_SRC, v}, {DNNL_ARG_MULTIPLE_SRC + 1, g}, {DNNL_ARG_DST, v}}, velocity.impl_info_str(),
        repeat);
    add(Pass::FWD, dnnl::sum(weights),
        {{DNNL_ARG_MULTIPLE_SRC, w}, {DNNL_ARG_MULTIPLE_SRC + 1, v}, {DNNL_ARG_DST, w}}, weights.impl_info_str(),
        repeat);
  };
  try {
    add_chunk(chunk, static_cast<int>(full));
    if (rest > 0) add_chunk(rest, 1);
  } catch (const dnnl::error& e) {
    throw Failure(fmt::format("oneDNN could not build the SGD update over {} parameters: {}", params, e.what()));
  }
}

OpRunner::OpRunner(const dnnl::engine& engine, const models::Layer& layer, std::int64_t max_bytes)
    : engine_(engine), max_bytes_(max_bytes) {
  const auto& p = layer.params;
  const models::Shape& s = layer.src_shapes.front();
  const models::Shape& d = layer.dst_shape;
  const auto any = tag::any;
  const std::vector<Pass> passes = passes_of(layer);
  const bool need_bwd_data = std::count(passes.begin(), passes.end(), Pass::BWD_DATA) > 0;
  try {
    switch (layer.op) {
      case OpKind::CONV2D: {
        const memory::dims strides{p.stride_h, p.stride_w}, dil{p.dilation_h - 1, p.dilation_w - 1},
            pl{p.pad_h, p.pad_w},
            pr{pad_r(s.h, d.h, p.kernel_h, p.stride_h, p.dilation_h, p.pad_h),
               pad_r(s.w, d.w, p.kernel_w, p.stride_w, p.dilation_w, p.pad_w)};
        const memory::dims wdims = p.groups > 1 ? memory::dims{p.groups, d.c / p.groups, s.c / p.groups, p.kernel_h,
                                                               p.kernel_w}
                                                : memory::dims{d.c, s.c, p.kernel_h, p.kernel_w};
        const memory::desc src(dims4(s), dt::f32, any), wei(wdims, dt::f32, any), dst(dims4(d), dt::f32, any),
            bias({d.c}, dt::f32, tag::a);
        auto fwd_d = p.bias ? dnnl::convolution_forward::desc(prop_kind::forward_training,
                                                              algorithm::convolution_direct, src, wei, bias, dst,
                                                              strides, dil, pl, pr)
                            : dnnl::convolution_forward::desc(prop_kind::forward_training,
                                                              algorithm::convolution_direct, src, wei, dst, strides,
                                                              dil, pl, pr);
        dnnl::convolution_forward::primitive_desc fwd(fwd_d, engine_);
        std::unordered_map<int, memory> fa{{DNNL_ARG_SRC, make(fwd.src_desc())},
                                           {DNNL_ARG_WEIGHTS, make(fwd.weights_desc())},
                                           {DNNL_ARG_DST, make(fwd.dst_desc())}};
        if (p.bias) fa[DNNL_ARG_BIAS] = make(fwd.bias_desc());
        add(Pass::FWD, dnnl::convolution_forward(fwd), std::move(fa), fwd.impl_info_str());
        if (need_bwd_data) {
          dnnl::convolution_backward_data::primitive_desc bd(
              dnnl::convolution_backward_data::desc(algorithm::convolution_direct, src, wei, dst, strides, dil, pl,
                                                    pr),
              engine_, fwd);
          add(Pass::BWD_DATA, dnnl::convolution_backward_data(bd),
              {{DNNL_ARG_DIFF_SRC, make(bd.diff_src_desc())},
               {DNNL_ARG_WEIGHTS, make(bd.weights_desc())},
               {DNNL_ARG_DIFF_DST, make(bd.diff_dst_desc())}},
              bd.impl_info_str());
        }
        auto bw_d = p.bias ? dnnl::convolution_backward_weights::desc(algorithm::convolution_direct, src, wei, bias,
                                                                      dst, strides, dil, pl, pr)
                           : dnnl::convolution_backward_weights::desc(algorithm::convolution_direct, src, wei, dst,
                                                                      strides, dil, pl, pr);
        dnnl::convolution_backward_weights::primitive_desc bw(bw_d, engine_, fwd);
        std::unordered_map<int, memory> wa{{DNNL_ARG_SRC, make(bw.src_desc())},
                                           {DNNL_ARG_DIFF_WEIGHTS, make(bw.diff_weights_desc())},
                                           {DNNL_ARG_DIFF_DST, make(bw.diff_dst_desc())}};
        if (p.bias) wa[DNNL_ARG_DIFF_BIAS] = make(bw.diff_bias_desc());
        add(Pass::BWD_WEIGHTS, dnnl::convolution_backward_weights(bw), std::move(wa), bw.impl_info_str());
        break;
      }
      case OpKind::FULLY_CONNECTED: {
        const bool flat = s.h == 1 && s.w == 1;
        const memory::dims sdims = flat ? memory::dims{s.n, s.c} : dims4(s);
        const memory::dims wdims = flat ? memory::dims{d.c, s.c} : memory::dims{d.c, s.c, s.h, s.w};
        const memory::desc src(sdims, dt::f32, any), wei(wdims, dt::f32, any), dst({d.n, d.c}, dt::f32, any),
            bias({d.c}, dt::f32, tag::a);
        auto fwd_d = p.bias ? dnnl::inner_product_forward::desc(prop_kind::forward_training, src, wei, bias, dst)
                            : dnnl::inner_product_forward::desc(prop_kind::forward_training, src, wei, dst);
        dnnl::inner_product_forward::primitive_desc fwd(fwd_d, engine_);
        std::unordered_map<int, memory> fa{{DNNL_ARG_SRC, make(fwd.src_desc())},
                                           {DNNL_ARG_WEIGHTS, make(fwd.weights_desc())},
                                           {DNNL_ARG_DST, make(fwd.dst_desc())}};
        if (p.bias) fa[DNNL_ARG_BIAS] = make(fwd.bias_desc());
        add(Pass::FWD, dnnl::inner_product_forward(fwd), std::move(fa), fwd.impl_info_str());
        if (need_bwd_data) {
          dnnl::inner_product_backward_data::primitive_desc bd(
              dnnl::inner_product_backward_data::desc(src, wei, dst), engine_, fwd);
          add(Pass::BWD_DATA, dnnl::inner_product_backward_data(bd),
              {{DNNL_ARG_DIFF_SRC, make(bd.diff_src_desc())},
               {DNNL_ARG_WEIGHTS, make(bd.weights_desc())},
               {DNNL_ARG_DIFF_DST, make(bd.diff_dst_desc())}},
              bd.impl_info_str());
        }
        auto bw_d = p.bias ? dnnl::inner_product_backward_weights::desc(src, wei, bias, dst)
                           : dnnl::inner_product_backward_weights::desc(src, wei, dst);
        dnnl::inner_product_backward_weights::primitive_desc bw(bw_d, engine_, fwd);
        std::unordered_map<int, memory> wa{{DNNL_ARG_SRC, make(bw.src_desc())},
                                           {DNNL_ARG_DIFF_WEIGHTS, make(bw.diff_weights_desc())},
                                           {DNNL_ARG_DIFF_DST, make(bw.diff_dst_desc())}};
        if (p.bias) wa[DNNL_ARG_DIFF_BIAS] = make(bw.diff_bias_desc());
        add(Pass::BWD_WEIGHTS, dnnl::inner_product_backward_weights(bw), std::move(wa), bw.impl_info_str());
        break;
      }
      case OpKind::BATCH_NORM: {
        const memory::desc data = act_md(s);
        const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
        const auto eps = static_cast<float>(p.bn_epsilon);
        dnnl::batch_normalization_forward::primitive_desc fwd(
            dnnl::batch_normalization_forward::desc(prop_kind::forward_training, data, eps, flags), engine_);
        const memory::desc cvec({s.c}, dt::f32, tag::a);
        memory src = make(data), scale = make(cvec), shift = make(cvec), mean = make(fwd.mean_desc()), var = make(fwd.variance_desc());
        add(Pass::FWD, dnnl::batch_normalization_forward(fwd),
            {{DNNL_ARG_SRC, src},
             {DNNL_ARG_DST, make(data)},
             {DNNL_ARG_SCALE, scale},
             {DNNL_ARG_SHIFT, shift},
             {DNNL_ARG_MEAN, mean},
             {DNNL_ARG_VARIANCE, var}},
            fwd.impl_info_str());
        dnnl::batch_normalization_backward::primitive_desc bwd(
            dnnl::batch_normalization_backward::desc(prop_kind::backward, data, data, eps, flags), engine_, fwd);
        add(Pass::BWD_DATA, dnnl::batch_normalization_backward(bwd),
            {{DNNL_ARG_SRC, src},
             {DNNL_ARG_MEAN, mean},
             {DNNL_ARG_VARIANCE, var},
             {DNNL_ARG_DIFF_DST, make(data)},
             {DNNL_ARG_SCALE, scale},
             {DNNL_ARG_SHIFT, shift},
             {DNNL_ARG_DIFF_SRC, make(data)},
             {DNNL_ARG_DIFF_SCALE, make(cvec)},
             {DNNL_ARG_DIFF_SHIFT, make(cvec)}},
            bwd.impl_info_str());
        break;
      }
      case OpKind::RELU:
      case OpKind::TANH: {
        const memory::desc data = act_md(s);
        const auto algo = layer.op == OpKind::RELU ? algorithm::eltwise_relu : algorithm::eltwise_tanh;
        dnnl::eltwise_forward::primitive_desc fwd(
            dnnl::eltwise_forward::desc(prop_kind::forward_training, algo, data, 0.f, 0.f), engine_);
        memory src = make(data);
        add(Pass::FWD, dnnl::eltwise_forward(fwd), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, make(data)}},
            fwd.impl_info_str());
        dnnl::eltwise_backward::primitive_desc bwd(dnnl::eltwise_backward::desc(algo, data, data, 0.f, 0.f), engine_,
                                                   fwd);
        add(Pass::BWD_DATA, dnnl::eltwise_backward(bwd),
            {{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, make(data)}, {DNNL_ARG_DIFF_SRC, make(data)}},
            bwd.impl_info_str());
        break;
      }
      case OpKind::DROPOUT: {
        // Forward multiplies by a (pre-drawn) scaled mask, backward multiplies the gradient by it.
        const memory::desc data = act_md(s);
        dnnl::binary::primitive_desc mul(dnnl::binary::desc(algorithm::binary_mul, data, data, data), engine_);
        memory mask = make(data);
        add(Pass::FWD, dnnl::binary(mul), {{DNNL_ARG_SRC_0, make(data)}, {DNNL_ARG_SRC_1, mask}, {DNNL_ARG_DST, make(data)}},
            mul.impl_info_str());
        add(Pass::BWD_DATA, dnnl::binary(mul),
            {{DNNL_ARG_SRC_0, make(data)}, {DNNL_ARG_SRC_1, mask}, {DNNL_ARG_DST, make(data)}}, mul.impl_info_str());
        break;
      }
      case OpKind::MAX_POOL:
      case OpKind::AVG_POOL:
      case OpKind::GLOBAL_AVG_POOL: {
        const bool global = layer.op == OpKind::GLOBAL_AVG_POOL;
        const memory::dim kh = global ? s.h : p.kernel_h, kw = global ? s.w : p.kernel_w;
        const memory::dim sh = global ? 1 : p.stride_h, sw = global ? 1 : p.stride_w;
        const memory::dim ph = global ? 0 : p.pad_h, pw = global ? 0 : p.pad_w;
        const memory::dims strides{sh, sw}, kernel{kh, kw}, pl{ph, pw},
            pr{pad_r(s.h, d.h, kh, sh, 1, ph), pad_r(s.w, d.w, kw, sw, 1, pw)};
        const auto algo = layer.op == OpKind::MAX_POOL ? algorithm::pooling_max
                          : (global || p.count_include_pad) ? algorithm::pooling_avg_include_padding
                                                            : algorithm::pooling_avg_exclude_padding;
        const memory::desc src = act_md(s), dst = act_md(d);
        dnnl::pooling_forward::primitive_desc fwd(
            dnnl::pooling_forward::desc(prop_kind::forward_training, algo, src, dst, strides, kernel, pl, pr), engine_);
        std::unordered_map<int, memory> fa{{DNNL_ARG_SRC, make(src)}, {DNNL_ARG_DST, make(dst)}};
        std::unordered_map<int, memory> ba;
        if (fwd.workspace_desc().get_size() > 0) {
          memory ws = make(fwd.workspace_desc());
          fa[DNNL_ARG_WORKSPACE] = ws;
          ba[DNNL_ARG_WORKSPACE] = ws;
        }
        add(Pass::FWD, dnnl::pooling_forward(fwd), std::move(fa), fwd.impl_info_str());
        dnnl::pooling_backward::primitive_desc bwd(
            dnnl::pooling_backward::desc(algo, src, dst, strides, kernel, pl, pr), engine_, fwd);
        ba[DNNL_ARG_DIFF_DST] = make(dst);
        ba[DNNL_ARG_DIFF_SRC] = make(src);
        add(Pass::BWD_DATA, dnnl::pooling_backward(bwd), std::move(ba), bwd.impl_info_str());
        break;
      }
      case OpKind::LRN: {
        const memory::desc data = act_md(s);
        const auto alpha = static_cast<float>(p.lrn_alpha), beta = static_cast<float>(p.lrn_beta),
                   k = static_cast<float>(p.lrn_k);
        dnnl::lrn_forward::primitive_desc fwd(
            dnnl::lrn_forward::desc(prop_kind::forward_training, algorithm::lrn_across_channels, data, p.lrn_size,
                                    alpha, beta, k),
            engine_);
        memory src = make(data);
        std::unordered_map<int, memory> fa{{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, make(data)}};
        std::unordered_map<int, memory> ba{{DNNL_ARG_SRC, src}};
        if (fwd.workspace_desc().get_size() > 0) {
          memory ws = make(fwd.workspace_desc());
          fa[DNNL_ARG_WORKSPACE] = ws;
          ba[DNNL_ARG_WORKSPACE] = ws;
        }
        add(Pass::FWD, dnnl::lrn_forward(fwd), std::move(fa), fwd.impl_info_str());
        dnnl::lrn_backward::primitive_desc bwd(
            dnnl::lrn_backward::desc(algorithm::lrn_across_channels, data, data, p.lrn_size, alpha, beta, k), engine_,
            fwd);
        ba[DNNL_ARG_DIFF_DST] = make(data);
        ba[DNNL_ARG_DIFF_SRC] = make(data);
        add(Pass::BWD_DATA, dnnl::lrn_backward(bwd), std::move(ba), bwd.impl_info_str());
        break;
      }
      case OpKind::SOFTMAX_LOSS: {
        // Softmax over the classes; the cross-entropy gradient is probabilities - one-hot labels.
        const memory::desc data({s.n, s.per_sample()}, dt::f32, tag::nc);
        dnnl::softmax_forward::primitive_desc fwd(dnnl::softmax_forward::desc(prop_kind::forward_training, data, 1),
                                                  engine_);
        memory probs = make(data);
        add(Pass::FWD, dnnl::softmax_forward(fwd), {{DNNL_ARG_SRC, make(data)}, {DNNL_ARG_DST, probs}},
            fwd.impl_info_str());
        dnnl::binary::primitive_desc sub(dnnl::binary::desc(algorithm::binary_sub, data, data, data), engine_);
        add(Pass::BWD_DATA, dnnl::binary(sub),
            {{DNNL_ARG_SRC_0, probs}, {DNNL_ARG_SRC_1, make(data)}, {DNNL_ARG_DST, make(data)}}, sub.impl_info_str());
        break;
      }
      case OpKind::ADD: {
        // Forward: the sum of the inputs. Backward: the gradient reaching the add is passed through,
        // and the branch point feeding the shortcut must accumulate two gradients (a 2-input sum).
        const memory::desc data = act_md(s);
        const std::vector<memory::desc> srcs(layer.src_shapes.size(), data);
        dnnl::sum::primitive_desc fwd(data, std::vector<float>(srcs.size(), 1.0f), srcs, engine_);
        std::unordered_map<int, memory> fa{{DNNL_ARG_DST, make(data)}};
        for (std::size_t i = 0; i < srcs.size(); ++i) fa[DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i)] = make(data);
        add(Pass::FWD, dnnl::sum(fwd), std::move(fa), fwd.impl_info_str());
        dnnl::sum::primitive_desc bwd(data, {1.0f, 1.0f}, {data, data}, engine_);
        add(Pass::BWD_DATA, dnnl::sum(bwd),
            {{DNNL_ARG_MULTIPLE_SRC, make(data)}, {DNNL_ARG_MULTIPLE_SRC + 1, make(data)}, {DNNL_ARG_DST, make(data)}},
            bwd.impl_info_str());
        break;
      }
      case OpKind::CONCAT: {
        std::vector<memory::desc> srcs;
        bool aligned = true;
        const std::int64_t block = avx512() ? 16 : 8;
        for (const auto& in : layer.src_shapes) {
          srcs.push_back(act_md(in));
          aligned = aligned && in.c % block == 0;
        }
        const memory::desc dst(dims4(d), dt::f32, aligned ? activation_tag(d.c) : tag::nchw);
        dnnl::concat::primitive_desc fwd(dst, 1, srcs, engine_);
        std::unordered_map<int, memory> fa{{DNNL_ARG_DST, make(dst)}};
        for (std::size_t i = 0; i < srcs.size(); ++i) fa[DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i)] = make(srcs[i]);
        add(Pass::FWD, dnnl::concat(fwd), std::move(fa), fwd.impl_info_str());
        // Backward splits the gradient: one copy per input of that input's channels. It is timed as a
        // reorder from a plain NCHW tensor of the input's shape (the same bytes read and written as a
        // channel slice of diff_dst): oneDNN 2.6.3 segfaults reordering channel-slice views at batch 32
        // (Inception-v3's first concat), in blocked and in plain layouts alike.
        for (std::size_t i = 0; i < srcs.size(); ++i) {
          const memory::desc plain(dims4(layer.src_shapes[i]), dt::f32, tag::nchw);
          memory diff_slice = make(plain);
          memory diff_src = make(srcs[i]);
          dnnl::reorder::primitive_desc split(engine_, plain, engine_, srcs[i]);
          add(Pass::BWD_DATA, dnnl::reorder(split), {{DNNL_ARG_FROM, diff_slice}, {DNNL_ARG_TO, diff_src}},
              split.impl_info_str());
        }
        break;
      }
      case OpKind::INPUT:
      case OpKind::FLATTEN: break;
    }
  } catch (const dnnl::error& e) {
    throw Failure(fmt::format("oneDNN could not build layer '{}' ({}): {}", layer.name, models::to_string(layer.op),
                              e.what()));
  }
  // Run the forward pass once so that workspaces, means and variances hold what backward expects.
  dnnl::stream stream(engine_);
  run(Pass::FWD, stream);
}

}  // namespace dtsim::calibrate
