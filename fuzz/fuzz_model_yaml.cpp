// libFuzzer target: a user model file (models/yaml_io.hpp), parsed and built (shapes, costs) in memory.
#include <string>

#include "fuzz/fuzz_input.hpp"
#include "models/yaml_io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  return dtsim::fuzz::run_loader([&] {
    const dtsim::models::ModelOptions options;  // batch 1, the file's own input size and classes
    (void)dtsim::models::parse_model_yaml(text, "fuzz-model.yaml", options);
  });
}
