// Closed-form checks of the device model (calibrate/device_model.hpp) and of profiles built from it.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <unistd.h>
#include <utility>

#include "calibrate/database.hpp"
#include "calibrate/device_model.hpp"
#include "calibrate/op_signature.hpp"
#include "calibrate/profile.hpp"
#include "common/errors.hpp"
#include "platforms/device.hpp"
#include "tests/calibrate/device_fixtures.hpp"

namespace {

using dtsim::platforms::Device;
using dtsim::platforms::DeviceKind;

using dtsim::test::host_model;
using dtsim::test::test_cpu;

Device test_gpu() {
  Device d;
  d.name = "test-gpu";
  d.kind = DeviceKind::GPU;
  d.peak_flops = 10e12;
  d.mem_bandwidth_Bps = 1e12;
  return d;
}

// A calibration host of the same test CPU at `threads` x `instances` (co-run copies).
dtsim::calibrate::HostInfo test_host(int threads, int instances, double core_peak_flops) {
  dtsim::calibrate::HostInfo h;
  h.device_model = "Test CPU";
  h.isa = "avx512_core";
  h.library_version = "oneDNN 2.6.3";
  h.threads = threads;
  h.instances = instances;
  h.core_peak_flops = core_peak_flops;
  h.mem_bandwidth_Bps = 10e9;
  return h;
}

// A clean conv2d forward entry of `flops` FLOPs timed at `time_s`.
dtsim::calibrate::PassEntry conv_entry(double time_s, double flops) {
  dtsim::calibrate::PassEntry e;
  e.time_s = time_s;
  e.blocks_kept = 3;
  e.flops = flops;
  e.bytes = 1e6;
  e.op = "conv2d";
  return e;
}

// A 3x3 convolution (8 channels) and its ReLU on an 8x3x16x16 input.
dtsim::models::Model conv_relu_model() {
  using namespace dtsim;
  models::Model model("tiny", models::Shape{8, 3, 16, 16});
  models::LayerParams conv;
  conv.out_channels = 8;
  conv.kernel_h = conv.kernel_w = 3;
  conv.pad_h = conv.pad_w = 1;
  model.add("conv1", models::OpKind::CONV2D, conv, {"data"});
  model.add("relu1", models::OpKind::RELU, {}, {"conv1"});
  return model;
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
  CHECK(t == Approx(1e9 / (64e9 * 0.5) / 4 + op_overhead_s(test_cpu(), 4)).epsilon(1e-9));
  // Half the threads: twice the compute time.
  place.threads = 2;
  const double t2 = predict_pass_s(m, OpClass::CONV, w, 0.5, true, test_cpu(), place);
  CHECK(t2 - op_overhead_s(test_cpu(), 2) == Approx(2 * (t - op_overhead_s(test_cpu(), 4))));
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
  CHECK(t == Approx(1e9 / (64e9 * 0.6) * 0.625 + op_overhead_s(test_cpu(), 4)).epsilon(1e-9));
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
  CHECK(t == Approx(4e8 / (20e9 * 0.8) + op_overhead_s(test_cpu(), 2)).epsilon(1e-9));
}

TEST_CASE("calibrate::DeviceModel: a worker spanning sockets pays its remote traffic over the socket links",
          "[calibrate]") {
  using namespace dtsim::calibrate;
  Device cpu = test_cpu();  // 4 cores, 40 GB/s per socket
  cpu.socket_link_Bps = 10e9;
  WorkerPlacement one;  // 8 threads on 2 sockets: spans both, half its traffic remote
  one.threads = 8;
  one.cpu_sockets = 2;
  one.workers_per_node = 1;
  // DRAM 80 GB/s; remote 0.5 x B over 2 sockets x 10 GB/s: max(1, 0.5 x 80 / 20) = 2.
  CHECK(numa_memory_factor(cpu, one) == Approx(2.0));
  WorkerPlacement pinned = one;  // 2 workers of 4 threads, one per socket: all local
  pinned.threads = 4;
  pinned.workers_per_node = 2;
  CHECK(numa_memory_factor(cpu, pinned) == 1.0);
  // Fast links (or no link figure): the local DRAM is the bottleneck, no NUMA cost.
  cpu.socket_link_Bps = 40e9;
  CHECK(numa_memory_factor(cpu, one) == 1.0);
  cpu.socket_link_Bps = 0;
  CHECK(numa_memory_factor(cpu, one) == 1.0);
  // In a memory-bound pass: the spanning worker's 80 GB/s share is halved.
  cpu.socket_link_Bps = 10e9;
  const HostModel m = host_model(1);
  const PassWork w{1e6, 4e8};
  const double t = predict_pass_s(m, OpClass::BATCH_NORM, w, 0.8, false, cpu, one);
  CHECK(t == Approx(4e8 / (40e9 * 0.8) + op_overhead_s(cpu, 8)).epsilon(1e-9));
  const double t_pinned = predict_pass_s(m, OpClass::BATCH_NORM, PassWork{1e6, 2e8}, 0.8, false, cpu, pinned);
  CHECK(t_pinned == Approx(2e8 / (40e9 * 0.8) + op_overhead_s(cpu, 4)).epsilon(1e-9));
}

TEST_CASE("calibrate::DeviceModel: Stampede2's Platinum 8160 pays its measured remote bandwidth only when one "
          "process spans both sockets", "[calibrate]") {
  using namespace dtsim::calibrate;
  const Device& cpu = dtsim::platforms::DeviceCatalog::builtin().by_name("xeon-platinum-8160");
  // Measured remote reads 34 GB/s vs local 112 GB/s (benchmarks/data/cpu-numa.yaml), on the
  // datasheet scale of its 128 GB/s DRAM: 34 x 128 / 112 = 38.9 GB/s per direction.
  REQUIRE(cpu.socket_link_Bps == Approx(34e9 * 128.0 / 112.0).epsilon(2e-3));  // 3 significant figures
  WorkerPlacement wide;  // 1 process per node: 48 threads over both 24-core sockets, half remote
  wide.threads = 48;
  wide.cpu_sockets = 2;
  wide.workers_per_node = 1;
  const double expected = 0.5 * (2 * cpu.mem_bandwidth_Bps) / (2 * cpu.socket_link_Bps);
  CHECK(numa_memory_factor(cpu, wide) == Approx(expected).epsilon(1e-12));
  CHECK(expected == Approx(1.645).epsilon(1e-3));
  WorkerPlacement pinned = wide;  // 4 processes per node of 12 threads: each fits one socket
  pinned.threads = 12;
  pinned.workers_per_node = 4;
  CHECK(numa_memory_factor(cpu, pinned) == 1.0);
  // A memory-bound pass of the wide process takes the factor longer than its local-DRAM time.
  const HostModel m = host_model(1);
  const PassWork w{1e6, 4e9};
  const double t = predict_pass_s(m, OpClass::BATCH_NORM, w, 0.8, false, cpu, wide);
  CHECK(t - op_overhead_s(cpu, 48) == Approx(4e9 / (2 * cpu.mem_bandwidth_Bps * 0.8) * expected).epsilon(1e-9));
}

TEST_CASE("calibrate::DeviceModel: a CPU pass's fixed cost grows with log2 of its threads between the measured "
          "1 and 68 threads", "[calibrate]") {
  using namespace dtsim::calibrate;
  // c(1) = 5 us (this host, 1 thread), c(68) = 10 us (DeepBench KNL7250): c(n) = 5 + 5 log2(n) / log2(68) us.
  CHECK(cpu_region_s(1) == Approx(5e-6).epsilon(1e-12));
  CHECK(cpu_region_s(68) == Approx(10e-6).epsilon(1e-12));
  CHECK(cpu_region_s(2) == Approx(5e-6 + 5e-6 / std::log2(68.0)).epsilon(1e-12));
  CHECK(cpu_region_s(48) == Approx(5e-6 + 5e-6 * std::log2(48.0) / std::log2(68.0)).epsilon(1e-12));
  CHECK(cpu_region_s(0) == cpu_region_s(1));
  CHECK(op_overhead_s(test_cpu(), 48) == cpu_region_s(48));
  CHECK(op_overhead_s(test_gpu(), 48) == op_overhead_s(test_gpu()));  // GPUs: launch cost, no threads
}

TEST_CASE("calibrate::DeviceModel: a pass's parallel efficiency falls with its work per thread as w / (w + c(n))",
          "[calibrate]") {
  using namespace dtsim::calibrate;
  const HostModel m = host_model(1);  // no Amdahl fit: the work itself scales ideally
  Device cpu = test_cpu();
  cpu.cores = 64;
  WorkerPlacement place;
  place.workers_per_node = 1;
  // 1-thread work W = F / (64 GFLOP/s x 0.5); on n threads each thread has w = W / n of it.
  const double flops = 64e9 * 0.5 * 1e-3;  // W = 1 ms
  const auto efficiency = [&](int n) {
    place.threads = n;
    const double t = predict_pass_s(m, OpClass::CONV, {flops, 1.0}, 0.5, true, cpu, place);
    return 1e-3 / (n * t);  // speedup over the pure 1-thread work, per thread
  };
  for (int n : {1, 2, 8, 48, 64}) {
    const double w = 1e-3 / n;
    CHECK(efficiency(n) == Approx(w / (w + cpu_region_s(n))).epsilon(1e-9));
  }
  // Work per thread equal to the fixed cost: half the efficiency of a pass with unlimited work.
  const double w_half = cpu_region_s(8);
  place.threads = 8;
  const double t = predict_pass_s(m, OpClass::CONV, {64e9 * 0.5 * w_half * 8, 1.0}, 0.5, true, cpu, place);
  CHECK(w_half * 8 / (8 * t) == Approx(0.5).epsilon(1e-9));
}

namespace {
// OSU's two set-ups of a 2-socket, 48-core Stampede2 node: one 48-thread process, or four of 12 threads.
std::pair<dtsim::calibrate::WorkerPlacement, dtsim::calibrate::WorkerPlacement> stampede2_wide_and_pinned() {
  dtsim::calibrate::WorkerPlacement wide;
  wide.threads = 48;
  wide.cpu_sockets = 2;
  wide.workers_per_node = 1;
  dtsim::calibrate::WorkerPlacement pinned = wide;
  pinned.threads = 12;
  pinned.workers_per_node = 4;
  return {wide, pinned};
}
}  // namespace

TEST_CASE("calibrate::DeviceModel: on a Stampede2 node one 48-thread process pays more fixed cost per pass than "
          "4 processes of 12 threads at the same batch per process", "[calibrate]") {
  using namespace dtsim::calibrate;
  const Device& cpu = dtsim::platforms::DeviceCatalog::builtin().by_name("xeon-platinum-8160");
  const HostModel m = host_model(1);
  const auto [wide, pinned] = stampede2_wide_and_pinned();
  const PassWork w{1e9, 1e3};  // compute bound: no NUMA term
  const double t_wide = predict_pass_s(m, OpClass::CONV, w, 0.5, true, cpu, wide);
  const double t_pinned = predict_pass_s(m, OpClass::CONV, w, 0.5, true, cpu, pinned);
  const double work_1_thread_s = 1e9 / (device_core_peak_flops(cpu) * 0.5);
  CHECK(t_wide == Approx(work_1_thread_s / 48 + cpu_region_s(48)).epsilon(1e-9));
  CHECK(t_pinned == Approx(work_1_thread_s / 12 + cpu_region_s(12)).epsilon(1e-9));
  // Node throughput: 4 passes of the pinned processes in t_pinned against 1 of the wide process in t_wide.
  const double ratio = 4 * t_wide / t_pinned;
  CHECK(ratio == Approx((work_1_thread_s / 12 + 4 * cpu_region_s(48)) / (work_1_thread_s / 12 + cpu_region_s(12)))
                     .epsilon(1e-9));
  CHECK(ratio > 1.0);
}

TEST_CASE("calibrate::DeviceModel: on a Stampede2 node four 12-thread processes gain 4 a(48) / a(12) per node on "
          "a compute-bound pass, a(n) = (1 - p) + p / n", "[calibrate]") {
  using namespace dtsim::calibrate;
  // The term benchmarks/osu_gap.py varies to size what OSU's ratio would need (docs/calibration.md, "What one
  // wide process pays"): beyond each pass's fixed cost, the per-node gain is the Amdahl ratio alone.
  const Device& cpu = dtsim::platforms::DeviceCatalog::builtin().by_name("xeon-platinum-8160");
  HostModel m = host_model(2);
  const double p = 0.9965;  // the shipped calibration's conv median (docs/calibration.md)
  m.parallel_fraction["conv"] = p;
  const auto [wide, pinned] = stampede2_wide_and_pinned();
  const PassWork w{1e10, 1e3};  // compute bound: neither the bandwidth floor nor NUMA applies
  const double busy_wide = predict_pass_s(m, OpClass::CONV, w, 0.5, true, cpu, wide) - cpu_region_s(48);
  const double busy_pinned = predict_pass_s(m, OpClass::CONV, w, 0.5, true, cpu, pinned) - cpu_region_s(12);
  const auto a = [p](int n) { return (1 - p) + p / n; };
  // Single-core efficiency from the 2-thread host: 0.5 x 2 x a(2); then F / (core peak x e1) x a(n).
  const double single_core_s = 1e10 / (device_core_peak_flops(cpu) * 0.5 * 2 * a(2));
  CHECK(busy_wide == Approx(single_core_s * a(48)).epsilon(1e-9));
  CHECK(busy_pinned == Approx(single_core_s * a(12)).epsilon(1e-9));
  CHECK(4 * busy_wide / busy_pinned == Approx(4 * a(48) / a(12)).epsilon(1e-9));
  CHECK(4 * a(48) / a(12) == Approx(1.121).epsilon(1e-3));  // the 1.12x of docs/results.md
  // Ideal scaling (p = 1): no per-node gain beyond the fixed costs.
  m.parallel_fraction["conv"] = 1.0;
  const double ideal_wide = predict_pass_s(m, OpClass::CONV, w, 0.5, true, cpu, wide) - cpu_region_s(48);
  const double ideal_pinned = predict_pass_s(m, OpClass::CONV, w, 0.5, true, cpu, pinned) - cpu_region_s(12);
  CHECK(4 * ideal_wide / ideal_pinned == Approx(1.0).epsilon(1e-9));
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
  // An architecture whose SGEMM reaches half the default (0.85 -> 0.425): conv and FC take twice as long.
  Device kepler_like = test_gpu();
  kepler_like.sgemm_efficiency = 0.425;
  const double o = op_overhead_s(test_gpu());
  CHECK(predict_pass_s(m, OpClass::CONV, w, 0.8, true, kepler_like, place) - o == Approx(2 * (best - o)));
  m.class_best_efficiency["fc"] = 0.8;
  CHECK(predict_pass_s(m, OpClass::FC, w, 0.8, true, kepler_like, place) - o == Approx(1e9 / 10e12 / 0.425));
  // Memory-bound classes are not affected by it.
  m.class_best_efficiency["eltwise"] = 0.5;
  const PassWork stream{1e6, 1e9};
  CHECK(predict_pass_s(m, OpClass::ELTWISE, stream, 0.5, false, kepler_like, place) ==
        predict_pass_s(m, OpClass::ELTWISE, stream, 0.5, false, test_gpu(), place));
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
  models::Model model = conv_relu_model();
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

TEST_CASE("calibrate::DeviceModel: the co-run slowdown is taken out of the Amdahl fit", "[calibrate]") {
  using namespace dtsim::calibrate;
  const auto host = [](int threads, int instances) { return test_host(threads, instances, 100e9); };
  const auto entry = [](double time_s) { return conv_entry(time_s, 1e9); };
  const std::string sig = "conv2d src=8x64x28x28 dst=8x64x28x28 k=3x3";
  CalibrationDb db;
  db.put(host(2, 1), sig, "fwd", entry(0.6));  // 2 threads: 1.67x faster than 1 thread alone
  db.put(host(1, 1), sig, "fwd", entry(1.0));
  db.put(host(1, 2), sig, "fwd", entry(1.2));  // 1 thread beside a busy copy: 1.2x slower
  // More entries on the co-run host must not make it the reference host.
  db.put(host(1, 2), "relu src=8x64x28x28", "fwd", entry(0.1));
  db.put(host(1, 2), "relu src=8x64x28x30", "fwd", entry(0.1));
  const HostModel m = fit_host_model(db);
  CHECK(m.host.threads == 2);
  CHECK(m.host.instances == 1);
  // Without the co-run: p = (1 - 0.6) / (1 - 1/2) = 0.8. With it: speedup 1.0 * 1.2 / 0.6 = 2, p = 1.
  REQUIRE(m.parallel_fraction.count("conv") == 1);
  CHECK(m.parallel_fraction.at("conv") == Approx(1.0));
  REQUIRE(m.corun_slowdown.count("conv") == 1);
  CHECK(m.corun_slowdown.at("conv") == Approx(1.2));

  CalibrationDb no_corun;
  no_corun.put(host(2, 1), sig, "fwd", entry(0.6));
  no_corun.put(host(1, 1), sig, "fwd", entry(1.0));
  const HostModel plain = fit_host_model(no_corun);
  CHECK(plain.parallel_fraction.at("conv") == Approx(0.8));
  CHECK(plain.corun_slowdown.empty());
}

TEST_CASE("calibrate::DeviceModel: idle neighbour cores take back the co-run slowdown", "[calibrate]") {
  using namespace dtsim::calibrate;
  HostModel m = host_model(2);
  m.parallel_fraction["conv"] = 1.0;
  m.corun_slowdown["conv"] = 1.25;
  const PassWork w{1e9, 1e3};
  const double o = op_overhead_s(test_cpu());
  WorkerPlacement alone;
  alone.threads = 1;
  alone.workers_per_node = 1;  // 1 of 4 cores busy
  WorkerPlacement full = alone;
  full.workers_per_node = 4;  // every core busy: the host's measured efficiency as is
  const double t_full = predict_pass_s(m, OpClass::CONV, w, 0.5, true, test_cpu(), full) - o;
  const double t_alone = predict_pass_s(m, OpClass::CONV, w, 0.5, true, test_cpu(), alone) - o;
  CHECK(t_full == Approx(1e9 / (64e9 * 0.5)).epsilon(1e-9));
  // Alone, none of the other 3 cores is busy: the whole slowdown comes back, 1 / 1.25.
  CHECK(t_alone == Approx(0.8 * t_full).epsilon(1e-9));
  // 2 of 4 cores busy: 1 of the 3 others, factor (1 + 0.25 / 3) / 1.25.
  WorkerPlacement half = alone;
  half.workers_per_node = 2;
  const double t_half = predict_pass_s(m, OpClass::CONV, w, 0.5, true, test_cpu(), half) - o;
  CHECK(t_half == Approx((1 + 0.25 / 3) / 1.25 * t_full).epsilon(1e-9));
  CHECK(corun_factor(1.25, 1, 1) == 1.0);
  CHECK(corun_factor(1.25, 8, 4) == Approx(1.25));  // oversubscribed: every other core busy
}

TEST_CASE("calibrate::DeviceModel: a 1-thread host with a co-run calibration charges busy neighbours",
          "[calibrate]") {
  using namespace dtsim::calibrate;
  // The validation set-up: calibrated at 1 thread alone and as 2 co-run copies on a 2-core machine.
  const auto host = [](int instances) { return test_host(1, instances, 64e9); };
  PassEntry e = conv_entry(1.0, 16e9);
  CalibrationDb db;
  const std::string sig = "conv2d src=8x64x28x28 dst=8x64x28x28 k=3x3";
  db.put(host(1), sig, "fwd", e);
  e.time_s = 1.6;
  db.put(host(2), sig, "fwd", e);
  const HostModel m = fit_host_model(db);
  CHECK(m.host.threads == 1);
  CHECK(m.corun_cores == 2);
  REQUIRE(m.corun_slowdown.count("conv") == 1);
  CHECK(m.corun_slowdown.at("conv") == Approx(1.6));
  CHECK(m.parallel_fraction.empty());  // nothing to fit at 1 thread

  Device two = test_cpu();
  two.cores = 2;
  WorkerPlacement one_rank;
  one_rank.threads = 1;
  WorkerPlacement two_ranks = one_rank;
  two_ranks.workers_per_node = 2;
  const double eff = host_efficiency(m.host, e);
  const double o = op_overhead_s(two);
  const double t1 = predict_pass_s(m, OpClass::CONV, {16e9, 1e6}, eff, true, two, one_rank) - o;
  const double t2 = predict_pass_s(m, OpClass::CONV, {16e9, 1e6}, eff, true, two, two_ranks) - o;
  CHECK(t2 == Approx(1.6 * t1).epsilon(1e-9));
}

TEST_CASE("calibrate::Profile: the calibrated machine at its calibrated threads gets its measured passes as timed",
          "[calibrate]") {
  using namespace dtsim;
  const models::Model model = conv_relu_model();
  // Every pass timed 10x faster than the host's roofline allows: the device model would clamp it.
  calibrate::CalibrationDb db;
  const auto host = test_host(1, 1, 1e6);  // a 1 MFLOP/s core: any real pass beats it
  double expected_s = 0;
  int n = 0;
  std::int64_t params = 0;
  for (const auto& layer : model.layers()) {
    if (layer.op == models::OpKind::INPUT) continue;
    params += layer.costs.params;
    for (auto pass : calibrate::passes_of(layer)) {
      auto e = conv_entry(1e-3 * ++n, 1e9);
      db.put(host, calibrate::op_signature(layer), std::string(calibrate::to_string(pass)), e);
      expected_s += e.time_s;
    }
  }
  const auto update = conv_entry(7e-3, 1e6);
  db.put(host, calibrate::update_signature(params), "fwd", update);
  expected_s += update.time_s;
  const auto path = std::filesystem::temp_directory_path() / ("dtsim_same_" + std::to_string(::getpid()) + ".json");
  db.save(path.string());
  calibrate::ProfileOptions o;
  o.db_path = path.string();
  o.threads = 1;
  Device cpu = test_cpu();
  cpu.cpu_model = "Test CPU";
  const auto same = calibrate::build_profile(model, cpu, o);
  CHECK(same.same_machine);
  CHECK(same.step_compute_s() == Approx(expected_s).epsilon(1e-12));
  CHECK(same.update_s == Approx(7e-3));
  CHECK(same.coverage == Approx(1.0));
  // Another CPU model, or other threads: the device model carries the entries (clamped at its roofline).
  cpu.cpu_model = "Other CPU";
  const auto other = calibrate::build_profile(model, cpu, o);
  CHECK_FALSE(other.same_machine);
  CHECK(other.step_compute_s() != Approx(expected_s));
  cpu.cpu_model = "Test CPU";
  o.threads = 2;
  CHECK_FALSE(calibrate::build_profile(model, cpu, o).same_machine);
  std::filesystem::remove(path);
}
