// Tests of the allocator regimes (calibrate/allocator.hpp): the table, the database key of a libtorch host
// timed in a regime, and the profile reading the calibration of the regime asked for.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "calibrate/allocator.hpp"
#include "calibrate/calibrate.hpp"
#include "calibrate/database.hpp"
#include "calibrate/device_model.hpp"
#include "calibrate/op_signature.hpp"
#include "calibrate/profile.hpp"
#include "common/errors.hpp"
#include "models/zoo.hpp"
#include "platforms/device.hpp"

namespace {

using namespace dtsim;
using namespace dtsim::calibrate;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("dtsim_alloc_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

HostInfo torch_host(const std::string& allocator) {
  HostInfo h = current_host("libtorch", 1);
  h.library_version = "libtorch 1.13.1";
  h.allocator = allocator;
  return h;
}

PassEntry entry(double time_s, double flops, const std::string& op) {
  PassEntry e;
  e.time_s = time_s;
  e.blocks_kept = 3;
  e.flops = flops;
  e.bytes = 1e6;
  e.op = op;
  return e;
}

// Every pass of `model` (and its update) timed at `scale` x its FLOPs / 1e10 seconds under `host`.
void put_model(CalibrationDb& db, const HostInfo& host, const models::Model& model, double scale) {
  for (const auto& layer : model.layers())
    for (const Pass pass : passes_of(layer)) {
      const double flops = std::max(1.0, static_cast<double>(layer.costs.fwd_flops));
      db.put(host, op_signature(layer), std::string(to_string(pass)),
             entry(scale * flops / 1e10, flops, std::string(models::op_name(layer))));
    }
}

}  // namespace

TEST_CASE("calibrate::Allocator: the default is glibc, first in the table, and names are checked",
          "[calibrate]") {
  REQUIRE(!allocator_regimes().empty());
  CHECK(allocator_regimes().front().name == DEFAULT_ALLOCATOR);
  CHECK(allocator_by_name("glibc").env.empty());  // a plain script: nothing set
  const AllocatorRegime& held = allocator_by_name("glibc-held");
  REQUIRE(held.env.size() == 2);
  CHECK(held.env[0] == std::pair<std::string, std::string>{"MALLOC_MMAP_THRESHOLD_", "33554432"});
  CHECK(held.env[1] == std::pair<std::string, std::string>{"MALLOC_TRIM_THRESHOLD_", "67108864"});
  for (const auto& r : allocator_regimes()) {
    INFO(r.name);
    CHECK(allocator_help().find(r.name + ": ") != std::string::npos);
    CHECK(r.preload.empty() == r.package.empty());  // a preloaded library names the package shipping it
    if (!r.preload.empty()) {
      REQUIRE(r.env.size() == 1);
      CHECK(r.env[0].first == "LD_PRELOAD");
      CHECK(r.env[0].second == r.preload);
    }
  }
  CHECK(allocator_or_null("ptmalloc") == nullptr);
  try {
    (void)allocator_by_name("ptmalloc", "--allocator");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()) ==
          "--allocator: unknown allocator 'ptmalloc'; expected one of: " + allocator_names());
  }
}

TEST_CASE(
    "calibrate::Allocator: the glibc rows are always loaded, a preloaded one only when it serves malloc",
    "[calibrate]") {
  CHECK(allocator_loaded(allocator_by_name("glibc")));
  CHECK(allocator_loaded(allocator_by_name("glibc-held")));
  CHECK_FALSE(allocator_loaded(allocator_by_name("jemalloc")));  // this test is not run under LD_PRELOAD
}

TEST_CASE("calibrate::CalibrationDb: a libtorch host's heap regime is in its key and round-trips",
          "[calibrate]") {
  const std::string path = temp_path("keys.json");
  std::filesystem::remove(path);
  CalibrationDb db;
  db.put(torch_host("glibc"), "relu src=1x1x1x1", "fwd", entry(2e-3, 1, "relu"));
  db.put(torch_host("glibc-held"), "relu src=1x1x1x1", "fwd", entry(1e-3, 1, "relu"));
  CHECK(torch_host("glibc").key().ends_with("|allocator=glibc"));
  CHECK(torch_host("glibc").key() != torch_host("glibc-held").key());
  HostInfo onednn = current_host("onednn", 1);
  CHECK(onednn.allocator.empty());
  CHECK(onednn.key().find("allocator") == std::string::npos);  // oneDNN keys are as before
  db.save(path);
  const CalibrationDb back = CalibrationDb::load(path);
  REQUIRE(back.hosts().size() == 2);
  CHECK(back.find(torch_host("glibc").key(), "relu src=1x1x1x1", "fwd")->time_s == 2e-3);
  CHECK(back.find(torch_host("glibc-held").key(), "relu src=1x1x1x1", "fwd")->time_s == 1e-3);

  // A libtorch host written without the field was timed in a held heap; an unknown regime is refused.
  nlohmann::json doc;
  std::ifstream(path) >> doc;
  doc.erase("checksum");
  for (auto& h : doc["hosts"]) h.erase("allocator");
  doc["hosts"].erase(1);
  std::ofstream(path) << doc.dump();
  const CalibrationDb legacy = CalibrationDb::load(path);
  REQUIRE(legacy.hosts().size() == 1);
  CHECK(legacy.hosts()[0].allocator == "glibc-held");
  doc["hosts"][0]["allocator"] = "ptmalloc";
  std::ofstream(path) << doc.dump();
  try {
    (void)CalibrationDb::load(path);
    FAIL("no error");
  } catch (const InputError& e) {
    const std::string what = e.what();
    CHECK(what.find(path) != std::string::npos);
    CHECK(what.find("$.hosts[0].allocator") != std::string::npos);
    CHECK(what.find("expected one of: glibc, glibc-held") != std::string::npos);
  }
  std::filesystem::remove(path);
}

TEST_CASE(
    "calibrate::Profile: a libtorch profile takes its times from the calibration of the regime asked for",
    "[calibrate]") {
  const std::string path = temp_path("regimes.json");
  std::filesystem::remove(path);
  models::ModelOptions mo;
  mo.batch = 4;
  const models::Model model = models::build_zoo_model("lenet5", mo);
  // The same machine timed every pass twice as long in glibc's default regime as in the held one.
  CalibrationDb db;
  put_model(db, torch_host("glibc"), model, 2.0);
  put_model(db, torch_host("glibc-held"), model, 1.0);
  db.save(path);
  CHECK(fit_host_model(db, "libtorch", "glibc").host.allocator == "glibc");
  CHECK(fit_host_model(db, "libtorch", "glibc-held").host.allocator == "glibc-held");
  CHECK_FALSE(fit_host_model(db, "libtorch", "tcmalloc").has_host());
  CHECK_FALSE(fit_host_model(db, "onednn").has_host());

  ProfileOptions po;
  po.threads = 1;
  po.db_path = path;
  po.backend = "libtorch";
  const auto& host = platforms::DeviceCatalog::builtin().by_name("host");
  const ComputeProfile plain = build_profile(model, host, po);  // default: glibc
  po.allocator = "glibc-held";
  const ComputeProfile held = build_profile(model, host, po);
  CHECK(plain.calibration_allocator == "glibc");
  CHECK(held.calibration_allocator == "glibc-held");
  REQUIRE(plain.same_machine);  // measured passes used as timed
  CHECK(plain.fwd_s() == Approx(2 * held.fwd_s()).epsilon(1e-9));
  CHECK(plain.bwd_s() == Approx(2 * held.bwd_s()).epsilon(1e-9));
  // No libtorch calibration in the regime asked: oneDNN's (none here either), said in the profile.
  po.allocator = "tcmalloc";
  const ComputeProfile none = build_profile(model, host, po);
  CHECK(none.calibration_backend == "onednn");
  CHECK(none.calibration_allocator.empty());
  po.allocator = "ptmalloc";
  CHECK_THROWS_AS(build_profile(model, host, po), InputError);
  std::filesystem::remove(path);
}
