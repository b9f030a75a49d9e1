// Compute devices (GPUs and CPU sockets) as described in platforms/devices.yaml, each figure sourced.
// The catalog is pure data: calibrate/ and sim/ read it to carry measured efficiencies to devices.
#pragma once
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace dtsim::platforms {

enum class DeviceKind { GPU, CPU };

struct Device {
  std::string name;         // key used by platform files and the CLI, e.g. "p100-sxm2", "xeon-platinum-8160"
  DeviceKind kind = DeviceKind::GPU;
  std::string description;  // e.g. "NVIDIA Tesla P100 SXM2 16 GB"
  double peak_flops = 0;         // FP32 peak, per GPU or per CPU socket (all cores)
  double mem_bandwidth_Bps = 0;  // per GPU or per socket
  double mem_capacity_B = 0;
  // GPUs only, optional: the fraction of FP32 peak that SGEMM can reach on the architecture (0 = not
  // stated: the device model's Pascal/Volta default applies).
  double sgemm_efficiency = 0;
  // GPUs only, optional: dense tensor-core peaks (FLOP/s), FP16 inputs with FP32 accumulation, TF32 and
  // BF16 (Ampere and later), FP8 (Hopper and later). 0 = no tensor cores for that type.
  double fp16_tensor_flops = 0;
  double tf32_tensor_flops = 0;
  double bf16_tensor_flops = 0;
  double fp8_tensor_flops = 0;
  // CPU sockets only
  int cores = 0;
  double clock_hz = 0;       // sustained all-core AVX clock where known, else base
  int simd_width_fp32 = 0;   // FP32 lanes per vector unit (16 for AVX-512, 8 for AVX2)
  int fma_units = 0;         // vector FMA units per core
  int threads_per_core = 1;
  // Socket-to-socket link bandwidth per direction, all links together (UPI / QPI), what remote-memory
  // traffic of a process spanning sockets crosses; 0 = not stated (no NUMA cost is modelled).
  double socket_link_Bps = 0;
  // Optional: a CPU's core generation (cpu_microarchitectures()) or a GPU's architecture
  // (gpu_architectures()), what a collective library's topology and protocol rules key on; "" = not stated
  // (no architecture-gated protocol: no LL128 by default, no NVLink SHARP).
  std::string microarchitecture;
  std::string source;        // where the figures come from
  // Additions (platforms engineer): stated assumptions, per-figure sources, host-resolved facts.
  std::string assumptions;                         // figures that are assumed, and why
  std::vector<std::string> aliases;                // short names the CLI also accepts ("p100")
  std::map<std::string, std::string> figure_sources;  // field name -> source, where it has its own
  std::string cpu_model;     // `host` only: the /proc/cpuinfo model name
  std::string isa;           // CPUs: "avx512", "avx2", "avx", "sse" (from the SIMD width or cpuinfo)

  bool is_cpu() const { return kind == DeviceKind::CPU; }
  // An Intel core older than Skylake-SP (CPUID family 6, model below 0x55): NCCL's topology class "BDW".
  bool intel_before_skylake_sp() const;
  // An AMD core (microarchitecture zen ... zen4): NCCL's CPU vendor class AMD.
  bool amd() const;
  // GPUs: NCCL enables its LL128 protocol by default on this architecture (Volta, Ampere: NCCL 2.7 tuning.cc).
  bool nccl_ll128_by_default() const;
  // GPUs: the architecture reduces in a third-generation NVSwitch (NVLink SHARP: Hopper).
  bool nvlink_sharp() const;
  // CPUs: cores x clock_hz x simd_width_fp32 x fma_units x 2 (FMA = 2 FLOPs); GPUs: peak_flops.
  double formula_peak_flops() const;
  // The source of one figure: its own source if it has one, else the device's.
  const std::string& source_of(std::string_view field) const;
};

// The GPU architectures devices.yaml accepts, oldest first.
const std::vector<std::string>& gpu_architectures();
// The CPU microarchitectures devices.yaml accepts, oldest first per vendor.
const std::vector<std::string>& cpu_microarchitectures();

// Facts about the machine dtsim runs on, as read from /proc (injectable for tests).
struct HostFacts {
  std::string cpu_model;       // "model name"
  double clock_hz = 0;         // from "@ x.xxGHz" in the model name, else "cpu MHz"
  int cores_available = 0;     // CPUs in the process's affinity mask
  int threads_per_core = 1;    // siblings / cpu cores
  int simd_width_fp32 = 0;     // 16 (avx512f), 8 (avx2 or avx), 4 (sse)
  bool has_fma = false;
  double mem_capacity_B = 0;   // MemTotal
};

// Parses /proc/cpuinfo and /proc/meminfo text; `cores_available` comes from the caller.
// Throws Failure when the text has no usable model/ISA information.
HostFacts parse_host_facts(const std::string& cpuinfo_text, const std::string& meminfo_text, int cores_available);
// Reads /proc/cpuinfo, /proc/meminfo and sched_getaffinity of this process.
HostFacts read_host_facts();

class DeviceCatalog {
 public:
  // The shipped catalog: builtin_path(), <data_dir>/platforms/devices.yaml (loaded once).
  static const DeviceCatalog& builtin();
  static std::string builtin_path();
  // Loads a catalog file; strict schema, InputError naming file, line and field.
  static DeviceCatalog load(const std::string& path);
  // Same, with the facts used to resolve a `resolve: host` entry (tests inject them).
  static DeviceCatalog load(const std::string& path, const HostFacts& host);

  // InputError listing the known names; Failure for `host` when /proc could not describe this machine.
  const Device& by_name(std::string_view name) const;
  const Device* by_name_or_null(std::string_view name) const;
  std::vector<std::string> names() const;
  const std::vector<Device>& devices() const { return devices_; }

 private:
  static DeviceCatalog load_impl(const std::string& path, const HostFacts* host_or_null);
  std::vector<Device> devices_;
  std::string host_error_;  // why `host` is missing, when /proc could not describe this machine
};

// "gpu" / "cpu".
std::string to_string(DeviceKind kind);

}  // namespace dtsim::platforms
