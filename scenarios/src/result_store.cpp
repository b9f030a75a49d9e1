// The sweep's result store: durable appends and atomic replaces, the record <-> CSV mapping (columns
// from sim::result_fields()), and the consolidation that makes results.jsonl/results.csv whole again.
#include "scenarios/src/result_store.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "common/child.hpp"
#include "common/errors.hpp"
#include "common/json_limits.hpp"

namespace dtsim::scenarios {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::vector<std::string> LABEL_COLUMNS = {"model", "platform", "strategy", "batch", "data"};

// Appends `text` and fsyncs, so that a finished point survives a kill or a crash of the machine.
void append_durable(const fs::path& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw Failure(fmt::format("{}: cannot append: {}", path.string(), std::strerror(errno)));
  write_all(fd, text);
  ::fsync(fd);
  ::close(fd);
}

fs::path temporary_of(const fs::path& path) { return path.string() + ".tmp"; }

// Replaces `path` atomically with `text` (write a temporary, fsync, rename); no temporary is left
// behind when it fails.
void replace_durable(const fs::path& path, const std::string& text) {
  const fs::path tmp = temporary_of(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_TRUNC | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw Failure(fmt::format("{}: cannot write: {}", tmp.string(), std::strerror(errno)));
  write_all(fd, text);
  ::fsync(fd);
  ::close(fd);
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw Failure(fmt::format("{}: cannot replace: {}", path.string(), ec.message()));
  }
}

std::string csv_cell(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += (c == '\n' || c == '\r') ? ' ' : c;
  }
  return q + "\"";
}

std::string get_text(const json& j, const std::string& key) {
  if (!j.is_object() || !j.contains(key)) return "";
  const json& v = j.at(key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  if (v.is_number()) return fmt::format("{:.8g}", v.get<double>());
  if (v.is_null()) return "";
  return v.dump();
}

// The result columns of results.csv: the fields of the result record that the CSV shows.
const std::vector<std::string>& csv_result_columns() {
  static const std::vector<std::string> columns = [] {
    std::vector<std::string> out;
    for (const auto& f : sim::result_fields())
      if (f.in_csv) out.emplace_back(f.name);
    return out;
  }();
  return columns;
}

// CSV lines of one record (one per result row; one line with the error for a failed point).
std::string record_csv(const json& rec, const std::vector<std::string>& fields) {
  std::string prefix = csv_cell(get_text(rec, "index")) + "," + csv_cell(get_text(rec, "key"));
  for (const auto& f : fields) prefix += "," + csv_cell(get_text(rec.value("params", json::object()), f));
  for (const auto& l : LABEL_COLUMNS) prefix += "," + csv_cell(get_text(rec.value("labels", json::object()), l));
  const std::string status = get_text(rec, "status");
  const json rows = rec.value("rows", json::array());
  if (status != "ok" || rows.empty())
    return prefix + "," + csv_cell(status) + std::string(csv_result_columns().size() + 1, ',') +
           csv_cell(get_text(rec, "error")) + "\n";
  std::string out;
  for (const auto& r : rows) {
    out += prefix + "," + status;
    for (const auto& c : csv_result_columns()) out += "," + csv_cell(get_text(r, c));
    out += ",\n";
  }
  return out;
}

std::string csv_header_line(const std::vector<std::string>& fields) {
  std::string line;
  for (const auto& h : sweep_csv_header(fields)) line += (line.empty() ? "" : ",") + csv_cell(h);
  return line + "\n";
}

// Reads the valid JSON records of a .jsonl file; `clean` turns false if a line was torn or invalid.
std::vector<json> read_records(const fs::path& path, bool& clean) {
  std::vector<json> out;
  std::ifstream in(path, std::ios::binary);
  if (!in) return out;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!text.empty() && text.back() != '\n') clean = false;
  std::size_t start = 0;
  int line_number = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    ++line_number;
    if (line.empty()) continue;
    json j;
    try {
      j = parse_json(line, fmt::format("{}, line {}", path.string(), line_number), "sweep result record",
                     {SWEEP_RECORD_MAX_BYTES});
    } catch (const InputError&) {  // torn, damaged, too large or too deep: the point runs again
      clean = false;
      continue;
    }
    if (!j.is_object() || !j.contains("id") || !j["id"].is_string() || !j.contains("status") ||
        !j["status"].is_string()) {
      clean = false;
      continue;
    }
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace

std::vector<std::string> sweep_csv_header(const std::vector<std::string>& fields) {
  std::vector<std::string> h = {"index", "key"};
  for (const auto& f : fields) h.push_back("sweep." + f);
  for (const auto& l : LABEL_COLUMNS) h.push_back(l);
  h.emplace_back("status");
  for (const auto& c : csv_result_columns()) h.push_back(c);
  h.emplace_back("error");
  return h;
}

ResultStore::ResultStore(const fs::path& out_dir, const std::vector<SweepPoint>& points)
    : dir_(out_dir), jsonl_(out_dir / "results.jsonl"), csv_(out_dir / "results.csv"), parts_(out_dir / "parts") {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec || !fs::is_directory(dir_))
    throw InputError(fmt::format("--out {}: cannot create the directory ({})", dir_.string(), ec.message()));
  if (!points.empty())
    for (const auto& [f, v] : points.front().assignments) fields_.push_back(f);
  for (const auto& p : points) index_of_.emplace(p.id, p.index);
}

std::size_t ResultStore::consolidate(bool final_order) {
  // A run killed inside replace_durable leaves its temporary; the renamed file is whole either way.
  std::error_code ec;
  fs::remove(temporary_of(jsonl_), ec);
  fs::remove(temporary_of(csv_), ec);
  bool clean = true;
  std::vector<json> recs = read_records(jsonl_, clean);
  bool had_parts = false;
  if (fs::is_directory(parts_)) {
    for (const auto& e : fs::directory_iterator(parts_)) {
      if (e.path().extension() != ".jsonl") continue;
      bool part_clean = true;
      for (auto& j : read_records(e.path(), part_clean)) recs.push_back(std::move(j));
      had_parts = true;
    }
  }
  // One record per id: a later record from other inputs (SweepPoint::inputs: a stale point computed
  // again) replaces the earlier one whatever its status; from the same inputs, a successful record wins
  // over an error record.
  std::map<std::string, json> by_id;
  std::vector<std::string> order;
  for (auto& j : recs) {
    const std::string id = j.at("id").get<std::string>();
    auto it = by_id.find(id);
    if (it == by_id.end()) {
      order.push_back(id);
      by_id.emplace(id, std::move(j));
    } else if (get_text(j, "inputs") != get_text(it->second, "inputs") || j.value("status", "") == "ok" ||
               it->second.value("status", "") != "ok") {
      it->second = std::move(j);
    } else {
      clean = false;
    }
  }
  if (order.size() != recs.size()) clean = false;
  if (final_order) {
    std::stable_sort(order.begin(), order.end(), [&](const std::string& a, const std::string& b) {
      const auto ia = index_of_.find(a), ib = index_of_.find(b);
      const std::size_t ka = ia == index_of_.end() ? SIZE_MAX : ia->second;
      const std::size_t kb = ib == index_of_.end() ? SIZE_MAX : ib->second;
      return ka < kb;
    });
  }
  std::string jtext, ctext = csv_header_line(fields_);
  std::size_t failed = 0;
  for (const auto& id : order) {
    json& j = by_id.at(id);
    jtext += j.dump() + "\n";
    const auto it = index_of_.find(id);
    if (it == index_of_.end()) continue;  // a point of an older version of the sweep: kept, not tabled
    j["index"] = it->second;
    ctext += record_csv(j, fields_);
    failed += j.value("status", "") == "ok" ? 0 : 1;
  }
  if (!clean || had_parts || final_order) replace_durable(jsonl_, jtext);
  replace_durable(csv_, ctext);
  if (had_parts) fs::remove_all(parts_, ec);
  return failed;
}

std::map<std::string, std::string> ResultStore::done(bool retry_failed) const {
  std::map<std::string, std::string> out;
  bool clean = true;
  for (const auto& j : read_records(jsonl_, clean))  // one record per id after consolidate
    if (j.value("status", "") == "ok" || !retry_failed) out[j.at("id").get<std::string>()] = get_text(j, "inputs");
  return out;
}

void ResultStore::append(const json& record, int rank) {
  if (rank == 0) {
    append_durable(jsonl_, record.dump() + "\n");
    append_durable(csv_, record_csv(record, fields_));
    return;
  }
  std::error_code ec;
  fs::create_directories(parts_, ec);
  append_durable(parts_ / fmt::format("rank-{}.jsonl", rank), record.dump() + "\n");
}

json ResultStore::point_record(const SweepPoint& point) {
  json params = json::object();
  for (const auto& [f, v] : point.assignments) params[f] = v;
  json rec{{"index", point.index}, {"id", point.id}, {"key", point.key}, {"params", params}};
  if (!point.inputs.empty()) rec["inputs"] = point.inputs;
  return rec;
}

}  // namespace dtsim::scenarios
