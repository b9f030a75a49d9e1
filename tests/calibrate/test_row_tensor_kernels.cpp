// Tests of transformer (row) layers timed by the tensor-kernel model (calibrate/gpu_kernel_model.hpp
// row_tensor_pass_s, build_profile on a GPU with tensor fits) and of the unchanged path elsewhere.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <utility>

#include "calibrate/gpu_kernel_model.hpp"
#include "calibrate/op_signature.hpp"
#include "calibrate/profile.hpp"
#include "models/zoo.hpp"
#include "platforms/device.hpp"

using namespace dtsim;
using namespace dtsim::calibrate;

namespace {
models::Model build(const std::string& name, int seq, int batch, bool flash) {
  models::ModelOptions o;
  o.batch = batch;
  o.seq_len = seq;
  o.flash_attention = flash;
  return models::build_zoo_model(name, o);
}
const platforms::Device& device(const std::string& name) { return platforms::DeviceCatalog::builtin().by_name(name); }
ProfileOptions options(Precision precision) {
  ProfileOptions po;
  po.db_path = std::string(DTSIM_SOURCE_DIR) + "/calibrate/data/calibration.json";
  po.precision = precision;
  return po;
}
const LayerTime& layer_time(const ComputeProfile& p, const std::string& name) {
  for (const auto& t : p.layers)
    if (t.name == name) return t;
  FAIL("no layer " << name);
  return p.layers.front();
}
bool mentions_tensor_model(const ComputeProfile& p) {
  for (const auto& [source, share] : p.sources)
    if (source.find("tensor-kernel model") != std::string::npos) return true;
  return false;
}
}  // namespace

TEST_CASE("calibrate::RowTensorKernels: a GPT-2 linear layer takes the GEMM times of its three shapes",
          "[calibrate]") {
  const auto m = build("gpt2", 1024, 8, false);
  const auto& h100 = device("h100-sxm5");
  const auto& km = GpuKernelModel::builtin();
  const double tokens = 8 * 1024;
  for (const auto& [precision, gemm] : {std::pair{Precision::FP32, "fp32"}, std::pair{Precision::FP16_MIXED, "fp16"}}) {
    INFO(gemm);
    const ComputeProfile p = build_profile(m, h100, options(precision));
    // fc1: 768 -> 3072. Forward y = x w^T, backward-data dx = dy w, backward-weights dw = dy^T x.
    const LayerTime& fc1 = layer_time(p, "layers.0.mlp.fc1");
    CHECK(fc1.fwd_s == Approx(km.gemm_s(h100, gemm, {tokens, 3072, 768}, Pass::FWD)));
    CHECK(fc1.bwd_data_s == Approx(km.gemm_s(h100, gemm, {tokens, 768, 3072}, Pass::BWD_DATA)));
    CHECK(fc1.bwd_weights_s == Approx(km.gemm_s(h100, gemm, {3072, 768, tokens}, Pass::BWD_WEIGHTS)));
    // A norm is one memory-bound kernel over its bytes at the precision's element size.
    const auto& norm = m.by_name("layers.0.norm1");
    const double scale = element_bytes(precision) / 4;
    CHECK(layer_time(p, "layers.0.norm1").fwd_s == Approx(km.memory_op_s(h100, "layer_norm", false, norm.costs.fwd_bytes * scale)));
    REQUIRE(!p.sources.empty());
    CHECK(p.sources.front().first.find("tensor-kernel model (gemm, attention, memory: h100-sxm5 fit") == 0);
  }
}

TEST_CASE("calibrate::RowTensorKernels: flash attention takes attention_s at fp16, the roofline at fp32",
          "[calibrate]") {
  const auto m = build("gpt2", 1024, 8, true);
  const auto& h100 = device("h100-sxm5");
  const auto& km = GpuKernelModel::builtin();
  const ComputeProfile half = build_profile(m, h100, options(Precision::FP16_MIXED));
  const LayerTime& core = layer_time(half, "layers.0.attn.core");
  CHECK(core.fwd_s == Approx(km.attention_s(h100, "fp16", {8, 12, 12, 1024, 64, true}, false)));
  CHECK(core.bwd_data_s == Approx(km.attention_s(h100, "fp16", {8, 12, 12, 1024, 64, true}, true)));
  // No fp32 flash-attention fit: that layer keeps the device model, and the sources say so.
  CHECK_FALSE(row_tensor_pass_s(km, m.by_name("layers.0.attn.core"), Pass::FWD, h100, "fp32", 1.0).has_value());
  const ComputeProfile full = build_profile(m, h100, options(Precision::FP32));
  CHECK(mentions_tensor_model(full));
  CHECK(full.sources.size() >= 2);
}

TEST_CASE("calibrate::RowTensorKernels: Llama 2 7B in bf16 on an H100 runs at 30-80% of the bf16 peak",
          "[calibrate]") {
  // A sanity band, not a fit: Megatron-LM and torchtitan report roughly 40-60% MFU for 7B models on H100s.
  const int seq = 4096;
  const auto m = build("llama2_7b", seq, 1, true);
  const auto& h100 = device("h100-sxm5");
  const auto& km = GpuKernelModel::builtin();
  double step_s = 0;
  std::int64_t params = 0;
  for (const auto& l : m.layers()) {
    if (!l.row) continue;
    params += l.costs.params;
    for (Pass pass : passes_of(l)) {
      INFO(l.name);
      const auto s = row_tensor_pass_s(km, l, pass, h100, "bf16", 0.5);
      REQUIRE(s.has_value());
      step_s += *s;
    }
  }
  // Model FLOPs: 6 x parameters x tokens (forward 2, backward 4; attention's s^2 term left out).
  const double mfu = 6.0 * static_cast<double>(params) * seq / step_s / h100.bf16_tensor_flops;
  INFO("step " << step_s << " s, MFU " << mfu);
  CHECK(mfu > 0.30);
  CHECK(mfu < 0.80);
}

TEST_CASE("calibrate::RowTensorKernels: CPUs and GPUs without tensor fits keep the device model", "[calibrate]") {
  const auto m = build("gpt2", 128, 2, false);
  for (const char* name : {"xeon-gold-6148", "p100-sxm2", "t4"}) {
    INFO(name);
    const ComputeProfile p = build_profile(m, device(name), options(Precision::FP32));
    CHECK_FALSE(mentions_tensor_model(p));
    CHECK(p.compute_model.find("tensor-kernel") == std::string::npos);
  }
}

TEST_CASE("calibrate::RowTensorKernels: a dense-attention BERT on a V100 takes the V100 GEMM fit and the H100's memory "
          "fractions",
          "[calibrate]") {
  // The V100 has DeepBench GEMM fits (fp16, fp32) and no attention fit; its memory-bound ops fall back to the
  // H100's fractions of bandwidth (§4d). Dense attention needs no attention fit: every kernel of such a BERT
  // is timed by the tensor-kernel model, per row pass.
  const int batch = 8, seq = 128;
  const auto m = build("bert_large", seq, batch, false);
  const auto& v100 = device("v100-sxm2-32gb");
  const auto& km = GpuKernelModel::builtin();
  const double tokens = batch * seq, rows = batch * 16.0 * seq, scores = rows * seq;
  for (const auto& [precision, gemm] : {std::pair{Precision::FP32, "fp32"}, std::pair{Precision::FP16_MIXED, "fp16"}}) {
    INFO(gemm);
    const double scale = element_bytes(precision) / 4;
    const ComputeProfile p = build_profile(m, v100, options(precision));
    const LayerTime& fc1 = layer_time(p, "layers.0.mlp.fc1");
    CHECK(fc1.fwd_s == Approx(km.gemm_s(v100, gemm, {tokens, 4096, 1024}, Pass::FWD)));
    CHECK(fc1.bwd_weights_s == Approx(km.gemm_s(v100, gemm, {4096, 1024, tokens}, Pass::BWD_WEIGHTS)));
    // Attention core forward: S = QK^T, softmax, dropout (the 1-byte mask), O = PV.
    const double core_fwd = km.gemm_s(v100, gemm, {rows, seq, 64}, Pass::FWD) +
                            km.memory_op_s(v100, "softmax", false, 4 * 2 * scores * scale) +
                            km.memory_op_s(v100, "dropout", false, (4 * 2 * scores + scores) * scale) +
                            km.gemm_s(v100, gemm, {rows, 64, seq}, Pass::FWD);
    CHECK(layer_time(p, "layers.0.attn.core").fwd_s == Approx(core_fwd));
    // Memory-bound ops: the H100's fraction of bandwidth at the V100's 900 GB/s.
    const auto& norm = m.by_name("layers.0.norm1");
    CHECK(layer_time(p, "layers.0.norm1").fwd_s ==
          Approx(km.memory_op_s(v100, "layer_norm", false, norm.costs.fwd_bytes * scale)));
    CHECK(km.memory_op_s(v100, "layer_norm", false, 9e8) > km.memory_op_s(device("h100-sxm5"), "layer_norm", false, 9e8));
    REQUIRE(p.sources.size() == 1);
    CHECK(p.sources.front().first.find("tensor-kernel model (gemm: fallback to the v100-sxm2-16gb fit") == 0);
    CHECK(p.sources.front().first.find("memory: fallback to the h100-sxm5 fit") != std::string::npos);
    CHECK(p.compute_model.find("tensor-kernel model (rows)") == 0);
  }
  // Flash attention has no V100 fit (PyTorch's flash kernels need Ampere): that layer alone keeps the device
  // model, and its source says which fit it lacked.
  const auto flash = build("bert_large", seq, batch, true);
  const auto& core = flash.by_name("layers.0.attn.core");
  CHECK(row_tensor_missing_fit(km, core, Pass::FWD, v100, "fp16") == "attention in fp16");
  CHECK(row_tensor_missing_fit(km, m.by_name("layers.0.attn.core"), Pass::FWD, v100, "fp16").empty());
  const ComputeProfile p = build_profile(flash, v100, options(Precision::FP16_MIXED));
  REQUIRE(p.sources.size() == 2);
  const bool named = std::any_of(p.sources.begin(), p.sources.end(), [](const auto& s) {
    return s.first.starts_with("device model from ") &&
           s.first.ends_with(" (no tensor-kernel fit for attention in fp16)");
  });
  CHECK(named);
  CHECK(layer_time(p, "layers.0.mlp.fc1").fwd_s == Approx(km.gemm_s(v100, "fp16", {tokens, 4096, 1024}, Pass::FWD)));
}

TEST_CASE("calibrate::RowTensorKernels: a masked-only MLM head costs GEMMs over batch x predictions tokens",
          "[calibrate]") {
  // DeepLearningExamples' dense sequence output (models::ModelOptions::mlm_predictions): the decoder to the
  // 30,522 words runs over b x p gathered tokens, so its GEMM time is gemm_s at M = b p; with p = 80 of 512
  // positions the head costs a sixth of the full-sequence head or less.
  const auto& a100 = device("a100-sxm4-80gb");
  const auto& km = GpuKernelModel::builtin();
  models::ModelOptions o;
  o.batch = 16;
  o.seq_len = 512;
  const auto full = models::build_zoo_model("bert_large", o);
  o.mlm_predictions = 80;
  const auto masked = models::build_zoo_model("bert_large", o);
  const ComputeProfile pf = build_profile(full, a100, options(Precision::FP16_MIXED));
  const ComputeProfile pm = build_profile(masked, a100, options(Precision::FP16_MIXED));
  const LayerTime& head = layer_time(pm, "mlm.head");
  const double softmax_fwd = km.memory_op_s(a100, "softmax", false, 4 * 2 * 16 * 80 * 30522.0 * 0.5);
  CHECK(head.fwd_s == Approx(km.gemm_s(a100, "fp16", {16 * 80, 30522, 1024}, Pass::FWD) + softmax_fwd));
  CHECK(head.bwd_weights_s == Approx(km.gemm_s(a100, "fp16", {30522, 1024, 16 * 80}, Pass::BWD_WEIGHTS)));
  const LayerTime& hf = layer_time(pf, "mlm.head");
  const double head_full = hf.fwd_s + hf.bwd_s(), head_masked = head.fwd_s + head.bwd_s();
  CHECK(head_masked < head_full * 80.0 / 512.0 * 1.1);
  CHECK(layer_time(pm, "mlm.gather").fwd_s > 0);
  CHECK(pm.step_compute_s() < pf.step_compute_s());
}
