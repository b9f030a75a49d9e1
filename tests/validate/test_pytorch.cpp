// Tests of `dtsim validate --framework pytorch` (validate/src/pytorch.cpp, validate/pytorch/train.py) at a
// tiny size: 1 and 2 processes (DDP over gloo) of LeNet-5 on Fashion-MNIST and of a 2-layer GPT on synthetic
// tokens, the torch model checked equal to dtsim's, every phase measured and predicted. Skipped, and counted as a skip, without python3-torch.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "common/errors.hpp"
#include "tests/support/run_cli.hpp"
#include "validate/validate.hpp"

namespace {

using namespace dtsim;

std::string temp_dir(const std::string& name) {
  const auto d = std::filesystem::temp_directory_path() / ("dtsim_pt_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::create_directories(d);
  return d.string();
}

}  // namespace

TEST_CASE("validate::Pytorch: a tiny LeNet-5 run on 1 and 2 DDP processes is measured and predicted per phase",
          "[validate][pytorch]") {
  if (!validate::pytorch_available()) {
    WARN("SKIPPED: no PyTorch (python3-torch, python3-torchvision) for " << validate::python_path());
    return;
  }
  validate::ValidateOptions o;
  o.framework = "pytorch";
  o.model = "lenet5";
  o.ranks = {1, 2};
  o.batch = 8;
  o.iterations = 4;
  o.warmup = 1;
  o.fusion_bytes = 25.0 * 1024 * 1024;
  o.work_dir = temp_dir("tiny");
  const validate::ValidationReport r = validate::run_validation(o);
  REQUIRE(r.rows.size() == 2);
  CHECK(r.comm_measured);
  CHECK(r.comm.allreduce_bandwidth_Bps > 0);
  for (const auto& row : r.rows) {
    INFO(row.ranks << " process(es)");
    for (const char* phase : {"iteration", "forward", "backward", "update"}) {
      INFO(phase);
      CHECK(row.measured.phases.at(phase).measured_ms > 0);
      CHECK(row.measured.phases.at(phase).predicted_ms > 0);
    }
    CHECK(row.measured.phases.at("exchange").predicted_ms >= 0);
    CHECK(row.measured.loss_first > 0);
    CHECK(row.prediction_note.find("libtorch calibration (heap glibc)") != std::string::npos);
  }
  // DDP's ranks run gloo, whose copies and reductions are charged on their cores (not the plain ring of a
  // point's default library, "none").
  CHECK(r.rows[1].prediction_note.find("collective library gloo,") != std::string::npos);
  // The default regime, a plain script's: the trainer ran with glibc's defaults and says its page faults.
  int fault_notes = 0;
  for (const auto& n : r.notes) fault_notes += n.find("heap glibc: ") != std::string::npos && n.find("page faults") != std::string::npos;
  CHECK(fault_notes == 2);
  // The report names the check of the torch model against dtsim's.
  bool checked = false;
  for (const auto& n : r.notes) checked = checked || n.find("checked equal") != std::string::npos;
  CHECK(checked);
  std::filesystem::remove_all(o.work_dir);
}

TEST_CASE("validate::Pytorch: a torch model that differs from dtsim's layer table is refused", "[validate][pytorch]") {
  if (!validate::pytorch_available()) {
    WARN("SKIPPED: no PyTorch (python3-torch, python3-torchvision) for " << validate::python_path());
    return;
  }
  const std::string dir = temp_dir("mismatch");
  const std::string table = dir + "/layers.json";
  {
    std::ofstream f(table);  // conv1 of dtsim's LeNet-5 with one filter too many
    f << R"({"model": "lenet5", "layers": [{"name": "conv1", "op": "conv2d", "params": 182, "dst": [2, 7, 28, 28]}]})";
  }
  const auto r = validate::run_command({validate::python_path(), std::string(DTSIM_SOURCE_DIR) + "/validate/pytorch/train.py",
                                        "--model", "lenet5", "--iterations", "1", "--warmup", "0", "--data", "synthetic",
                                        "--check-model", table},
                                       300);
  CHECK(r.exit_code != 0);
  CHECK(r.output.find("layer conv1: 156 parameters in torch, 182 in dtsim") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("validate::Pytorch: a tiny GPT (models/examples/hf/gpt-tiny) on 1 and 2 DDP processes is checked layer by "
          "layer, measured and predicted from libtorch timings of its transformer rows", "[validate][pytorch]") {
  if (!validate::pytorch_available()) {
    WARN("SKIPPED: no PyTorch (python3-torch, python3-torchvision) for " << validate::python_path());
    return;
  }
  validate::ValidateOptions o;
  o.framework = "pytorch";
  o.model = std::string(DTSIM_SOURCE_DIR) + "/models/examples/hf/gpt-tiny/config.json";
  o.data = "synthetic";
  o.seq_len = 16;
  o.ranks = {1, 2};
  o.batch = 2;
  o.iterations = 3;
  o.warmup = 1;
  o.fusion_bytes = 25.0 * 1024 * 1024;
  o.work_dir = temp_dir("gpt");
  const validate::ValidationReport r = validate::run_validation(o);
  REQUIRE(r.rows.size() == 2);
  for (const auto& row : r.rows) {
    INFO(row.ranks << " process(es)");
    for (const char* phase : {"iteration", "forward", "backward", "update"}) {
      INFO(phase);
      CHECK(row.measured.phases.at(phase).measured_ms > 0);
      CHECK(row.measured.phases.at(phase).predicted_ms > 0);
    }
    CHECK(row.measured.loss_first > 0);
    CHECK(row.prediction_note.find("libtorch calibration") != std::string::npos);
  }
  // Every row of the model has a libtorch driver: the calibration covers all 26 distinct passes (embedding 2,
  // layer norm 2, QKV 3, attention 2, projection 3, residual add 2, fc1 3, gelu 2, fc2 3, lm_head 3, update 1),
  // timed or, on a busy machine, stored as disturbed.
  bool checked = false, all_passes = false;
  for (const auto& n : r.notes) {
    checked = checked || n.find("checked equal") != std::string::npos;
    all_passes = all_passes || n.find("libtorch calibration: 26 passes") != std::string::npos;
  }
  CHECK(checked);
  CHECK(all_passes);
  std::filesystem::remove_all(o.work_dir);
}

TEST_CASE("validate::Pytorch: a GPT whose torch layer differs from dtsim's layer table is refused", "[validate][pytorch]") {
  if (!validate::pytorch_available()) {
    WARN("SKIPPED: no PyTorch (python3-torch, python3-torchvision) for " << validate::python_path());
    return;
  }
  const std::string dir = temp_dir("gpt_mismatch");
  const std::string table = dir + "/layers.json";
  {
    std::ofstream f(table);  // gpt-tiny's fused QKV projection without its bias (128 x 384 + 384 = 49,536)
    f << R"({"model": "gpt-tiny", "layers": [{"name": "layers.0.attn.qkv", "op": "linear", "params": 49152, "dst": [2, 384, 16, 1]}]})";
  }
  const auto r = validate::run_command({validate::python_path(), std::string(DTSIM_SOURCE_DIR) + "/validate/pytorch/train.py",
                                        "--model", std::string(DTSIM_SOURCE_DIR) + "/models/examples/hf/gpt-tiny/config.json",
                                        "--seq-len", "16", "--iterations", "1", "--warmup", "0", "--data", "synthetic",
                                        "--check-model", table},
                                       300);
  CHECK(r.exit_code != 0);
  CHECK(r.output.find("layer layers.0.attn.qkv: 49536 parameters in torch, 49152 in dtsim") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("validate::Pytorch: bad framework options exit 2 with one line", "[validate][pytorch]") {
  auto r = test::run_cli({"validate", "--framework", "tensorflow"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--framework: expected dtsim or pytorch") != std::string::npos);
  r = test::run_cli({"validate", "--framework", "pytorch", "--model", "resnet50"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("lenet5 and resnet18") != std::string::npos);
  r = test::run_cli({"validate", "--side", "64"});
  CHECK(r.exit_code == 2);
  r = test::run_cli({"validate", "--framework", "pytorch", "--model", "models/examples/hf/gpt-tiny/config.json"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--data synthetic") != std::string::npos);
  r = test::run_cli({"validate", "--seq-len", "64"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--seq-len: only a language model") != std::string::npos);
  r = test::run_cli({"validate", "--framework", "pytorch", "--model", "x/config.json", "--seq-len", "-1"});
  CHECK(r.exit_code == 2);
  r = test::run_cli({"validate", "--framework", "pytorch", "--allocator", "hoard"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--allocator: unknown allocator 'hoard'; expected one of: glibc, glibc-held") != std::string::npos);
  r = test::run_cli({"validate", "--allocator", "glibc-held"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--allocator: applies to --framework pytorch") != std::string::npos);
}
