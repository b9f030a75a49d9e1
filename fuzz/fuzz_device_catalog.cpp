// libFuzzer target: a device catalog (platforms/device.hpp) read from a path. The `resolve: host`
// entry resolves against fixed host facts, so a run does not depend on (or re-read) this machine's /proc.
#include "fuzz/fuzz_input.hpp"
#include "platforms/device.hpp"

namespace {
dtsim::platforms::HostFacts fixed_host() {
  dtsim::platforms::HostFacts h;
  h.cpu_model = "Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz";
  h.clock_hz = 2.4e9;
  h.cores_available = 2;
  h.threads_per_core = 1;
  h.simd_width_fp32 = 16;
  h.has_fma = true;
  h.mem_capacity_B = 8.0 * (1ULL << 30);
  return h;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static dtsim::fuzz::ScratchFile file("devices.yaml");
  static const dtsim::platforms::HostFacts host = fixed_host();
  const std::string& path = file.write(data, size);
  return dtsim::fuzz::run_loader([&] { (void)dtsim::platforms::DeviceCatalog::load(path, host); });
}
