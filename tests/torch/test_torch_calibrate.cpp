// Tests of the libtorch calibrator (calibrate/torch/runner.cpp, `dtsim calibrate --backend libtorch`):
// its entries sit beside their oneDNN twins in one database, each under a host of its backend, and the
// pytorch-ddp profile reads them.
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <filesystem>

#include "calibrate/calibrate.hpp"
#include "calibrate/database.hpp"
#include "calibrate/op_signature.hpp"
#include "calibrate/profile.hpp"
#include "calibrate/torch/plugin.hpp"
#include "common/errors.hpp"
#include "models/zoo.hpp"
#include "platforms/device.hpp"
#include "tests/support/run_cli.hpp"

namespace {

using namespace dtsim;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("dtsim_torch_" + std::to_string(::getpid()) + "_" + name)).string();
}

models::Model lenet(int batch) {
  models::ModelOptions o;
  o.batch = batch;
  return models::build_zoo_model("lenet5", o);
}

// Fast, unchecked timing: these tests are about what is recorded, not about the figures.
calibrate::CalibrateOptions quick(const std::string& backend, const std::string& db) {
  calibrate::CalibrateOptions o;
  o.backend = backend;
  o.threads = 1;
  o.db_path = db;
  o.timer.check_disturbance = false;
  o.timer.blocks = 1;
  o.timer.max_blocks = 1;
  o.timer.min_block_s = 0.001;
  return o;
}

const calibrate::HostInfo* host_of(const calibrate::CalibrationDb& db, const std::string& backend) {
  for (const auto& h : db.hosts())
    if (h.backend == backend) return db.host_or_null(h.key());
  return nullptr;
}

}  // namespace

TEST_CASE("torch::Calibrate: a libtorch-timed layer and its oneDNN-timed twin are both in the database", "[torch]") {
  const std::string db_path = temp_path("twins.json");
  std::filesystem::remove(db_path);
  const models::Model m = lenet(4);
  const auto torch_summary = calibrate::calibrate_model_libtorch(m, quick("libtorch", db_path));
  const auto onednn_summary = calibrate::calibrate_model(m, quick("onednn", db_path));
  CHECK(torch_summary.items == onednn_summary.items);  // same layers, same passes, same update
  CHECK(torch_summary.timed == torch_summary.items);

  const auto db = calibrate::CalibrationDb::load(db_path);
  const calibrate::HostInfo* torch_host = host_of(db, "libtorch");
  const calibrate::HostInfo* onednn_host = host_of(db, "onednn");
  REQUIRE(torch_host != nullptr);
  REQUIRE(onednn_host != nullptr);
  CHECK(torch_host->key().rfind("libtorch|", 0) == 0);
  CHECK(torch_host->library_version.rfind("libtorch 1.", 0) == 0);
  const models::Layer& conv2 = m.by_name("conv2");
  for (const char* pass : {"fwd", "bwd_data", "bwd_weights"}) {
    INFO(pass);
    const auto* t = db.find(torch_host->key(), calibrate::op_signature(conv2), pass);
    const auto* o = db.find(onednn_host->key(), calibrate::op_signature(conv2), pass);
    REQUIRE(t != nullptr);
    REQUIRE(o != nullptr);
    CHECK(t->impl == "nn.Conv2d");
    CHECK(o->impl != t->impl);
    CHECK(t->time_s > 0);
    CHECK(t->flops == o->flops);  // the same work, timed two ways
  }
  // The first conv has no input gradient in either backend.
  CHECK(db.find(torch_host->key(), calibrate::op_signature(m.by_name("conv1")), "bwd_data") == nullptr);
  const std::int64_t params = m.totals().params;
  const auto* update = db.find(torch_host->key(), calibrate::update_signature(params), "fwd");
  REQUIRE(update != nullptr);
  CHECK(update->op == "sgd_momentum");

  // The pytorch-ddp profile's backend reads the libtorch host; the default reads oneDNN's.
  const auto& host = platforms::DeviceCatalog::builtin().by_name("host");
  calibrate::ProfileOptions po;
  po.threads = 1;
  po.db_path = db_path;
  const auto onednn_profile = calibrate::build_profile(m, host, po);
  po.backend = "libtorch";
  const auto torch_profile = calibrate::build_profile(m, host, po);
  CHECK(onednn_profile.calibration_backend == "onednn");
  CHECK(torch_profile.calibration_backend == "libtorch");
  CHECK(torch_profile.coverage == Approx(1.0));
  CHECK(torch_profile.step_compute_s() != onednn_profile.step_compute_s());
  std::filesystem::remove(db_path);
}

TEST_CASE("torch::Calibrate: a database without libtorch entries falls back to oneDNN and says so", "[torch]") {
  const std::string db_path = temp_path("onednn_only.json");
  std::filesystem::remove(db_path);
  const models::Model m = lenet(2);
  calibrate::calibrate_model(m, quick("onednn", db_path));
  calibrate::ProfileOptions po;
  po.threads = 1;
  po.db_path = db_path;
  po.backend = "libtorch";
  const auto profile = calibrate::build_profile(m, platforms::DeviceCatalog::builtin().by_name("host"), po);
  CHECK(profile.calibration_backend == "onednn");
  po.backend = "tensorflow";
  CHECK_THROWS_AS(calibrate::build_profile(m, platforms::DeviceCatalog::builtin().by_name("host"), po), InputError);
  std::filesystem::remove(db_path);
}

namespace {

// Minor page faults of this process so far (first touches of fresh pages).
long minor_faults() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return r.ru_minflt;
}

}  // namespace

namespace {

// Faults of two rounds of malloc, touch and free of a 24 MiB block, right after a calibration.
std::array<long, 2> block_faults() {
  constexpr std::size_t BLOCK_B = std::size_t{24} << 20;
  constexpr std::size_t PAGE_B = 4096;
  std::array<long, 2> out{};
  for (int round = 0; round < 2; ++round) {
    const long before = minor_faults();
    auto* p = static_cast<char*>(std::malloc(BLOCK_B));
    REQUIRE(p != nullptr);
    volatile char* touch = p;  // volatile: the compiler may not drop the block or the writes
    for (std::size_t i = 0; i < BLOCK_B; i += PAGE_B) touch[i] = static_cast<char>(round + 1);
    out[static_cast<std::size_t>(round)] = minor_faults() - before;
    std::free(p);
  }
  return out;
}

}  // namespace

// glibc's thresholds are per process and a held heap cannot be let go: this case comes before the held one
// (ctest runs each case in a process of its own anyway).
TEST_CASE("torch::Calibrate: in the default glibc regime the heap keeps glibc's dynamic thresholds", "[torch]") {
  const std::string db_path = temp_path("heap_glibc.json");
  std::filesystem::remove(db_path);
  (void)calibrate::calibrate_model_libtorch(lenet(2), quick("libtorch", db_path));
  const auto db = calibrate::CalibrationDb::load(db_path);
  const calibrate::HostInfo* host = host_of(db, "libtorch");
  REQUIRE(host != nullptr);
  CHECK(host->allocator == "glibc");
  CHECK(host->key().ends_with("|allocator=glibc"));
  CHECK(host->cache_state.find("heap: glibc after one untimed step") != std::string::npos);
  // Nothing this large was freed: the first block is mapped afresh (6,144 pages), and once it is freed the
  // threshold rises above it, so the second comes from a heap that must grow by most of the block (the held
  // regime: under 64 faults).
  const auto faults = block_faults();
  CHECK(faults[0] > 6000);
  CHECK(faults[1] > 3072);
  std::filesystem::remove(db_path);
}

TEST_CASE("torch::Calibrate: in the glibc-held regime a freed 24 MiB block is reused without page faults",
          "[torch]") {
  const std::string db_path = temp_path("heap.json");
  std::filesystem::remove(db_path);
  calibrate::CalibrateOptions o = quick("libtorch", db_path);
  o.allocator = "glibc-held";
  (void)calibrate::calibrate_model_libtorch(lenet(2), o);
  const auto db = calibrate::CalibrationDb::load(db_path);
  REQUIRE(host_of(db, "libtorch") != nullptr);
  CHECK(host_of(db, "libtorch")->allocator == "glibc-held");
  // Held at glibc's 32 MiB ceiling: the first block may grow the heap; the second reuses it.
  CHECK(block_faults()[1] < 64);
  std::filesystem::remove(db_path);
}

TEST_CASE("torch::Cli: calibrate --backend libtorch loads the module and records libtorch entries", "[torch]") {
  const std::string db_path = temp_path("cli.json");
  std::filesystem::remove(db_path);
  const auto r = test::run_cli({"calibrate", "--model", "lenet5", "--batch", "2", "--threads", "1", "--backend",
                                "libtorch", "--db", db_path, "--quiet"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("on libtorch|") != std::string::npos);
  const auto db = calibrate::CalibrationDb::load(db_path);
  REQUIRE(host_of(db, "libtorch") != nullptr);
  CHECK(db.entries(host_of(db, "libtorch")->key()).size() > 0);
  const auto glibc_onednn = test::run_cli(
      {"calibrate", "--model", "lenet5", "--backend", "onednn", "--allocator", "glibc-held", "--db", db_path});
  CHECK(glibc_onednn.exit_code == 2);
  CHECK(glibc_onednn.err.find("--allocator: applies to --backend libtorch") != std::string::npos);
  const auto unknown = test::run_cli(
      {"calibrate", "--model", "lenet5", "--backend", "libtorch", "--allocator", "hoard", "--db", db_path});
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.err.find("--allocator: unknown allocator 'hoard'; expected one of: glibc, glibc-held") !=
        std::string::npos);
  const auto bad = test::run_cli({"calibrate", "--model", "lenet5", "--backend", "tensorflow", "--db", db_path});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("'onednn', 'libtorch' or 'cudnn'") != std::string::npos);
  std::filesystem::remove(db_path);
}
