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
