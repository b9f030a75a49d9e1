// Tests of scenarios/src/result_store.hpp: one list of result fields drives the JSONL rows and the
// CSV columns; consolidation orders records, keeps successes over errors and leaves no temporaries.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "scenarios/src/result_store.hpp"

namespace fs = std::filesystem;
using namespace dtsim::scenarios;
using nlohmann::json;

namespace {

std::vector<std::string> lines_of(const fs::path& p) {
  std::vector<std::string> out;
  std::ifstream in(p);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(line);
  return out;
}

std::size_t cells(const std::string& line) { return static_cast<std::size_t>(std::count(line.begin(), line.end(), ',')) + 1; }

std::vector<SweepPoint> two_points() {
  std::vector<SweepPoint> pts(2);
  for (std::size_t i = 0; i < 2; ++i) {
    pts[i].index = i;
    pts[i].assignments = {{"workers", std::to_string(i + 1)}};
    pts[i].key = "workers=" + std::to_string(i + 1);
    pts[i].id = "000000000000000" + std::to_string(i);
  }
  return pts;
}

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("dtsim_store_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

}  // namespace

TEST_CASE("scenarios::ResultStore: the CSV columns are the record's CSV fields, in the record's order") {
  const auto header = sweep_csv_header({"workers"});
  const auto status = std::find(header.begin(), header.end(), "status");
  REQUIRE(status != header.end());
  std::size_t k = static_cast<std::size_t>(status - header.begin()) + 1;
  for (const auto& f : dtsim::sim::result_fields()) {
    if (!f.in_csv) {
      CHECK(std::find(header.begin(), header.end(), f.name) == header.end());
      continue;
    }
    REQUIRE(k < header.size());
    CHECK(header[k++] == f.name);
  }
  CHECK(header[k] == "error");
  CHECK(header.back() == "error");
}

TEST_CASE("scenarios::ResultStore: ok and error rows have as many CSV cells as the header, in point order") {
  const fs::path dir = fresh_dir("rows");
  const auto pts = two_points();
  ResultStore store(dir, pts);
  json ok = ResultStore::point_record(pts[1]);
  ok["labels"] = {{"model", "resnet50"}};
  ok["status"] = "ok";
  dtsim::sim::PointResult r;
  r.workers = 2;
  ok["rows"] = json::array({dtsim::sim::to_json(r), dtsim::sim::to_json(r)});
  json bad = ResultStore::point_record(pts[0]);
  bad["status"] = "error";
  bad["error"] = "input error: batch, must be > 0";
  bad["rows"] = json::array();
  store.append(ok, 0);
  store.append(bad, 0);
  CHECK(store.consolidate(true) == 1);
  const auto csv = lines_of(store.csv_path());
  REQUIRE(csv.size() == 4);
  const std::size_t columns = sweep_csv_header({"workers"}).size();
  CHECK(cells(csv[0]) == columns);
  CHECK(csv[1].rfind("0,workers=1,1,", 0) == 0);  // the error record, first in point order
  CHECK(cells(csv[1]) == columns + 1);            // + 1: the quoted error holds a comma
  CHECK(csv[1].find("\"input error: batch, must be > 0\"") != std::string::npos);
  CHECK(cells(csv[2]) == columns);
  CHECK(csv[3].rfind("1,workers=2,2,resnet50,", 0) == 0);
  fs::remove_all(dir);
}

TEST_CASE("scenarios::ResultStore: consolidation removes temporaries a killed rewrite left behind") {
  const fs::path dir = fresh_dir("tmp");
  const auto pts = two_points();
  ResultStore store(dir, pts);
  std::ofstream(dir / "results.csv.tmp") << "half a fi";
  std::ofstream(dir / "results.jsonl.tmp") << "{\"id\":";
  (void)store.consolidate(false);
  CHECK_FALSE(fs::exists(dir / "results.csv.tmp"));
  CHECK_FALSE(fs::exists(dir / "results.jsonl.tmp"));
  CHECK(fs::exists(dir / "results.csv"));
  fs::remove_all(dir);
}

TEST_CASE("scenarios::ResultStore: a results line past the depth or size bound is dropped like a torn one") {
  const fs::path dir = fresh_dir("bounds");
  const auto pts = two_points();
  ResultStore store(dir, pts);
  const std::string ok = R"({"id": "0000000000000000", "status": "ok", "inputs": "a"})";
  // At the bounds (64 levels, SWEEP_RECORD_MAX_BYTES) a record is read; one level or byte more, it is not.
  auto nested = [](int levels) { return std::string(levels, '[') + std::string(levels, ']'); };
  const std::string deep_ok = R"({"id": "0000000000000001", "status": "ok", "x": )" + nested(63) + "}";
  const std::string deep_bad = R"({"id": "0000000000000001", "status": "ok", "x": )" + nested(100'000) + "}";
  std::string sized = R"({"id": "0000000000000001", "status": "ok", "x": ")";
  sized += std::string(SWEEP_RECORD_MAX_BYTES - sized.size() - 2, 'a') + "\"}";
  REQUIRE(sized.size() == SWEEP_RECORD_MAX_BYTES);
  const std::string oversized = sized.substr(0, sized.size() - 2) + "a\"}";
  const std::string bad_status = R"({"id": "0000000000000001", "status": 1})";
  for (const auto& [second, read] : std::vector<std::pair<std::string, bool>>{
           {deep_ok, true}, {deep_bad, false}, {sized, true}, {oversized, false}, {bad_status, false}}) {
    std::ofstream(dir / "results.jsonl") << ok << "\n" << second << "\n";
    CHECK(store.done(false).size() == (read ? 2u : 1u));
  }
  fs::remove_all(dir);
}
