// Calibration database in JSON (nlohmann): strict load, atomic save, one entry per host/signature/pass.
#include "calibrate/database.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "calibrate/allocator.hpp"
#include "common/errors.hpp"
#include "common/json_limits.hpp"
#include "common/paths.hpp"
#include "common/text.hpp"

namespace dtsim::calibrate {
namespace {

using nlohmann::json;
constexpr const char* FORMAT_NAME = "dtsim-calibration";
constexpr int FORMAT_VERSION = 2;  // 2: repeats timed with evicted caches (cache_state)
// Largest database read: the shipped one (calibrate/data/calibration.json, every op of the zoo on one
// host) is 451 KB, so this holds over a hundred such hosts; a parsed document takes ~10x its text.
constexpr std::size_t CALIBRATION_DB_MAX_BYTES = 64 << 20;

std::string_view status_name(EntryStatus s) { return s == EntryStatus::MEASURED ? "measured" : "disturbed"; }

// Strict readers: a wrong type or a missing field is an InputError naming file and JSON path.
struct Reader {
  const std::string& file;
  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw InputError(fmt::format("{}: calibration database field '{}': {} (the file was not modified)", file, where,
                                 what));
  }
  const json& field(const json& obj, const std::string& where, const char* name) const {
    if (!obj.is_object()) fail(where, "expected an object");
    auto it = obj.find(name);
    if (it == obj.end()) fail(where + "." + name, "missing");
    return *it;
  }
  std::string str(const json& obj, const std::string& where, const char* name) const {
    const json& v = field(obj, where, name);
    if (!v.is_string()) fail(where + "." + name, "expected a string");
    return v.get<std::string>();
  }
  double num(const json& obj, const std::string& where, const char* name, double lo) const {
    const json& v = field(obj, where, name);
    if (!v.is_number()) fail(where + "." + name, "expected a number");
    const double x = v.get<double>();
    if (!(x >= lo) || !std::isfinite(x)) fail(where + "." + name, fmt::format("expected a finite number >= {}", lo));
    return x;
  }
  int integer(const json& obj, const std::string& where, const char* name) const {
    const json& v = field(obj, where, name);
    if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > 1000000)
      fail(where + "." + name, "expected an integer in 0..1000000");
    return v.get<int>();
  }
};

json host_to_json(const HostInfo& h) {
  json out{{"backend", h.backend},
              {"device_model", h.device_model},
              {"isa", h.isa},
              {"library_version", h.library_version},
              {"threads", h.threads},
              {"instances", h.instances},
              {"cache_state", h.cache_state},
              {"core_peak_flops", h.core_peak_flops},
              {"mem_bandwidth_Bps", h.mem_bandwidth_Bps}};
  if (!h.allocator.empty()) out["allocator"] = h.allocator;
  return out;
}

json entry_to_json(const PassEntry& e) {
  return json{{"status", status_name(e.status)}, {"time_s", e.time_s},          {"spread", e.spread},
              {"blocks_kept", e.blocks_kept},      {"blocks_rejected", e.blocks_rejected},
              {"flops", e.flops},                  {"bytes", e.bytes},          {"impl", e.impl},
              {"op", e.op}};
}

// Content checksum: FNV-1a (64 bit) of the document's compact dump without the "checksum" field.
// nlohmann keeps object keys sorted and prints doubles round-trip, so the dump of a parsed file is
// the dump that was hashed when it was written: any edit of content changes it, formatting does not.
constexpr const char* CHECKSUM_FIELD = "checksum";

std::string content_checksum(json doc) {
  doc.erase(CHECKSUM_FIELD);
  return "fnv1a64:" + fnv1a64_hex(doc.dump());
}

// Exclusive advisory lock on "<db>.lock" for the life of the object: writers of one database
// take turns, so each re-reads what the other saved before replacing the file.
class DbLock {
 public:
  explicit DbLock(const std::string& db_path) : path_(db_path + ".lock") {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw Failure(fmt::format("{}: cannot open the lock file: {}", path_, std::strerror(errno)));
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd_);
      throw Failure(fmt::format("{}: cannot lock: {}", path_, std::strerror(err)));
    }
  }
  ~DbLock() { ::close(fd_); }  // closing releases the lock
  DbLock(const DbLock&) = delete;
  DbLock& operator=(const DbLock&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace

std::string HostInfo::key() const {
  const std::string base = fmt::format("{}|{}|{}|{}|threads={}", backend, device_model, isa, library_version, threads);
  const std::string with_instances = instances > 1 ? fmt::format("{}|instances={}", base, instances) : base;
  return allocator.empty() ? with_instances : fmt::format("{}|allocator={}", with_instances, allocator);
}

CalibrationDb CalibrationDb::load(const std::string& path) {
  CalibrationDb db;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return db;
  json doc;
  try {
    doc = read_json_file(path, "calibration database", {CALIBRATION_DB_MAX_BYTES});
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}; fix or remove it, it was not modified", e.what()));
  }
  const Reader r{path};
  if (doc.is_object() && doc.contains(CHECKSUM_FIELD)) {
    const json& sum = doc[CHECKSUM_FIELD];
    if (!sum.is_string()) r.fail("$.checksum", "expected a string");
    if (sum.get<std::string>() != content_checksum(doc))
      throw InputError(fmt::format("{}: calibration database checksum does not match its content (edited by hand "
                                   "or damaged); re-run `dtsim calibrate` into a new file, this one was not modified",
                                   path));
  }
  if (r.str(doc, "$", "format") != FORMAT_NAME) r.fail("$.format", fmt::format("expected \"{}\"", FORMAT_NAME));
  if (const std::int64_t version = r.integer(doc, "$", "version"); version != FORMAT_VERSION)
    r.fail("$.version", version == 1 ? fmt::format("expected {}: version 1 databases were timed with warm caches, "
                                                   "which understates in-step times; calibrate into a new file",
                                                   FORMAT_VERSION)
                                     : fmt::format("expected {}", FORMAT_VERSION));
  const json& hosts = r.field(doc, "$", "hosts");
  if (!hosts.is_array()) r.fail("$.hosts", "expected an array");
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    const std::string hw = fmt::format("$.hosts[{}]", i);
    const json& h = hosts[i];
    HostData data;
    data.info.backend = r.str(h, hw, "backend");
    if (data.info.backend != "onednn" && data.info.backend != "libtorch" && data.info.backend != "cudnn")
      r.fail(hw + ".backend", "expected \"onednn\", \"libtorch\" or \"cudnn\"");
    data.info.device_model = r.str(h, hw, "device_model");
    data.info.isa = r.str(h, hw, "isa");
    data.info.library_version = r.str(h, hw, "library_version");
    data.info.threads = r.integer(h, hw, "threads");
    data.info.instances = r.integer(h, hw, "instances");
    if (data.info.instances < 1) r.fail(hw + ".instances", "expected an integer >= 1");
    data.info.cache_state = r.str(h, hw, "cache_state");
    // libtorch hosts written before the field timed in a held glibc heap (calibrate/torch/runner.cpp then).
    if (h.contains("allocator")) {
      data.info.allocator = r.str(h, hw, "allocator");
      if (!allocator_or_null(data.info.allocator))
        r.fail(hw + ".allocator", "expected one of: " + allocator_names());
    }
    else if (data.info.backend == "libtorch") data.info.allocator = "glibc-held";
    data.info.core_peak_flops = r.num(h, hw, "core_peak_flops", 0);
    data.info.mem_bandwidth_Bps = r.num(h, hw, "mem_bandwidth_Bps", 0);
    const json& entries = r.field(h, hw, "entries");
    if (!entries.is_object()) r.fail(hw + ".entries", "expected an object");
    for (const auto& [sig, passes] : entries.items()) {
      const std::string sw = hw + ".entries[\"" + sig + "\"]";
      if (!passes.is_object()) r.fail(sw, "expected an object of passes");
      for (const auto& [pass, e] : passes.items()) {
        const std::string pw = sw + "." + pass;
        PassEntry entry;
        const std::string status = r.str(e, pw, "status");
        if (status == "measured") entry.status = EntryStatus::MEASURED;
        else if (status == "disturbed") entry.status = EntryStatus::DISTURBED;
        else r.fail(pw + ".status", "expected \"measured\" or \"disturbed\"");
        entry.time_s = r.num(e, pw, "time_s", 0);
        if (entry.status == EntryStatus::MEASURED && !(entry.time_s > 0)) r.fail(pw + ".time_s", "expected > 0");
        entry.spread = r.num(e, pw, "spread", 0);
        entry.blocks_kept = r.integer(e, pw, "blocks_kept");
        entry.blocks_rejected = r.integer(e, pw, "blocks_rejected");
        entry.flops = r.num(e, pw, "flops", 0);
        entry.bytes = r.num(e, pw, "bytes", 0);
        entry.impl = r.str(e, pw, "impl");
        entry.op = r.str(e, pw, "op");
        data.entries[sig][pass] = entry;
      }
    }
    const std::string key = data.info.key();
    if (db.hosts_.count(key)) r.fail(hw, "duplicate host " + key);
    db.hosts_[key] = std::move(data);
  }
  if (!doc.contains(CHECKSUM_FIELD))  // said only once the file is otherwise valid
    std::cerr << fmt::format("dtsim: warning: {}: calibration database has no checksum (written before checksums); "
                             "it is accepted, and the next `dtsim calibrate` into it adds one\n",
                             path);
  return db;
}

void CalibrationDb::save(const std::string& path) const {
  const std::filesystem::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path(), ec);
  const DbLock lock(path);
  // Merge on write: entries another process saved since this one loaded are kept; ours win on a tie.
  CalibrationDb merged = load(path);
  for (const auto& [key, data] : hosts_)
    for (const auto& [sig, passes] : data.entries)
      for (const auto& [pass, e] : passes) merged.put(data.info, sig, pass, e);
  merged.write_locked(path);
}

void CalibrationDb::write_locked(const std::string& path) const {
  json doc{{"format", FORMAT_NAME}, {"version", FORMAT_VERSION}, {"hosts", json::array()}};
  for (const auto& [key, data] : hosts_) {
    json h = host_to_json(data.info);
    h["key"] = key;
    json entries = json::object();
    for (const auto& [sig, passes] : data.entries)
      for (const auto& [pass, e] : passes) entries[sig][pass] = entry_to_json(e);
    h["entries"] = std::move(entries);
    doc["hosts"].push_back(std::move(h));
  }
  doc[CHECKSUM_FIELD] = content_checksum(doc);
  const std::filesystem::path target(path);
  std::error_code ec;
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) throw Failure(fmt::format("{}: cannot write the calibration database", tmp));
    out << doc.dump(1) << '\n';
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw Failure(fmt::format("{}: write failed (disk full?)", tmp));
    }
  }
  std::filesystem::rename(tmp, target, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw Failure(fmt::format("{}: cannot replace the calibration database: {}", path, ec.message()));
  }
}

const PassEntry* CalibrationDb::find(const std::string& host_key, const std::string& signature,
                                     const std::string& pass) const {
  auto h = hosts_.find(host_key);
  if (h == hosts_.end()) return nullptr;
  auto s = h->second.entries.find(signature);
  if (s == h->second.entries.end()) return nullptr;
  auto p = s->second.find(pass);
  return p == s->second.end() ? nullptr : &p->second;
}

void CalibrationDb::put(const HostInfo& host, const std::string& signature, const std::string& pass,
                        const PassEntry& entry) {
  HostData& data = hosts_[host.key()];
  data.info = host;
  data.entries[signature][pass] = entry;
}

std::vector<HostInfo> CalibrationDb::hosts() const {
  std::vector<HostInfo> out;
  for (const auto& [key, data] : hosts_) out.push_back(data.info);
  return out;
}

const HostInfo* CalibrationDb::host_or_null(const std::string& host_key) const {
  auto h = hosts_.find(host_key);
  return h == hosts_.end() ? nullptr : &h->second.info;
}

const std::map<std::string, std::map<std::string, PassEntry>>& CalibrationDb::entries(
    const std::string& host_key) const {
  static const std::map<std::string, std::map<std::string, PassEntry>> EMPTY;
  auto h = hosts_.find(host_key);
  return h == hosts_.end() ? EMPTY : h->second.entries;
}

std::size_t CalibrationDb::size() const {
  std::size_t n = 0;
  for (const auto& [key, data] : hosts_)
    for (const auto& [sig, passes] : data.entries) n += passes.size();
  return n;
}

std::string default_db_path() {
  return replaceable_data_file("DTSIM_CALIBRATION_DB", "calibrate/data/calibration.json");
}

}  // namespace dtsim::calibrate
