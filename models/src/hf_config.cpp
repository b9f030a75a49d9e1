// Hugging Face config.json -> TransformerConfig, one key table per model_type (the names transformers'
// GPT2Config, LlamaConfig, MistralConfig, MixtralConfig, BertConfig and ViTConfig use).
#include "models/hf_config.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/errors.hpp"
#include "common/json_limits.hpp"
#include "common/text.hpp"

namespace dtsim::models {
namespace {

using Json = nlohmann::json;
// Largest dimension accepted from a file (far beyond any model; keeps products exact).
constexpr std::int64_t MAX_DIMENSION = std::int64_t{1} << 32;

struct Reader {
  const Json& root;
  const std::string& label;
  const std::string& type;

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw InputError(fmt::format("{}: key '{}': {}", label, key, what));
  }
  const Json* find(const std::string& key) const {
    const auto it = root.find(key);
    return it == root.end() || it->is_null() ? nullptr : &*it;
  }
  std::int64_t integer(const Json& v, const std::string& key) const {
    if (!v.is_number_integer()) fail(key, fmt::format("expected a positive integer, got {}", printable(v.dump())));
    const std::int64_t x = v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(MAX_DIMENSION)
                               ? MAX_DIMENSION + 1
                               : v.get<std::int64_t>();
    if (x < 1 || x > MAX_DIMENSION) fail(key, fmt::format("expected an integer in 1..{}, got {}", MAX_DIMENSION, printable(v.dump())));
    return x;
  }
  std::int64_t need(const std::string& key) const {
    const Json* v = find(key);
    if (!v) throw InputError(fmt::format("{}: missing key '{}' (needed for model_type '{}')", label, key, type));
    return integer(*v, key);
  }
  std::int64_t optional(const std::string& key, std::int64_t fallback) const {
    const Json* v = find(key);
    return v ? integer(*v, key) : fallback;
  }
  double ratio(const std::string& key, double fallback) const {
    const Json* v = find(key);
    if (!v) return fallback;
    if (!v->is_number() || !(v->get<double>() >= 0 && v->get<double>() < 1))
      fail(key, fmt::format("expected a number in [0, 1), got {}", printable(v->dump())));
    return v->get<double>();
  }
  bool boolean(const std::string& key, bool fallback) const {
    const Json* v = find(key);
    if (!v) return fallback;
    if (!v->is_boolean()) fail(key, fmt::format("expected true or false, got {}", printable(v->dump())));
    return v->get<bool>();
  }
};

void read_gpt2(const Reader& r, TransformerConfig& c) {
  c.family = TransformerFamily::GPT;
  c.hidden = r.need("n_embd");
  c.layers = r.need("n_layer");
  c.heads = r.need("n_head");
  c.vocab = r.need("vocab_size");
  c.positions = c.default_seq = r.need("n_positions");
  c.ffn = r.optional("n_inner", 4 * c.hidden);  // GPT2Config: None means 4 x n_embd
  c.hidden_dropout = r.ratio("resid_pdrop", 0.1);
  c.attention_dropout = r.ratio("attn_pdrop", 0.1);
  c.tied = r.boolean("tie_word_embeddings", true);
}

void read_llama(const Reader& r, TransformerConfig& c, bool moe) {
  c.family = TransformerFamily::LLAMA;
  c.hidden = r.need("hidden_size");
  c.ffn = r.need("intermediate_size");
  c.heads = r.need("num_attention_heads");
  c.layers = r.need("num_hidden_layers");
  c.vocab = r.need("vocab_size");
  c.kv_heads = r.optional("num_key_value_heads", c.heads);
  c.default_seq = r.need("max_position_embeddings");
  c.tied = r.boolean("tie_word_embeddings", false);
  c.attention_dropout = r.ratio("attention_dropout", 0.0);
  if (r.find("head_dim") && c.hidden % c.heads == 0 && r.integer(*r.find("head_dim"), "head_dim") != c.hidden / c.heads)
    r.fail("head_dim", fmt::format("only hidden_size / num_attention_heads = {} is modelled", c.hidden / c.heads));
  if (moe) {
    c.experts = r.need("num_local_experts");
    c.top_k = r.need("num_experts_per_tok");
    if (c.top_k > c.experts) r.fail("num_experts_per_tok", fmt::format("exceeds num_local_experts {}", c.experts));
  }
}

void read_bert(const Reader& r, TransformerConfig& c) {
  c.family = TransformerFamily::BERT;
  c.hidden = r.need("hidden_size");
  c.layers = r.need("num_hidden_layers");
  c.heads = r.need("num_attention_heads");
  c.ffn = r.need("intermediate_size");
  c.vocab = r.need("vocab_size");
  c.positions = c.default_seq = r.need("max_position_embeddings");
  c.token_types = r.need("type_vocab_size");
  c.hidden_dropout = r.ratio("hidden_dropout_prob", 0.1);
  c.attention_dropout = r.ratio("attention_probs_dropout_prob", 0.1);
}

void read_vit(const Reader& r, TransformerConfig& c) {
  c.family = TransformerFamily::VIT;
  c.hidden = r.need("hidden_size");
  c.layers = r.need("num_hidden_layers");
  c.heads = r.need("num_attention_heads");
  c.ffn = r.need("intermediate_size");
  c.image = r.need("image_size");
  c.patch = r.need("patch_size");
  c.channels = r.optional("num_channels", 3);
  c.hidden_dropout = r.ratio("hidden_dropout_prob", 0.0);
  c.attention_dropout = r.ratio("attention_probs_dropout_prob", 0.0);
  const Json* labels = r.find("id2label");
  if (!labels) throw InputError(fmt::format("{}: missing key 'id2label' (needed for model_type 'vit': the classes)", r.label));
  if (!labels->is_object() || labels->empty()) r.fail("id2label", "expected a non-empty object of class names");
  c.classes = static_cast<std::int64_t>(labels->size());
}

struct ModelType {
  const char* name;
  void (*read)(const Reader&, TransformerConfig&);
};

const ModelType TYPES[] = {
    {"gpt2", read_gpt2},
    {"llama", [](const Reader& r, TransformerConfig& c) { read_llama(r, c, false); }},
    {"mistral", [](const Reader& r, TransformerConfig& c) { read_llama(r, c, false); }},
    {"mixtral", [](const Reader& r, TransformerConfig& c) { read_llama(r, c, true); }},
    {"bert", read_bert},
    {"vit", read_vit},
};

}  // namespace

TransformerConfig parse_hf_config(const std::string& text, const std::string& label, const std::string& name) {
  // In a fuzz build the bound is lowered as every JSON reader's is (common/json_limits.hpp), so that the
  // fuzzer's inputs (scripts/fuzz.sh max_len) reach it.
  const std::size_t max_bytes = effective(JsonLimits{HF_CONFIG_MAX_BYTES, HF_CONFIG_MAX_DEPTH}).max_bytes;
  if (text.size() > max_bytes)
    throw InputError(fmt::format("{}: {} bytes is larger than a config.json can be ({} bytes)", label, text.size(),
                                 max_bytes));
  Json root;
  try {
    // The callback bounds nesting before the parser recurses further (throws out of the parser).
    root = Json::parse(text, [&](int depth, Json::parse_event_t, Json&) {
      if (depth > HF_CONFIG_MAX_DEPTH)
        throw InputError(fmt::format("{}: JSON nested deeper than {} levels", label, HF_CONFIG_MAX_DEPTH));
      return true;
    });
  } catch (const Json::exception& e) {
    throw InputError(fmt::format("{}: malformed JSON: {}", label, printable(e.what())));
  }
  if (!root.is_object()) throw InputError(fmt::format("{}: expected a JSON object (a Hugging Face config.json)", label));
  const auto mt = root.find("model_type");
  if (mt == root.end()) throw InputError(fmt::format("{}: missing key 'model_type'", label));
  if (!mt->is_string()) throw InputError(fmt::format("{}: key 'model_type': expected a string", label));
  const std::string type = mt->get<std::string>();
  std::string known;
  for (const auto& t : TYPES) {
    known += (known.empty() ? "" : ", ") + std::string(t.name);
    if (type == t.name) {
      TransformerConfig c;
      c.name = name;
      t.read(Reader{root, label, type}, c);
      if (c.hidden % c.heads != 0)
        throw InputError(fmt::format("{}: hidden size {} is not a multiple of the {} attention heads", label, c.hidden,
                                     c.heads));
      if (c.kv_heads && (c.kv_heads > c.heads || c.heads % c.kv_heads != 0))
        throw InputError(fmt::format("{}: key 'num_key_value_heads': {} must divide num_attention_heads {}", label,
                                     c.kv_heads, c.heads));
      return c;
    }
  }
  throw InputError(fmt::format("{}: key 'model_type': unsupported '{}' (supported: {})", label, printable(type), known));
}

Model load_hf_config(const std::string& path, const ModelOptions& options) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw InputError(fmt::format("{}: no such config file", printable(path)));
  if (std::filesystem::file_size(path, ec) > HF_CONFIG_MAX_BYTES)
    throw InputError(fmt::format("{}: larger than a config.json can be ({} bytes)", printable(path), HF_CONFIG_MAX_BYTES));
  std::ifstream in(path);
  if (!in) throw InputError(fmt::format("{}: cannot be read", printable(path)));
  std::stringstream text;
  text << in.rdbuf();
  // The model is named after its folder (hub snapshots keep config.json in a folder named after the model).
  const std::filesystem::path p(path);
  std::string name = p.stem().string();
  if (name == "config" && p.has_parent_path() && !p.parent_path().filename().empty())
    name = p.parent_path().filename().string();
  const TransformerConfig config = parse_hf_config(text.str(), printable(path), name);
  try {
    return build_transformer(config, options);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", printable(path), e.what()));
  }
}

}  // namespace dtsim::models
