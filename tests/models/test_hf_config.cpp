// Tests of models/hf_config.hpp: the shipped Hugging Face config.json examples give the zoo's (and
// Hugging Face's) parameter counts; unknown model types, missing keys, bad values and deep JSON are
// one-line errors naming the file and key.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "common/errors.hpp"
#include "models/hf_config.hpp"
#include "models/zoo.hpp"

using namespace dtsim::models;

namespace {
std::string error_of(const std::string& text) {
  try {
    build_transformer(parse_hf_config(text, "c.json", "c"), ModelOptions{});
  } catch (const dtsim::InputError& e) {
    return e.what();
  }
  return "";
}
std::string example(const std::string& folder) {
  return std::string(DTSIM_SOURCE_DIR) + "/models/examples/hf/" + folder + "/config.json";
}
}  // namespace

TEST_CASE("models::HfConfig: shipped config.json files give the Hugging Face parameter counts", "[models]") {
  const std::map<std::string, std::int64_t> counts = {
      {"gpt2", 124'439'808},
      {"Llama-2-7b-hf", 6'738'415'616},
      {"Meta-Llama-3-8B", 8'030'261'248},
      {"Mixtral-8x7B-v0.1", 46'702'792'704},
      {"vit-base-patch16-224", 86'567'656},
      // BertModel 109,482,240 + masked-LM head 622,650 + next-sentence classifier 1,538.
      {"bert-base-uncased", 110'106'428},
      // dtsim validate's small GPT: the count torch gives validate/pytorch/train.py's model of the same file.
      {"gpt-tiny", 675'328},
  };
  for (const auto& [folder, params] : counts) {
    INFO(folder);
    ModelOptions o;
    if (folder != "vit-base-patch16-224") o.seq_len = 128;
    const Model m = load_model(example(folder), o);
    CHECK(m.totals().params == params);
    CHECK(m.name() == folder);
  }
  // The zoo and the config file build the same layers.
  const Model file = load_model(example("Meta-Llama-3-8B"), ModelOptions{});
  const Model zoo = build_zoo_model("llama3_8b", ModelOptions{});
  CHECK(file.totals().fwd_flops == zoo.totals().fwd_flops);
  CHECK(file.layers().size() == zoo.layers().size());
}

TEST_CASE("models::HfConfig: bad files are one-line errors naming the file and key", "[models]") {
  CHECK(error_of(R"({"model_type": "t5"})") ==
        "c.json: key 'model_type': unsupported 't5' (supported: gpt2, llama, mistral, mixtral, bert, vit)");
  CHECK(error_of(R"({"n_embd": 8})") == "c.json: missing key 'model_type'");
  CHECK(error_of(R"({"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 100})") ==
        "c.json: missing key 'n_positions' (needed for model_type 'gpt2')");
  CHECK_THAT(error_of(R"({"model_type": "gpt2", "n_embd": "64", "n_layer": 2, "n_head": 4, "vocab_size": 100,
                          "n_positions": 64})"),
             Catch::Contains("c.json: key 'n_embd': expected a positive integer"));
  CHECK_THAT(error_of(R"({"model_type": "gpt2", "n_embd": -1, "n_layer": 2, "n_head": 4, "vocab_size": 100,
                          "n_positions": 64})"),
             Catch::Contains("key 'n_embd': expected an integer in 1.."));
  CHECK_THAT(error_of(R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
                          "num_attention_heads": 4, "num_key_value_heads": 3, "num_hidden_layers": 2,
                          "vocab_size": 100, "max_position_embeddings": 64})"),
             Catch::Contains("num_key_value_heads"));
  CHECK_THAT(error_of(R"({"model_type": "mixtral", "hidden_size": 64, "intermediate_size": 128,
                          "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 100,
                          "max_position_embeddings": 64, "num_local_experts": 4})"),
             Catch::Contains("missing key 'num_experts_per_tok'"));
  CHECK_THAT(error_of("{\"model_type\": \"gpt2\""), Catch::StartsWith("c.json: malformed JSON"));
  CHECK_THAT(error_of("[1, 2]"), Catch::Contains("expected a JSON object"));
  std::string deep = R"({"model_type": "gpt2", "x": )";
  for (int i = 0; i < 100000; ++i) deep += "[";
  CHECK_THAT(error_of(deep), Catch::Contains("nested deeper than 32 levels"));
  CHECK_THAT(error_of(std::string(HF_CONFIG_MAX_BYTES + 1, ' ')), Catch::Contains("larger than a config.json"));
  try {
    load_model("/nonexistent/config.json", ModelOptions{});
    FAIL("no error");
  } catch (const dtsim::InputError& e) {
    CHECK(std::string(e.what()) == "/nonexistent/config.json: no such config file");
  }
}
