// Tests of the calibration database (calibrate/database.hpp): round trip, strict loading, atomic save.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

#include "calibrate/database.hpp"
#include "common/errors.hpp"

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("dtsim_calib_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

dtsim::calibrate::HostInfo test_host(int threads) {
  dtsim::calibrate::HostInfo h;
  h.device_model = "Test CPU";
  h.isa = "avx512_core";
  h.library_version = "oneDNN 2.6.3";
  h.threads = threads;
  h.cache_state = "tensors flushed";
  h.core_peak_flops = 1e11;
  h.mem_bandwidth_Bps = 1e10;
  return h;
}

}  // namespace

TEST_CASE("calibrate::CalibrationDb: save then load reproduces every field", "[calibrate]") {
  using namespace dtsim::calibrate;
  const std::string path = temp_path("roundtrip.json");
  CalibrationDb db;
  PassEntry e;
  e.time_s = 1.25e-3;
  e.spread = 0.02;
  e.blocks_kept = 3;
  e.blocks_rejected = 1;
  e.flops = 2e9;
  e.bytes = 3e6;
  e.impl = "jit:avx512_core";
  e.op = "conv2d";
  db.put(test_host(2), "conv2d src=1x1x1x1", "fwd", e);
  PassEntry d;
  d.status = EntryStatus::DISTURBED;
  d.op = "relu";
  db.put(test_host(2), "relu src=1x1x1x1", "fwd", d);
  db.put(test_host(1), "conv2d src=1x1x1x1", "bwd_data", e);
  db.save(path);

  const CalibrationDb back = CalibrationDb::load(path);
  REQUIRE(back.size() == 3);
  REQUIRE(back.hosts().size() == 2);
  const PassEntry* got = back.find(test_host(2).key(), "conv2d src=1x1x1x1", "fwd");
  REQUIRE(got);
  CHECK(got->time_s == e.time_s);
  CHECK(got->spread == e.spread);
  CHECK(got->blocks_kept == 3);
  CHECK(got->blocks_rejected == 1);
  CHECK(got->flops == e.flops);
  CHECK(got->bytes == e.bytes);
  CHECK(got->impl == e.impl);
  CHECK(got->op == "conv2d");
  const PassEntry* dist = back.find(test_host(2).key(), "relu src=1x1x1x1", "fwd");
  REQUIRE(dist);
  CHECK(dist->status == EntryStatus::DISTURBED);
  CHECK(back.find(test_host(2).key(), "conv2d src=1x1x1x1", "bwd_data") == nullptr);
  const HostInfo* h = back.host_or_null(test_host(1).key());
  REQUIRE(h);
  CHECK(h->core_peak_flops == 1e11);
  CHECK(h->mem_bandwidth_Bps == 1e10);
  CHECK(h->cache_state == "tensors flushed");
  // No temporary file is left behind by the atomic save.
  for (const auto& f : std::filesystem::directory_iterator(std::filesystem::temp_directory_path()))
    CHECK(f.path().string().find(path + ".tmp") == std::string::npos);
  std::remove(path.c_str());
}

TEST_CASE("calibrate::CalibrationDb: a missing file is an empty database", "[calibrate]") {
  const auto db = dtsim::calibrate::CalibrationDb::load(temp_path("does_not_exist.json"));
  CHECK(db.size() == 0);
  CHECK(db.hosts().empty());
}

TEST_CASE("calibrate::CalibrationDb: a corrupt file is an InputError naming the file", "[calibrate]") {
  const std::string path = temp_path("corrupt.json");
  const std::vector<std::string> bad = {
      "{not json",
      R"({"format": "something-else", "version": 2, "hosts": []})",
      R"({"format": "dtsim-calibration", "version": 2, "hosts": [{"backend": "onednn"}]})",
      R"({"format": "dtsim-calibration", "version": 2, "hosts": [{"backend": "onednn", "device_model": "x",
          "isa": "y", "library_version": "z", "threads": 2, "cache_state": "c", "core_peak_flops": 1,
          "mem_bandwidth_Bps": 1,
          "entries": {"s": {"fwd": {"status": "measured", "time_s": -1, "spread": 0, "blocks_kept": 1,
          "blocks_rejected": 0, "flops": 1, "bytes": 1, "impl": "", "op": "relu"}}}}]})",
  };
  for (const auto& text : bad) {
    {
      std::ofstream out(path);
      out << text;
    }
    try {
      dtsim::calibrate::CalibrationDb::load(path);
      FAIL("expected an InputError for: " << text);
    } catch (const dtsim::InputError& e) {
      CHECK(std::string(e.what()).find(path) != std::string::npos);
    }
    CHECK(read_all(path) == text);  // untouched
  }
  std::remove(path.c_str());
}

TEST_CASE("calibrate::CalibrationDb: a version 1 (warm-cache) database is refused with the reason", "[calibrate]") {
  const std::string path = temp_path("version1.json");
  const std::string text = R"({"format": "dtsim-calibration", "version": 1, "hosts": []})";
  {
    std::ofstream out(path);
    out << text;
  }
  try {
    dtsim::calibrate::CalibrationDb::load(path);
    FAIL("expected an InputError for a version 1 database");
  } catch (const dtsim::InputError& e) {
    const std::string what = e.what();
    CHECK(what.find(path) != std::string::npos);
    CHECK(what.find("$.version") != std::string::npos);
    CHECK(what.find("warm caches") != std::string::npos);
  }
  CHECK(read_all(path) == text);
  std::remove(path.c_str());
}

namespace {
dtsim::calibrate::PassEntry timed(double time_s) {
  dtsim::calibrate::PassEntry e;
  e.time_s = time_s;
  e.blocks_kept = 3;
  e.flops = 1e9;
  e.bytes = 1e6;
  e.impl = "jit:avx512_core";
  e.op = "conv2d";
  return e;
}
void remove_db(const std::string& path) {
  std::remove(path.c_str());
  std::remove((path + ".lock").c_str());
}
}  // namespace

TEST_CASE("calibrate::CalibrationDb: two processes saving one database keep both runs' entries", "[calibrate]") {
  using namespace dtsim::calibrate;
  const std::string path = temp_path("concurrent.json");
  remove_db(path);
  constexpr int ENTRIES = 40;
  // Each process loads once and saves after every entry, as `dtsim calibrate` does after each window.
  auto run = [&](const std::string& tag) {
    CalibrationDb db = CalibrationDb::load(path);
    for (int i = 0; i < ENTRIES; ++i) {
      db.put(test_host(2), tag + " sig " + std::to_string(i), "fwd", timed(1e-3 * (i + 1)));
      db.save(path);
    }
  };
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    try {
      run("child");
    } catch (...) {
      ::_exit(1);
    }
    ::_exit(0);
  }
  run("parent");
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  const CalibrationDb back = CalibrationDb::load(path);
  CHECK(back.size() == 2 * ENTRIES);
  for (const char* tag : {"child", "parent"})
    for (int i = 0; i < ENTRIES; ++i)
      CHECK(back.find(test_host(2).key(), std::string(tag) + " sig " + std::to_string(i), "fwd") != nullptr);
  remove_db(path);
}

TEST_CASE("calibrate::CalibrationDb: a hand edit that keeps valid JSON fails the checksum", "[calibrate]") {
  using namespace dtsim::calibrate;
  const std::string path = temp_path("edited.json");
  remove_db(path);
  CalibrationDb db;
  db.put(test_host(2), "conv2d src=1x1x1x1", "fwd", timed(0.00125));
  db.save(path);
  std::string text = read_all(path);
  REQUIRE(text.find("\"checksum\": \"fnv1a64:") != std::string::npos);
  REQUIRE(CalibrationDb::load(path).size() == 1);
  const auto at = text.find("0.00125");
  REQUIRE(at != std::string::npos);
  text.replace(at, 7, "0.00025");
  std::ofstream(path) << text;
  try {
    CalibrationDb::load(path);
    FAIL("expected an InputError for an edited database");
  } catch (const dtsim::InputError& e) {
    const std::string what = e.what();
    CHECK(what.find(path) != std::string::npos);
    CHECK(what.find("checksum does not match") != std::string::npos);
  }
  CHECK(read_all(path) == text);  // untouched
  // Without the checksum field (a file written before checksums) it loads.
  const auto sum = text.find("\n \"checksum\": ");  // first key: keys are written sorted
  REQUIRE(sum != std::string::npos);
  text.erase(sum, text.find('\n', sum + 1) - sum);
  std::ofstream(path) << text;
  CHECK(CalibrationDb::load(path).size() == 1);
  remove_db(path);
}

TEST_CASE("calibrate::CalibrationDb: a number no double holds is an InputError naming the file", "[calibrate]") {
  const std::string path = temp_path("huge.json");
  std::ofstream(path) << R"({"format": "dtsim-calibration", "version": 2, "hosts": [], "x": 1e309})";
  try {
    dtsim::calibrate::CalibrationDb::load(path);
    FAIL("expected an InputError");
  } catch (const dtsim::InputError& e) {
    CHECK(std::string(e.what()).find(path) != std::string::npos);
    CHECK(std::string(e.what()).find("json.exception") == std::string::npos);
  }
  std::remove(path.c_str());
}

TEST_CASE("calibrate::CalibrationDb: the shipped database carries a valid checksum", "[calibrate]") {
  const std::string shipped = std::string(DTSIM_SOURCE_DIR) + "/calibrate/data/calibration.json";
  CHECK(read_all(shipped).find("\"checksum\"") != std::string::npos);
  CHECK(dtsim::calibrate::CalibrationDb::load(shipped).size() > 0);
}

TEST_CASE("calibrate::CalibrationDb: nesting past the JSON depth bound is one InputError line, not a crash",
          "[calibrate]") {
  const std::string path = temp_path("deep.json");
  // 100,000 levels inside `entries` killed `predict` and `calibrate report` with SIGSEGV.
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  std::ofstream(path) << R"({"format": "dtsim-calibration", "version": 2, "hosts": [{"entries": )" << deep << "}]}";
  try {
    dtsim::calibrate::CalibrationDb::load(path);
    FAIL("expected an InputError");
  } catch (const dtsim::InputError& e) {
    const std::string msg = e.what();
    CHECK(msg.find(path + ": calibration database nests arrays and objects deeper than 64 levels") == 0);
    CHECK(msg.find('\n') == std::string::npos);
  }
  // At the bound: 64 levels in all (the document, hosts, a host and 61 arrays in entries) are read, and
  // the reader goes on to the schema.
  std::ofstream(path) << R"({"format": "dtsim-calibration", "version": 2, "hosts": [{"entries": )"
                      << std::string(61, '[') << std::string(61, ']') << "}]}";
  try {
    dtsim::calibrate::CalibrationDb::load(path);
    FAIL("expected an InputError");
  } catch (const dtsim::InputError& e) {
    CHECK(std::string(e.what()).find("deeper than") == std::string::npos);
    CHECK(std::string(e.what()).find("$.hosts[0].backend") != std::string::npos);
  }
  std::remove(path.c_str());
}

TEST_CASE("calibrate::CalibrationDb: a file past the 64 MiB size bound is refused before it is read", "[calibrate]") {
  const std::string path = temp_path("huge_size.json");
  constexpr std::uintmax_t BOUND_B = 64u << 20;
  { std::ofstream create(path); }
  std::filesystem::resize_file(path, BOUND_B + 1);  // sparse: nothing is written
  try {
    dtsim::calibrate::CalibrationDb::load(path);
    FAIL("expected an InputError");
  } catch (const dtsim::InputError& e) {
    CHECK(std::string(e.what()) == path + ": calibration database is 67,108,865 bytes; expected at most 67,108,864 "
                                          "bytes; fix or remove it, it was not modified");
  }
  std::filesystem::resize_file(path, BOUND_B);  // at the bound it is read (and its zero bytes are no JSON)
  try {
    dtsim::calibrate::CalibrationDb::load(path);
    FAIL("expected an InputError");
  } catch (const dtsim::InputError& e) {
    CHECK(std::string(e.what()).find("is not valid JSON (byte 1)") != std::string::npos);
  }
  std::remove(path.c_str());
}
