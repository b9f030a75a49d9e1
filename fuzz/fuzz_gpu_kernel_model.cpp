// libFuzzer target: a GPU kernel model (calibrate/gpu_kernel_model.hpp, the $DTSIM_GPU_KERNELS file) read
// from a path.
#include "calibrate/gpu_kernel_model.hpp"
#include "fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static dtsim::fuzz::ScratchFile file("gpu_kernels.json");
  const std::string& path = file.write(data, size);
  return dtsim::fuzz::run_loader([&] { (void)dtsim::calibrate::GpuKernelModel::load(path); });
}
