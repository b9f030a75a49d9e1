// Hugging Face config.json reader: a transformer from its model_type's own keys (gpt2, llama, mistral,
// mixtral, bert, vit). Strict: unknown model_type or a missing/ill-typed needed key is one InputError.
#pragma once
#include <string>

#include "models/model.hpp"
#include "models/transformer.hpp"
#include "models/zoo.hpp"

namespace dtsim::models {

// Largest config.json accepted (real ones are a few KiB) and deepest JSON nesting (real ones: 3).
inline constexpr std::size_t HF_CONFIG_MAX_BYTES = std::size_t{1} << 20;
inline constexpr int HF_CONFIG_MAX_DEPTH = 32;

// Parses config.json text; `label` names the file in errors and `name` becomes the config's name.
TransformerConfig parse_hf_config(const std::string& text, const std::string& label, const std::string& name);
// Reads a config.json and builds the model for `options` (micro-batch, seq_len; ViT: input, classes).
Model load_hf_config(const std::string& path, const ModelOptions& options);

}  // namespace dtsim::models
