// Transformer builders: each block written as the reference implementations run it (Hugging Face
// GPT2Model, BertForPreTraining, LlamaForCausalLM, MixtralForCausalLM, torchvision VisionTransformer).
#include "models/transformer.hpp"

#include <fmt/format.h>

#include "common/errors.hpp"

namespace dtsim::models {
namespace {

// Longest sequence accepted (beyond any trained context; keeps s^2 terms far from the element bound).
constexpr int MAX_SEQ_LEN = 1 << 20;

class Blocks {
 public:
  Blocks(Model& m, const TransformerConfig& c, const ModelOptions& o)
      : m_(m), c_(c), flash_(o.flash_attention), tp_(o.tensor_parallel), cp_(o.context_parallel),
        ep_(o.expert_parallel) {}

  std::string row(const std::string& name, std::string_view op, const std::string& in, SeqParams p = {}) {
    p.block = block_;
    LayerParams lp;
    lp.seq = p;
    return m_.add_row(name, op, lp, {in}).name;
  }
  std::string row2(const std::string& name, std::string_view op, const std::string& a, const std::string& b,
                   SeqParams p = {}) {
    p.block = block_;
    LayerParams lp;
    lp.seq = p;
    return m_.add_row(name, op, lp, {a, b}).name;
  }
  // `column`: a column-parallel linear (its input is the full hidden width on every tensor-parallel rank).
  std::string linear(const std::string& name, const std::string& in, std::int64_t out, bool bias, bool column = false) {
    SeqParams p;
    p.out_features = out;
    p.bias = bias;
    p.sequence_parallel_region = column;
    return row(name, "linear", in, p);
  }
  std::string dropout(const std::string& name, const std::string& in, double ratio) {
    if (ratio <= 0) return in;
    SeqParams p;
    p.dropout = ratio;
    p.sequence_parallel_region = true;
    return row(name, "hidden_dropout", in, p);
  }
  std::string norm(const std::string& name, const std::string& in) {
    SeqParams p;
    p.sequence_parallel_region = true;
    return row(name, c_.family == TransformerFamily::LLAMA ? "rms_norm" : "layer_norm", in, p);
  }
  std::string residual(const std::string& name, const std::string& a, const std::string& b) {
    SeqParams p;
    p.sequence_parallel_region = true;
    return row2(name, "residual_add", a, b, p);
  }
  // Fused QKV projection, (rotary), attention core, output projection.
  std::string attention(const std::string& p, const std::string& in, bool causal) {
    const bool llama = c_.family == TransformerFamily::LLAMA;
    // Tensor parallelism: each rank holds heads / tp query heads and kv_heads / tp key/value heads
    // (column-parallel QKV, row-parallel output projection; Shoeybi et al. 2019, Megatron-LM).
    const std::int64_t kv = (c_.kv_heads ? c_.kv_heads : c_.heads) / tp_;
    const std::int64_t heads = c_.heads / tp_;
    const std::int64_t d = c_.hidden / c_.heads;
    auto x = linear(p + ".qkv", in, (heads + 2 * kv) * d, !llama, true);
    SeqParams h;
    h.heads = heads;
    h.kv_heads = kv;
    if (llama) x = row(p + ".rotary", "rotary", x, h);
    h.causal = causal;
    h.flash = flash_;
    h.dropout = c_.attention_dropout;
    h.context_parallel = cp_;
    x = row(p + ".core", "attention", x, h);
    return linear(p + ".proj", x, c_.hidden, !llama);
  }
  std::string mlp(const std::string& p, const std::string& in) {
    if (c_.family == TransformerFamily::LLAMA) {
      if (c_.experts > 0) {
        SeqParams r;
        r.experts = c_.experts;
        r.top_k = c_.top_k;
        const auto gate = row(p + ".router", "moe_router", in, r);
        r.ffn = c_.ffn / tp_;
        r.expert_parallel = ep_;
        return row2(p + ".experts", "moe_experts", in, gate, r);
      }
      auto x = linear(p + ".gate_up", in, 2 * c_.ffn / tp_, false, true);
      x = row(p + ".swiglu", "swiglu", x);
      return linear(p + ".down", x, c_.hidden, false);
    }
    auto x = linear(p + ".fc1", in, c_.ffn / tp_, true, true);
    x = row(p + ".gelu", "gelu", x);
    return linear(p + ".fc2", x, c_.hidden, true);
  }
  // Pre-LN block (GPT, Llama, ViT): x + attn(norm(x)), then x + mlp(norm(x)).
  std::string pre_ln_block(const std::string& p, const std::string& x, bool causal) {
    auto a = dropout(p + ".attn_drop", attention(p + ".attn", norm(p + ".norm1", x), causal), c_.hidden_dropout);
    const auto r1 = residual(p + ".add1", x, a);
    auto f = dropout(p + ".mlp_drop", mlp(p + ".mlp", norm(p + ".norm2", r1)), c_.hidden_dropout);
    return residual(p + ".add2", r1, f);
  }
  // Post-LN block (BERT): norm(x + attn(x)), then norm(x + mlp(x)).
  std::string post_ln_block(const std::string& p, const std::string& x) {
    auto a = dropout(p + ".attn_drop", attention(p + ".attn", x, false), c_.hidden_dropout);
    const auto n1 = norm(p + ".norm1", residual(p + ".add1", x, a));
    auto f = dropout(p + ".mlp_drop", mlp(p + ".mlp", n1), c_.hidden_dropout);
    return norm(p + ".norm2", residual(p + ".add2", n1, f));
  }
  void set_block(std::int64_t b) { block_ = b; }

 private:
  Model& m_;
  const TransformerConfig& c_;
  bool flash_;
  std::int64_t tp_ = 1, cp_ = 1, ep_ = 1;
  std::int64_t block_ = -1;
};

void check_config(const TransformerConfig& c) {
  const auto need = [&](std::int64_t v, const char* field) {
    if (v < 1) throw InputError(fmt::format("model '{}': {} must be >= 1, got {}", c.name, field, v));
  };
  need(c.hidden, "hidden size");
  need(c.layers, "layers");
  need(c.heads, "attention heads");
  need(c.ffn, "intermediate (ffn) size");
  if (c.family == TransformerFamily::VIT) {
    need(c.patch, "patch size");
    need(c.classes, "classes");
  } else {
    need(c.vocab, "vocabulary size");
  }
  if (c.hidden % c.heads != 0)
    throw InputError(fmt::format("model '{}': hidden size {} is not a multiple of the {} heads", c.name, c.hidden, c.heads));
  if (c.layers > 1 << 16) throw InputError(fmt::format("model '{}': layers must be <= 65536", c.name));
}

// The layout's constraints on the model (Megatron-LM's own checks: heads, query groups and the MLP split
// evenly over tensor-parallel ranks; experts over expert-parallel ranks). Errors name the flag.
void check_shards(const TransformerConfig& c, const ModelOptions& o) {
  const auto range = [&](int v, const char* flag) {
    if (v < 1 || v > (1 << 16)) throw InputError(fmt::format("{}: must be in 1..65536, got {}", flag, v));
  };
  range(o.tensor_parallel, "--tp");
  range(o.context_parallel, "--cp");
  range(o.expert_parallel, "--ep");
  const std::int64_t tp = o.tensor_parallel;
  const std::int64_t kv = c.kv_heads ? c.kv_heads : c.heads;
  if (c.heads % tp != 0)
    throw InputError(fmt::format("--tp: tensor parallelism {} must divide model '{}''s {} attention heads", tp, c.name,
                                 c.heads));
  if (kv % tp != 0)
    throw InputError(fmt::format("--tp: tensor parallelism {} must divide model '{}''s {} key/value heads (query groups)",
                                 tp, c.name, kv));
  if (c.ffn % tp != 0)
    throw InputError(fmt::format("--tp: tensor parallelism {} must divide model '{}''s MLP size {}", tp, c.name, c.ffn));
  if (o.expert_parallel > 1 && c.experts == 0)
    throw InputError(fmt::format("--ep: model '{}' has no experts (expert parallelism needs a mixture of experts)", c.name));
  if (c.experts > 0 && c.experts % o.expert_parallel != 0)
    throw InputError(fmt::format("--ep: expert parallelism {} must divide model '{}''s {} experts", o.expert_parallel,
                                 c.name, c.experts));
  if (c.family == TransformerFamily::VIT && o.context_parallel > 1)
    throw InputError(fmt::format("--cp: model '{}' is a vision transformer; context parallelism applies to language models",
                                 c.name));
}

// The vocabulary rows one tensor-parallel rank holds (vocab-parallel embedding and output layer; Megatron
// pads the vocabulary to a multiple of the tensor-parallel size), or all of them when they are replicated.
std::int64_t vocab_shard(const TransformerConfig& c, const ModelOptions& o) {
  if (o.replicated_vocab) return c.vocab;
  return (c.vocab + o.tensor_parallel - 1) / o.tensor_parallel;
}

}  // namespace

Model build_transformer(const TransformerConfig& c, const ModelOptions& o) {
  check_config(c);
  if (o.batch < 1) throw InputError(fmt::format("model '{}': micro-batch must be >= 1, got {}", c.name, o.batch));
  const bool vit = c.family == TransformerFamily::VIT;
  if (vit && o.seq_len)
    throw InputError(fmt::format("model '{}': the sequence follows the image (--input HxW), not --seq-len", c.name));
  if (!vit && (o.input_h || o.input_w || o.channels || o.classes))
    throw InputError(fmt::format("model '{}' is a language model: use --seq-len, not --input/--channels/--classes",
                                 c.name));
  check_shards(c, o);
  const std::int64_t full_seq = o.seq_len ? o.seq_len : c.default_seq;
  if (!vit && full_seq % o.context_parallel != 0)
    throw InputError(fmt::format("--cp: context parallelism {} must divide the sequence length {}", o.context_parallel,
                                 full_seq));
  const std::int64_t seq = full_seq / o.context_parallel;
  if (o.mlm_predictions > 0 && c.family != TransformerFamily::BERT)
    throw InputError(fmt::format("--mlm-predictions: model '{}' has no masked-LM head (BERT models have)", c.name));
  if (o.mlm_predictions < 0 || o.mlm_predictions > full_seq)
    throw InputError(fmt::format("--mlm-predictions: must be in 0..{} (the sequence length), got {}", full_seq,
                                 o.mlm_predictions));
  if (o.mlm_predictions > 0 && o.context_parallel > 1)
    throw InputError("--mlm-predictions: not with context parallelism (--cp): each rank's masked positions are unknown");
  if (!vit && (full_seq < 1 || full_seq > MAX_SEQ_LEN))
    throw InputError(fmt::format("model '{}': sequence length must be in 1..{}, got {}", c.name, MAX_SEQ_LEN, full_seq));
  if (vit && (c.image < 1 || c.image > MAX_SEQ_LEN))
    throw InputError(fmt::format("model '{}': image side must be in 1..{}, got {}", c.name, MAX_SEQ_LEN, c.image));
  Shape input = vit ? Shape{o.batch, o.channels ? o.channels : c.channels, o.input_h ? o.input_h : c.image,
                            o.input_w ? o.input_w : c.image}
                    : Shape{o.batch, 1, seq, 1};
  Model m(c.name, input);
  Blocks b(m, c, o);
  std::string x;
  if (vit) {
    SeqParams p;
    p.hidden = c.hidden;
    p.patch = c.patch;
    x = b.row("patch_embed", "patch_embed", "data", p);
    x = b.dropout("embed_drop", x, c.hidden_dropout);
  } else {
    SeqParams p;
    p.vocab = vocab_shard(c, o);
    p.hidden = c.hidden;
    p.positions = c.positions;
    p.token_types = c.token_types;
    x = b.row("embed", "embedding", "data", p);
    if (c.family == TransformerFamily::BERT) x = b.norm("embed_norm", x);
    x = b.dropout("embed_drop", x, c.hidden_dropout);
  }
  for (std::int64_t i = 0; i < c.layers; ++i) {
    b.set_block(i);
    const auto p = fmt::format("layers.{}", i);
    x = c.family == TransformerFamily::BERT ? b.post_ln_block(p, x)
                                            : b.pre_ln_block(p, x, c.family != TransformerFamily::VIT);
  }
  b.set_block(-1);
  if (c.family != TransformerFamily::BERT) x = b.norm("final_norm", x);
  if (vit) {
    SeqParams p;
    p.classes = o.classes ? o.classes : c.classes;
    b.row("head", "cls_head", x, p);
  } else if (c.family == TransformerFamily::BERT) {
    // Masked-LM head (dense + GELU + LayerNorm, tied decoder with a bias) and the next-sentence head. The
    // MLM head runs over every position (Hugging Face's BertForPreTraining), or over mlm_predictions
    // positions per sequence gathered first (NVIDIA DeepLearningExamples' dense sequence output:
    // BertPreTrainingHeads index_selects the masked positions before the transform and the decoder).
    std::string h = x;
    if (o.mlm_predictions > 0) {
      SeqParams g;
      g.keep_tokens = o.mlm_predictions;
      h = b.row("mlm.gather", "gather_tokens", x, g);
    }
    auto t = b.norm("mlm.norm", b.row("mlm.gelu", "gelu", b.linear("mlm.dense", h, c.hidden, true)));
    SeqParams lm;
    lm.vocab = vocab_shard(c, o);
    lm.tied = c.tied;
    lm.head_bias = true;
    b.row("mlm.head", "lm_head", t, lm);
    SeqParams nsp;
    nsp.classes = 2;
    nsp.pooler = true;
    b.row("nsp.head", "cls_head", x, nsp);
  } else {
    SeqParams lm;
    lm.vocab = vocab_shard(c, o);
    lm.tied = c.tied;
    b.row("lm_head", "lm_head", x, lm);
  }
  return m;
}

}  // namespace dtsim::models
