// Tests of `dtsim validate --framework pytorch --parallel tp|pp` (validate/src/pytorch_layout.cpp,
// validate/pytorch/model_parallel.py) at a tiny size: gpt-tiny on 2 processes over gloo as 2-way tensor
// parallelism and as a 2-stage 1F1B pipeline, every phase measured and predicted by dtsim's layout planner,
// and the prediction built of the layout's own mechanisms. Skipped, and counted as a skip, without python3-torch.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "tests/support/run_cli.hpp"
#include "validate/validate.hpp"

namespace {

using namespace dtsim;

const std::string GPT_TINY = std::string(DTSIM_SOURCE_DIR) + "/models/examples/hf/gpt-tiny/config.json";

// `dtsim validate --format json` of gpt-tiny at sequence 16 on `parallel` with `extra` flags; its JSON.
nlohmann::json run_layout(const std::string& parallel, const std::vector<std::string>& extra) {
  std::vector<std::string> args{"validate", "--framework", "pytorch", "--model", GPT_TINY, "--data", "synthetic",
                                "--seq-len", "16", "--parallel", parallel, "--iterations", "3", "--warmup", "1",
                                "--format", "json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = test::run_cli(args);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.out);
}

// The row has every phase measured and predicted, and its layout.
void check_measured_and_predicted(const nlohmann::json& row, const std::string& layout) {
  CHECK(row.at("ranks") == 2);
  CHECK(row.at("layout") == layout);
  CHECK(row.at("measured_ms").get<double>() > 0);
  CHECK(row.at("predicted_ms").get<double>() > 0);
  for (const char* phase : {"iteration", "forward", "backward", "exchange", "update"}) {
    INFO(phase);
    CHECK(row.at("phases").at(phase).at("measured_ms").get<double>() > 0);
    CHECK(row.at("phases").at(phase).at("predicted_ms").get<double>() > 0);
  }
  CHECK(row.at("prediction").get<std::string>().find("layout planner") != std::string::npos);
}

bool has_note(const nlohmann::json& report, const std::string& text) {
  for (const auto& n : report.at("notes"))
    if (n.get<std::string>().find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("validate::PytorchLayout: 2-way tensor parallelism is measured and predicted with its allreduces on the "
          "compute stream and no bubble",
          "[validate][pytorch]") {
  if (!validate::pytorch_available()) {
    WARN("SKIPPED: no PyTorch (python3-torch, python3-torchvision) for " << validate::python_path());
    return;
  }
  const auto report = run_layout("tp", {"--batch", "2"});
  REQUIRE(report.at("rows").size() == 1);
  const auto& row = report.at("rows")[0];
  check_measured_and_predicted(row, "tp");
  const auto& st = row.at("predicted_structure");
  CHECK(st.at("local_collectives_ms").get<double>() > 0);
  CHECK(st.at("bubble_ms").get<double>() == 0);
  // The trainer ran the mechanism the planner plays: 2 allreduces per block each way (2 blocks), of micro-batch
  // x sequence x hidden fp32 (2 x 16 x 128 x 4 B), the embedding and head replicated (no collective of theirs).
  CHECK(has_note(report, "8 gloo allreduces per iteration, 131072 B in all (16384 B each"));
  CHECK(row.at("prediction").get<std::string>().find("16384 B per allreduce") != std::string::npos);
}

TEST_CASE("validate::PytorchLayout: a 2-stage 1F1B pipeline is measured and predicted with a bubble and no "
          "tensor-parallel collectives",
          "[validate][pytorch]") {
  if (!validate::pytorch_available()) {
    WARN("SKIPPED: no PyTorch (python3-torch, python3-torchvision) for " << validate::python_path());
    return;
  }
  const auto report = run_layout("pp", {"--batch", "4", "--micro-batches", "2"});
  REQUIRE(report.at("rows").size() == 1);
  const auto& row = report.at("rows")[0];
  check_measured_and_predicted(row, "pp");
  const auto& st = row.at("predicted_structure");
  CHECK(st.at("bubble_ms").get<double>() > 0);
  CHECK(st.at("local_collectives_ms").get<double>() == 0);
  // Stage 0 waits at least the bubble: the exchange it is predicted includes it.
  CHECK(row.at("phases").at("exchange").at("predicted_ms").get<double>() >= st.at("bubble_ms").get<double>());
  // Stage 0 sends one activation per micro-batch (2 x 16 x 128 x 4 B) and allreduces the tied embedding's
  // gradient (2,048 x 128 x 4 B) with the last stage.
  CHECK(has_note(report, "2 micro-batches of 2 sequences, 32768 B of activations sent per iteration (16384 B each), "
                         "tied-embedding gradient allreduce of 1048576 B"));
}

TEST_CASE("validate::PytorchLayout: bad layout options exit 2 with one line", "[validate][pytorch]") {
  auto r = test::run_cli({"validate", "--framework", "pytorch", "--model", GPT_TINY, "--data", "synthetic",
                          "--parallel", "sp"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--parallel: expected dp, tp or pp, got 'sp'") != std::string::npos);
  r = test::run_cli({"validate", "--parallel", "tp"});  // dtsim-train runs data parallelism only
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("model-parallel layouts run in the PyTorch trainer") != std::string::npos);
  r = test::run_cli({"validate", "--framework", "pytorch", "--model", GPT_TINY, "--data", "synthetic", "--parallel",
                     "tp", "--ranks", "1,2"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--ranks: --parallel tp runs on exactly 2 processes") != std::string::npos);
  r = test::run_cli({"validate", "--framework", "pytorch", "--model", GPT_TINY, "--data", "synthetic", "--parallel",
                     "pp", "--batch", "6", "--micro-batches", "4"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--batch: 6 sequences per step do not split into 4 micro-batches") != std::string::npos);
  r = test::run_cli({"validate", "--framework", "pytorch", "--model", GPT_TINY, "--data", "synthetic", "--parallel",
                     "tp", "--micro-batches", "2"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--micro-batches: applies to --parallel pp") != std::string::npos);
}
