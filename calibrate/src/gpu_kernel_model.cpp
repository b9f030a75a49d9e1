// GPU kernel model: reads data/gpu_kernels.json and times conv2d / fully_connected passes on GPUs.
#include "calibrate/gpu_kernel_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/errors.hpp"
#include "common/json_limits.hpp"
#include "common/paths.hpp"

namespace dtsim::calibrate {
namespace {

constexpr double FP32_BYTES = 4.0;
constexpr double FP16_BYTES = 2.0;
// Largest model file read: the shipped one (data/gpu_kernels.json, every fitted device) is 23 KB.
constexpr std::size_t GPU_KERNEL_MODEL_MAX_BYTES = 16 << 20;

std::string key_of(const std::string& device, Precision precision) {
  return device + "|" + std::string(to_string(precision));
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
  if (name == "fp32") return Precision::FP32;
  if (name == "fp16-mixed") return Precision::FP16_MIXED;
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

}  // namespace

std::string_view to_string(Precision precision) {
  return precision == Precision::FP32 ? "fp32" : "fp16-mixed";
}

Precision precision_by_name(std::string_view name) {
  if (auto p = precision_or_null(name)) return *p;
  throw InputError(fmt::format("unknown precision '{}' (expected fp32 or fp16-mixed)", name));
}

double element_bytes(Precision precision) { return precision == Precision::FP32 ? FP32_BYTES : FP16_BYTES; }

std::string GpuKernelModel::builtin_path() {
  if (const char* env = std::getenv("DTSIM_GPU_KERNELS"); env && *env) return env;
  return (data_dir() / "calibrate" / "data" / "gpu_kernels.json").string();
}

const GpuKernelModel& GpuKernelModel::builtin() {
  static const GpuKernelModel model = [] {
    const std::string path = builtin_path();
    if (!std::filesystem::exists(path)) return GpuKernelModel{};
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
  if (!(device.fp16_tensor_flops > 0))
    throw InputError(fmt::format("device '{}' has no FP16 tensor cores (no fp16_tensor_flops in devices.yaml): "
                                 "precision fp16-mixed needs one of V100, T4, A100, H100",
                                 device.name));
  return device.fp16_tensor_flops;
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

}  // namespace dtsim::calibrate
