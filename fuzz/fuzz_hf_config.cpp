// libFuzzer target: a Hugging Face config.json (models/hf_config.hpp), parsed and built (shapes, costs) in
// memory at a short sequence so that every input stays fast.
#include <string>

#include "fuzz/fuzz_input.hpp"
#include "models/hf_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  return dtsim::fuzz::run_loader([&] {
    const auto config = dtsim::models::parse_hf_config(text, "fuzz-config.json", "fuzz");
    dtsim::models::ModelOptions options;
    if (config.family != dtsim::models::TransformerFamily::VIT) options.seq_len = 16;
    if (config.layers <= 64) (void)dtsim::models::build_transformer(config, options);  // bounded time per input
  });
}
