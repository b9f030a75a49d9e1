// Transformer models from a few dimensions: GPT (pre-LN, GELU, learned positions), BERT (post-LN),
// Llama/Mistral/Mixtral (RMSNorm, rotary, SwiGLU or top-k MoE) and ViT, built of the row ops.
#pragma once
#include <cstdint>
#include <string>

#include "models/model.hpp"
#include "models/zoo.hpp"

namespace dtsim::models {

enum class TransformerFamily { GPT, BERT, LLAMA, VIT };

struct TransformerConfig {
  std::string name;
  TransformerFamily family = TransformerFamily::GPT;
  std::int64_t vocab = 0;        // GPT, BERT, Llama
  std::int64_t hidden = 0;
  std::int64_t layers = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;     // 0 = heads
  std::int64_t ffn = 0;          // MLP (or each expert's) intermediate size
  std::int64_t positions = 0;    // learned position table (GPT, BERT); 0 for rotary (Llama)
  std::int64_t token_types = 0;  // BERT segments
  std::int64_t experts = 0;      // > 0: every MLP is a top-k mixture of experts (Mixtral)
  std::int64_t top_k = 0;
  std::int64_t default_seq = 0;  // sequence length when the options give none
  bool tied = true;              // LM head shares the token embedding
  double hidden_dropout = 0;     // 0 = no dropout layers
  double attention_dropout = 0;
  // ViT: image side, channels, patch side, classes.
  std::int64_t image = 0, channels = 3, patch = 0, classes = 0;
};

// Builds the model for options.batch (micro-batch) x options.seq_len tokens (0 = default_seq), or for
// ViT options.input_h/w images (0 = config.image). Throws InputError for bad dimensions or options.
Model build_transformer(const TransformerConfig& config, const ModelOptions& options);

}  // namespace dtsim::models
