// Closed-form checks of the device model (calibrate/device_model.hpp) and of profiles built from it.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <unistd.h>

#include "calibrate/device_model.hpp"
#include "calibrate/profile.hpp"
#include "common/errors.hpp"

namespace {

using dtsim::platforms::Device;
using dtsim::platforms::DeviceKind;

Device test_cpu() {
  Device d;
  d.name = "test-cpu";
  d.kind = DeviceKind::CPU;
  d.cores = 4;
  d.clock_hz = 1e9;
  d.simd_width_fp32 = 16;
  d.fma_units = 2;  // 64 GFLOP/s per core
  d.mem_bandwidth_Bps = 40e9;
  return d;
}

Device test_gpu() {
  Device d;
  d.name = "test-gpu";
  d.kind = DeviceKind::GPU;
  d.peak_flops = 10e12;
  d.mem_bandwidth_Bps = 1e12;
  return d;
}

dtsim::calibrate::HostModel host_model(int threads) {
  dtsim::calibrate::HostModel m;
  m.host.device_model = "Test CPU";
  m.host.threads = threads;
  m.host.core_peak_flops = 100e9;
  m.host.mem_bandwidth_Bps = 10e9;
  return m;
}

}  // namespace

TEST_CASE("calibrate::DeviceModel: CPU compute-bound pass with ideal scaling", "[calibrate]") {
  using namespace dtsim::calibrate;
  const HostModel m = host_model(1);
  const PassWork w{1e9, 1e6};
  WorkerPlacement place;
  place.threads = 4;
  // e1 = 0.5; t = F / (64e9 * 0.5) / 4 + overhead
  const double t = predict_pass_s(m, OpClass::CONV, w, 0.5, true, test_cpu(), place);
  CHECK(t == Approx(1e9 / (64e9 * 0.5) / 4 + op_overhead_s(test_cpu())).epsilon(1e-9));
  // Half the threads: twice the compute time.
  place.threads = 2;
  const double t2 = predict_pass_s(m, OpClass::CONV, w, 0.5, true, test_cpu(), place);
  CHECK(t2 - op_overhead_s(test_cpu()) == Approx(2 * (t - op_overhead_s(test_cpu()))));
}

TEST_CASE("calibrate::DeviceModel: Amdahl fraction fitted on the host limits thread scaling", "[calibrate]") {
  using namespace dtsim::calibrate;
  HostModel m = host_model(2);
  m.parallel_fraction["conv"] = 0.5;
  const PassWork w{1e9, 1e3};
  WorkerPlacement place;
  place.threads = 4;
  // Host at 2 threads with efficiency 0.4 -> single-core efficiency 0.4 * 2 * (0.5 + 0.25) = 0.6;
  // 4 threads: F / (64e9 * 0.6) * (0.5 + 0.125).
  const double t = predict_pass_s(m, OpClass::CONV, w, 0.4, true, test_cpu(), place);
  CHECK(t == Approx(1e9 / (64e9 * 0.6) * 0.625 + op_overhead_s(test_cpu())).epsilon(1e-9));
  // Two workers of 2 threads beat one of 4 threads on the same node (throughput per node).
  place.threads = 2;
  const double t_half = predict_pass_s(m, OpClass::CONV, PassWork{0.5e9, 1e3}, 0.4, true, test_cpu(), place);
  CHECK(t_half < t);
}

TEST_CASE("calibrate::DeviceModel: memory-bound pass uses the worker's bandwidth share", "[calibrate]") {
  using namespace dtsim::calibrate;
  const HostModel m = host_model(1);
  const PassWork w{1e6, 4e8};
  WorkerPlacement place;
  place.threads = 2;  // half the socket's cores -> half its 40 GB/s
  const double t = predict_pass_s(m, OpClass::BATCH_NORM, w, 0.8, false, test_cpu(), place);
  CHECK(t == Approx(4e8 / (20e9 * 0.8) + op_overhead_s(test_cpu())).epsilon(1e-9));
}

TEST_CASE("calibrate::DeviceModel: GPU time from the class-relative efficiency", "[calibrate]") {
  using namespace dtsim::calibrate;
  HostModel m = host_model(2);
  m.class_best_efficiency["conv"] = 0.8;
  const PassWork w{1e9, 1e6};
  WorkerPlacement place;
  // A shape at the host's best efficiency runs at the GPU's best conv efficiency (0.75).
  const double best = predict_pass_s(m, OpClass::CONV, w, 0.8, true, test_gpu(), place);
  CHECK(best == Approx(1e9 / 10e12 / 0.75 + op_overhead_s(test_gpu())).epsilon(1e-9));
  // Half the host's best efficiency -> half the GPU's.
  const double half = predict_pass_s(m, OpClass::CONV, w, 0.4, true, test_gpu(), place);
  CHECK(half - op_overhead_s(test_gpu()) == Approx(2 * (best - op_overhead_s(test_gpu()))));
  // No work, no time; a device without peak is an InputError.
  CHECK(predict_pass_s(m, OpClass::CONV, PassWork{0, 0}, 0.5, true, test_gpu(), place) == 0);
  Device broken = test_gpu();
  broken.peak_flops = 0;
  CHECK_THROWS_AS(predict_pass_s(m, OpClass::CONV, w, 0.5, true, broken, place), dtsim::InputError);
}

TEST_CASE("calibrate::DeviceModel: batch is stripped from signatures", "[calibrate]") {
  CHECK(dtsim::calibrate::strip_batch("conv2d src=32x64x56x56 dst=32x64x56x56 k=3x3") ==
        "conv2d src=Nx64x56x56 dst=Nx64x56x56 k=3x3");
}

TEST_CASE("calibrate::Profile: anchoring scales the step to the measured throughput", "[calibrate]") {
  using namespace dtsim;
  models::Model model("tiny", models::Shape{8, 3, 16, 16});
  models::LayerParams conv;
  conv.out_channels = 8;
  conv.kernel_h = conv.kernel_w = 3;
  conv.pad_h = conv.pad_w = 1;
  model.add("conv1", models::OpKind::CONV2D, conv, {"data"});
  model.add("relu1", models::OpKind::RELU, {}, {"conv1"});
  models::LayerParams fc;
  fc.out_channels = 10;
  model.add("fc", models::OpKind::FULLY_CONNECTED, fc, {"relu1"});
  model.add("loss", models::OpKind::SOFTMAX_LOSS, {}, {"fc"});
  calibrate::ProfileOptions o;
  o.db_path = (std::filesystem::temp_directory_path() / ("dtsim_empty_" + std::to_string(::getpid()) + ".json")).string();
  const auto base = calibrate::build_profile(model, test_gpu(), o);
  REQUIRE(base.layers.size() == 4);
  CHECK(base.coverage == 0);  // empty database: everything from the class fallback
  CHECK(base.step_compute_s() > 0);
  CHECK(base.layers[0].bwd_data_s == 0);  // first layer: no gradient w.r.t. the input
  CHECK(base.grad_bytes() == (8 * 3 * 9 + 8 + 8 * 16 * 16 * 10 + 10) * 4);
  auto anchored = base;
  calibrate::anchor_profile(anchored, 1000.0);
  CHECK(8 / anchored.step_compute_s() == Approx(1000.0));
  CHECK(anchored.anchor_factor == Approx(8 / (1000.0 * base.step_compute_s())));
  CHECK(anchored.layers[2].fwd_s == Approx(base.layers[2].fwd_s * anchored.anchor_factor));
  CHECK_THROWS_AS(calibrate::anchor_profile(anchored, 0.0), InputError);
  CHECK_THROWS_AS(calibrate::anchor_profile(anchored, -5.0), InputError);
  o.anchor_samples_per_s = 500.0;
  const auto via_options = calibrate::build_profile(model, test_gpu(), o);
  CHECK(8 / via_options.step_compute_s() == Approx(500.0));
  o.workers_per_node = 0;
  CHECK_THROWS_AS(calibrate::build_profile(model, test_gpu(), o), InputError);
}
