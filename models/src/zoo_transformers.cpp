// The transformer zoo: dimensions of each model from its Hugging Face config.json (GPT-2, BERT, Llama,
// Mixtral), torchvision (ViT) or Narayanan et al. SC'21 Table 1 (Megatron GPT); see models/README.md.
#include "models/src/zoo_transformers.hpp"

#include <map>

namespace dtsim::models {
namespace {

using F = TransformerFamily;

// GPT-2 (openai-community/gpt2*): vocab 50257, 1024 positions, dropout 0.1 (embd, attn, resid), tied head.
TransformerConfig gpt2(const char* name, std::int64_t h, std::int64_t l, std::int64_t a) {
  TransformerConfig c;
  c.name = name;
  c.family = F::GPT;
  c.vocab = 50257;
  c.hidden = h;
  c.layers = l;
  c.heads = a;
  c.ffn = 4 * h;
  c.positions = 1024;
  c.default_seq = 1024;
  c.hidden_dropout = c.attention_dropout = 0.1;
  return c;
}

// Megatron-LM GPT of Narayanan et al. SC'21 Table 1: vocabulary 51,200, sequence 2,048, ffn 4h, learned
// positions, tied head, Megatron's default hidden and attention dropout 0.1.
TransformerConfig megatron(const char* name, std::int64_t a, std::int64_t h, std::int64_t l) {
  TransformerConfig c = gpt2(name, h, l, a);
  c.vocab = 51200;
  c.positions = c.default_seq = 2048;
  return c;
}

// BERT (google-bert/bert-*-uncased): vocab 30522, 512 positions, 2 segments, dropout 0.1.
TransformerConfig bert(const char* name, std::int64_t h, std::int64_t l, std::int64_t a) {
  TransformerConfig c;
  c.name = name;
  c.family = F::BERT;
  c.vocab = 30522;
  c.hidden = h;
  c.layers = l;
  c.heads = a;
  c.ffn = 4 * h;
  c.positions = c.default_seq = 512;
  c.token_types = 2;
  c.hidden_dropout = c.attention_dropout = 0.1;
  return c;
}

// Llama family (meta-llama/*): RMSNorm, rotary, SwiGLU, no bias, no dropout, untied head.
TransformerConfig llama(const char* name, std::int64_t vocab, std::int64_t h, std::int64_t l, std::int64_t a,
                        std::int64_t kv, std::int64_t ffn, std::int64_t seq) {
  TransformerConfig c;
  c.name = name;
  c.family = F::LLAMA;
  c.vocab = vocab;
  c.hidden = h;
  c.layers = l;
  c.heads = a;
  c.kv_heads = kv;
  c.ffn = ffn;
  c.default_seq = seq;
  c.tied = false;
  return c;
}

// torchvision vit_b_16 / vit_l_16: 224x224 images, 16x16 patches + class token, 1000 classes, no dropout.
TransformerConfig vit(const char* name, std::int64_t h, std::int64_t l, std::int64_t a, std::int64_t ffn) {
  TransformerConfig c;
  c.name = name;
  c.family = F::VIT;
  c.hidden = h;
  c.layers = l;
  c.heads = a;
  c.ffn = ffn;
  c.image = 224;
  c.patch = 16;
  c.classes = 1000;
  return c;
}

const std::vector<TransformerConfig>& configs() {
  static const std::vector<TransformerConfig> all = [] {
    std::vector<TransformerConfig> v = {
        gpt2("gpt2", 768, 12, 12), gpt2("gpt2_medium", 1024, 24, 16), gpt2("gpt2_large", 1280, 36, 20),
        gpt2("gpt2_xl", 1600, 48, 25),
        // Narayanan et al. SC'21 Table 1: heads, hidden, layers.
        megatron("megatron_1.7b", 24, 2304, 24), megatron("megatron_3.6b", 32, 3072, 30),
        megatron("megatron_7.5b", 32, 4096, 36), megatron("megatron_18.4b", 48, 6144, 40),
        megatron("megatron_39.1b", 64, 8192, 48), megatron("megatron_76.1b", 80, 10240, 60),
        megatron("megatron_145.6b", 96, 12288, 80), megatron("megatron_310.1b", 128, 16384, 96),
        megatron("megatron_529.6b", 128, 20480, 105), megatron("megatron_1t", 160, 25600, 128),
        bert("bert_base", 768, 12, 12), bert("bert_large", 1024, 24, 16),
        // vocab, hidden, layers, heads, kv heads, intermediate, context (config.json of each).
        llama("llama2_7b", 32000, 4096, 32, 32, 32, 11008, 4096),
        llama("llama2_13b", 32000, 5120, 40, 40, 40, 13824, 4096),
        llama("llama2_70b", 32000, 8192, 80, 64, 8, 28672, 4096),
        llama("llama3_8b", 128256, 4096, 32, 32, 8, 14336, 8192),
        llama("llama3_70b", 128256, 8192, 80, 64, 8, 28672, 8192),
        llama("llama3_405b", 128256, 16384, 126, 128, 8, 53248, 8192),
        llama("mixtral_8x7b", 32000, 4096, 32, 32, 8, 14336, 4096),
        vit("vit_b16", 768, 12, 12, 3072), vit("vit_l16", 1024, 24, 16, 4096),
    };
    for (auto& c : v)
      if (c.name == "mixtral_8x7b") {  // mistralai/Mixtral-8x7B-v0.1: 8 experts, 2 per token
        c.experts = 8;
        c.top_k = 2;
      }
    return v;
  }();
  return all;
}

}  // namespace

const TransformerConfig* transformer_zoo_config_or_null(const std::string& name) {
  for (const auto& c : configs())
    if (c.name == name) return &c;
  return nullptr;
}

std::vector<std::string> transformer_zoo_names() {
  std::vector<std::string> names;
  for (const auto& c : configs()) names.push_back(c.name);
  return names;
}

}  // namespace dtsim::models
