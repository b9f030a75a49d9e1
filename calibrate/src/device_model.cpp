// Device model: host efficiency per pass -> predicted time on any catalog device (docs/calibration.md).
#include "common/stats.hpp"
#include "calibrate/device_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <vector>

#include "common/errors.hpp"
#include "common/json_limits.hpp"
#include "common/paths.hpp"
#include "models/op_rows.hpp"

namespace dtsim::calibrate {
namespace {

using platforms::Device;
using platforms::DeviceKind;

// Work per thread (docs/calibration.md, "Work per thread"). A oneDNN primitive on n threads pays a fixed
// cost however little work each thread gets: the call, the parallel region's fork, its join barrier and each
// thread's set-up. A pass of W seconds of 1-thread work then takes c(n) + W / n, so its parallel efficiency
// falls with its work per thread w = W / n as w / (w + c(n)). c(n) = c(1) + k log2(n): the barrier's depth
// grows with log2 of the threads (the OpenMP runtimes' tree/hyper barriers, LLVM openmp/runtime/src/
// kmp_barrier.cpp). Measured:
// - c(1) = 5 us: this host at 1 thread, by CPU time (benchmarks/work_per_thread.sh): a pass with almost
//   nothing to compute (softmax over 10 values at batch 1) takes 5.2 us, its straight-line intercept over
//   batch 1-8 is 5.3 us, and the median intercept over the probe's 31 passes is 7.4 us (docs/calibration.md).
// - c(68) = 10 us: DeepBench's published KNL7250 sheet (Xeon Phi 7250, 68 cores, Intel MKL 2017;
//   ../shared/reference/deepbench/conv.csv): median of 2 t(8) - t(16) over the 91 passes it times at batch
//   8 and 16 (quartiles -20 and 50 us; the sheet rounds to 10 us).
constexpr double CPU_REGION_1_THREAD_S = 5e-6;
constexpr double CPU_REGION_MANY_S = 10e-6;
constexpr int CPU_REGION_MANY_THREADS = 68;
// Per-op overhead on a GPU: CUDA kernel launch (~5 us, NVIDIA CUDA C++ Best Practices Guide,
// "kernel launch overhead") plus the framework's per-op dispatch (TensorFlow/MXNet executors, a few us).
constexpr double GPU_OP_OVERHEAD_S = 1e-5;

// Best FP32 efficiency (fraction of peak) that cuDNN/cuBLAS reach on the largest, most regular shapes.
// Assumptions with their basis: cuBLAS SGEMM on large matrices runs at ~85-90% of FP32 peak on
// Pascal/Volta (NVIDIA cuBLAS performance pages); implicit-GEMM / Winograd-free FP32 convolution in
// cuDNN loses a further ~10% to im2col indexing and tile quantisation -> 0.75. A device whose
// architecture caps SGEMM lower states its `sgemm_efficiency` (devices.yaml, e.g. Kepler); its
// convolution keeps the same ratio to SGEMM (0.75 / 0.85).
constexpr double GPU_BEST_CONV_EFFICIENCY = 0.75;
constexpr double GPU_BEST_FC_EFFICIENCY = 0.85;
// Memory-bound kernels reach ~75% of the datasheet HBM2/GDDR bandwidth (STREAM-like copy/triad on
// P100/V100 reaches 540-800 GB/s of 732/900, Deakin et al., BabelStream 2016/2018).
constexpr double GPU_BEST_BANDWIDTH_EFFICIENCY = 0.75;

// Defaults for a class the database has never measured (assumptions, used only without data).
constexpr double DEFAULT_COMPUTE_EFFICIENCY = 0.5;
constexpr double DEFAULT_MEMORY_EFFICIENCY = 0.4;
// No 1-thread calibration: assume ideal thread scaling of the parallel kernels.
constexpr double DEFAULT_PARALLEL_FRACTION = 1.0;
// Largest thread-scaling table read (the shipped one, 335 shape-passes, is about 40 KB).
constexpr std::size_t THREAD_SCALING_MAX_BYTES = 8 << 20;
// Thread counts a table may name: a bound against absurd values (the widest CPU nodes have a few hundred threads).
constexpr std::int64_t THREAD_SCALING_MAX_THREADS = 1 << 16;
// Efficiencies are clamped to this range (a measured time can never beat the roofline).
constexpr double MIN_EFFICIENCY = 1e-4;
constexpr double MAX_EFFICIENCY = 1.0;
// The "best shape" of a class is this percentile of its host efficiencies.
constexpr double BEST_PERCENTILE = 0.9;

std::string class_of_op_name(const std::string& op) {
  if (op == "sgd_momentum") return std::string(to_string(OpClass::UPDATE));
  if (const models::OpRow* row = models::op_row_by_name_or_null(op))  // a transformer op: its row's class
    return std::string(to_string(op_class_by_name_or_null(row->cost_class).value_or(OpClass::NONE)));
  auto kind = models::op_kind_by_name_or_null(op);
  return std::string(to_string(kind ? op_class_of(*kind) : OpClass::NONE));
}

std::int64_t batch_of(const std::string& signature) {
  const auto pos = signature.find("src=");
  if (pos == std::string::npos) return 0;
  return std::strtoll(signature.c_str() + pos + 4, nullptr, 10);
}

}  // namespace

std::string strip_batch(const std::string& signature) {
  std::string out;
  out.reserve(signature.size());
  std::size_t i = 0;
  while (i < signature.size()) {
    const bool tag = signature.compare(i, 4, "src=") == 0 || signature.compare(i, 4, "dst=") == 0;
    if (tag) {
      out.append(signature, i, 4);
      i += 4;
      while (i < signature.size() && std::isdigit(static_cast<unsigned char>(signature[i]))) ++i;
      out += 'N';
    } else {
      out += signature[i++];
    }
  }
  return out;
}

std::string shape_pass_key(const std::string& signature, std::string_view pass) {
  return strip_batch(signature) + "|" + std::string(pass);
}

double device_core_peak_flops(const Device& d) {
  return d.clock_hz * d.simd_width_fp32 * d.fma_units * 2.0;
}

double device_peak_flops(const Device& d) {
  if (d.peak_flops > 0) return d.peak_flops;
  return device_core_peak_flops(d) * d.cores;
}

double cpu_region_s(int threads) {
  const double per_doubling_s =
      (CPU_REGION_MANY_S - CPU_REGION_1_THREAD_S) / std::log2(static_cast<double>(CPU_REGION_MANY_THREADS));
  return CPU_REGION_1_THREAD_S + per_doubling_s * std::log2(static_cast<double>(std::max(threads, 1)));
}

double op_overhead_s(const Device& d, int threads) {
  return d.kind == DeviceKind::GPU ? GPU_OP_OVERHEAD_S : cpu_region_s(threads);
}

double host_efficiency(const HostInfo& host, const PassEntry& e) {
  const double peak = host.core_peak_flops * std::max(host.threads, 1);
  double roof = 0;
  if (peak > 0) roof = std::max(roof, e.flops / peak);
  if (host.mem_bandwidth_Bps > 0) roof = std::max(roof, e.bytes / host.mem_bandwidth_Bps);
  // Net of the 1-thread call cost; the host's extra region cost at its threads (0.8 us at 2) stays in its
  // efficiency, below the spread of its timings.
  const double busy = std::max(e.time_s - cpu_region_s(1), 0.5 * e.time_s);
  if (!(busy > 0) || !(roof > 0)) return MIN_EFFICIENCY;
  return std::clamp(roof / busy, MIN_EFFICIENCY, MAX_EFFICIENCY);
}

std::optional<double> ThreadScaling::loss(const std::string& key, OpClass op_class, double n) const {
  if (!(n >= 1)) return std::nullopt;
  // The measured points of a row, (log2 T, L); a row needs two to say how L grows.
  const auto points = [&](const Row& row) {
    std::vector<std::pair<double, double>> p;
    for (std::size_t i = 0; i < threads.size() && i < row.size(); ++i)
      if (row[i]) p.emplace_back(std::log2(threads[i]), *row[i]);
    return p;
  };
  std::vector<std::pair<double, double>> p;
  if (auto it = shapes.find(key); !key.empty() && it != shapes.end()) p = points(it->second);
  if (p.size() < 2)
    if (auto ic = classes.find(std::string(to_string(op_class))); ic != classes.end()) p = points(ic->second);
  if (p.size() < 2) return std::nullopt;
  // Linear in log2 T between measured counts; the last segment's slope beyond the widest.
  const double x = std::log2(n);
  std::size_t i = 1;
  while (i + 1 < p.size() && x > p[i].first) ++i;
  const auto [x0, l0] = p[i - 1];
  const auto [x1, l1] = p[i];
  return std::max(1.0, l0 + (l1 - l0) * (x - x0) / (x1 - x0));
}

ThreadScaling ThreadScaling::load(const std::string& path) {
  const nlohmann::json j = read_json_file(path, "thread scaling", {THREAD_SCALING_MAX_BYTES});
  ThreadScaling t;
  const auto fail = [&](const std::string& what) { return InputError(fmt::format("{}: {}", path, what)); };
  if (!j.is_object() || !j.contains("threads") || !j.at("threads").is_array() || j.at("threads").size() < 2)
    throw fail("field 'threads' must list at least 2 thread counts, the first 1");
  for (const auto& v : j.at("threads")) {
    const bool in_range = v.is_number_integer() && v.get<std::int64_t>() >= 1 &&
                          v.get<std::int64_t>() <= THREAD_SCALING_MAX_THREADS;
    if (!in_range || (!t.threads.empty() && v.get<int>() <= t.threads.back()))
      throw fail(fmt::format("field 'threads' must hold ascending integers from 1 to {}", THREAD_SCALING_MAX_THREADS));
    t.threads.push_back(v.get<int>());
  }
  if (t.threads.front() != 1) throw fail("field 'threads' must start at 1");
  const auto rows = [&](const char* field, std::map<std::string, Row>& out) {
    if (!j.contains(field) || !j.at(field).is_object()) throw fail(fmt::format("field '{}' must be a map", field));
    for (const auto& [name, v] : j.at(field).items()) {
      if (!v.is_array() || v.size() != t.threads.size())
        throw fail(fmt::format("{}['{}'] must list one loss per thread count ({})", field, name, t.threads.size()));
      Row row;
      for (const auto& x : v) {
        if (x.is_null()) {  // not measured at this count
          row.emplace_back();
          continue;
        }
        if (!x.is_number() || !(x.get<double>() > 0))
          throw fail(fmt::format("{}['{}'] must hold numbers > 0 (or null where not measured)", field, name));
        row.emplace_back(x.get<double>());
      }
      if (!row.front()) throw fail(fmt::format("{}['{}'] must hold the loss at 1 thread", field, name));
      out[name] = std::move(row);
    }
  };
  rows("classes", t.classes);
  rows("shapes", t.shapes);
  if (!j.contains("backend") || !j.at("backend").is_string() || j.at("backend").get<std::string>().empty())
    throw fail("field 'backend' must name the calibration backend whose ops were measured (e.g. \"libtorch\")");
  t.backend = j.at("backend").get<std::string>();
  if (j.contains("node") && j.at("node").is_string()) t.source = j.at("node").get<std::string>();
  return t;
}

std::string ThreadScaling::builtin_path() {
  return replaceable_data_file("DTSIM_THREAD_SCALING", "calibrate/data/thread_scaling.json");
}

const ThreadScaling& ThreadScaling::builtin() {
  static const ThreadScaling table = [] {
    const std::string path = builtin_path();
    if (!replaceable_data_file_exists(path, "DTSIM_THREAD_SCALING")) return ThreadScaling{};
    return load(path);
  }();
  return table;
}

HostModel fit_host_model(const CalibrationDb& db, const std::string& backend, const std::string& allocator) {
  HostModel model;
  const std::vector<HostInfo> hosts = db.hosts();
  const HostInfo* best = nullptr;
  std::size_t best_n = 0;
  for (const auto& h : hosts) {
    if (h.backend != backend || h.allocator != allocator || h.instances != 1) continue;
    // Its measured passes: one whose passes were all disturbed (a T-thread calibration on a T-core machine
    // that something else shared) has none to carry.
    std::size_t n = 0;
    for (const auto& [sig, passes] : db.entries(h.key()))
      for (const auto& [pass, e] : passes) n += e.status == EntryStatus::MEASURED ? 1 : 0;
    if (!best || n > best_n || (n == best_n && h.threads > best->threads)) {
      best = &h;
      best_n = n;
    }
  }
  if (!best) return model;
  model.host = *best;
  std::map<std::string, std::vector<double>> per_class_pass, per_class;
  for (const auto& [sig, passes] : db.entries(best->key())) {
    for (const auto& [pass, e] : passes) {
      if (e.status != EntryStatus::MEASURED) continue;
      const double eff = host_efficiency(*best, e);
      const std::string cls = class_of_op_name(e.op);
      per_class_pass[cls + "/" + pass].push_back(eff);
      per_class[cls].push_back(eff);
      model.by_shape[shape_pass_key(sig, pass)][batch_of(sig)] = eff;
    }
  }
  for (auto& [k, v] : per_class_pass) model.class_efficiency[k] = quantile(v, 0.5);
  for (auto& [k, v] : per_class) model.class_best_efficiency[k] = quantile(v, BEST_PERCENTILE);

  // Same host and library at 1 thread: alone, and as co-run copies (the largest co-run calibrated).
  const auto same_machine = [&](const HostInfo& h) {
    return h.backend == best->backend && h.device_model == best->device_model && h.isa == best->isa &&
           h.library_version == best->library_version && h.allocator == best->allocator && h.threads == 1;
  };
  const HostInfo* alone = nullptr;
  const HostInfo* corun = nullptr;
  for (const auto& h : hosts) {
    if (!same_machine(h)) continue;
    if (h.instances == 1) alone = &h;
    else if (!corun || h.instances > corun->instances) corun = &h;
  }
  if (!alone) return model;
  if (corun) model.corun_cores = corun->instances;
  const double t = best->threads;
  std::map<std::string, std::vector<double>> fractions, slowdowns;
  for (const auto& [sig, passes] : db.entries(alone->key())) {
    for (const auto& [pass, e1] : passes) {
      if (e1.status != EntryStatus::MEASURED) continue;
      const std::string cls = class_of_op_name(e1.op);
      // Co-run slowdown: one thread's pass while every other core runs the same work. It is the share
      // of the T-thread loss that comes from shared hardware, not from the software's serial part.
      double slowdown = 1.0;
      if (corun)
        if (const PassEntry* ec = db.find(corun->key(), sig, pass); ec && ec->status == EntryStatus::MEASURED) {
          slowdown = std::max(1.0, ec->time_s / e1.time_s);
          slowdowns[cls].push_back(slowdown);
        }
      if (best->threads <= 1) continue;  // the Amdahl fit needs the same pass at more than 1 thread
      const PassEntry* en = db.find(best->key(), sig, pass);
      if (!en || en->status != EntryStatus::MEASURED) continue;
      // The T-thread pass ran with all T cores busy: it carries the slowdown of a fully busy host.
      const double speedup = e1.time_s * slowdown / en->time_s;
      const double p = (1.0 - 1.0 / speedup) / (1.0 - 1.0 / t);
      fractions[cls].push_back(std::clamp(p, 0.0, 1.0));
    }
  }
  for (auto& [cls, v] : fractions) model.parallel_fraction[cls] = quantile(v, 0.5);
  for (auto& [cls, v] : slowdowns) model.corun_slowdown[cls] = quantile(v, 0.5);
  return model;
}

double corun_factor(double slowdown, int busy_cores, int cores) {
  if (cores <= 1) return 1.0;
  const double others = std::clamp(static_cast<double>(busy_cores - 1) / (cores - 1), 0.0, 1.0);
  return 1.0 + (std::max(slowdown, 1.0) - 1.0) * others;
}

double fallback_efficiency(const HostModel& model, OpClass op_class, Pass pass) {
  const std::string key = std::string(to_string(op_class)) + "/" + std::string(to_string(pass));
  if (auto it = model.class_efficiency.find(key); it != model.class_efficiency.end()) return it->second;
  // Same class, any pass.
  for (const auto& [k, v] : model.class_efficiency)
    if (k.rfind(std::string(to_string(op_class)) + "/", 0) == 0) return v;
  return is_compute_class(op_class) ? DEFAULT_COMPUTE_EFFICIENCY : DEFAULT_MEMORY_EFFICIENCY;
}

double numa_memory_factor(const Device& device, const WorkerPlacement& placement) {
  const int cores = std::max(device.cores, 1);
  const int sockets = std::max(placement.cpu_sockets, 1);
  const int n = std::max(placement.threads, 1);
  const int spanned = std::min(sockets, (n + cores - 1) / cores);
  if (spanned <= 1 || !(device.socket_link_Bps > 0)) return 1.0;
  const double node_cores = static_cast<double>(cores) * sockets;
  const double share = std::min(1.0, n / node_cores);  // of the node's DRAM bandwidth and of its links
  const double dram_Bps = device.mem_bandwidth_Bps * sockets * share;
  const double remote_fraction = 1.0 - 1.0 / spanned;
  const double link_Bps = device.socket_link_Bps * spanned * share;  // each spanned socket sends over its links
  return std::max(1.0, remote_fraction * dram_Bps / link_Bps);
}

double predict_pass_s(const HostModel& model, OpClass op_class, const PassWork& work, double host_eff,
                      bool host_compute_bound, const Device& device, const WorkerPlacement& placement,
                      const ThreadScaling* scaling, const std::string& shape_key) {
  if (!(device_peak_flops(device) > 0) || !(device.mem_bandwidth_Bps > 0))
    throw InputError(fmt::format("device '{}': peak_flops and mem_bandwidth_Bps must be > 0 for the compute model",
                                 device.name));
  if (work.flops <= 0 && work.bytes <= 0) return 0;
  const double eff = std::clamp(host_eff, MIN_EFFICIENCY, MAX_EFFICIENCY);
  const std::string cls(to_string(op_class));
  const double overhead = op_overhead_s(device, placement.threads);

  if (device.kind == DeviceKind::GPU) {
    // Relative difficulty of the shape on the host, carried to the GPU's best efficiency of the class.
    double best_host = eff;
    if (auto it = model.class_best_efficiency.find(cls); it != model.class_best_efficiency.end())
      best_host = std::max(it->second, MIN_EFFICIENCY);
    const double relative = std::min(1.0, eff / best_host);
    const double sgemm = device.sgemm_efficiency > 0 ? device.sgemm_efficiency : GPU_BEST_FC_EFFICIENCY;
    const double compute_best =
        op_class == OpClass::FC ? sgemm : sgemm * (GPU_BEST_CONV_EFFICIENCY / GPU_BEST_FC_EFFICIENCY);
    const double gpu_eff =
        (is_compute_class(op_class) ? compute_best : GPU_BEST_BANDWIDTH_EFFICIENCY) * relative;
    const double roof = std::max(work.flops / device.peak_flops, work.bytes / device.mem_bandwidth_Bps);
    return overhead + roof / std::max(gpu_eff, MIN_EFFICIENCY);
  }

  // CPU socket(s): threads of this worker, and its share of the node's memory bandwidth.
  const int n = std::max(placement.threads, 1);
  const int sockets = std::max(placement.cpu_sockets, 1);
  const int node_cores = std::max(device.cores, 1) * sockets;
  // Its DRAM share, lowered when its traffic also crosses the socket links (numa_memory_factor).
  const double bw_share = device.mem_bandwidth_Bps * sockets * std::min(1.0, static_cast<double>(n) / node_cores) /
                          numa_memory_factor(device, placement);
  const double core_peak = device_core_peak_flops(device) > 0 ? device_core_peak_flops(device)
                                                                : device_peak_flops(device) / node_cores;
  double p = DEFAULT_PARALLEL_FRACTION;
  if (auto it = model.parallel_fraction.find(cls); it != model.parallel_fraction.end()) p = it->second;
  const double host_threads = std::max(model.host.threads, 1);
  const double amdahl_host = (1 - p) + p / host_threads;
  // Time at n threads as a fraction of one thread's: the host's own Amdahl fit up to its threads; beyond them,
  // the loss measured on a full node, L(n) / n against L(T) / T at the host's T (ThreadScaling).
  double amdahl_target = (1 - p) + p / n;
  double memory_loss = 1.0;  // the same measured loss, on the memory-bound path (its bandwidth share holds the 1/n)
  if (scaling && n > host_threads)
    if (const auto ln = scaling->loss(shape_key, op_class, n)) {
      const double lt = scaling->loss(shape_key, op_class, host_threads).value_or(1.0);
      amdahl_target = amdahl_host * (*ln / n) / (lt / host_threads);
      memory_loss = *ln / lt;
    }
  // Shared-hardware slowdown: a pass runs slower the more of the node's other cores are busy. The host
  // timing carries the slowdown of its own busy cores (its threads, out of the cores the co-run
  // calibration kept busy); the target gets the slowdown of its node's busy cores instead.
  double slowdown = 1.0;
  if (auto it = model.corun_slowdown.find(cls); it != model.corun_slowdown.end()) slowdown = std::max(it->second, 1.0);
  const int host_cores = std::max(model.corun_cores, std::max(model.host.threads, 1));
  const int node_busy = std::min(node_cores, n * std::max(placement.workers_per_node, 1));
  const double contention = corun_factor(slowdown, node_busy, node_cores) /
                            corun_factor(slowdown, std::max(model.host.threads, 1), host_cores);
  if (host_compute_bound) {
    // Single-core efficiency implied by the host's T-thread efficiency, then Amdahl at n threads.
    const double e1 = std::min(MAX_EFFICIENCY, eff * host_threads * amdahl_host);
    const double compute_s = work.flops / (core_peak * e1) * amdahl_target * contention;
    return overhead + std::max(compute_s, work.bytes / bw_share);
  }
  const double memory_s = work.bytes / (bw_share * eff) * contention * memory_loss;
  return overhead + std::max(memory_s, work.flops / (core_peak * n));
}

}  // namespace dtsim::calibrate
