// Calibration runs: distinct (signature, pass) items of a model, reuse of the database, oneDNN
// timing of what is missing with the disturbance-checked timer, and an atomic save after each item.
#include "calibrate/calibrate.hpp"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>

#include "calibrate/device_model.hpp"
#include "calibrate/op_signature.hpp"
#include "calibrate/src/pass_entry.hpp"
#include "calibrate/src/onednn_runner.hpp"
#include "common/errors.hpp"
#include "platforms/device.hpp"
#ifdef DTSIM_HAVE_CUDNN
#include <dlfcn.h>

#include <cstdlib>

#include "calibrate/src/cudnn_backend.hpp"
#endif

namespace dtsim::calibrate {
namespace {

constexpr int MAX_THREADS = 1024;

#ifdef DTSIM_HAVE_CUDNN
// Loads libdtsim_cudnn.so ($DTSIM_CUDNN_PLUGIN, else where the build put it) and runs its entry point.
CalibrateSummary run_cudnn_plugin(const models::Model& model, const CalibrateOptions& options) {
  const char* env = std::getenv("DTSIM_CUDNN_PLUGIN");
  const std::string path = (env != nullptr && *env != '\0') ? env : DTSIM_CUDNN_PLUGIN;
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr)
    throw Failure(fmt::format("--backend cudnn: cannot load the cuDNN plugin {}: {}", path, ::dlerror()));
  auto* entry = reinterpret_cast<CudnnPluginEntry>(::dlsym(handle, CUDNN_PLUGIN_SYMBOL));
  if (entry == nullptr)
    throw Failure(fmt::format("--backend cudnn: {} has no symbol {}", path, CUDNN_PLUGIN_SYMBOL));
  CalibrateSummary summary;
  entry(&model, &options, &summary);  // exceptions (no GPU ...) propagate; the handle stays loaded
  return summary;
}
#endif

int resolve_threads(int threads) {
  if (threads < 0 || threads > MAX_THREADS)
    throw InputError(fmt::format("--threads must be in 0..{} (0 = every CPU), got {}", MAX_THREADS, threads));
  return threads == 0 ? online_cpus() : threads;
}

struct Item {
  std::string signature;
  Pass pass = Pass::FWD;
  const models::Layer* layer = nullptr;  // null for the update
};

}  // namespace

HostInfo current_host(const std::string& backend, int threads) {
  HostInfo h;
  h.backend = backend;
  h.threads = threads;
  const platforms::Device* dev = platforms::DeviceCatalog::builtin().by_name_or_null("host");
  if (!dev) throw Failure("device catalog has no 'host' entry: cannot describe the calibration host");
  h.device_model = dev->cpu_model.empty() ? dev->description : dev->cpu_model;
  h.core_peak_flops = device_core_peak_flops(*dev);
  // The process may use `threads` of the cores: its share of the socket's bandwidth.
  h.mem_bandwidth_Bps = dev->mem_bandwidth_Bps * std::min(1.0, static_cast<double>(threads) / std::max(dev->cores, 1));
  h.isa = onednn_isa_name();
  h.library_version = onednn_version_string();
  return h;
}

CalibrateSummary calibrate_model(const models::Model& model, const CalibrateOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (options.backend != "onednn" && options.backend != "cudnn")
    throw InputError(fmt::format("--backend must be 'onednn' or 'cudnn', got '{}'", options.backend));
  if (options.max_bytes < (1 << 20)) throw InputError("calibration memory limit must be at least 1 MiB");
  if (options.backend == "cudnn") {
#ifdef DTSIM_HAVE_CUDNN
    return run_cudnn_plugin(model, options);
#else
    throw Failure("--backend cudnn: this dtsim was built without cuDNN (CUDA/cuDNN not found at configure time)");
#endif
  }
  const int threads = resolve_threads(options.threads);
  CalibrateSummary summary;
  summary.db_path = options.db_path.empty() ? default_db_path() : options.db_path;
  CalibrationDb db = CalibrationDb::load(summary.db_path);  // a corrupt file stops here, untouched

  // oneDNN fixes the thread count when a primitive is created: set it first.
  omp_set_num_threads(threads);
  const HostInfo host = current_host("onednn", threads);
  summary.host_key = host.key();

  std::vector<Item> items;
  std::map<std::string, bool> seen;
  std::int64_t params = 0;
  for (const auto& layer : model.layers()) {
    params += layer.costs.params;
    const std::string sig = op_signature(layer);
    for (Pass pass : passes_of(layer)) {
      const std::string key = sig + "|" + std::string(to_string(pass));
      if (seen.emplace(key, true).second) items.push_back({sig, pass, &layer});
    }
  }
  if (options.include_update && params > 0) items.push_back({update_signature(params), Pass::FWD, nullptr});
  summary.items = static_cast<int>(items.size());

  CleanTimerOptions timer = options.timer;
  timer.threads = threads;
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);

  // Items of one signature are consecutive: one runner per signature, built only when needed.
  std::unique_ptr<OpRunner> runner;
  std::string runner_sig;
  int done = 0;
  for (const Item& item : items) {
    const std::string pass_name(to_string(item.pass));
    CalibrateProgress progress{++done, summary.items, item.signature, pass_name, false, true};
    const PassEntry* existing = db.find(host.key(), item.signature, pass_name);
    if (existing && existing->status == EntryStatus::MEASURED) {
      ++summary.reused;
      progress.reused = true;
      if (options.progress) options.progress(progress);
      continue;
    }
    if (!runner || runner_sig != item.signature) {
      runner.reset();  // free the previous shape's tensors first
      runner = item.layer ? std::make_unique<OpRunner>(engine, *item.layer, options.max_bytes)
                          : std::make_unique<OpRunner>(engine, params, options.max_bytes);
      runner_sig = item.signature;
    }
    const TimingResult r = time_clean([&] { runner->run(item.pass, stream); }, timer);
    const PassEntry entry = timed_entry(r, item.layer, item.pass, params, runner->impl(item.pass));
    db.put(host, item.signature, pass_name, entry);
    db.save(summary.db_path);  // every finished item is on disk: an interrupt loses nothing done
    if (r.clean()) {
      ++summary.timed;
    } else {
      ++summary.disturbed;
      progress.clean = false;
    }
    if (options.progress) options.progress(progress);
  }
  summary.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

double sum_measured_step_s(const models::Model& model, const CalibrationDb& db, const std::string& host_key,
                           int* missing) {
  double total = 0;
  int absent = 0;
  std::int64_t params = 0;
  auto add = [&](const std::string& sig, Pass pass) {
    const PassEntry* e = db.find(host_key, sig, std::string(to_string(pass)));
    if (e && e->status == EntryStatus::MEASURED) total += e->time_s;
    else ++absent;
  };
  for (const auto& layer : model.layers()) {
    params += layer.costs.params;
    for (Pass pass : passes_of(layer)) add(op_signature(layer), pass);
  }
  if (params > 0) add(update_signature(params), Pass::FWD);
  if (missing) *missing = absent;
  return total;
}

TimingResult time_full_step_onednn(const models::Model& model, int threads, const CleanTimerOptions& timer_options) {
  const int n = resolve_threads(threads);
  omp_set_num_threads(n);
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  constexpr std::int64_t MAX_STEP_BYTES = std::int64_t{8} << 30;
  std::vector<std::unique_ptr<OpRunner>> runners;
  std::int64_t params = 0, bytes = 0;
  for (const auto& layer : model.layers()) {
    params += layer.costs.params;
    if (passes_of(layer).empty()) continue;
    runners.push_back(std::make_unique<OpRunner>(engine, layer, MAX_STEP_BYTES - bytes));
    bytes += runners.back()->bytes();
  }
  std::unique_ptr<OpRunner> update;
  if (params > 0) update = std::make_unique<OpRunner>(engine, params, MAX_STEP_BYTES - bytes);
  CleanTimerOptions timer = timer_options;
  timer.threads = n;
  return time_clean(
      [&] {
        for (auto& r : runners) r->run(Pass::FWD, stream);
        for (auto it = runners.rbegin(); it != runners.rend(); ++it) {
          (*it)->run(Pass::BWD_DATA, stream);
          (*it)->run(Pass::BWD_WEIGHTS, stream);
        }
        if (update) update->run(Pass::FWD, stream);
      },
      timer);
}

}  // namespace dtsim::calibrate
