// Fixtures shared by the device-model tests: a test CPU and a fitted host model of a few figures.
#pragma once
#include <string>

#include "calibrate/device_model.hpp"
#include "platforms/device.hpp"

namespace dtsim::test {

// A CPU of `cores` cores at 64 GFLOP/s each (1 GHz x 16 lanes x 2 FMA units) and `mem_Bps` of memory bandwidth.
inline platforms::Device test_cpu(int cores = 4, double mem_Bps = 40e9) {
  platforms::Device d;
  d.name = cores == 4 ? "test-cpu" : "test-cpu-" + std::to_string(cores);
  d.kind = platforms::DeviceKind::CPU;
  d.cores = cores;
  d.clock_hz = 1e9;
  d.simd_width_fp32 = 16;
  d.fma_units = 2;
  d.mem_bandwidth_Bps = mem_Bps;
  return d;
}

// A host model of the test CPU calibrated at `threads` threads (100 GFLOP/s per core, 10 GB/s).
inline calibrate::HostModel host_model(int threads) {
  calibrate::HostModel m;
  m.host.device_model = "Test CPU";
  m.host.threads = threads;
  m.host.core_peak_flops = 100e9;
  m.host.mem_bandwidth_Bps = 10e9;
  return m;
}

}  // namespace dtsim::test
