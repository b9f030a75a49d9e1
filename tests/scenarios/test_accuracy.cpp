// Accuracy report: the published rows map to the right scenarios (strategy, PS count, data, anchor),
// MAPE leaves anchor and failed rows out, and the CLI prints its table in the documented format.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "common/errors.hpp"
#include "common/paths.hpp"
#include "scenarios/accuracy.hpp"
#include "tests/support/run_cli.hpp"

using namespace dtsim::scenarios;
namespace fs = std::filesystem;

namespace {
AccuracyOptions reference_options() {
  AccuracyOptions o;
  o.measurements = (dtsim::reference_dir() / "open-measurements.yaml").string();  // the shipped copy
  return o;
}
}  // namespace

TEST_CASE("scenarios::Accuracy: Piz Daint and GTX 1080 Ti rows map to their scenarios") {
  const auto o = reference_options();
  REQUIRE(fs::exists(o.measurements));
  const auto rows = load_accuracy_rows(o);
  REQUIRE(rows.size() == 22);  // 16 Piz Daint rows + 6 GTX 1080 Ti rows; facts are not rows
  const AccuracyRow& r4 = rows[4];  // [4, 3, distributed_replicated, false, 523.38]
  CHECK(r4.study == "piz_daint_inception_v3");
  CHECK(r4.strategy == "ps-replicated");
  CHECK(r4.ps == 3);
  CHECK(r4.variant == "synthetic");
  CHECK(r4.scenario["platform"].as<std::string>() == "piz-daint");
  CHECK(r4.scenario["anchor"].as<double>() == Approx(138.23));
  const AccuracyRow& r7 = rows[7];  // [8, 2, parameter_server, true, 911.84]
  CHECK(r7.strategy == "ps");
  CHECK(r7.scenario["data"].as<std::string>() == "real");
  CHECK(r7.scenario["anchor"].as<double>() == Approx(137.03));
  CHECK(rows[0].anchor);
  CHECK_FALSE(rows[2].anchor);
  const AccuracyRow& g = rows[21];  // [64, 7080]
  CHECK(g.study == "gtx1080ti_mxnet_resnet50");
  CHECK(g.ps == 16);  // one server per 4-GPU node
  CHECK(g.scenario["anchor"].as<double>() == Approx(182));
  AccuracyOptions un = o;
  un.anchored = false;
  CHECK_FALSE(load_accuracy_rows(un)[2].scenario["anchor"]);
}

TEST_CASE("scenarios::Accuracy: MAPE skips anchor and failed rows") {
  std::vector<AccuracyRow> rows(4);
  for (auto& r : rows) r.study = "s", r.variant = "v";
  rows[0] = {"s", "v", 1, 1, "ps", "", 100, 100, true, "", {}};
  rows[1] = {"s", "v", 2, 1, "ps", "", 200, 220, false, "", {}};   // +10%
  rows[2] = {"s", "v", 4, 1, "ps", "", 400, 300, false, "", {}};   // -25%
  rows[3] = {"s", "v", 8, 1, "ps", "", 800, 0, false, "failed", {}};
  const auto m = summarize_accuracy(rows);
  REQUIRE(m.size() == 1);
  CHECK(m[0].rows == 2);
  CHECK(m[0].mape_pct == Approx(17.5));
  CHECK(m[0].max_abs_error_pct == Approx(25));
}

TEST_CASE("scenarios::Accuracy: bad measurement files are input errors naming the file") {
  const fs::path p = fs::temp_directory_path() / ("dtsim_acc_" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(p) << "x:\n  system: piz-daint\n  model: inception_v3\n  batch_per_worker: 64\n  rows: [[1, 1]]\n";
  AccuracyOptions o;
  o.measurements = p.string();
  CHECK_THROWS_WITH(load_accuracy_rows(o), Catch::Contains(p.string()) && Catch::Contains("row must be"));
  o.study = "nope";
  CHECK_THROWS_AS(load_accuracy_rows(o), dtsim::InputError);
  fs::remove(p);
}

TEST_CASE("scenarios::AccuracyCli: one row prints measured, predicted and error, then MAPE") {
  const fs::path out = fs::temp_directory_path() / ("dtsim_acc_cli_" + std::to_string(::getpid()));
  const auto r = dtsim::test::run_cli({"accuracy", "--study", "gtx1080ti_mxnet_resnet50", "--max-rows", "2", "--no-plot",
                                       "--format", "csv", "--out", out.string()});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.rfind("study,variant,workers,ps,strategy,measured_img_s,predicted_img_s,error_pct,note\n", 0) == 0);
  CHECK(r.out.find("gtx1080ti_mxnet_resnet50,real,4,1,ps-replicated,705.00,") != std::string::npos);
  CHECK(r.out.find("study,variant,rows,mape_pct,max_abs_error_pct") != std::string::npos);
  CHECK(fs::exists(out / "accuracy.csv"));
  fs::remove_all(out);
}
