// libFuzzer target: a thread-scaling table (calibrate/device_model.hpp ThreadScaling, the $DTSIM_THREAD_SCALING
// file) read from a path.
#include "calibrate/device_model.hpp"
#include "fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static dtsim::fuzz::ScratchFile file("thread_scaling.json");
  const std::string& path = file.write(data, size);
  return dtsim::fuzz::run_loader([&] { (void)dtsim::calibrate::ThreadScaling::load(path); });
}
