// Device catalog: strict loading of platforms/devices.yaml and resolution of the `host` entry from /proc.
#include "platforms/device.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>

#include "common/errors.hpp"
#include "common/text.hpp"
#include "common/paths.hpp"
#include "common/yaml_util.hpp"
#include "platforms/src/physical_bounds.hpp"

namespace dtsim::platforms {

namespace {

constexpr double FLOPS_PER_FMA = 2.0;  // one fused multiply-add = 2 floating-point operations

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The value of "key : value" in /proc-style text (first occurrence), or empty.
std::string proc_field(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string k = line.substr(0, colon);
    while (!k.empty() && (k.back() == ' ' || k.back() == '\t')) k.pop_back();
    if (k != key) continue;
    std::string v = line.substr(colon + 1);
    const auto first = v.find_first_not_of(" \t");
    return first == std::string::npos ? std::string{} : v.substr(first);
  }
  return {};
}

// A number from /proc text, or 0 when it is missing or not a number.
double proc_number(const std::string& text) {
  try {
    return text.empty() ? 0.0 : std::stod(text);
  } catch (const std::exception&) {
    return 0.0;
  }
}

bool has_flag(const std::string& flags, const std::string& flag) {
  std::istringstream in(flags);
  std::string f;
  while (in >> f)
    if (f == flag) return true;
  return false;
}

// A figure is a number, or {value: number, source: text}; returns the number, records its source.
double read_figure(const YAML::Node& map, const std::string& key, const yaml::Origin& origin,
                   const std::string& context, Device& device, bool is_required, double fallback = 0) {
  const YAML::Node node = map[key];
  if (!node) {
    if (is_required) yaml::fail(map, origin, context, "missing required field '" + key + "'");
    return fallback;
  }
  double value = 0;
  if (node.IsMap()) {
    yaml::check_keys(node, {"value", "source"}, origin, context + " field '" + key + "'");
    value = yaml::required<double>(node, "value", origin, context + " field '" + key + "'");
    device.figure_sources[key] = yaml::required<std::string>(node, "source", origin, context + " field '" + key + "'");
  } else {
    value = yaml::required<double>(map, key, origin, context);
  }
  if (!std::isfinite(value) || value <= 0)
    yaml::fail(node, origin, context, fmt::format("field '{}' must be a finite number > 0, got {}", key, value));
  if (const auto b = platforms::detail::physical_bounds(key); b && (value < b->lo || value > b->hi))
    yaml::fail(node, origin, context,
               fmt::format("field '{}' must be between {:g} and {:g} (docs/platform-schema.md), got {:g}", key, b->lo,
                           b->hi, value));
  return value;
}

int read_count(const YAML::Node& map, const std::string& key, const yaml::Origin& origin, const std::string& context,
               Device& device, bool is_required, int max_value, int fallback = 0) {
  const double v = read_figure(map, key, origin, context, device, is_required, fallback);
  if (v != std::floor(v) || v > max_value)
    yaml::fail(map[key] ? map[key] : map, origin, context,
               fmt::format("field '{}' must be a whole number between 1 and {}, got {}", key, max_value, v));
  return static_cast<int>(v);
}

std::string isa_of(int simd_width_fp32) {
  switch (simd_width_fp32) {
    case 16: return "avx512";
    case 8: return "avx2";
    case 4: return "sse";
    default: return "scalar";
  }
}

// name, Intel before Skylake-SP (NCCL's src/graph/topo.cc classes Intel CPUs by CPUID: family 6 and
// model >= 0x55 is Skylake or later, anything older "BDW"), AMD (NCCL's CPU vendor class AMD). Knights
// Landing (model 0x57) lands in the Skylake class by that rule.
struct Microarchitecture {
  const char* name;
  bool intel_before_skylake_sp;
  bool amd;
};
constexpr std::array MICROARCHITECTURES = {
    Microarchitecture{"sandy-bridge", true, false},     Microarchitecture{"ivy-bridge", true, false},
    Microarchitecture{"haswell", true, false},          Microarchitecture{"broadwell", true, false},
    Microarchitecture{"skylake", false, false},         Microarchitecture{"knights-landing", false, false},
    Microarchitecture{"cascade-lake", false, false},    Microarchitecture{"ice-lake", false, false},
    Microarchitecture{"sapphire-rapids", false, false}, Microarchitecture{"emerald-rapids", false, false},
    Microarchitecture{"zen", false, true},              Microarchitecture{"zen2", false, true},
    Microarchitecture{"zen3", false, true},             Microarchitecture{"zen4", false, true},
};

constexpr int MAX_CORES_PER_SOCKET = 1024;  // sanity bound on input, not a hardware figure
constexpr int MAX_SIMD_WIDTH = 64;
constexpr int MAX_FMA_UNITS = 8;
constexpr int MAX_THREADS_PER_CORE = 8;

// The optional `microarchitecture` field, one of `known` ("" when not stated); `kind_text` qualifies the
// field in the error (" of a GPU").
std::string read_microarchitecture(const YAML::Node& entry, const yaml::Origin& origin, const std::string& context,
                                   const std::vector<std::string>& known, const char* kind_text) {
  const auto name = yaml::optional<std::string>(entry, "microarchitecture", "", origin, context);
  if (entry["microarchitecture"] && std::find(known.begin(), known.end(), name) == known.end())
    yaml::fail(entry["microarchitecture"], origin, context,
               fmt::format("field 'microarchitecture'{} must be one of {}, got '{}'", kind_text, fmt::join(known, ", "),
                           name));
  return name;
}

Device parse_device(const YAML::Node& entry, const yaml::Origin& origin, const HostFacts* host) {
  yaml::check_keys(entry,
                   {"name", "kind", "description", "peak_flops", "mem_bandwidth_Bps", "mem_capacity_B", "cores",
                    "clock_hz", "simd_width_fp32", "fma_units", "threads_per_core", "source", "assumptions",
                    "resolve", "aliases", "sgemm_efficiency", "fp16_tensor_flops", "tf32_tensor_flops", "bf16_tensor_flops",
                    "fp8_tensor_flops", "socket_link_Bps",
                    "microarchitecture"},
                   origin, "device");
  Device d;
  d.name = yaml::required<std::string>(entry, "name", origin, "device");
  if (d.name.empty()) yaml::fail(entry["name"], origin, "device", "field 'name' must not be empty");
  const std::string context = "device '" + d.name + "'";
  const std::string kind = yaml::required<std::string>(entry, "kind", origin, context);
  if (kind == "gpu") d.kind = DeviceKind::GPU;
  else if (kind == "cpu") d.kind = DeviceKind::CPU;
  else yaml::fail(entry["kind"], origin, context, "field 'kind' must be 'gpu' or 'cpu', got '" + kind + "'");
  d.description = yaml::required<std::string>(entry, "description", origin, context);
  d.source = yaml::required<std::string>(entry, "source", origin, context);
  if (d.source.empty()) yaml::fail(entry["source"], origin, context, "field 'source' must not be empty");
  d.assumptions = yaml::optional<std::string>(entry, "assumptions", "", origin, context);
  if (const YAML::Node aliases = entry["aliases"]) {
    if (!aliases.IsSequence())
      yaml::fail(aliases, origin, context, "field 'aliases' must be a list of names");
    for (const auto& a : aliases) {
      if (!a.IsScalar() || a.Scalar().empty())
        yaml::fail(a, origin, context, "field 'aliases' must hold non-empty names");
      d.aliases.push_back(a.Scalar());
    }
  }

  const std::string resolve = yaml::optional<std::string>(entry, "resolve", "", origin, context);
  if (!resolve.empty() && resolve != "host")
    yaml::fail(entry["resolve"], origin, context, "field 'resolve' must be 'host', got '" + resolve + "'");

  if (d.kind == DeviceKind::GPU) {
    if (!resolve.empty()) yaml::fail(entry["resolve"], origin, context, "field 'resolve' is only for CPUs");
    for (const char* cpu_only :
         {"cores", "clock_hz", "simd_width_fp32", "fma_units", "threads_per_core", "socket_link_Bps"})
      if (entry[cpu_only]) yaml::fail(entry[cpu_only], origin, context, fmt::format("field '{}' is only for CPUs", cpu_only));
    d.peak_flops = read_figure(entry, "peak_flops", origin, context, d, true);
    d.mem_bandwidth_Bps = read_figure(entry, "mem_bandwidth_Bps", origin, context, d, true);
    d.mem_capacity_B = read_figure(entry, "mem_capacity_B", origin, context, d, true);
    d.sgemm_efficiency = read_figure(entry, "sgemm_efficiency", origin, context, d, false, 0);
    if (d.sgemm_efficiency > 1)
      yaml::fail(entry["sgemm_efficiency"], origin, context,
                 fmt::format("field 'sgemm_efficiency' is a fraction of peak in (0, 1], got {}", d.sgemm_efficiency));
    d.microarchitecture = read_microarchitecture(entry, origin, context, gpu_architectures(), " of a GPU");
    d.fp16_tensor_flops = read_figure(entry, "fp16_tensor_flops", origin, context, d, false, 0);
    d.tf32_tensor_flops = read_figure(entry, "tf32_tensor_flops", origin, context, d, false, 0);
    d.bf16_tensor_flops = read_figure(entry, "bf16_tensor_flops", origin, context, d, false, 0);
    d.fp8_tensor_flops = read_figure(entry, "fp8_tensor_flops", origin, context, d, false, 0);
    return d;
  }
  for (const char* gpu_only :
       {"sgemm_efficiency", "fp16_tensor_flops", "tf32_tensor_flops", "bf16_tensor_flops", "fp8_tensor_flops"})
    if (entry[gpu_only]) yaml::fail(entry[gpu_only], origin, context, fmt::format("field '{}' is only for GPUs", gpu_only));

  if (entry["peak_flops"])
    yaml::fail(entry["peak_flops"], origin, context,
               "field 'peak_flops' is derived for CPUs (cores x clock_hz x simd_width_fp32 x fma_units x 2); remove it");
  const bool from_host = resolve == "host";
  if (from_host) {
    if (host == nullptr) throw Failure("internal: host facts missing while resolving device 'host'");
    d.cpu_model = host->cpu_model;
    d.description = fmt::format("{} ({}; {})", host->cpu_model, d.description, "resolved from /proc");
    d.cores = host->cores_available;
    d.clock_hz = host->clock_hz;
    d.simd_width_fp32 = host->simd_width_fp32;
    d.threads_per_core = host->threads_per_core;
    d.mem_capacity_B = host->mem_capacity_B;
    d.fma_units = host->has_fma ? 2 : 1;
  }
  // For `host`, entries in the file override what /proc says (the stated assumptions).
  d.cores = read_count(entry, "cores", origin, context, d, !from_host, MAX_CORES_PER_SOCKET, d.cores);
  d.clock_hz = read_figure(entry, "clock_hz", origin, context, d, !from_host, d.clock_hz);
  d.simd_width_fp32 = read_count(entry, "simd_width_fp32", origin, context, d, !from_host, MAX_SIMD_WIDTH, d.simd_width_fp32);
  d.fma_units = read_count(entry, "fma_units", origin, context, d, !from_host, MAX_FMA_UNITS, d.fma_units);
  d.threads_per_core =
      read_count(entry, "threads_per_core", origin, context, d, !from_host, MAX_THREADS_PER_CORE, d.threads_per_core);
  d.mem_bandwidth_Bps = read_figure(entry, "mem_bandwidth_Bps", origin, context, d, true);
  d.socket_link_Bps = read_figure(entry, "socket_link_Bps", origin, context, d, false, 0);
  d.microarchitecture = read_microarchitecture(entry, origin, context, cpu_microarchitectures(), "");
  d.mem_capacity_B = read_figure(entry, "mem_capacity_B", origin, context, d, !from_host, d.mem_capacity_B);
  if (from_host && (d.cores <= 0 || d.clock_hz <= 0 || d.simd_width_fp32 <= 0 || d.mem_capacity_B <= 0))
    throw Failure(fmt::format("device 'host': could not resolve cores/clock/ISA/memory from /proc (cores {}, clock {} Hz, "
                              "simd {}, memory {} B); state them in {}",
                              d.cores, d.clock_hz, d.simd_width_fp32, d.mem_capacity_B, origin.file));
  if (d.simd_width_fp32 & (d.simd_width_fp32 - 1))
    yaml::fail(entry["simd_width_fp32"] ? entry["simd_width_fp32"] : entry, origin, context,
               fmt::format("field 'simd_width_fp32' must be a power of two, got {}", d.simd_width_fp32));
  d.isa = isa_of(d.simd_width_fp32);
  d.peak_flops = d.formula_peak_flops();
  return d;
}

}  // namespace

const std::vector<std::string>& gpu_architectures() {
  static const std::vector<std::string> names = {"kepler", "maxwell", "pascal", "volta", "turing", "ampere", "hopper"};
  return names;
}

bool Device::nccl_ll128_by_default() const {
  // NCCL 2.7 src/graph/tuning.cc enables LL128 by default only on Volta (sm70) and Ampere (sm80).
  return !is_cpu() && (microarchitecture == "volta" || microarchitecture == "ampere");
}

bool Device::nvlink_sharp() const {
  // NVLink SHARP (NVLS) needs third-generation NVSwitch and Hopper GPUs (NCCL 2.17+, nvls.cc).
  return !is_cpu() && microarchitecture == "hopper";
}

const std::vector<std::string>& cpu_microarchitectures() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& m : MICROARCHITECTURES) v.emplace_back(m.name);
    return v;
  }();
  return names;
}

namespace {
// The table row of `name`, or nullptr (not stated, or a GPU).
const Microarchitecture* microarchitecture_row(const std::string& name) {
  for (const auto& m : MICROARCHITECTURES)
    if (name == m.name) return &m;
  return nullptr;
}
}  // namespace

bool Device::intel_before_skylake_sp() const {
  const Microarchitecture* m = microarchitecture_row(microarchitecture);
  return m != nullptr && m->intel_before_skylake_sp;
}

bool Device::amd() const {
  const Microarchitecture* m = microarchitecture_row(microarchitecture);
  return m != nullptr && m->amd;
}

double Device::formula_peak_flops() const {
  if (kind == DeviceKind::GPU) return peak_flops;
  return static_cast<double>(cores) * clock_hz * simd_width_fp32 * fma_units * FLOPS_PER_FMA;
}

const std::string& Device::source_of(std::string_view field) const {
  const auto it = figure_sources.find(std::string(field));
  return it == figure_sources.end() ? source : it->second;
}

std::string to_string(DeviceKind kind) { return kind == DeviceKind::GPU ? "gpu" : "cpu"; }

HostFacts parse_host_facts(const std::string& cpuinfo_text, const std::string& meminfo_text, int cores_available) {
  HostFacts h;
  h.cpu_model = proc_field(cpuinfo_text, "model name");
  if (h.cpu_model.empty()) throw Failure("/proc/cpuinfo: no 'model name' line; cannot describe device 'host'");
  h.cores_available = cores_available;
  static const std::regex ghz(R"(@\s*([0-9]+(?:\.[0-9]+)?)\s*GHz)");
  std::smatch m;
  if (std::regex_search(h.cpu_model, m, ghz)) h.clock_hz = proc_number(m[1].str()) * 1e9;
  else h.clock_hz = proc_number(proc_field(cpuinfo_text, "cpu MHz")) * 1e6;
  const double siblings = proc_number(proc_field(cpuinfo_text, "siblings"));
  const double cpu_cores = proc_number(proc_field(cpuinfo_text, "cpu cores"));
  if (siblings >= 1 && cpu_cores >= 1) h.threads_per_core = std::max(1, static_cast<int>(siblings / cpu_cores));
  const std::string flags = proc_field(cpuinfo_text, "flags");
  if (has_flag(flags, "avx512f")) h.simd_width_fp32 = 16;
  else if (has_flag(flags, "avx2") || has_flag(flags, "avx")) h.simd_width_fp32 = 8;
  else if (has_flag(flags, "sse2")) h.simd_width_fp32 = 4;
  h.has_fma = has_flag(flags, "fma");
  h.mem_capacity_B = proc_number(proc_field(meminfo_text, "MemTotal")) * 1024.0;  // /proc/meminfo "kB" are KiB
  return h;
}

HostFacts read_host_facts() {
  int cores = 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cores = CPU_COUNT(&set);
  return parse_host_facts(read_text("/proc/cpuinfo"), read_text("/proc/meminfo"), cores);
}

DeviceCatalog DeviceCatalog::load_impl(const std::string& path, const HostFacts* host_or_null) {
  const YAML::Node root = yaml::load_file(path);
  const yaml::Origin origin{path};
  yaml::check_keys(root, {"devices"}, origin, "device catalog");
  const YAML::Node list = root["devices"];
  if (!list || !list.IsSequence() || list.size() == 0)
    yaml::fail(root, origin, "device catalog", "field 'devices' must be a non-empty list");
  // The host entry is resolved lazily: read /proc only when the file has one.
  bool wants_host = false;
  for (const auto& e : list)
    if (e.IsMap() && e["resolve"]) wants_host = true;
  // A machine whose /proc cannot describe it loses only the `host` entry (by_name explains why),
  // so the other devices and every cluster platform stay usable.
  HostFacts host;
  std::string host_error;
  if (host_or_null != nullptr) {
    host = *host_or_null;
  } else if (wants_host) {
    try {
      host = read_host_facts();
    } catch (const Failure& e) {
      host_error = e.what();
    }
  }
  std::vector<Device> devices;
  for (const auto& entry : list) {
    const bool is_host_entry = entry.IsMap() && entry["resolve"];
    if (is_host_entry && !host_error.empty()) continue;
    Device d;
    try {
      d = parse_device(entry, origin, &host);
    } catch (const Failure& e) {
      if (!is_host_entry) throw;
      host_error = e.what();
      continue;
    }
    const auto taken = [&](const std::string& n) {
      for (const auto& other : devices)
        if (other.name == n || std::find(other.aliases.begin(), other.aliases.end(), n) != other.aliases.end())
          return true;
      return false;
    };
    if (taken(d.name)) yaml::fail(entry["name"], origin, "device '" + d.name + "'", "duplicate device name");
    for (const auto& a : d.aliases)
      if (taken(a) || a == d.name)
        yaml::fail(entry["aliases"], origin, "device '" + d.name + "'", "alias '" + a + "' is already a device name or alias");
    devices.push_back(std::move(d));
  }

  DeviceCatalog catalog;
  catalog.devices_ = std::move(devices);
  catalog.host_error_ = std::move(host_error);
  return catalog;
}

DeviceCatalog DeviceCatalog::load(const std::string& path) { return load_impl(path, nullptr); }
DeviceCatalog DeviceCatalog::load(const std::string& path, const HostFacts& host) { return load_impl(path, &host); }

std::string DeviceCatalog::builtin_path() { return (data_dir() / "platforms" / "devices.yaml").string(); }

const DeviceCatalog& DeviceCatalog::builtin() {
  static const DeviceCatalog catalog = load(builtin_path());
  return catalog;
}

const Device* DeviceCatalog::by_name_or_null(std::string_view name) const {
  for (const auto& d : devices_)
    if (d.name == name) return &d;
  for (const auto& d : devices_)
    if (std::find(d.aliases.begin(), d.aliases.end(), name) != d.aliases.end()) return &d;
  return nullptr;
}

const Device& DeviceCatalog::by_name(std::string_view name) const {
  if (const Device* d = by_name_or_null(name)) return *d;
  if (name == "host" && !host_error_.empty()) throw Failure("device 'host' could not be resolved: " + host_error_);
  std::string known;
  for (const auto& d : devices_) known += (known.empty() ? "" : ", ") + d.name;
  throw InputError(fmt::format("unknown device '{}' (known: {})", printable(name), known));
}

std::vector<std::string> DeviceCatalog::names() const {
  std::vector<std::string> out;
  for (const auto& d : devices_) out.push_back(d.name);
  return out;
}

}  // namespace dtsim::platforms
