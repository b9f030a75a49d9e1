// libFuzzer target: a platform file (platforms/platform.hpp) read from a path, as `--platform FILE` does;
// its devices resolve against the shipped catalog.
#include "fuzz/fuzz_input.hpp"
#include "platforms/platform.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  dtsim::fuzz::use_source_data_dir();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static dtsim::fuzz::ScratchFile file("platform.yaml");
  const std::string& path = file.write(data, size);
  return dtsim::fuzz::run_loader([&] { (void)dtsim::platforms::load_platform(path); });
}
