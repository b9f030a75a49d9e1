// Running a sweep: a pool of forked worker processes, a durable result store (results.jsonl is the
// source of truth, results.csv is regenerated from it), a progress line, SIGINT handling and the
// MPI split (each rank runs every R-th pending point; rank 0 merges the ranks' part files).
#include <fcntl.h>
#include <fmt/format.h>
#include <dlfcn.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "common/errors.hpp"
#include "scenarios/sweep.hpp"

namespace dtsim::scenarios {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int sig) { g_stop_signal = sig; }

// Installs SIGINT/SIGTERM handlers (without SA_RESTART, so poll() wakes up) for its lifetime.
class StopSignals {
 public:
  StopSignals() {
    g_stop_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

void write_all(int fd, const std::string& data) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

// Appends `text` and fsyncs, so that a finished point survives a kill or a crash of the machine.
void append_durable(const fs::path& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw Failure(fmt::format("{}: cannot append: {}", path.string(), std::strerror(errno)));
  write_all(fd, text);
  ::fsync(fd);
  ::close(fd);
}

// Replaces `path` atomically with `text` (write a temporary, fsync, rename).
void replace_durable(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_TRUNC | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw Failure(fmt::format("{}: cannot write: {}", tmp.string(), std::strerror(errno)));
  write_all(fd, text);
  ::fsync(fd);
  ::close(fd);
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw Failure(fmt::format("{}: cannot replace: {}", path.string(), ec.message()));
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

std::string num(double v) { return fmt::format("{:.8g}", v); }

const std::vector<std::string> LABEL_COLUMNS = {"model", "platform", "strategy", "batch", "data"};

json row_to_json(const sim::PointResult& r) {
  return json{{"workers", r.workers},
              {"nodes", r.nodes},
              {"ps_servers", r.ps_servers},
              {"throughput_samples_per_s", r.throughput},
              {"efficiency", r.efficiency},
              {"iteration_time_s", r.iteration_time_s},
              {"compute_s", r.breakdown.compute_s},
              {"communication_s", r.breakdown.communication_s},
              {"exposed_communication_s", r.breakdown.exposed_communication_s},
              {"io_stall_s", r.breakdown.io_stall_s},
              {"bottleneck", r.bottleneck},
              {"wall_s", r.wall_s}};
}

std::string get_text(const json& j, const std::string& key) {
  if (!j.is_object() || !j.contains(key)) return "";
  const json& v = j.at(key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  if (v.is_number()) return num(v.get<double>());
  if (v.is_null()) return "";
  return v.dump();
}

// CSV lines of one record (one per result row; one line with the error for a failed point).
std::string record_csv(const json& rec, const std::vector<std::string>& fields) {
  std::string prefix = csv_cell(get_text(rec, "index")) + "," + csv_cell(get_text(rec, "key"));
  for (const auto& f : fields) prefix += "," + csv_cell(get_text(rec.value("params", json::object()), f));
  for (const auto& l : LABEL_COLUMNS) prefix += "," + csv_cell(get_text(rec.value("labels", json::object()), l));
  const std::string status = get_text(rec, "status");
  std::string out;
  const json rows = rec.value("rows", json::array());
  if (status != "ok" || rows.empty()) {
    out += prefix + "," + csv_cell(status) + std::string(13, ',') + csv_cell(get_text(rec, "error")) + "\n";
    return out;
  }
  for (const auto& r : rows) {
    out += prefix + "," + status;
    for (const char* k : {"workers", "nodes", "ps_servers", "throughput_samples_per_s", "efficiency",
                          "iteration_time_s", "compute_s", "communication_s", "exposed_communication_s",
                          "io_stall_s", "bottleneck", "wall_s"})
      out += "," + csv_cell(get_text(r, k));
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
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("id") || !j.contains("status")) {
      clean = false;
      continue;
    }
    out.push_back(std::move(j));
  }
  return out;
}

// OpenMPI entry points resolved from libmpi itself: libsimgrid (SMPI) also exports MPI_* symbols
// and wins the dynamic link, so calling MPI_Init directly would start SMPI and abort.
struct MpiApi {
  using Fn0 = int (*)();
  using FnInit = int (*)(int*, char***);
  using FnFlag = int (*)(int*);
  using FnCommInt = int (*)(void*, int*);
  using FnComm = int (*)(void*);
  using FnAllreduce = int (*)(const void*, void*, int, void*, void*, void*);
  FnFlag initialized = nullptr;
  FnInit init = nullptr;
  Fn0 finalize = nullptr;
  FnCommInt comm_rank = nullptr, comm_size = nullptr;
  FnComm barrier = nullptr;
  FnAllreduce allreduce = nullptr;
  void* comm_world = nullptr;
  void* int_type = nullptr;
  void* op_max = nullptr;
  void* op_sum = nullptr;
};

struct MpiSession {
  int rank = 0, size = 1;
  bool active = false, we_initialized = false;
  MpiApi api;
  void barrier() const {
    if (active) api.barrier(api.comm_world);
  }
  int allreduce_int(int value, bool max) const {
    int out = value;
    if (active) api.allreduce(&value, &out, 1, api.int_type, max ? api.op_max : api.op_sum, api.comm_world);
    return out;
  }
};

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? std::atoi(v) : 0;
}

MpiApi load_openmpi() {
  void* h = ::dlopen("libmpi.so.40", RTLD_NOW | RTLD_GLOBAL);
  if (h == nullptr) h = ::dlopen("libmpi.so", RTLD_NOW | RTLD_GLOBAL);
  if (h == nullptr) throw Failure(fmt::format("launched by mpirun but OpenMPI's libmpi cannot be loaded: {}", ::dlerror()));
  MpiApi a;
  auto sym = [&](const char* name) {
    void* p = ::dlsym(h, name);
    if (p == nullptr) throw Failure(fmt::format("OpenMPI's libmpi lacks {}", name));
    return p;
  };
  a.initialized = reinterpret_cast<MpiApi::FnFlag>(sym("MPI_Initialized"));
  a.init = reinterpret_cast<MpiApi::FnInit>(sym("MPI_Init"));
  a.finalize = reinterpret_cast<MpiApi::Fn0>(sym("MPI_Finalize"));
  a.comm_rank = reinterpret_cast<MpiApi::FnCommInt>(sym("MPI_Comm_rank"));
  a.comm_size = reinterpret_cast<MpiApi::FnCommInt>(sym("MPI_Comm_size"));
  a.barrier = reinterpret_cast<MpiApi::FnComm>(sym("MPI_Barrier"));
  a.allreduce = reinterpret_cast<MpiApi::FnAllreduce>(sym("MPI_Allreduce"));
  a.comm_world = sym("ompi_mpi_comm_world");
  a.int_type = sym("ompi_mpi_int");
  a.op_max = sym("ompi_mpi_op_max");
  a.op_sum = sym("ompi_mpi_op_sum");
  return a;
}

MpiSession start_mpi(bool allow) {
  MpiSession s;
  const int launched = std::max(env_int("OMPI_COMM_WORLD_SIZE"), env_int("PMI_SIZE"));
  if (!allow || launched <= 1) return s;
  s.api = load_openmpi();
  int inited = 0;
  s.api.initialized(&inited);
  if (!inited) {
    s.api.init(nullptr, nullptr);
    s.we_initialized = true;
  }
  s.api.comm_rank(s.api.comm_world, &s.rank);
  s.api.comm_size(s.api.comm_world, &s.size);
  s.active = s.size > 1;
  return s;
}

class Progress {
 public:
  Progress(bool enabled, std::size_t total, std::size_t already, std::string prefix)
      : enabled_(enabled), total_(total), done_(already), prefix_(std::move(prefix)),
        tty_(::isatty(STDERR_FILENO) != 0), start_(std::chrono::steady_clock::now()) {}
  void finished(bool failed) {
    ++done_;
    ++ran_;
    failed_ += failed ? 1 : 0;
    show();
  }
  void show() const {
    if (!enabled_) return;
    const double elapsed_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double rate = (ran_ > 0 && elapsed_s > 0) ? static_cast<double>(ran_) / elapsed_s : 0.0;
    const std::size_t left = total_ - std::min(total_, done_);
    std::string eta = rate > 0 ? fmt::format("ETA {:.0f} s", static_cast<double>(left) / rate) : "ETA ?";
    const std::string line = fmt::format("{}sweep: {}/{} points done ({} failed this run), {:.2f} points/s, {}",
                                         prefix_, done_, total_, failed_, rate, eta);
    if (tty_)
      std::cerr << '\r' << line << "\x1b[K" << (left == 0 ? "\n" : "") << std::flush;
    else
      std::cerr << line << '\n' << std::flush;
  }
  void end() const {
    if (enabled_ && tty_ && done_ < total_) std::cerr << '\n' << std::flush;
  }

 private:
  bool enabled_;
  std::size_t total_, done_, ran_ = 0, failed_ = 0;
  std::string prefix_;
  bool tty_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

std::vector<std::string> sweep_csv_header(const std::vector<std::string>& fields) {
  std::vector<std::string> h = {"index", "key"};
  for (const auto& f : fields) h.push_back("sweep." + f);
  for (const auto& l : LABEL_COLUMNS) h.push_back(l);
  for (const char* c : {"status", "workers", "nodes", "ps_servers", "throughput_samples_per_s", "efficiency",
                        "iteration_time_s", "compute_s", "communication_s", "exposed_communication_s", "io_stall_s",
                        "bottleneck", "wall_s", "error"})
    h.emplace_back(c);
  return h;
}

std::size_t run_process_pool(std::size_t n, int jobs, const std::function<std::string(std::size_t)>& work,
                             const std::function<void(std::size_t, bool, const std::string&)>& done,
                             const std::function<bool()>& stop) {
  if (jobs < 1) throw InputError(fmt::format("--jobs must be >= 1, got {}", jobs));
  struct Running {
    pid_t pid;
    int fd;
    std::size_t task;
    std::string data;
  };
  std::vector<Running> running;
  std::size_t next = 0, finished = 0;
  const pid_t parent = ::getpid();
  while (next < n || !running.empty()) {
    if (stop()) {
      for (auto& r : running) ::kill(r.pid, SIGTERM);
      for (auto& r : running) {
        ::close(r.fd);
        while (::waitpid(r.pid, nullptr, 0) < 0 && errno == EINTR) {
        }
      }
      running.clear();
      break;
    }
    while (next < n && running.size() < static_cast<std::size_t>(jobs)) {
      int fds[2];
      if (::pipe2(fds, O_CLOEXEC) != 0) throw Failure(fmt::format("pipe failed: {}", std::strerror(errno)));
      std::fflush(nullptr);
      const pid_t pid = ::fork();
      if (pid < 0) throw Failure(fmt::format("fork failed: {}", std::strerror(errno)));
      if (pid == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // a killed sweep takes its workers with it
        if (::getppid() != parent) ::_exit(3);
        std::signal(SIGINT, SIG_DFL);
        std::signal(SIGTERM, SIG_DFL);
        ::close(fds[0]);
        std::string tagged;
        try {
          tagged = "O" + work(next);
        } catch (const InputError& e) {
          tagged = std::string("I") + e.what();
        } catch (const std::exception& e) {
          tagged = std::string("F") + e.what();
        }
        write_all(fds[1], tagged);
        ::close(fds[1]);
        std::fflush(nullptr);
        ::_exit(0);
      }
      ::close(fds[1]);
      running.push_back({pid, fds[0], next, {}});
      ++next;
    }
    std::vector<pollfd> pfds;
    for (const auto& r : running) pfds.push_back({r.fd, POLLIN, 0});
    const int rc = ::poll(pfds.data(), pfds.size(), 250);
    if (rc < 0) {
      if (errno == EINTR) continue;
      throw Failure(fmt::format("poll failed: {}", std::strerror(errno)));
    }
    for (std::size_t i = pfds.size(); i-- > 0;) {
      if (pfds[i].revents == 0) continue;
      Running& r = running[i];
      char buf[65536];
      const ssize_t got = ::read(r.fd, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got > 0) {
        r.data.append(buf, static_cast<std::size_t>(got));
        continue;
      }
      ::close(r.fd);
      int status = 0;
      while (::waitpid(r.pid, &status, 0) < 0 && errno == EINTR) {
      }
      const std::size_t task = r.task;
      std::string data = std::move(r.data);
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
      if (stop()) continue;  // killed by the interruption: not a finished point
      ++finished;
      if (WIFSIGNALED(status) && (data.empty() || data[0] != 'O'))
        done(task, false, fmt::format("worker process died with signal {} ({})", WTERMSIG(status),
                                      strsignal(WTERMSIG(status))));
      else if (data.empty())
        done(task, false, "worker process exited without a result");
      else if (data[0] == 'O')
        done(task, true, data.substr(1));
      else
        done(task, false, (data[0] == 'I' ? "input error: " : "failed: ") + data.substr(1));
    }
  }
  return finished;
}

SweepSummary run_sweep(const std::vector<SweepPoint>& points, const yaml::Origin& origin,
                       const SweepOptions& options, const PointFunction& run_point) {
  if (options.jobs < 1) throw InputError(fmt::format("--jobs must be >= 1, got {}", options.jobs));
  if (options.out_dir.empty()) throw InputError("--out: an output directory is required");
  const fs::path out = options.out_dir;
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec || !fs::is_directory(out))
    throw InputError(fmt::format("--out {}: cannot create the directory ({})", out.string(), ec.message()));
  const fs::path jsonl = out / "results.jsonl", csv = out / "results.csv", parts = out / "parts";

  std::vector<std::string> fields;
  if (!points.empty())
    for (const auto& [f, v] : points.front().assignments) fields.push_back(f);
  std::map<std::string, std::size_t> index_of;
  for (const auto& p : points) index_of.emplace(p.id, p.index);

  MpiSession mpi = start_mpi(options.allow_mpi);
  SweepSummary summary;
  summary.total = points.size();
  summary.mpi_ranks = mpi.size;
  summary.mpi_rank = mpi.rank;
  summary.jsonl_path = jsonl.string();
  summary.csv_path = csv.string();

  // Rank 0 folds part files of an earlier (killed) MPI run into results.jsonl and drops torn lines.
  auto consolidate = [&](bool final_order) {
    bool clean = true;
    std::vector<json> recs = read_records(jsonl, clean);
    bool had_parts = false;
    if (fs::is_directory(parts)) {
      for (const auto& e : fs::directory_iterator(parts)) {
        if (e.path().extension() != ".jsonl") continue;
        bool part_clean = true;
        for (auto& j : read_records(e.path(), part_clean)) recs.push_back(std::move(j));
        had_parts = true;
      }
    }
    // One record per id; a successful record wins over an error record.
    std::map<std::string, json> by_id;
    std::vector<std::string> order;
    for (auto& j : recs) {
      const std::string id = j.at("id").get<std::string>();
      auto it = by_id.find(id);
      if (it == by_id.end()) {
        order.push_back(id);
        by_id.emplace(id, std::move(j));
      } else if (j.value("status", "") == "ok" || it->second.value("status", "") != "ok") {
        it->second = std::move(j);
      } else {
        clean = false;
      }
    }
    if (order.size() != recs.size()) clean = false;
    if (final_order) {
      std::stable_sort(order.begin(), order.end(), [&](const std::string& a, const std::string& b) {
        const auto ia = index_of.find(a), ib = index_of.find(b);
        const std::size_t ka = ia == index_of.end() ? SIZE_MAX : ia->second;
        const std::size_t kb = ib == index_of.end() ? SIZE_MAX : ib->second;
        return ka < kb;
      });
    }
    std::string jtext, ctext = csv_header_line(fields);
    std::size_t failed = 0;
    for (const auto& id : order) {
      json& j = by_id.at(id);
      jtext += j.dump() + "\n";
      const auto it = index_of.find(id);
      if (it == index_of.end()) continue;  // a point of an older version of the sweep: kept, not tabled
      j["index"] = it->second;
      ctext += record_csv(j, fields);
      failed += j.value("status", "") == "ok" ? 0 : 1;
    }
    if (!clean || had_parts || final_order) replace_durable(jsonl, jtext);
    replace_durable(csv, ctext);
    if (had_parts) fs::remove_all(parts, ec);
    return std::make_pair(by_id.size(), failed);
  };

  if (mpi.rank == 0) consolidate(false);
  mpi.barrier();

  // The done set, as every rank sees it after the consolidation.
  std::set<std::string> done_ids;
  {
    bool clean = true;
    for (const auto& j : read_records(jsonl, clean))
      if (j.value("status", "") == "ok" || !options.retry_failed) done_ids.insert(j.at("id").get<std::string>());
  }
  std::vector<std::size_t> pending;
  for (const auto& p : points)
    if (done_ids.count(p.id) == 0) pending.push_back(p.index);
  summary.skipped = points.size() - pending.size();
  std::vector<std::size_t> mine;
  for (std::size_t i = 0; i < pending.size(); ++i)
    if (static_cast<int>(i % static_cast<std::size_t>(mpi.size)) == mpi.rank) mine.push_back(pending[i]);

  const fs::path my_jsonl = (mpi.rank == 0) ? jsonl : parts / fmt::format("rank-{}.jsonl", mpi.rank);
  if (mpi.rank != 0 && !mine.empty()) fs::create_directories(parts, ec);

  auto point_record = [&](const SweepPoint& p) {
    json params = json::object();
    for (const auto& [f, v] : p.assignments) params[f] = v;
    return json{{"index", p.index}, {"id", p.id}, {"key", p.key}, {"params", params}};
  };

  Progress progress(options.progress, mpi.active ? mine.size() : points.size(), mpi.active ? 0 : summary.skipped,
                    mpi.active ? fmt::format("[rank {}/{}] ", mpi.rank, mpi.size) : "");
  std::size_t ran = 0;
  {
    StopSignals signals;
    ran = run_process_pool(
        mine.size(), options.jobs,
        [&](std::size_t k) {
          const SweepPoint& p = points[mine[k]];
          PointOutcome outcome = run_point(p, origin);
          json rows = json::array();
          for (const auto& r : outcome.rows) rows.push_back(row_to_json(r));
          json rec = point_record(p);
          rec["labels"] = outcome.labels;
          rec["status"] = "ok";
          rec["rows"] = rows;
          return rec.dump();
        },
        [&](std::size_t k, bool ok, const std::string& text) {
          const SweepPoint& p = points[mine[k]];
          json rec;
          if (ok) rec = json::parse(text, nullptr, false);
          if (!ok || rec.is_discarded()) {
            rec = point_record(p);
            rec["labels"] = json::object();
            rec["status"] = "error";
            rec["error"] = ok ? "worker returned unreadable output" : text;
            rec["rows"] = json::array();
            ok = false;
          }
          append_durable(my_jsonl, rec.dump() + "\n");
          if (mpi.rank == 0) append_durable(csv, record_csv(rec, fields));
          progress.finished(!ok);
        },
        [] { return g_stop_signal != 0; });
    summary.interrupted = g_stop_signal != 0;
  }
  progress.end();
  summary.ran = ran;

  if (mpi.active) {
    summary.interrupted = mpi.allreduce_int(summary.interrupted ? 1 : 0, true) != 0;
    summary.ran = static_cast<std::size_t>(mpi.allreduce_int(static_cast<int>(ran), false));
  }
  if (mpi.rank == 0) {
    const auto [records, failed] = consolidate(!summary.interrupted);
    (void)records;
    summary.failed = failed;
  }
  mpi.barrier();
  if (mpi.we_initialized) mpi.api.finalize();
  return summary;
}

}  // namespace dtsim::scenarios
