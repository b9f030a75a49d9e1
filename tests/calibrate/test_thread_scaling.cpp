// Closed-form checks of the thread scaling measured on a full node (calibrate/device_model.hpp, ThreadScaling;
// docs/calibration.md, "Thread scaling on a full node").
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "calibrate/database.hpp"
#include "calibrate/device_model.hpp"
#include "calibrate/op_signature.hpp"
#include "calibrate/profile.hpp"
#include "common/errors.hpp"
#include "platforms/device.hpp"
#include "tests/calibrate/device_fixtures.hpp"

namespace {

using dtsim::InputError;
using dtsim::calibrate::OpClass;
using dtsim::calibrate::ThreadScaling;

ThreadScaling table() {
  ThreadScaling t;
  t.threads = {1, 4, 16};
  t.backend = "libtorch";
  t.classes["conv"] = {1.0, 1.2, 1.6};
  t.classes["eltwise"] = {1.0, 0.9, 0.8};  // faster than one thread per thread: held at 1
  t.shapes["conv2d src=Nx3x8x8 dst=Nx8x8x8 k=3x3 s=1x1 p=1x1 d=1x1 g=1 bias=0|fwd"] = {1.0, 1.5, 2.5};
  return t;
}

dtsim::platforms::Device cpu16() { return dtsim::test::test_cpu(16, 160e9); }

using dtsim::test::host_model;

std::string write(const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / ("dtsim_ts_" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << text;
  return path.string();
}

// The message of the InputError that loading `text` throws ("" when none).
std::string load_error(const std::string& text) {
  const std::string path = write(text);
  try {
    ThreadScaling::load(path);
  } catch (const InputError& e) {
    std::filesystem::remove(path);
    return e.what();
  }
  std::filesystem::remove(path);
  return "";
}

}  // namespace

TEST_CASE("calibrate::ThreadScaling: the loss is linear in log2 of the threads and continues its last slope",
          "[calibrate]") {
  const ThreadScaling t = table();
  CHECK(*t.loss("", OpClass::CONV, 1) == Approx(1.0));
  CHECK(*t.loss("", OpClass::CONV, 2) == Approx(1.1));   // half way (in log2) from 1 to 4
  CHECK(*t.loss("", OpClass::CONV, 4) == Approx(1.2));
  CHECK(*t.loss("", OpClass::CONV, 8) == Approx(1.4));
  CHECK(*t.loss("", OpClass::CONV, 16) == Approx(1.6));
  CHECK(*t.loss("", OpClass::CONV, 64) == Approx(2.0));  // 0.2 per doubling beyond 16
  CHECK(*t.loss("", OpClass::CONV, 48) == Approx(1.6 + 0.2 * std::log2(3.0)));
}

TEST_CASE("calibrate::ThreadScaling: a measured shape takes its own row, others their class's, else none",
          "[calibrate]") {
  const ThreadScaling t = table();
  const std::string key = "conv2d src=Nx3x8x8 dst=Nx8x8x8 k=3x3 s=1x1 p=1x1 d=1x1 g=1 bias=0|fwd";
  CHECK(*t.loss(key, OpClass::CONV, 16) == Approx(2.5));
  CHECK(*t.loss(key + "x", OpClass::CONV, 16) == Approx(1.6));
  CHECK_FALSE(t.loss("", OpClass::FC, 16).has_value());
  CHECK(*t.loss("", OpClass::ELTWISE, 16) == Approx(1.0));  // never below 1
  CHECK_FALSE(ThreadScaling{}.loss("", OpClass::CONV, 16).has_value());
}

TEST_CASE("calibrate::ThreadScaling: a row lacking a count interpolates over the counts it has", "[calibrate]") {
  ThreadScaling t;
  t.threads = {1, 2, 4, 16};
  t.classes["conv"] = {1.0, 1.05, 1.25, 1.65};  // 2 threads from one node, 4 and 16 from another
  const std::string key = "conv2d src=Nx3x8x8 dst=Nx8x8x8 k=3x3 s=1x1 p=1x1 d=1x1 g=1 bias=0|fwd";
  t.shapes[key] = {1.0, std::nullopt, 1.5, 2.5};  // timed on the wider node only
  CHECK(*t.loss("", OpClass::CONV, 2) == Approx(1.05));
  CHECK(*t.loss("", OpClass::CONV, std::sqrt(8.0)) == Approx(1.15));  // half way (in log2) from 2 to 4
  CHECK(*t.loss("", OpClass::CONV, 8) == Approx(1.45));
  CHECK(*t.loss(key, OpClass::CONV, 2) == Approx(1.25));  // from 1 to 4, as if 2 were not listed
  CHECK(*t.loss(key, OpClass::CONV, 8) == Approx(2.0));
  CHECK(*t.loss(key, OpClass::CONV, 64) == Approx(3.5));  // 0.5 per doubling beyond 16
  // A row with one measured point says nothing of growth: its class's row stands in.
  t.shapes[key] = {1.0, std::nullopt, std::nullopt, std::nullopt};
  CHECK(*t.loss(key, OpClass::CONV, 16) == Approx(1.65));
}

TEST_CASE("calibrate::DeviceModel: beyond the host's threads a pass pays the measured loss L(n) / L(T)",
          "[calibrate]") {
  using namespace dtsim::calibrate;
  const ThreadScaling t = table();
  const HostModel m = host_model(1);
  const PassWork w{1e9, 1e3};
  WorkerPlacement place;
  place.threads = 16;
  const double overhead = op_overhead_s(cpu16(), 16);
  // 1-thread host at efficiency 0.5: F / (64e9 x 0.5) x L(16) / 16.
  const double ideal = predict_pass_s(m, OpClass::CONV, w, 0.5, true, cpu16(), place);
  const double scaled = predict_pass_s(m, OpClass::CONV, w, 0.5, true, cpu16(), place, &t);
  CHECK(ideal - overhead == Approx(1e9 / (64e9 * 0.5) / 16).epsilon(1e-9));
  CHECK(scaled - overhead == Approx(1e9 / (64e9 * 0.5) * 1.6 / 16).epsilon(1e-9));
  // A 2-thread host: its own time at 2 threads, times L(16) / 16 against L(2) / 2.
  const HostModel m2 = host_model(2);
  const double from2 = predict_pass_s(m2, OpClass::CONV, w, 0.5, true, cpu16(), place, &t);
  CHECK(from2 - overhead == Approx(1e9 / (64e9 * 0.5) * (1.6 / 16) / (1.1 / 2) / 2).epsilon(1e-9));
  // At or below the host's threads the host's own fit holds: the table changes nothing.
  place.threads = 2;
  CHECK(predict_pass_s(m2, OpClass::CONV, w, 0.5, true, cpu16(), place, &t) ==
        Approx(predict_pass_s(m2, OpClass::CONV, w, 0.5, true, cpu16(), place)));
  // A memory-bound pass: its bandwidth share already holds 1/n; it pays L(n) / L(T).
  place.threads = 16;
  const PassWork mem{1e3, 1e9};
  const double bw_ideal = predict_pass_s(m, OpClass::CONV, mem, 0.5, false, cpu16(), place) - overhead;
  const double bw_scaled = predict_pass_s(m, OpClass::CONV, mem, 0.5, false, cpu16(), place, &t) - overhead;
  CHECK(bw_scaled == Approx(bw_ideal * 1.6).epsilon(1e-9));
}

TEST_CASE("calibrate::ThreadScaling: a malformed table is refused naming the file and the field", "[calibrate]") {
  const std::string ok_rows = R"("classes": {"conv": [1, 1.2, 1.6]}, "shapes": {})";
  CHECK(load_error(R"({"backend": "libtorch", "threads": [1, 4, 16], )" + ok_rows + "}").empty());
  CHECK_THAT(load_error(R"({"backend": "libtorch", "threads": [2, 4, 16], )" + ok_rows + "}"),
             Catch::Contains("dtsim_ts_") && Catch::Contains("'threads' must start at 1"));
  CHECK_THAT(load_error(R"({"backend": "libtorch", "threads": [1, 16, 4], )" + ok_rows + "}"),
             Catch::Contains("ascending"));
  CHECK_THAT(load_error(R"({"backend": "libtorch", "threads": [1, 99999999999], "classes": {}, "shapes": {}})"),
             Catch::Contains("from 1 to 65536"));
  CHECK_THAT(load_error(R"({"backend": "libtorch", "threads": [1, 4], )" + ok_rows + "}"),
             Catch::Contains("classes['conv'] must list one loss per thread count (2)"));
  CHECK_THAT(load_error(R"({"backend": "libtorch", "threads": [1, 4, 16], "classes": {"conv": [1, 0, 2]}, "shapes": {}})"),
             Catch::Contains("classes['conv'] must hold numbers > 0"));
  CHECK(load_error(R"({"backend": "libtorch", "threads": [1, 4, 16], "classes": {"conv": [1, null, 2]}, "shapes": {}})")
            .empty());
  CHECK_THAT(load_error(R"({"backend": "libtorch", "threads": [1, 4, 16], "classes": {"conv": [null, 1.2, 2]}, "shapes": {}})"),
             Catch::Contains("classes['conv'] must hold the loss at 1 thread"));
  CHECK_THAT(load_error(R"({"backend": "libtorch", "threads": [1, 4], "classes": {}, "shapes": {"s|fwd": [1, "x"]}})"),
             Catch::Contains("shapes['s|fwd'] must hold numbers > 0 (or null where not measured)"));
  CHECK_THAT(load_error(R"({"threads": [1, 4, 16], )" + ok_rows + "}"), Catch::Contains("field 'backend'"));
  CHECK_THAT(load_error(R"({"backend": "libtorch", "threads": [1, 4, 16], "classes": {}})"),
             Catch::Contains("field 'shapes' must be a map"));
  CHECK_THAT(load_error("{\"threads\": [1, "), Catch::Contains("dtsim_ts_"));
}

TEST_CASE("calibrate::ThreadScaling: the shipped table is PyTorch's, measured on 2 and 16 cores, and loses with "
          "threads", "[calibrate]") {
  const ThreadScaling& t = ThreadScaling::builtin();  // ctest sets DTSIM_DATA_DIR to the source tree
  REQUIRE_FALSE(t.empty());
  CHECK(t.backend == "libtorch");
  CHECK(t.threads == std::vector<int>{1, 2, 4, 16});
  const double l2 = *t.loss("", OpClass::CONV, 2), l4 = *t.loss("", OpClass::CONV, 4);
  const double l16 = *t.loss("", OpClass::CONV, 16);
  CHECK(l2 > 1.0);
  CHECK(l4 > l2);
  CHECK(l16 > l4);
  for (const auto& [name, row] : t.classes)
    for (const auto& l : row) CHECK(l.has_value());  // every class is measured at every count
  CHECK(t.shapes.size() > 100);
  for (const auto& [key, row] : t.shapes) {
    CHECK(key.find("src=N") != std::string::npos);
    CHECK(key.find('|') != std::string::npos);
  }
}

TEST_CASE("calibrate::Profile: the measured thread scaling applies to the framework whose ops it measured",
          "[calibrate]") {
  using namespace dtsim;
  models::Model model("tiny", models::Shape{32, 64, 28, 28});
  models::LayerParams conv;
  conv.out_channels = 64;
  conv.kernel_h = conv.kernel_w = 3;
  conv.pad_h = conv.pad_w = 1;
  model.add("conv1", models::OpKind::CONV2D, conv, {"data"});
  const auto path = std::filesystem::temp_directory_path() / ("dtsim_ts_db_" + std::to_string(::getpid()) + ".json");
  calibrate::CalibrationDb().save(path.string());  // no host: op-class fallbacks, the same for both backends
  calibrate::ProfileOptions o;
  o.db_path = path.string();
  o.threads = 16;
  o.backend = "onednn";
  const auto onednn = calibrate::build_profile(model, cpu16(), o);
  o.backend = "libtorch";
  const auto torch = calibrate::build_profile(model, cpu16(), o);
  const double l16 = *calibrate::ThreadScaling::builtin().loss("", calibrate::OpClass::CONV, 16);
  const double overhead = calibrate::op_overhead_s(cpu16(), 16);
  REQUIRE(onednn.layers.size() == 1);
  CHECK(torch.layers[0].fwd_s - overhead == Approx((onednn.layers[0].fwd_s - overhead) * l16).epsilon(1e-6));
  // One thread: no loss to pay.
  o.threads = 1;
  const auto torch1 = calibrate::build_profile(model, cpu16(), o);
  o.backend = "onednn";
  CHECK(torch1.layers[0].fwd_s == Approx(calibrate::build_profile(model, cpu16(), o).layers[0].fwd_s));
  std::filesystem::remove(path);
}
