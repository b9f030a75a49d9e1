// Tests of the transformer ops (models/op_rows.hpp) and zoo (models/transformer.hpp): parameter counts
// against Hugging Face / torchvision / Megatron figures, the FLOP count per token, GQA/flash/MoE costs,
// YAML round trips and one-line errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <map>
#include <tuple>

#include "common/errors.hpp"
#include "models/op_rows.hpp"
#include "models/transformer.hpp"
#include "models/yaml_io.hpp"
#include "models/zoo.hpp"

using namespace dtsim::models;

namespace {
ModelOptions seq(int s, int batch = 1) {
  ModelOptions o;
  o.batch = batch;
  o.seq_len = s;
  return o;
}
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const dtsim::InputError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("models::Transformers: parameter counts equal Hugging Face and torchvision figures", "[models]") {
  // Exact counts: Hugging Face model cards / num_parameters() (GPT-2, Llama, Mixtral) and torchvision's
  // num_params (ViT); each also derived by arithmetic from its config.json in models/README.md.
  const std::map<std::string, std::int64_t> published = {
      {"gpt2", 124'439'808},           {"gpt2_medium", 354'823'168},       {"gpt2_large", 774'030'080},
      {"gpt2_xl", 1'557'611'200},      {"llama2_7b", 6'738'415'616},       {"llama2_13b", 13'015'864'320},
      {"llama2_70b", 68'976'648'192},  {"llama3_8b", 8'030'261'248},       {"llama3_70b", 70'553'706'496},
      {"llama3_405b", 405'853'388'800}, {"mixtral_8x7b", 46'702'792'704},   {"vit_b16", 86'567'656},
      {"vit_l16", 304'326'632},
  };
  for (const auto& [name, params] : published) {
    INFO(name);
    CHECK(build_zoo_model(name, seq(0)).totals().params == params);
  }
}

TEST_CASE("models::Transformers: BERT is BertModel (HF count) plus the pre-training heads", "[models]") {
  // bert-base-uncased BertModel (with pooler): 109,482,240; bert-large-uncased: 335,141,888. The zoo adds
  // the masked-LM transform (dense h*h+h, LayerNorm 2h), the decoder bias (vocab; weight tied) and the
  // next-sentence classifier (2h + 2).
  for (const auto& [name, h, bert_model] :
       {std::tuple{"bert_base", 768LL, 109'482'240LL}, std::tuple{"bert_large", 1024LL, 335'141'888LL}}) {
    INFO(name);
    const Model m = build_zoo_model(name, seq(0));
    const std::int64_t heads = (h * h + h) + 2 * h + 30522 + (2 * h + 2);
    CHECK(m.totals().params == bert_model + heads);
  }
}

TEST_CASE("models::Transformers: Megatron GPT sizes are Narayanan et al. SC'21 Table 1", "[models]") {
  // Table 1: billions of parameters (one decimal) for (heads, hidden, layers); V = 51,200, s = 2,048.
  // The paper's count P = 12 l h^2 (1 + 13/(12h) + (V+s)/(12 l h)) plus the final LayerNorm (2h).
  const std::map<std::string, std::tuple<double, std::int64_t, std::int64_t>> table = {
      {"megatron_1.7b", {1.7, 2304, 24}},     {"megatron_3.6b", {3.6, 3072, 30}},
      {"megatron_7.5b", {7.5, 4096, 36}},     {"megatron_18.4b", {18.4, 6144, 40}},
      {"megatron_39.1b", {39.1, 8192, 48}},   {"megatron_76.1b", {76.1, 10240, 60}},
      {"megatron_145.6b", {145.6, 12288, 80}}, {"megatron_310.1b", {310.1, 16384, 96}},
      {"megatron_529.6b", {529.6, 20480, 105}}, {"megatron_1t", {1008.0, 25600, 128}},
  };
  for (const auto& [name, row] : table) {
    INFO(name);
    const auto [billions, h, l] = row;
    const std::int64_t params = build_zoo_model(name, seq(0)).totals().params;
    CHECK(params == 12 * l * h * h + 13 * l * h + (51200 + 2048) * h + 2 * h);
    CHECK(std::round(static_cast<double>(params) / 1e8) / 10 == Approx(billions));
  }
}

TEST_CASE("models::Transformers: GPT-2 forward FLOPs per token are 2N + 4 l s h within 2%", "[models]") {
  // Megatron/PaLM count: dense attention over the whole sequence (QK^T and PV, 2 x 2 s h per layer).
  const Model m = build_zoo_model("gpt2", seq(1024, 2));
  const double n = 124'439'808, l = 12, s = 1024, h = 768;
  const double per_token = m.totals().fwd_flops / (2 * 1024);
  CHECK(per_token == Approx(2 * n + 4 * l * s * h).epsilon(0.02));
  // A causal flash kernel skipping masked work does about half the attention term: (s+1)/2 of s keys per
  // query for the matmuls (4 h per key) and the softmax and dropout (5 + 2 per score and head).
  ModelOptions flash = seq(1024, 2);
  flash.flash_attention = true;
  const double flash_per_token = build_zoo_model("gpt2", flash).totals().fwd_flops / (2 * 1024);
  const double a = 12;
  CHECK(per_token - flash_per_token == Approx((4 * h + 7 * a) * l * (s - 1) / 2).epsilon(1e-9));
  CHECK(per_token - flash_per_token == Approx(0.5 * 4 * l * s * h).epsilon(0.03));
}

TEST_CASE("models::Transformers: attention costs for multi-head, grouped- and multi-query", "[models]") {
  for (std::int64_t kv : {8, 2, 1}) {
    INFO(kv);
    Model m("t", Shape{2, 1, 16, 1});
    LayerParams e;
    e.seq.vocab = 100;
    e.seq.hidden = 64;
    m.add_row("embed", "embedding", e, {"data"});
    LayerParams q;
    q.seq.out_features = (8 + 2 * kv) * 8;
    m.add_row("qkv", "linear", q, {"embed"});
    LayerParams a;
    a.seq.heads = 8;
    a.seq.kv_heads = kv;
    const Layer& core = m.add_row("core", "attention", a, {"qkv"});
    CHECK(core.dst_shape == Shape{2, 64, 16, 1});
    // 2 x (2 b a s^2 d) for QK^T and PV + 5 per score (softmax): independent of kv heads.
    const double scores = 2.0 * 8 * 16 * 16;
    CHECK(core.costs.fwd_flops == Approx(2 * 2 * scores * 8 + 5 * scores));
    CHECK(core.costs.bwd_data_flops == Approx(4 * 2 * scores * 8 + 4 * scores));
    CHECK(core.costs.params == 0);
    // Saved: Q, K, V (K and V shrink with kv heads) and the softmax output.
    CHECK(core.saved.act_elements == Approx(2.0 * 16 * (8 + 2 * kv) * 8 + scores));
    CHECK(m.by_name("qkv").costs.params == 64 * (8 + 2 * kv) * 8 + (8 + 2 * kv) * 8);
  }
}

TEST_CASE("models::Transformers: Mixtral experts cost top-k per token but hold every expert", "[models]") {
  const Model m = build_zoo_model("mixtral_8x7b", seq(128));
  const Layer& experts = m.by_name("layers.0.mlp.experts");
  const double h = 4096, f = 14336, tokens = 128;
  CHECK(experts.costs.params == 8LL * 3 * 4096 * 14336);
  CHECK(experts.costs.fwd_flops == Approx(2 * tokens * 2 * 3 * h * f).epsilon(0.01));  // 2 of 8 experts
  CHECK(m.by_name("layers.0.mlp.router").costs.params == 4096 * 8);
}

TEST_CASE("models::Transformers: every transformer round-trips through YAML", "[models]") {
  for (const auto& name : transformer_zoo_names()) {
    if (name.rfind("megatron", 0) == 0 || name.find("70b") != std::string::npos || name.find("405b") != std::string::npos)
      continue;  // the smaller ones cover every row
    INFO(name);
    ModelOptions o = name.rfind("vit", 0) == 0 ? ModelOptions{} : seq(32);
    o.batch = 2;
    const Model m = build_zoo_model(name, o);
    ModelOptions back_o;
    back_o.batch = 2;
    const Model back = parse_model_yaml(model_to_yaml(m), name + ".yaml", back_o);
    REQUIRE(back.layers().size() == m.layers().size());
    for (std::size_t i = 0; i < m.layers().size(); ++i) {
      const Layer& a = m.layers()[i];
      const Layer& b = back.layers()[i];
      INFO(a.name);
      CHECK(a.row == b.row);
      CHECK(a.params == b.params);
      CHECK(a.inputs == b.inputs);
      CHECK(a.dst_shape == b.dst_shape);
      CHECK(a.costs.fwd_flops == b.costs.fwd_flops);
      CHECK(a.costs.bwd_data_flops == b.costs.bwd_data_flops);
      CHECK(a.costs.params == b.costs.params);
    }
  }
}

TEST_CASE("models::Transformers: bad fields, shapes and options give one-line errors", "[models]") {
  CHECK_THAT(error_of([] { build_zoo_model("gpt2", seq(2048)); }),
             Catch::Contains("sequence length 2048 exceeds the 1024 learned positions"));
  CHECK_THAT(error_of([] {
               ModelOptions o;
               o.input_h = 32;
               build_zoo_model("llama2_7b", o);
             }),
             Catch::Contains("use --seq-len"));
  CHECK_THAT(error_of([] { build_zoo_model("resnet50", seq(128)); }), Catch::Contains("is a CNN"));
  const std::string header = "name: t\ninput: {channels: 1, height: 8, width: 1}\nlayers:\n";
  auto yaml_error = [&](const std::string& layers) {
    return error_of([&] { parse_model_yaml(header + layers, "m.yaml", ModelOptions{}); });
  };
  CHECK_THAT(yaml_error("  - {name: e, op: embedding, vocab: 10}\n"),
             Catch::Contains("m.yaml:4: layer 'e': missing required field 'hidden'"));
  CHECK_THAT(yaml_error("  - {name: e, op: embedding, vocab: 10, hidden: 8, heads: 2}\n"),
             Catch::Contains("unknown key 'heads'"));
  CHECK_THAT(yaml_error("  - {name: e, op: embedding, vocab: 10, hidden: 8}\n"
                        "  - {name: q, op: linear, out_features: 20}\n"
                        "  - {name: a, op: attention, heads: 3}\n"),
             Catch::Contains("not (heads + 2 kv_heads) x head_dim"));
  CHECK_THAT(yaml_error("  - {name: e, op: embedding, vocab: 10, hidden: 8}\n"
                        "  - {name: a, op: attention, heads: 4, kv_heads: 3}\n"),
             Catch::Contains("kv_heads must divide heads"));
  CHECK_THAT(yaml_error("  - {name: e, op: embedding, vocab: 10, hidden: 8}\n"
                        "  - {name: d, op: hidden_dropout, dropout: 1.5}\n"),
             Catch::Contains("must be in (0, 1)"));
  CHECK_THAT(yaml_error("  - {name: e, op: embedding, vocab: 10, hidden: 8}\n"
                        "  - {name: r, op: residual_add}\n"),
             Catch::Contains("residual_add takes exactly 2 input(s), got 1"));
  CHECK_THAT(yaml_error("  - {name: e, op: embedding, vocab: 10, hidden: 8}\n"
                        "  - {name: m, op: moe_router, experts: 4, top_k: 5}\n"),
             Catch::Contains("field 'top_k' must be in 1..4"));
}

TEST_CASE("models::Transformers: a tensor-, context- or expert-parallel rank holds its shard", "[models]") {
  ModelOptions o;
  o.batch = 2;
  o.seq_len = 1024;
  const auto whole = build_zoo_model("megatron_1.7b", o);
  o.tensor_parallel = 4;
  const auto shard = build_zoo_model("megatron_1.7b", o);
  const std::int64_t h = 2304;
  CHECK(shard.by_name("layers.0.attn.qkv").dst_shape.c == 3 * h / 4);
  CHECK(shard.by_name("layers.0.attn.proj").dst_shape.c == h);
  CHECK(shard.by_name("layers.0.mlp.fc1").dst_shape.c == 4 * h / 4);
  CHECK(shard.by_name("embed").costs.params == (51200 / 4 + 2048) * h);  // vocabulary split, positions not
  {
    ModelOptions r = o;
    r.replicated_vocab = true;  // the embedding and the output layer whole on every rank, the blocks split
    const auto rep = build_zoo_model("megatron_1.7b", r);
    CHECK(rep.by_name("embed").costs.params == whole.by_name("embed").costs.params);
    CHECK(rep.by_name("lm_head").costs.fwd_flops == whole.by_name("lm_head").costs.fwd_flops);
    CHECK(rep.by_name("layers.0.attn.qkv").dst_shape.c == 3 * h / 4);
  }
  // The blocks' weight matrices split 4 ways; biases of row-parallel layers and norms stay whole.
  const auto block_params = [](const Model& m) {
    std::int64_t p = 0;
    for (const auto& l : m.layers())
      if (l.row && l.params.seq.block == 0) p += l.costs.params;
    return p;
  };
  CHECK(block_params(shard) == 12 * h * h / 4 + (3 * h + 4 * h) / 4 + 2 * h + 2 * 2 * h);
  CHECK(block_params(whole) == 12 * h * h + 3 * h + 4 * h + 2 * h + 2 * 2 * h);
  // Context parallelism: each rank's rows see seq / cp tokens, its attention all the pairs of its queries.
  o.tensor_parallel = 1;
  o.context_parallel = 2;
  const auto cp = build_zoo_model("megatron_1.7b", o);
  CHECK(cp.input_shape().h == 512);
  CHECK(cp.by_name("layers.0.attn.core").costs.fwd_flops ==
        Approx(whole.by_name("layers.0.attn.core").costs.fwd_flops / 2));
  // Expert parallelism: Mixtral's 8 experts over 4 ranks, 2 each, the same routed work.
  ModelOptions m;
  m.seq_len = 256;
  const auto mix = build_zoo_model("mixtral_8x7b", m);
  m.expert_parallel = 4;
  const auto mix4 = build_zoo_model("mixtral_8x7b", m);
  CHECK(mix4.by_name("layers.0.mlp.experts").costs.params * 4 == mix.by_name("layers.0.mlp.experts").costs.params);
  CHECK(mix4.by_name("layers.0.mlp.experts").costs.fwd_flops == Approx(mix.by_name("layers.0.mlp.experts").costs.fwd_flops));
  // Layouts the model cannot take name the flag.
  ModelOptions bad;
  bad.tensor_parallel = 5;
  CHECK_THROWS_WITH(build_zoo_model("gpt2", bad), Catch::Contains("--tp") && Catch::Contains("12 attention heads"));
  bad = {};
  bad.expert_parallel = 2;
  CHECK_THROWS_WITH(build_zoo_model("gpt2", bad), Catch::Contains("--ep") && Catch::Contains("no experts"));
  bad = {};
  bad.context_parallel = 3;
  CHECK_THROWS_WITH(build_zoo_model("gpt2", bad), Catch::Contains("--cp"));
  bad = {};
  bad.tensor_parallel = 2;
  CHECK_THROWS_WITH(build_zoo_model("resnet50", bad), Catch::Contains("CNN"));
}

TEST_CASE("models::Transformers: a BERT masked-LM head over mlm_predictions positions costs that share of the full head",
          "[models]") {
  // NVIDIA DeepLearningExamples' dense sequence output gathers the masked positions before the MLM head
  // (at most max_predictions_per_seq: 80 at sequence 512): the transform and the decoder then run over
  // b x 80 tokens instead of b x 512, and every FLOP of theirs is per token.
  ModelOptions all = seq(512, 4), masked = seq(512, 4);
  masked.mlm_predictions = 80;
  const Model full = build_zoo_model("bert_large", all), dense = build_zoo_model("bert_large", masked);
  CHECK_FALSE(full.by_name_or_null("mlm.gather"));
  const Layer& gather = dense.by_name("mlm.gather");
  CHECK(gather.dst_shape == Shape{4, 1024, 80, 1});
  CHECK(gather.costs.fwd_flops == 0);
  CHECK(gather.costs.params == 0);
  for (const char* name : {"mlm.dense", "mlm.gelu", "mlm.norm", "mlm.head"}) {
    INFO(name);
    const Layer& a = full.by_name(name);
    const Layer& b = dense.by_name(name);
    CHECK(b.costs.fwd_flops == Approx(a.costs.fwd_flops * 80.0 / 512.0));
    CHECK(b.costs.bwd_data_flops == Approx(a.costs.bwd_data_flops * 80.0 / 512.0));
    CHECK(b.costs.params == a.costs.params);
  }
  // Logits over 30,522 words for 4 x 80 tokens: 2 x 320 x 1024 x 30522 multiply-adds counted forward.
  CHECK(dense.by_name("mlm.head").dst_shape == Shape{4, 30522, 80, 1});
  // The encoder and the next-sentence head do not change.
  CHECK(dense.by_name("layers.23.mlp.fc1").costs.fwd_flops == full.by_name("layers.23.mlp.fc1").costs.fwd_flops);
  CHECK(dense.by_name("nsp.head").costs.fwd_flops == full.by_name("nsp.head").costs.fwd_flops);
  CHECK(dense.totals().params == full.totals().params);

  ModelOptions too_many = seq(128);
  too_many.mlm_predictions = 129;
  CHECK_THAT(error_of([&] { build_zoo_model("bert_base", too_many); }),
             Catch::Contains("--mlm-predictions: must be in 0..128"));
  ModelOptions gpt = seq(128);
  gpt.mlm_predictions = 20;
  CHECK_THAT(error_of([&] { build_zoo_model("gpt2", gpt); }), Catch::Contains("has no masked-LM head"));
  CHECK_THAT(error_of([&] { build_zoo_model("resnet50", [] { ModelOptions o; o.mlm_predictions = 20; return o; }()); }),
             Catch::Contains("is a CNN"));
}
