// Checks of the GPU kernel model (calibrate/gpu_kernel_model.hpp): its closed form, the shipped fit
// against published DeepBench timings, and precision (tensor peak, halved bytes and gradients).
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "calibrate/gpu_kernel_model.hpp"
#include "calibrate/profile.hpp"
#include "common/errors.hpp"
#include "platforms/device.hpp"

namespace {

using namespace dtsim;

// One conv layer: batch n, c -> k channels, h x w input, r x r filter, stride s, "same" padding.
models::Model conv_model(std::int64_t n, std::int64_t c, std::int64_t k, std::int64_t hw, int r, int s) {
  models::Model model("conv", models::Shape{n, c, hw, hw});
  models::LayerParams p;
  p.out_channels = k;
  p.kernel_h = p.kernel_w = r;
  p.stride_h = p.stride_w = s;
  p.pad_h = p.pad_w = r / 2;
  p.bias = false;
  model.add("conv", models::OpKind::CONV2D, p, {"data"});
  return model;
}

std::string empty_db() {
  return (std::filesystem::temp_directory_path() / ("dtsim_gk_empty_" + std::to_string(::getpid()) + ".json")).string();
}

}  // namespace

TEST_CASE("calibrate::GpuKernelModel: a pass is launch + roofline over efficiency x fill", "[calibrate]") {
  platforms::Device gpu;
  gpu.name = "g";
  gpu.peak_flops = 10e12;
  gpu.fp16_tensor_flops = 80e12;
  gpu.mem_bandwidth_Bps = 1e12;
  calibrate::KernelCoefficients k;
  k.launch_s = 5e-6;
  k.mem_eff = 0.5;
  k.eff_default = 0.5;
  k.eff = {{"conv_fwd/w3", 1.5}, {"conv_fwd/k1", 0.8}, {"gemm", 0.9}};
  k.half_fill = {{"conv_fwd", 1e6}};
  const auto model = conv_model(16, 256, 256, 14, 3, 1);
  const auto& layer = model.layers()[1];
  const double flops = 2.0 * 16 * 256 * 256 * 9 * 14 * 14;
  const double out = 16.0 * 256 * 14 * 14;
  const double expected = 5e-6 + flops / (10e12 * 1.5 * out / (out + 1e6));
  CHECK(calibrate::kernel_pass_s(k, layer, calibrate::Pass::FWD, gpu, calibrate::Precision::FP32) == Approx(expected));
  // FP16: the tensor peak; compute bound, so only the compute term changes.
  const double expected16 = 5e-6 + flops / (80e12 * 1.5 * out / (out + 1e6));
  CHECK(calibrate::kernel_pass_s(k, layer, calibrate::Pass::FWD, gpu, calibrate::Precision::FP16_MIXED) ==
        Approx(expected16));
  // A memory-bound 1x1 conv with few channels: bytes at 4 (FP32) or 2 (FP16) per element.
  const auto thin = conv_model(64, 4, 4, 112, 1, 1);
  const double bytes32 = 4.0 * (64 * 4 * 112 * 112 * 2 + 16);
  CHECK(calibrate::kernel_pass_s(k, thin.layers()[1], calibrate::Pass::FWD, gpu, calibrate::Precision::FP32) ==
        Approx(5e-6 + bytes32 / (1e12 * 0.5)));
  CHECK(calibrate::kernel_pass_s(k, thin.layers()[1], calibrate::Pass::FWD, gpu, calibrate::Precision::FP16_MIXED) ==
        Approx(5e-6 + bytes32 / 2 / (1e12 * 0.5)));
  // A Kepler-like device capped at sgemm_efficiency 0.45 of a fit whose GEMM reaches 0.9: compute halves.
  platforms::Device kepler = gpu;
  kepler.sgemm_efficiency = 0.45;
  CHECK(calibrate::kernel_pass_s(k, layer, calibrate::Pass::FWD, kepler, calibrate::Precision::FP32) - 5e-6 ==
        Approx(2 * (expected - 5e-6)));
  gpu.fp16_tensor_flops = 0;
  CHECK_THROWS_AS(calibrate::kernel_pass_s(k, layer, calibrate::Pass::FWD, gpu, calibrate::Precision::FP16_MIXED),
                  InputError);
}

TEST_CASE("calibrate::GpuKernelModel: the shipped fit reproduces published DeepBench timings", "[calibrate]") {
  const auto& catalog = platforms::DeviceCatalog::builtin();
  const auto& km = calibrate::GpuKernelModel::builtin();
  struct Row {
    const char* device;
    std::int64_t n, c, k, hw;
    int r, s;
    double fwd_ms;  // DeepBench results/train, "Forward (msec)"; H100: our timing of the same shape
  };
  // DeepBench (commit da81ba78) training conv rows, FP32: VGG-style 3x3 stride-1 and ResNet 1x1 shapes.
  const Row rows[] = {
      {"p100-pcie", 16, 128, 256, 56, 3, 1, 1.592},   // P100: W=H=56 C=128 N=16 K=256 3x3
      {"p100-pcie", 16, 256, 512, 28, 3, 1, 1.356},   // P100: 28x28 C=256 N=16 K=512 3x3 (Winograd: >100% of direct peak)
      {"p100-pcie", 16, 256, 1024, 14, 1, 1, 0.253},  // P100: 14x14 C=256 N=16 K=1024 1x1
      {"v100-sxm2-16gb", 16, 128, 256, 56, 3, 1, 0.900},
      {"v100-sxm2-16gb", 16, 256, 1024, 14, 1, 1, 0.135},
      // H100 SXM5, cuDNN 9.14 via PyTorch, TF32 off (calibrate/data/measured/h100_deepbench_conv.csv)
      {"h100-sxm5", 16, 128, 256, 56, 3, 1, 0.6948},
      {"h100-sxm5", 16, 256, 512, 28, 3, 1, 0.9000},
      {"h100-sxm5", 16, 256, 1024, 14, 1, 1, 0.0608},
      // Xeon Phi 7250 (DeepBench KNL7250, Intel MKL): the ResNet-50 bottleneck shapes at N=16
      {"xeon-phi-7250", 16, 64, 256, 56, 1, 1, 0.36},
      {"xeon-phi-7250", 16, 64, 64, 56, 3, 1, 0.79},
      {"xeon-phi-7250", 16, 128, 128, 28, 3, 1, 0.75},
      {"xeon-phi-7250", 16, 256, 256, 14, 3, 1, 0.80},
      {"xeon-phi-7250", 16, 256, 1024, 14, 1, 1, 0.39},
      {"xeon-phi-7250", 16, 512, 2048, 7, 1, 1, 0.69},
  };
  double sum_abs = 0;
  for (const auto& r : rows) {
    const auto& dev = catalog.by_name(r.device);
    const auto* k = km.coefficients_or_null(dev.name, calibrate::Precision::FP32);
    REQUIRE(k != nullptr);
    const auto model = conv_model(r.n, r.c, r.k, r.hw, r.r, r.s);
    const double t = calibrate::kernel_pass_s(*k, model.layers()[1], calibrate::Pass::FWD, dev, calibrate::Precision::FP32);
    const double err = std::abs(t / (r.fwd_ms * 1e-3) - 1);
    INFO(r.device << " " << r.c << "->" << r.k << " " << r.hw << "x" << r.hw << " " << r.r << "x" << r.r << ": predicted "
                  << t * 1e3 << " ms, published " << r.fwd_ms << " ms");
    CHECK(err < 0.6);  // single kernels: the fit's per-kernel error is 18-29% on average (docs/calibration.md)
    sum_abs += err;
  }
  CHECK(sum_abs / std::size(rows) < 0.35);
  // Devices without DeepBench data get their documented fallback; CPUs other than the Xeon Phi get nothing.
  CHECK(km.coefficients_or_null("k80-gk210", calibrate::Precision::FP32) != nullptr);
  CHECK(km.coefficients_or_null("h100-sxm5", calibrate::Precision::FP16_MIXED) != nullptr);
  // H100: FP32 from its own measured fit; FP16 from V100 (its NCHW FP16 timings do not follow the model).
  CHECK(km.coefficients_or_null("h100-sxm5", calibrate::Precision::FP32)->fitted_on == "h100-sxm5");
  CHECK(km.coefficients_or_null("h100-sxm5", calibrate::Precision::FP16_MIXED)->fitted_on == "v100-sxm2-16gb");
  CHECK(km.coefficients_or_null("h100-pcie", calibrate::Precision::FP32)->fitted_on == "h100-sxm5");
  CHECK(km.coefficients_or_null("h100-pcie", calibrate::Precision::FP16_MIXED)->fitted_on == "v100-sxm2-16gb");
  CHECK(km.coefficients_or_null("xeon-gold-6148", calibrate::Precision::FP32) == nullptr);
  CHECK(km.coefficients_or_null("xeon-phi-7250", calibrate::Precision::FP32)->fitted_on == "xeon-phi-7250");
}

TEST_CASE("calibrate::GpuKernelModel: a CPU worker runs on its share of the fitted socket", "[calibrate]") {
  const auto& knl = platforms::DeviceCatalog::builtin().by_name("xeon-phi-7250");
  CHECK(calibrate::kernel_share(knl, 68, 1) == 1.0);
  CHECK(calibrate::kernel_share(knl, 34, 1) == 0.5);
  CHECK(calibrate::kernel_share(knl, 272, 1) == 1.0);  // hardware threads beyond the cores add no roof
  CHECK(calibrate::kernel_share(knl, 136, 2) == 2.0);  // two sockets' worth
  const auto& gpu = platforms::DeviceCatalog::builtin().by_name("v100-sxm2-16gb");
  CHECK(calibrate::kernel_share(gpu, 8, 2) == 1.0);
  // Through the profile: one worker per KNL node takes the fit's time, two per node (34 cores each)
  // twice its compute term; a Xeon without a fit stays on the device model.
  const auto model = conv_model(32, 256, 256, 28, 3, 1);
  calibrate::ProfileOptions o;
  o.db_path = empty_db();
  const auto whole = calibrate::build_profile(model, knl, o);
  o.workers_per_node = 2;
  const auto half = calibrate::build_profile(model, knl, o);
  CHECK(whole.compute_model == "kernel model (xeon-phi-7250)");
  const double launch_s = calibrate::GpuKernelModel::builtin().coefficients_or_null("xeon-phi-7250", calibrate::Precision::FP32)->launch_s;
  CHECK(half.layers[0].fwd_s - launch_s == Approx(2 * (whole.layers[0].fwd_s - launch_s)));
  CHECK(calibrate::build_profile(model, platforms::DeviceCatalog::builtin().by_name("xeon-gold-6148"), o).compute_model ==
        "device model");
}

TEST_CASE("calibrate::Profile: fp16-mixed halves gradient bytes and uses the tensor peak", "[calibrate]") {
  const auto& v100 = platforms::DeviceCatalog::builtin().by_name("v100-sxm2-32gb");
  const auto model = conv_model(32, 256, 256, 28, 3, 1);
  calibrate::ProfileOptions o;
  o.db_path = empty_db();
  const auto fp32 = calibrate::build_profile(model, v100, o);
  o.precision = calibrate::Precision::FP16_MIXED;
  const auto fp16 = calibrate::build_profile(model, v100, o);
  CHECK(fp32.grad_bytes() == 256 * 256 * 9 * 4);
  CHECK(fp16.grad_bytes() == fp32.grad_bytes() / 2);
  CHECK(fp16.precision == calibrate::Precision::FP16_MIXED);
  CHECK(fp16.layers[0].fwd_s < fp32.layers[0].fwd_s / 2);  // 125 vs 15.7 TFLOP/s peak
  CHECK(fp32.compute_model.rfind("kernel model", 0) == 0);
  // No tensor cores: an input error, never a silent FP32 answer.
  const auto& p100 = platforms::DeviceCatalog::builtin().by_name("p100-sxm2");
  CHECK_THROWS_AS(calibrate::build_profile(model, p100, o), InputError);
  CHECK_THROWS_AS(calibrate::precision_by_name("bf16"), InputError);
  CHECK(calibrate::precision_by_name("bf16-mixed") == calibrate::Precision::BF16_MIXED);
  CHECK(calibrate::element_bytes(calibrate::Precision::FP8) == 2);
  CHECK(calibrate::precision_row(calibrate::Precision::FP8).gemm == "fp8");
  CHECK(calibrate::precision_row(calibrate::Precision::FP8).attention == "bf16");
  CHECK(calibrate::precision_by_name("fp16-mixed") == calibrate::Precision::FP16_MIXED);
}

TEST_CASE("calibrate::GpuKernelModel: a fallback block may name its own sources; a malformed one is an InputError",
          "[calibrate]") {
  const auto path =
      (std::filesystem::temp_directory_path() / ("dtsim_gk_from_" + std::to_string(::getpid()) + ".json")).string();
  const std::string block = R"("launch_s": 1e-5, "mem_eff": 0.5, "eff_default": 0.5, "eff": {"gemm": 0.8},
                               "half_fill": {"gemm": 1000})";
  auto write = [&](const std::string& fp16_from) {
    std::ofstream(path) << R"({"devices": {}, "fallback": {"x": {"from": ["a", "b"], "precisions": {"fp32": {)" << block
                        << R"(, "from": ["a"]}, "fp16-mixed": {)" << block << fp16_from << "}}}}}";
  };
  write("");
  const auto km = calibrate::GpuKernelModel::load(path);
  CHECK(km.coefficients_or_null("x", calibrate::Precision::FP32)->fitted_on == "a");
  CHECK(km.coefficients_or_null("x", calibrate::Precision::FP16_MIXED)->fitted_on == "a+b");
  write(R"(, "from": 3)");
  CHECK_THROWS_AS(calibrate::GpuKernelModel::load(path), InputError);
  write(R"(, "from": [3])");
  CHECK_THROWS_AS(calibrate::GpuKernelModel::load(path), InputError);
  std::filesystem::remove(path);
}

namespace {

// A model file holding only a tensor block (one fitted GPU "fit-gpu", one fallback "fb-gpu").
std::string tensor_model_file(const std::string& tensor_json) {
  const auto path = std::filesystem::temp_directory_path() / ("dtsim_gk_tensor_" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << R"({"devices": {}, "tensor": )" << tensor_json << "}";
  return path.string();
}

constexpr const char* TENSOR_JSON = R"({"devices": {"fit-gpu": {"source": "a test",
  "gemm": {"bf16": {"launch_s": 5e-6, "mem_eff": 0.5, "half_fill": 1e5, "half_k": 100, "eff_default": 0.6,
                    "eff": {"fwd": 0.8, "bwd_weights": 0.7}}},
  "attention": {"bf16": {"launch_s": 2e-5, "half_d": 50, "half_rows": 4000, "eff_default": 0.3,
                         "eff": {"fwd/causal": 0.5, "bwd/full": 0.4}}},
  "memory": {"launch_s": 6e-6, "eff_default": 0.5, "eff": {"layer_norm/fwd": 0.45}}}},
  "fallback": {"fb-gpu": {"gemm": "fit-gpu"}}})";

platforms::Device tensor_gpu(const char* name) {
  platforms::Device gpu;
  gpu.name = name;
  gpu.peak_flops = 60e12;
  gpu.bf16_tensor_flops = 1000e12;
  gpu.mem_bandwidth_Bps = 4e12;
  return gpu;
}

}  // namespace

TEST_CASE("calibrate::GpuKernelModel: tensor kernels are launch + roofline over efficiency x fill", "[calibrate]") {
  const auto km = calibrate::GpuKernelModel::load(tensor_model_file(TENSOR_JSON));
  const auto gpu = tensor_gpu("fit-gpu");
  // A compute-bound forward GEMM: 2MNK / (peak x eff[fwd] x MN/(MN+half_fill) x K/(K+half_k)).
  const double m = 4096, n = 8192, k = 2048;
  const double fill = m * n / (m * n + 1e5) * k / (k + 100);
  CHECK(km.gemm_s(gpu, "bf16", {m, n, k}, calibrate::Pass::FWD) == Approx(5e-6 + 2 * m * n * k / (1000e12 * 0.8 * fill)));
  // A pass without its own efficiency takes eff_default.
  CHECK(km.gemm_s(gpu, "bf16", {m, n, k}, calibrate::Pass::BWD_DATA) == Approx(5e-6 + 2 * m * n * k / (1000e12 * 0.6 * fill)));
  // A GEMM with k = 1 is memory bound: (MK + KN + MN) x 2 B / (BW x mem_eff).
  const double bytes = (m * 1 + 1 * n + m * n) * 2;
  CHECK(km.gemm_s(gpu, "bf16", {m, n, 1}, calibrate::Pass::FWD) == Approx(5e-6 + bytes / (4e12 * 0.5)));
  CHECK(km.gemm_s(gpu, "bf16", {0, n, k}, calibrate::Pass::FWD) == 0);
  // Causal attention forward: half of 4 b h s^2 d.
  const calibrate::AttentionShape att{2, 32, 8, 4096, 128, true};
  const double flops = 4.0 * 2 * 32 * 4096 * 4096 * 128 * 0.5;
  const double rows = 2.0 * 32 * 4096;
  CHECK(km.attention_s(gpu, "bf16", att, false) ==
        Approx(2e-5 + flops / (1000e12 * 0.5 * 128 / (128 + 50.0) * rows / (rows + 4000))));
  // Backward of the full mask: 2.5x the forward FLOPs, its own efficiency.
  auto full = att;
  full.causal = false;
  CHECK(km.attention_s(gpu, "bf16", full, true) ==
        Approx(2e-5 + 2.5 * 2 * flops / (1000e12 * 0.4 * 128 / (128 + 50.0) * rows / (rows + 4000))));
  CHECK(km.memory_op_s(gpu, "layer_norm", false, 1e9) == Approx(6e-6 + 1e9 / (4e12 * 0.45)));
  CHECK(km.memory_op_s(gpu, "a_new_op", true, 1e9) == Approx(6e-6 + 1e9 / (4e12 * 0.5)));
}

TEST_CASE("calibrate::GpuKernelModel: a tensor fallback runs at the target's own peaks; gaps are input errors",
          "[calibrate]") {
  const auto km = calibrate::GpuKernelModel::load(tensor_model_file(TENSOR_JSON));
  auto fb = tensor_gpu("fb-gpu");
  fb.bf16_tensor_flops = 250e12;
  const double fit_s = km.gemm_s(tensor_gpu("fit-gpu"), "bf16", {8192, 8192, 8192}, calibrate::Pass::FWD);
  const double fb_s = km.gemm_s(fb, "bf16", {8192, 8192, 8192}, calibrate::Pass::FWD);
  CHECK(fb_s - 5e-6 == Approx(4 * (fit_s - 5e-6)));
  CHECK(km.tensor_source("fit-gpu") == "gemm, attention, memory: fit-gpu fit, a test");
  CHECK(km.tensor_source("fb-gpu") == "gemm: fallback to the fit-gpu fit (a test), at fb-gpu's peaks");
  CHECK(km.tensor_source("other").empty());
  // The fallback names gemm only: attention and memory-bound ops of fb-gpu are not modelled.
  CHECK_THROWS_WITH(km.attention_s(fb, "bf16", {1, 8, 8, 1024, 64, false}, false),
                    Catch::Contains("no attention fit for it"));
  CHECK_THROWS_AS(km.memory_op_s(fb, "softmax", false, 1e6), InputError);
  // A precision the fit lacks, one the device has no peak for, one that does not exist.
  CHECK_THROWS_WITH(km.gemm_s(fb, "fp8", {64, 64, 64}, calibrate::Pass::FWD), Catch::Contains("no fp8 GEMM fit"));
  auto no_bf16 = tensor_gpu("fit-gpu");
  no_bf16.bf16_tensor_flops = 0;
  CHECK_THROWS_WITH(km.gemm_s(no_bf16, "bf16", {64, 64, 64}, calibrate::Pass::FWD),
                    Catch::Contains("bf16_tensor_flops"));
  CHECK_THROWS_WITH(calibrate::math_precision_by_name("fp4"), Catch::Contains("expected fp32, tf32, fp16, bf16 or fp8"));
  CHECK_THROWS_AS(km.gemm_s(tensor_gpu("fit-gpu"), "bf16", {-1, 64, 64}, calibrate::Pass::FWD), InputError);
  CHECK_THROWS_WITH(km.attention_s(tensor_gpu("fit-gpu"), "bf16", {1, 12, 5, 1024, 64, false}, false),
                    Catch::Contains("kv_heads 5 must divide heads 12"));
  // Malformed blocks name the file and the field.
  CHECK_THROWS_WITH(calibrate::GpuKernelModel::load(tensor_model_file(R"({"devices": {"g": {"gemm": {"bf16": {"launch_s": 1e-6}}}}})")),
                    Catch::Contains("tensor device 'g' gemm bf16: field 'mem_eff' must be a number > 0"));
  CHECK_THROWS_WITH(calibrate::GpuKernelModel::load(tensor_model_file(R"({"devices": {}, "fallback": {"x": {"gemm": "nope"}}})")),
                    Catch::Contains("tensor fallback 'x' gemm: must name a device of tensor.devices"));
  CHECK_THROWS_WITH(calibrate::GpuKernelModel::load(tensor_model_file(R"({"devices": {"g": {"gemm": {"int4": {}}}}})")),
                    Catch::Contains("unknown matrix precision 'int4'"));
}

TEST_CASE("calibrate::GpuKernelModel: the shipped tensor fit reproduces timings of the lent H200 and H100",
          "[calibrate]") {
  const auto& catalog = platforms::DeviceCatalog::builtin();
  const auto& km = calibrate::GpuKernelModel::builtin();
  const auto& h200 = catalog.by_name("h200-sxm");
  const auto& h100 = catalog.by_name("h100-sxm5");
  // Rows of calibrate/data/measured/h{200,100}_transformer_*.csv (median ms): Llama 3 8B MLP up at tp 1,
  // 4096 tokens; its flash attention (4 x 8192 tokens, 32 heads over 8 kv heads, causal); layer norm and
  // GELU over 8192 x 4096 bf16. Per-kernel tolerance 20%: the fit's held-out mean error is 6-12%.
  using calibrate::Pass;
  CHECK(km.gemm_s(h200, "bf16", {4096, 28672, 4096}, Pass::FWD) * 1e3 == Approx(1.21138).epsilon(0.2));
  CHECK(km.gemm_s(h200, "bf16", {28672, 4096, 4096}, Pass::BWD_WEIGHTS) * 1e3 == Approx(1.39237).epsilon(0.2));
  CHECK(km.gemm_s(h200, "fp8", {4096, 28672, 4096}, Pass::FWD) * 1e3 == Approx(0.63941).epsilon(0.2));
  CHECK(km.gemm_s(h200, "tf32", {4096, 28672, 4096}, Pass::FWD) * 1e3 == Approx(2.38086).epsilon(0.2));
  CHECK(km.attention_s(h200, "bf16", {4, 32, 8, 8192, 128, true}, false) * 1e3 == Approx(6.34014).epsilon(0.2));
  CHECK(km.attention_s(h200, "bf16", {4, 32, 8, 8192, 128, true}, true) * 1e3 == Approx(19.08069).epsilon(0.2));
  CHECK(km.memory_op_s(h200, "layer_norm", false, 134217728) * 1e3 == Approx(0.05923).epsilon(0.2));
  CHECK(km.memory_op_s(h100, "gelu_tanh", true, 201326592) * 1e3 == Approx(0.07290).epsilon(0.2));
  // Every catalog GPU of Ampere or later times a bf16 GEMM; the A100 through the H100's fit, at its own peak.
  for (const char* name : {"a100-sxm4-40gb", "a100-sxm4-80gb", "h100-pcie", "h100-sxm5", "h200-sxm"})
    CHECK(km.gemm_s(catalog.by_name(name), "bf16", {8192, 8192, 8192}, Pass::FWD) > 0);
  CHECK(km.tensor_source("a100-sxm4-80gb").find("fallback to the h100-sxm5 fit") != std::string::npos);
  CHECK_THROWS_WITH(km.gemm_s(catalog.by_name("a100-sxm4-80gb"), "fp8", {64, 64, 64}, Pass::FWD),
                    Catch::Contains("fp8_tensor_flops"));
  CHECK(km.gemm_s(catalog.by_name("v100-sxm2-32gb"), "fp16", {4096, 4096, 4096}, Pass::FWD) > 0);
  CHECK_THROWS_AS(km.attention_s(catalog.by_name("v100-sxm2-32gb"), "fp16", {1, 8, 8, 1024, 64, false}, false),
                  InputError);
}

TEST_CASE("calibrate::Profile: the sources of a prediction's compute time are named with their shares", "[calibrate]") {
  const auto& h100 = platforms::DeviceCatalog::builtin().by_name("h100-sxm5");
  // A conv and a ReLU: the kernel model times the conv; the device model the ReLU.
  models::Model model("conv_relu", models::Shape{32, 256, 28, 28});
  models::LayerParams p;
  p.out_channels = 256;
  p.kernel_h = p.kernel_w = 3;
  p.stride_h = p.stride_w = 1;
  p.pad_h = p.pad_w = 1;
  p.bias = false;
  model.add("conv", models::OpKind::CONV2D, p, {"data"});
  model.add("relu", models::OpKind::RELU, models::LayerParams{}, {"conv"});
  calibrate::ProfileOptions o;
  o.db_path = empty_db();
  o.precision = calibrate::Precision::FP16_MIXED;
  const auto fp16 = calibrate::build_profile(model, h100, o);
  REQUIRE(fp16.sources.size() == 2);
  // H100 FP16 convolutions come from the V100 fit (docs/calibration.md §4b), and the header must say so.
  CHECK(fp16.sources[0].first == "kernel model of v100-sxm2-16gb (fallback for h100-sxm5)");
  CHECK(fp16.sources[1].first == "device model from op-class fallbacks");  // an empty database
  CHECK(fp16.sources[0].second + fp16.sources[1].second == Approx(1.0));
  CHECK(fp16.sources[0].second > fp16.sources[1].second);
  o.precision = calibrate::Precision::FP32;
  const auto fp32 = calibrate::build_profile(model, h100, o);
  CHECK(fp32.sources[0].first == "kernel model of h100-sxm5 (its own timings)");
  const std::string line = calibrate::describe_sources(fp32);
  CHECK(line.find("% kernel model of h100-sxm5 (its own timings), ") != std::string::npos);
  CHECK(line.find("% device model from op-class fallbacks") == line.size() - 38);
}

TEST_CASE("calibrate::GpuKernelModel: the H200 times convolutions from the H100's sources", "[calibrate]") {
  const auto& km = calibrate::GpuKernelModel::builtin();
  const auto* fp32 = km.coefficients_or_null("h200-sxm", calibrate::Precision::FP32);
  const auto* fp16 = km.coefficients_or_null("h200-sxm", calibrate::Precision::FP16_MIXED);
  REQUIRE(fp32 != nullptr);
  REQUIRE(fp16 != nullptr);
  CHECK(fp32->fitted_on == "h100-sxm5");
  CHECK(fp16->fitted_on == "v100-sxm2-16gb");
}

TEST_CASE("calibrate::GpuKernelModel: nesting and size past the JSON bounds are one-line InputErrors", "[calibrate]") {
  const auto path =
      (std::filesystem::temp_directory_path() / ("dtsim_gk_bounds_" + std::to_string(::getpid()) + ".json")).string();
  auto error_of = [&] {
    try {
      (void)calibrate::GpuKernelModel::load(path);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::ofstream(path) << R"({"devices": )" << std::string(100'000, '[') << std::string(100'000, ']') << "}";
  CHECK(error_of() == path + ": GPU kernel model nests arrays and objects deeper than 64 levels; expected at most 64");
  std::ofstream(path) << R"({"devices": {"x": )" << std::string(62, '[') << std::string(62, ']') << "}}";  // 64 levels
  CHECK(error_of().find("deeper than") == std::string::npos);
  { std::ofstream create(path); }
  std::filesystem::resize_file(path, (16u << 20) + 1);
  CHECK(error_of() == path + ": GPU kernel model is 16,777,217 bytes; expected at most 16,777,216 bytes");
  std::filesystem::remove(path);
}
