// GPU kernel model: reads data/gpu_kernels.json and times conv2d / fully_connected passes on GPUs.
#include "calibrate/gpu_kernel_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>

#include "common/errors.hpp"
#include "common/json_limits.hpp"
#include "common/paths.hpp"
#include "models/op_rows.hpp"

namespace dtsim::calibrate {
namespace {

constexpr double FP32_BYTES = 4.0;
constexpr double FP16_BYTES = 2.0;
// Largest model file read: the shipped one (data/gpu_kernels.json, every fitted device) is 23 KB.
constexpr std::size_t GPU_KERNEL_MODEL_MAX_BYTES = 16 << 20;

// The CNN fits are keyed by fp32 and fp16-mixed; bf16-mixed uses the fp16 fit (equal FP16 and BF16 tensor
// peaks on A100 and H100: NVIDIA A100 and H100 datasheets), tf32 and fp8 have none.
std::string key_of(const std::string& device, Precision precision) {
  const auto fit = precision_row(precision).cnn_fit;
  return device + "|" + std::string(fit ? to_string(*fit) : "none");
}

double positive(const nlohmann::json& j, const char* field, const std::string& path, const std::string& where) {
  if (!j.contains(field) || !j.at(field).is_number() || !(j.at(field).get<double>() > 0))
    throw InputError(fmt::format("{}: {}: field '{}' must be a number > 0", path, where, field));
  return j.at(field).get<double>();
}

std::map<std::string, double> positive_map(const nlohmann::json& j, const char* field, const std::string& path,
                                           const std::string& where) {
  if (!j.contains(field) || !j.at(field).is_object())
    throw InputError(fmt::format("{}: {}: field '{}' must be a map of name to number", path, where, field));
  std::map<std::string, double> out;
  for (const auto& [name, v] : j.at(field).items()) {
    if (!v.is_number() || !(v.get<double>() > 0))
      throw InputError(fmt::format("{}: {}: {}['{}'] must be a number > 0", path, where, field, name));
    out[name] = v.get<double>();
  }
  return out;
}

KernelCoefficients parse_coefficients(const nlohmann::json& j, const std::string& path, const std::string& where,
                                      std::string fitted_on) {
  KernelCoefficients k;
  k.launch_s = positive(j, "launch_s", path, where);
  k.mem_eff = positive(j, "mem_eff", path, where);
  k.eff_default = positive(j, "eff_default", path, where);
  k.eff = positive_map(j, "eff", path, where);
  k.half_fill = positive_map(j, "half_fill", path, where);
  k.fitted_on = std::move(fitted_on);
  return k;
}

std::optional<Precision> precision_or_null(std::string_view name) {
  for (const auto& r : precision_rows())
    if (r.name == name) return r.precision;
  return std::nullopt;
}

// Reads one "precisions" block of a device or fallback entry.
void read_precisions(GpuKernelModel& model, const nlohmann::json& entry, const std::string& device,
                     const std::string& fitted_on, const std::string& path) {
  if (!entry.contains("precisions") || !entry.at("precisions").is_object())
    throw InputError(fmt::format("{}: device '{}': field 'precisions' must be a map", path, device));
  for (const auto& [name, coeffs] : entry.at("precisions").items()) {
    const auto precision = precision_or_null(name);
    if (!precision)
      throw InputError(fmt::format("{}: device '{}': unknown precision '{}' (expected fp32 or fp16-mixed)", path,
                                   device, name));
    // A block may name its own sources when they differ per precision (H100: FP32 measured, FP16 from V100).
    std::string from = fitted_on;
    if (coeffs.is_object() && coeffs.contains("from")) {
      if (!coeffs.at("from").is_array())
        throw InputError(fmt::format("{}: device '{}' {}: field 'from' must be a list of device names", path, device, name));
      from.clear();
      for (const auto& f : coeffs.at("from")) {
        if (!f.is_string())
          throw InputError(fmt::format("{}: device '{}' {}: field 'from' must be a list of device names", path, device, name));
        from += (from.empty() ? "" : "+") + f.get<std::string>();
      }
    }
    model.set(device, *precision, parse_coefficients(coeffs, path, fmt::format("device '{}' {}", device, name), from));
  }
}

// DeepBench families: Winograd-eligible 3x3 stride 1, 1x1, everything else (grouped/dilated included).
std::string conv_family(const models::LayerParams& p) {
  if (p.groups != 1 || p.dilation_h != 1 || p.dilation_w != 1) return "other";
  if (p.kernel_h == 3 && p.kernel_w == 3 && p.stride_h == 1 && p.stride_w == 1) return "w3";
  if (p.kernel_h == 1 && p.kernel_w == 1) return "k1";
  return "other";
}

// ---- tensor kernels (§4d) ----

constexpr std::array MATH_PRECISIONS = {
    MathPrecision{"fp32", 4.0, &platforms::Device::peak_flops, "peak_flops"},
    MathPrecision{"tf32", 4.0, &platforms::Device::tf32_tensor_flops, "tf32_tensor_flops"},
    MathPrecision{"fp16", 2.0, &platforms::Device::fp16_tensor_flops, "fp16_tensor_flops"},
    MathPrecision{"bf16", 2.0, &platforms::Device::bf16_tensor_flops, "bf16_tensor_flops"},
    MathPrecision{"fp8", 1.0, &platforms::Device::fp8_tensor_flops, "fp8_tensor_flops"},
};

struct GemmFit {
  double launch_s = 0, mem_eff = 0, half_fill = 0, half_k = 0, eff_default = 0;
  std::map<std::string, double> eff;  // by pass
};
struct AttentionFit {
  double launch_s = 0, half_d = 0, half_rows = 0, eff_default = 0;
  std::map<std::string, double> eff;  // "fwd/causal", "bwd/full", ...
};
struct MemoryFit {
  double launch_s = 0, eff_default = 0;
  std::map<std::string, double> eff;  // "layer_norm/fwd", ...
};
struct TensorDevice {
  std::map<std::string, GemmFit> gemm;            // by precision
  std::map<std::string, AttentionFit> attention;  // by precision
  std::optional<MemoryFit> memory;
  std::string source;
};

constexpr std::array TENSOR_KINDS = {"gemm", "attention", "memory"};

}  // namespace

struct GpuKernelModel::TensorFits {
  std::map<std::string, TensorDevice> devices;
  std::map<std::string, std::map<std::string, std::string>> fallback;  // target -> kind -> fitted device
  std::string path;
};

namespace {

double non_negative(const nlohmann::json& j, const char* field, const std::string& path, const std::string& where) {
  if (!j.contains(field) || !j.at(field).is_number() || !(j.at(field).get<double>() >= 0))
    throw InputError(fmt::format("{}: {}: field '{}' must be a number >= 0", path, where, field));
  return j.at(field).get<double>();
}

template <class Fit, class Read>
std::map<std::string, Fit> read_by_precision(const nlohmann::json& entry, const char* kind, const std::string& path,
                                             const std::string& device, Read read) {
  std::map<std::string, Fit> out;
  if (!entry.contains(kind)) return out;
  if (!entry.at(kind).is_object())
    throw InputError(fmt::format("{}: tensor device '{}': field '{}' must be a map of precision to fit", path, device, kind));
  for (const auto& [prec, j] : entry.at(kind).items()) {
    try {
      math_precision_by_name(prec);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: tensor device '{}' {}: {}", path, device, kind, e.what()));
    }
    if (!j.is_object())
      throw InputError(fmt::format("{}: tensor device '{}' {} {}: must be a map", path, device, kind, prec));
    out[prec] = read(j, fmt::format("tensor device '{}' {} {}", device, kind, prec));
  }
  return out;
}

std::shared_ptr<const GpuKernelModel::TensorFits> read_tensor(const nlohmann::json& t, const std::string& path) {
  auto fits = std::make_shared<GpuKernelModel::TensorFits>();
  fits->path = path;
  if (!t.is_object() || !t.contains("devices") || !t.at("devices").is_object())
    throw InputError(fmt::format("{}: field 'tensor.devices' must be a map of device name to fit", path));
  for (const auto& [device, e] : t.at("devices").items()) {
    if (!e.is_object()) throw InputError(fmt::format("{}: tensor device '{}' must be a map", path, device));
    TensorDevice d;
    d.gemm = read_by_precision<GemmFit>(e, "gemm", path, device, [&](const nlohmann::json& j, const std::string& w) {
      return GemmFit{non_negative(j, "launch_s", path, w), positive(j, "mem_eff", path, w),
                     non_negative(j, "half_fill", path, w), non_negative(j, "half_k", path, w),
                     positive(j, "eff_default", path, w), positive_map(j, "eff", path, w)};
    });
    d.attention = read_by_precision<AttentionFit>(e, "attention", path, device,
                                                  [&](const nlohmann::json& j, const std::string& w) {
      return AttentionFit{non_negative(j, "launch_s", path, w), non_negative(j, "half_d", path, w),
                          non_negative(j, "half_rows", path, w), positive(j, "eff_default", path, w),
                          positive_map(j, "eff", path, w)};
    });
    if (e.contains("memory")) {
      const std::string w = fmt::format("tensor device '{}' memory", device);
      const auto& j = e.at("memory");
      if (!j.is_object()) throw InputError(fmt::format("{}: {}: must be a map", path, w));
      d.memory = MemoryFit{non_negative(j, "launch_s", path, w), positive(j, "eff_default", path, w),
                           positive_map(j, "eff", path, w)};
    }
    if (e.contains("source") && e.at("source").is_string()) d.source = e.at("source").get<std::string>();
    fits->devices[device] = std::move(d);
  }
  if (t.contains("fallback")) {
    if (!t.at("fallback").is_object())
      throw InputError(fmt::format("{}: field 'tensor.fallback' must be a map of device to {{kind: device}}", path));
    for (const auto& [target, kinds] : t.at("fallback").items()) {
      if (!kinds.is_object())
        throw InputError(fmt::format("{}: tensor fallback '{}' must be a map of kind to device", path, target));
      for (const auto& [kind, src] : kinds.items()) {
        if (std::find(TENSOR_KINDS.begin(), TENSOR_KINDS.end(), kind) == TENSOR_KINDS.end())
          throw InputError(fmt::format("{}: tensor fallback '{}': unknown kind '{}' (expected gemm, attention or memory)",
                                       path, target, kind));
        if (!src.is_string() || !fits->devices.count(src.get<std::string>()))
          throw InputError(fmt::format("{}: tensor fallback '{}' {}: must name a device of tensor.devices", path,
                                       target, kind));
        fits->fallback[target][kind] = src.get<std::string>();
      }
    }
  }
  return fits;
}

// The fitted device whose `kind` fit times `device`: its own, else its fallback's; "" when none.
std::string tensor_source_device(const GpuKernelModel::TensorFits* fits, const std::string& device,
                                 std::string_view kind) {
  if (!fits) return "";
  auto has = [&](const std::string& d) {
    auto it = fits->devices.find(d);
    if (it == fits->devices.end()) return false;
    if (kind == "gemm") return !it->second.gemm.empty();
    if (kind == "attention") return !it->second.attention.empty();
    return it->second.memory.has_value();
  };
  if (has(device)) return device;
  if (auto f = fits->fallback.find(device); f != fits->fallback.end())
    if (auto k = f->second.find(std::string(kind)); k != f->second.end() && has(k->second)) return k->second;
  return "";
}

const TensorDevice& tensor_fit(const GpuKernelModel::TensorFits* fits, const platforms::Device& device,
                               std::string_view kind) {
  const std::string src = tensor_source_device(fits, device.name, kind);
  if (src.empty())
    throw InputError(fmt::format("device '{}': the GPU kernel model has no {} fit for it (tensor kernels are timed for "
                                 "h100-sxm5 and h200-sxm, GEMMs also for V100; others use those as fallbacks, "
                                 "docs/calibration.md §4d)",
                                 device.name, kind));
  return fits->devices.at(src);
}

void check_bandwidth(const platforms::Device& device) {
  if (!(device.mem_bandwidth_Bps > 0))
    throw InputError(fmt::format("device '{}': mem_bandwidth_Bps must be > 0 for the kernel model", device.name));
}

double checked_size(double v, const char* what) {
  if (!std::isfinite(v) || v < 0) throw InputError(fmt::format("tensor kernel: {} must be a finite number >= 0, got {}", what, v));
  return v;
}

}  // namespace

const std::vector<PrecisionRow>& precision_rows() {
  static const std::vector<PrecisionRow> rows = {
      {Precision::FP32, "fp32", "FP32 math and storage", FP32_BYTES, "fp32", "fp32", Precision::FP32, false},
      {Precision::TF32, "tf32", "TF32 tensor-core matmuls, FP32 storage (A100, H100)", FP32_BYTES, "tf32", "fp32",
       std::nullopt, false},
      {Precision::FP16_MIXED, "fp16-mixed", "FP16 tensor cores, FP32 master weights (V100, T4, A100, H100)",
       FP16_BYTES, "fp16", "fp16", Precision::FP16_MIXED, true},
      {Precision::BF16_MIXED, "bf16-mixed", "BF16 tensor cores, FP32 master weights (A100, H100)", FP16_BYTES,
       "bf16", "bf16", Precision::FP16_MIXED, true},
      {Precision::FP8, "fp8", "Transformer Engine: linear-layer GEMMs in FP8, the rest in BF16 (H100, H200)",
       FP16_BYTES, "fp8", "bf16", std::nullopt, true},
  };
  return rows;
}

const PrecisionRow& precision_row(Precision precision) {
  for (const auto& r : precision_rows())
    if (r.precision == precision) return r;
  throw Failure("internal: precision without a row");
}

std::string_view to_string(Precision precision) { return precision_row(precision).name; }

std::string precision_names() {
  std::string out;
  for (const auto& r : precision_rows()) out += (out.empty() ? "" : "|") + std::string(r.name);
  return out;
}

Precision precision_by_name(std::string_view name) {
  if (auto p = precision_or_null(name)) return *p;
  throw InputError(fmt::format("unknown precision '{}' (expected one of {})", name, precision_names()));
}

double element_bytes(Precision precision) { return precision_row(precision).element_bytes; }

std::string GpuKernelModel::builtin_path() {
  return replaceable_data_file("DTSIM_GPU_KERNELS", "calibrate/data/gpu_kernels.json");
}

const GpuKernelModel& GpuKernelModel::builtin() {
  static const GpuKernelModel model = [] {
    const std::string path = builtin_path();
    if (!replaceable_data_file_exists(path, "DTSIM_GPU_KERNELS")) return GpuKernelModel{};
    return load(path);
  }();
  return model;
}

GpuKernelModel GpuKernelModel::load(const std::string& path) {
  const nlohmann::json j = read_json_file(path, "GPU kernel model", {GPU_KERNEL_MODEL_MAX_BYTES});
  if (!j.is_object() || !j.contains("devices") || !j.at("devices").is_object())
    throw InputError(fmt::format("{}: field 'devices' must be a map of device name to fit", path));
  GpuKernelModel model;
  for (const auto& [device, entry] : j.at("devices").items()) read_precisions(model, entry, device, device, path);
  if (j.contains("tensor")) model.tensor_ = read_tensor(j.at("tensor"), path);
  if (j.contains("fallback")) {
    if (!j.at("fallback").is_object()) throw InputError(fmt::format("{}: field 'fallback' must be a map", path));
    for (const auto& [device, entry] : j.at("fallback").items()) {
      std::string from;
      if (entry.contains("from") && entry.at("from").is_array())
        for (const auto& f : entry.at("from")) {
          if (!f.is_string())
            throw InputError(fmt::format("{}: fallback '{}': field 'from' must list device names", path, device));
          from += (from.empty() ? "" : "+") + f.get<std::string>();
        }
      read_precisions(model, entry, device, from, path);
    }
  }
  return model;
}

const KernelCoefficients* GpuKernelModel::coefficients_or_null(const std::string& device, Precision precision) const {
  auto it = by_key_.find(key_of(device, precision));
  return it == by_key_.end() ? nullptr : &it->second;
}

void GpuKernelModel::set(const std::string& device, Precision precision, KernelCoefficients coefficients) {
  by_key_[key_of(device, precision)] = std::move(coefficients);
}

bool kernel_model_applies(models::OpKind op) {
  return op == models::OpKind::CONV2D || op == models::OpKind::FULLY_CONNECTED;
}

double precision_peak_flops(const platforms::Device& device, Precision precision) {
  if (precision == Precision::FP32) return device.peak_flops;
  if (precision == Precision::FP16_MIXED && !(device.fp16_tensor_flops > 0))
    throw InputError(fmt::format("device '{}' has no FP16 tensor cores (no fp16_tensor_flops in devices.yaml): "
                                 "precision fp16-mixed needs one of V100, T4, A100, H100",
                                 device.name));
  return math_peak_flops(device, math_precision_by_name(precision_row(precision).gemm));
}

double kernel_share(const platforms::Device& device, int threads, int sockets) {
  if (device.kind == platforms::DeviceKind::GPU || device.cores < 1) return 1.0;
  const int cores = std::clamp(threads, 1, device.cores * std::max(sockets, 1));
  return static_cast<double>(cores) / device.cores;
}

double kernel_pass_s(const KernelCoefficients& k, const models::Layer& layer, Pass pass,
                     const platforms::Device& device, Precision precision, double share) {
  if (!(share > 0 && std::isfinite(share)))
    throw Failure(fmt::format("internal: kernel model share {} for layer '{}'", share, layer.name));
  if (!kernel_model_applies(layer.op))
    throw Failure(fmt::format("internal: kernel model asked for layer '{}' of op {}", layer.name,
                              models::to_string(layer.op)));
  const PassWork work = pass_work(layer, pass);
  if (work.flops <= 0 && work.bytes <= 0) return 0;
  const bool conv = layer.op == models::OpKind::CONV2D;
  const std::string pass_name = conv ? "conv_" + std::string(to_string(pass)) : "gemm";
  const std::string cls = conv ? pass_name + "/" + conv_family(layer.params) : "gemm";
  double src_el = 0;
  for (const auto& s : layer.src_shapes) src_el += static_cast<double>(s.elements());
  const double out = pass == Pass::FWD        ? static_cast<double>(layer.dst_shape.elements())
                     : pass == Pass::BWD_DATA ? src_el
                                              : static_cast<double>(layer.costs.params);
  double eff = k.eff_default;
  if (auto it = k.eff.find(cls); it != k.eff.end()) eff = it->second;
  if (device.sgemm_efficiency > 0)
    if (auto g = k.eff.find("gemm"); g != k.eff.end() && device.sgemm_efficiency < g->second)
      eff *= device.sgemm_efficiency / g->second;
  double half = 0;
  if (auto it = k.half_fill.find(pass_name); it != k.half_fill.end()) half = it->second;
  const double fill = out > 0 ? out / (out + half) : 1.0;
  const double peak = precision_peak_flops(device, precision);
  if (!(peak > 0) || !(device.mem_bandwidth_Bps > 0))
    throw InputError(fmt::format("device '{}': peak_flops and mem_bandwidth_Bps must be > 0 for the kernel model",
                                 device.name));
  const double bytes = work.bytes * element_bytes(precision) / FP32_BYTES;
  return k.launch_s +
         std::max(work.flops / (share * peak * eff * fill), bytes / (share * device.mem_bandwidth_Bps * k.mem_eff));
}

const MathPrecision& math_precision_by_name(std::string_view name) {
  for (const auto& p : MATH_PRECISIONS)
    if (p.name == name) return p;
  throw InputError(fmt::format("unknown matrix precision '{}' (expected fp32, tf32, fp16, bf16 or fp8)", name));
}

double math_peak_flops(const platforms::Device& device, const MathPrecision& precision) {
  const double peak = device.*precision.peak_flops;
  if (!(peak > 0))
    throw InputError(fmt::format("device '{}' states no {} peak ({} in devices.yaml): it has no {} matrix units",
                                 device.name, precision.name, precision.peak_field, precision.name));
  return peak;
}

double GpuKernelModel::gemm_s(const platforms::Device& device, std::string_view precision, const GemmShape& shape,
                              Pass pass) const {
  const MathPrecision& p = math_precision_by_name(precision);
  const double m = checked_size(shape.m, "GEMM m"), n = checked_size(shape.n, "GEMM n"), k = checked_size(shape.k, "GEMM k");
  const TensorDevice& d = tensor_fit(tensor_.get(), device, "gemm");
  auto it = d.gemm.find(std::string(precision));
  if (it == d.gemm.end())
    throw InputError(fmt::format("device '{}': the GPU kernel model has no {} GEMM fit for it", device.name, precision));
  const double peak = math_peak_flops(device, p);
  check_bandwidth(device);
  if (m == 0 || n == 0 || k == 0) return 0;
  const GemmFit& g = it->second;
  double eff = g.eff_default;
  if (auto e = g.eff.find(std::string(to_string(pass))); e != g.eff.end()) eff = e->second;
  const double fill = m * n / (m * n + g.half_fill) * k / (k + g.half_k);
  const double bytes = (m * k + k * n + m * n) * p.element_bytes;
  return g.launch_s + std::max(2.0 * m * n * k / (peak * eff * fill), bytes / (device.mem_bandwidth_Bps * g.mem_eff));
}

double GpuKernelModel::attention_s(const platforms::Device& device, std::string_view precision,
                                   const AttentionShape& shape, bool backward) const {
  const MathPrecision& p = math_precision_by_name(precision);
  const double b = checked_size(shape.batch, "attention batch"), h = checked_size(shape.heads, "attention heads");
  const double kv = checked_size(shape.kv_heads, "attention kv_heads"), s = checked_size(shape.seq, "attention seq");
  const double hd = checked_size(shape.head_dim, "attention head_dim");
  if (kv > h || (kv > 0 && std::fmod(h, kv) != 0))
    throw InputError(fmt::format("attention: kv_heads {} must divide heads {}", kv, h));
  const TensorDevice& d = tensor_fit(tensor_.get(), device, "attention");
  auto it = d.attention.find(std::string(precision));
  if (it == d.attention.end())
    throw InputError(fmt::format("device '{}': the GPU kernel model has no {} attention fit (flash attention was "
                                 "timed in bf16 and fp16)",
                                 device.name, precision));
  const double peak = math_peak_flops(device, p);
  if (b == 0 || h == 0 || s == 0 || hd == 0) return 0;
  const AttentionFit& a = it->second;
  const std::string cls = std::string(backward ? "bwd" : "fwd") + (shape.causal ? "/causal" : "/full");
  double eff = a.eff_default;
  if (auto e = a.eff.find(cls); e != a.eff.end()) eff = e->second;
  // 2 GEMMs of 2·s·s·d per query head forward (QK^T, PV); backward recomputes QK^T and runs 4 more: 2.5x.
  const double flops = 4.0 * b * h * s * s * hd * (shape.causal ? 0.5 : 1.0) * (backward ? 2.5 : 1.0);
  const double rows = b * h * s;
  return a.launch_s + flops / (peak * eff * hd / (hd + a.half_d) * rows / (rows + a.half_rows));
}

double GpuKernelModel::memory_op_s(const platforms::Device& device, std::string_view op, bool backward,
                                   double bytes) const {
  checked_size(bytes, "memory op bytes");
  const TensorDevice& d = tensor_fit(tensor_.get(), device, "memory");
  check_bandwidth(device);
  if (bytes == 0) return 0;
  const MemoryFit& m = *d.memory;
  double eff = m.eff_default;
  if (auto e = m.eff.find(fmt::format("{}/{}", op, backward ? "bwd" : "fwd")); e != m.eff.end()) eff = e->second;
  return m.launch_s + bytes / (device.mem_bandwidth_Bps * eff);
}

bool GpuKernelModel::has_tensor_fit(const std::string& device, std::string_view kind,
                                    std::string_view precision) const {
  const std::string src = tensor_source_device(tensor_.get(), device, kind);
  if (src.empty()) return false;
  const TensorDevice& d = tensor_->devices.at(src);
  if (kind == "gemm") return d.gemm.count(std::string(precision)) > 0;
  if (kind == "attention") return d.attention.count(std::string(precision)) > 0;
  return d.memory.has_value();
}

namespace {
models::RowPass row_pass_of(Pass pass) {
  return pass == Pass::FWD        ? models::RowPass::FWD
         : pass == Pass::BWD_DATA ? models::RowPass::BWD_DATA
                                  : models::RowPass::BWD_WEIGHTS;
}
}  // namespace

std::string row_tensor_missing_fit(const GpuKernelModel& model, const models::Layer& layer, Pass pass,
                                   const platforms::Device& device, std::string_view gemm_precision,
                                   std::string_view attention_precision) {
  if (attention_precision.empty()) attention_precision = gemm_precision;
  if (!layer.row || !layer.row->kernels) return "kernels";
  using Kind = models::RowKernel::Kind;
  for (const auto& k : layer.row->kernels(layer, row_pass_of(pass))) {
    const char* kind = k.kind == Kind::GEMM ? "gemm" : k.kind == Kind::ATTENTION ? "attention" : "memory";
    const std::string_view precision = k.kind == Kind::ATTENTION ? attention_precision : gemm_precision;
    if (!model.has_tensor_fit(device.name, kind, precision))
      return k.kind == Kind::MEMORY ? std::string("memory") : fmt::format("{} in {}", kind, precision);
  }
  return "";
}

std::optional<double> row_tensor_pass_s(const GpuKernelModel& model, const models::Layer& layer, Pass pass,
                                        const platforms::Device& device, std::string_view gemm_precision,
                                        double byte_scale, std::string_view attention_precision) {
  if (attention_precision.empty()) attention_precision = gemm_precision;
  if (!row_tensor_missing_fit(model, layer, pass, device, gemm_precision, attention_precision).empty())
    return std::nullopt;
  const auto kernels = layer.row->kernels(layer, row_pass_of(pass));
  using Kind = models::RowKernel::Kind;
  double s = 0;
  for (const auto& k : kernels) {
    if (k.kind == Kind::GEMM)
      s += k.calls * model.gemm_s(device, gemm_precision, GemmShape{k.m, k.n, k.k}, pass);
    else if (k.kind == Kind::ATTENTION)
      s += k.calls * model.attention_s(device, attention_precision,
                             AttentionShape{k.batch, k.heads, k.kv_heads, k.seq, k.head_dim, k.causal},
                             pass != Pass::FWD);
    else
      s += model.memory_op_s(device, k.memory_op, pass != Pass::FWD, k.bytes * byte_scale);
  }
  return s;
}

std::string GpuKernelModel::tensor_source(const std::string& device) const {
  // kinds grouped by their source: "gemm, attention, memory: timed on a lent H200 (...)"
  std::vector<std::pair<std::string, std::string>> groups;  // source text -> kinds
  for (const char* kind : TENSOR_KINDS) {
    const std::string src = tensor_source_device(tensor_.get(), device, kind);
    if (src.empty()) continue;
    const auto& d = tensor_->devices.at(src);
    const std::string text = src == device ? fmt::format("{} fit, {}", src, d.source)
                                           : fmt::format("fallback to the {} fit ({}), at {}'s peaks", src, d.source, device);
    auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& x) { return x.first == text; });
    if (g == groups.end()) groups.emplace_back(text, kind);
    else g->second += std::string(", ") + kind;
  }
  std::string out;
  for (const auto& [text, kinds] : groups) out += (out.empty() ? "" : "; ") + kinds + ": " + text;
  return out;
}

}  // namespace dtsim::calibrate
