// oneDNN primitives per layer and pass (see onednn_runner.hpp). Shapes come from models::Layer.
#include "calibrate/src/onednn_runner.hpp"

#include <fmt/format.h>

#include <cpuid.h>
#include <omp.h>
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "calibrate/ops/op_driver.hpp"
#include "common/errors.hpp"

namespace dtsim::calibrate {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

// SGD hyper-parameters of the timed update (values do not change the time).
constexpr float SGD_MOMENTUM = 0.9f;
constexpr float SGD_LEARNING_RATE = 0.01f;
// The optimizer step is timed on chunks of at most this many parameters (memory bound, linear).
constexpr std::int64_t UPDATE_CHUNK_PARAMS = 16 * 1024 * 1024;

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
  if (!ops::has_driver(layer)) return;  // input, flatten, rows without a driver: nothing to time
  const std::vector<Pass> passes = passes_of(layer);
  const bool need_bwd_data = std::count(passes.begin(), passes.end(), Pass::BWD_DATA) > 0;
  try {
    const ops::OpPlan plan = ops::build_op(engine_, {&layer, ops::Layout::BLOCKED, need_bwd_data, false});
    tensors_ = ops::bind(engine_, plan, [&](const ops::Tensor& t) { return make(t.desc); });
    ops::fill_causal_mask(plan, tensors_);
    for (const auto& [stage, pass] : {std::pair{ops::Stage::FWD, Pass::FWD}, std::pair{ops::Stage::BWD_DATA, Pass::BWD_DATA},
                                      std::pair{ops::Stage::BWD_WEIGHTS, Pass::BWD_WEIGHTS}}) {
      auto it = plan.stages.find(stage);
      if (it == plan.stages.end()) continue;
      for (const auto& step : it->second) add(pass, step.primitive, ops::args_of(step, tensors_), step.impl);
    }
  } catch (const dnnl::error& e) {
    throw Failure(fmt::format("oneDNN could not build layer '{}' ({}): {}", layer.name, models::op_name(layer),
                              e.what()));
  }
  // Run the forward pass once so that workspaces, means and variances hold what backward expects.
  dnnl::stream stream(engine_);
  run(Pass::FWD, stream);
}

}  // namespace dtsim::calibrate
