// Compute devices (GPUs and CPU sockets) as described in platforms/devices.yaml, each figure sourced.
#pragma once
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
  // CPU sockets only
  int cores = 0;
  double clock_hz = 0;       // sustained all-core AVX clock where known, else base
  int simd_width_fp32 = 0;   // FP32 lanes per vector unit (16 for AVX-512, 8 for AVX2)
  int fma_units = 0;         // vector FMA units per core
  int threads_per_core = 1;
  std::string source;        // where the figures come from
};

class DeviceCatalog {
 public:
  // The shipped catalog: <data_dir>/platforms/devices.yaml (loaded once).
  static const DeviceCatalog& builtin();
  // Loads a catalog file; strict schema, InputError naming file, line and field.
  static DeviceCatalog load(const std::string& path);

  const Device& by_name(std::string_view name) const;  // InputError listing the known names
  const Device* by_name_or_null(std::string_view name) const;
  std::vector<std::string> names() const;
  const std::vector<Device>& devices() const { return devices_; }

 private:
  std::vector<Device> devices_;
};

}  // namespace dtsim::platforms
