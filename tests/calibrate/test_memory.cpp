// Checks of the training memory estimate and capacity check (calibrate/memory.hpp).
#include <catch2/catch.hpp>

#include "calibrate/memory.hpp"
#include "common/errors.hpp"
#include "models/zoo.hpp"
#include "platforms/device.hpp"

namespace {

using namespace dtsim;

models::Model resnet50(int batch) {
  models::ModelOptions o;
  o.batch = batch;
  return models::build_zoo_model("resnet50", o);
}

}  // namespace

TEST_CASE("calibrate::Memory: closed form on a one-conv model", "[calibrate]") {
  models::Model model("one", models::Shape{8, 3, 32, 32});
  models::LayerParams p;
  p.out_channels = 16;
  p.kernel_h = p.kernel_w = 3;
  p.pad_h = p.pad_w = 1;
  model.add("conv", models::OpKind::CONV2D, p, {"data"});
  model.add("bn", models::OpKind::BATCH_NORM, {}, {"conv"});
  model.add("relu", models::OpKind::RELU, {}, {"bn"});
  platforms::Device gpu;
  gpu.kind = platforms::DeviceKind::GPU;
  const double params = 16 * 3 * 9 + 16 + 2 * 16;  // conv weights + bias, BN gamma + beta
  const double in = 8 * 3 * 32 * 32, out = 8 * 16 * 32 * 32;
  const auto m = calibrate::estimate_memory(model, calibrate::Precision::FP32, gpu);
  CHECK(m.weights_B == params * 4);
  CHECK(m.gradients_B == params * 4);
  CHECK(m.optimizer_B == params * 4);  // SGD momentum: one FP32 velocity
  // Kept for backward: the images (conv reads x), the conv output (BN reads x), the ReLU output (ReLU
  // reads y); the BN output is read by nobody's backward.
  CHECK(m.activations_B == (in + 2 * out) * 4);
  CHECK(m.workspace_B == out * 4);
  CHECK(m.runtime_B > 0);
  const auto h = calibrate::estimate_memory(model, calibrate::Precision::FP16_MIXED, gpu);
  CHECK(h.weights_B == params * 6);    // FP32 master + FP16 copy
  CHECK(h.gradients_B == params * 2);
  CHECK(h.optimizer_B == params * 4);
  CHECK(h.activations_B == m.activations_B / 2);
  platforms::Device cpu;
  cpu.kind = platforms::DeviceKind::CPU;
  CHECK(calibrate::estimate_memory(model, calibrate::Precision::FP32, cpu).runtime_B == 0);
}

TEST_CASE("calibrate::Memory: ResNet-50 fits an 11 GB GTX 1080 Ti at batch 32, not at 1024", "[calibrate]") {
  const auto& gtx = platforms::DeviceCatalog::builtin().by_name("gtx-1080ti");
  const auto small = resnet50(32);
  CHECK_NOTHROW(calibrate::check_memory_fits(calibrate::estimate_memory(small, calibrate::Precision::FP32, gtx), small, gtx));
  const auto big = resnet50(1024);
  const auto m = calibrate::estimate_memory(big, calibrate::Precision::FP32, gtx);
  CHECK(m.total_B() > gtx.mem_capacity_B);
  CHECK_THROWS_WITH(calibrate::check_memory_fits(m, big, gtx), Catch::Contains("does not fit") &&
                                                                 Catch::Contains("gtx-1080ti") &&
                                                                 Catch::Contains("activations"));
  // Batch 256 in fp16-mixed fits an 80 GB H100.
  const auto& h100 = platforms::DeviceCatalog::builtin().by_name("h100-sxm5");
  const auto mid = resnet50(256);
  CHECK_NOTHROW(calibrate::check_memory_fits(calibrate::estimate_memory(mid, calibrate::Precision::FP16_MIXED, h100), mid, h100));
}
