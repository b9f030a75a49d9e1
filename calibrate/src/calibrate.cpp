// Calibration runs: distinct (signature, pass) items of a model, reuse of the database, oneDNN
// timing of what is missing with the disturbance-checked timer, and an atomic save after each item.
#include "calibrate/calibrate.hpp"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "calibrate/allocator.hpp"
#include "calibrate/device_model.hpp"
#include "calibrate/op_signature.hpp"
#include "calibrate/ops/op_driver.hpp"
#include "calibrate/src/calibration_loop.hpp"
#include "calibrate/src/pass_entry.hpp"
#include "calibrate/src/onednn_runner.hpp"
#include "common/errors.hpp"
#include "common/stats.hpp"
#include "platforms/device.hpp"
#if defined(DTSIM_HAVE_CUDNN) || defined(DTSIM_HAVE_TORCH)
#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "common/paths.hpp"
#endif
#ifdef DTSIM_HAVE_CUDNN
#include "calibrate/src/cudnn_backend.hpp"
#endif
#ifdef DTSIM_HAVE_TORCH
#include "calibrate/torch/plugin.hpp"
#endif

namespace dtsim::calibrate {
namespace {

constexpr int MAX_THREADS = 1024;
// Calibration times the passes of consecutive layers interleaved, each repeat after the others ran,
// so each finds the TLBs, branch predictors and instruction caches that other kernels left, as in a
// training step. A window holds at most this many passes and stops growing past this many bytes of
// the passes' minimum traffic (one larger layer still forms a window of its own).
constexpr std::size_t WINDOW_PASSES = 32;
constexpr std::int64_t WINDOW_BYTES = std::int64_t{512} << 20;

#if defined(DTSIM_HAVE_CUDNN) || defined(DTSIM_HAVE_TORCH)
// A calibrator module's path: $`env_name`, else `installed` (relative to the binary's folder, when the
// module is installed there), else where the build put it.
std::string plugin_path(const char* env_name, const char* installed, const char* built_path) {
  if (const char* env = std::getenv(env_name); env != nullptr && *env != '\0') return env;
  const auto bin = executable_dir();
  std::error_code ec;
  if (installed != nullptr && !bin.empty()) {
    const auto path = (bin / installed).lexically_normal();
    if (std::filesystem::is_regular_file(path, ec)) return path.string();
  }
  return built_path;
}

// Loads a calibrator module and runs its entry point `symbol`.
CalibrateSummary run_plugin(const models::Model& model, const CalibrateOptions& options, const std::string& path,
                            const char* symbol) {
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr)
    throw Failure(fmt::format("--backend {}: cannot load the calibrator module {}: {}", options.backend, path,
                              ::dlerror()));
  using Entry = void (*)(const models::Model*, const CalibrateOptions*, CalibrateSummary*);
  auto* entry = reinterpret_cast<Entry>(::dlsym(handle, symbol));
  if (entry == nullptr) throw Failure(fmt::format("--backend {}: {} has no symbol {}", options.backend, path, symbol));
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

// The oneDNN runners of one calibration window: one per signature, shared by that signature's passes,
// on the engine and stream of the thread that built them.
class OnednnWindow : public TimedWindow {
 public:
  OnednnWindow(const std::vector<const CalibrationItem*>& items, std::int64_t params, std::int64_t max_bytes)
      : items_(items), engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {
    for (const CalibrationItem* item : items) {
      if (by_item_.empty() || items_[by_item_.size() - 1]->signature != item->signature)
        runners_.push_back(item->layer ? std::make_unique<OpRunner>(engine_, *item->layer, max_bytes)
                                       : std::make_unique<OpRunner>(engine_, params, max_bytes));
      by_item_.push_back(runners_.back().get());
    }
  }
  std::size_t size() const override { return items_.size(); }
  void prepare(std::size_t i) override { by_item_[i]->flush(items_[i]->pass); }
  void run(std::size_t i) override { by_item_[i]->run(items_[i]->pass, stream_); }
  std::string impl(std::size_t i) const override { return by_item_[i]->impl(items_[i]->pass); }

 private:
  std::vector<const CalibrationItem*> items_;
  dnnl::engine engine_;
  dnnl::stream stream_;
  std::vector<std::unique_ptr<OpRunner>> runners_;
  std::vector<OpRunner*> by_item_;
};

}  // namespace

HostInfo current_host(const std::string& backend, int threads, int instances) {
  HostInfo h;
  h.backend = backend;
  h.threads = threads;
  h.instances = instances;
  const platforms::Device* dev = platforms::DeviceCatalog::builtin().by_name_or_null("host");
  if (!dev) throw Failure("device catalog has no 'host' entry: cannot describe the calibration host");
  h.device_model = dev->cpu_model.empty() ? dev->description : dev->cpu_model;
  h.core_peak_flops = device_core_peak_flops(*dev);
  // The process may use `threads` of the cores: its share of the socket's bandwidth.
  h.mem_bandwidth_Bps = dev->mem_bandwidth_Bps * std::min(1.0, static_cast<double>(threads) / std::max(dev->cores, 1));
  h.isa = onednn_isa_name();
  h.library_version = onednn_version_string();
  if (backend == "onednn") h.cache_state = "tensors flushed (clflush), passes timed interleaved, up to 32 per window";
  return h;
}

int calibration_threads(const CalibrateOptions& options) {
  const int threads = resolve_threads(options.threads);
  if (options.instances < 1 || threads * options.instances > online_cpus())
    throw InputError(fmt::format("--instances must be in 1..{} for {} thread(s) each: co-run copies need a CPU per "
                                 "thread, got {}",
                                 std::max(online_cpus() / threads, 1), threads, options.instances));
  return threads;
}

void run_calibration(const models::Model& model, const CalibrateOptions& options, const HostInfo& host, int threads,
                     CalibrationDb& db, CalibrateSummary& summary, const CalibrationBackend& backend) {
  std::vector<CalibrationItem> items;
  std::map<std::string, bool> seen;
  std::int64_t params = 0;
  for (const auto& layer : model.layers()) {
    params += layer.costs.params;
    if (!backend.times_layer(layer)) continue;
    const std::string sig = op_signature(layer);
    for (Pass pass : passes_of(layer)) {
      const std::string key = sig + "|" + std::string(to_string(pass));
      if (seen.emplace(key, true).second) items.push_back({sig, pass, &layer});
    }
  }
  if (options.include_update && params > 0) items.push_back({update_signature(params), Pass::FWD, nullptr});
  summary.items = static_cast<int>(items.size());

  CleanTimerOptions timer = options.timer;
  timer.threads = threads * options.instances;  // the co-run copies are this process's threads too

  int done = 0;
  const auto report = [&](const CalibrationItem& item, bool reused, bool clean) {
    CalibrateProgress progress{++done, summary.items, item.signature, std::string(to_string(item.pass)), reused, clean};
    if (options.progress) options.progress(progress);
  };
  std::vector<const CalibrationItem*> pending;
  for (const CalibrationItem& item : items) {
    const PassEntry* existing = db.find(host.key(), item.signature, std::string(to_string(item.pass)));
    if (existing && existing->status == EntryStatus::MEASURED) {
      ++summary.reused;
      report(item, true, true);
    } else {
      pending.push_back(&item);
    }
  }

  // Windows of consecutive layers are built together and their passes timed interleaved; each
  // window is saved when done, so an interrupt loses at most the current one.
  std::size_t next = 0;
  while (next < pending.size()) {
    std::vector<const CalibrationItem*> items_of_window;
    {
      std::int64_t bytes = 0;
      std::string last_sig;
      while (next < pending.size() &&
             (items_of_window.empty() || (bytes < WINDOW_BYTES && items_of_window.size() < WINDOW_PASSES))) {
        const CalibrationItem* item = pending[next];
        if (item->signature != last_sig) {
          // Estimate from the layer's work (the runner is not built yet): enough to bound windows.
          const PassWork w = item->layer ? pass_work(*item->layer, item->pass) : update_work(params);
          if (!items_of_window.empty() && bytes >= WINDOW_BYTES) break;
          bytes += static_cast<std::int64_t>(w.bytes);
          last_sig = item->signature;
        }
        items_of_window.push_back(item);
        ++next;
      }
    }
    const std::unique_ptr<TimedWindow> main = backend.make_window(items_of_window);
    // Co-run copies: each thread builds its own runners (after setting its thread count) and runs
    // the window's passes, preparation included, until the timing is over.
    std::atomic<bool> stop{false};
    std::atomic<int> ready{0};
    std::vector<std::thread> neighbours;
    std::exception_ptr neighbour_error;
    std::mutex error_mutex;
    for (int k = 1; k < options.instances; ++k) {
      neighbours.emplace_back([&] {
        try {
          backend.set_threads();
          const std::unique_ptr<TimedWindow> copy = backend.make_window(items_of_window);
          ++ready;
          while (!stop.load())
            for (std::size_t i = 0; i < copy->size() && !stop.load(); ++i) {
              copy->prepare(i);
              copy->run(i);
            }
        } catch (...) {
          std::lock_guard lock(error_mutex);
          neighbour_error = std::current_exception();
          ++ready;
        }
      });
    }
    // Whatever happens below, the copies are stopped and joined before this window ends.
    struct Joiner {
      std::atomic<bool>& stop;
      std::vector<std::thread>& threads;
      ~Joiner() {
        stop = true;
        for (auto& t : threads) t.join();
      }
    };
    std::vector<TimingResult> results;
    {
      const Joiner joiner{stop, neighbours};
      while (ready.load() < options.instances - 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (!neighbour_error) {
        std::vector<std::function<void()>> works;
        for (std::size_t i = 0; i < main->size(); ++i) works.emplace_back([&, i] { main->run(i); });
        results = time_clean_interleaved(works, timer, [&](std::size_t i) { main->prepare(i); });
      }
    }
    if (neighbour_error) std::rethrow_exception(neighbour_error);
    for (std::size_t i = 0; i < main->size(); ++i) {
      const CalibrationItem& item = *items_of_window[i];
      const PassEntry entry = timed_entry(results[i], item.layer, item.pass, params, main->impl(i));
      db.put(host, item.signature, std::string(to_string(item.pass)), entry);
      if (results[i].clean()) ++summary.timed;
      else ++summary.disturbed;
    }
    db.save(summary.db_path);  // every finished window is on disk
    for (std::size_t i = 0; i < main->size(); ++i) report(*items_of_window[i], false, results[i].clean());
  }
}

CalibrateSummary calibrate_model(const models::Model& model, const CalibrateOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (options.backend != "onednn" && options.backend != "cudnn" && options.backend != "libtorch")
    throw InputError(fmt::format("--backend must be 'onednn', 'libtorch' or 'cudnn', got '{}'", options.backend));
  if (options.max_bytes < (1 << 20)) throw InputError("calibration memory limit must be at least 1 MiB");
  if (!options.allocator.empty()) {
    const AllocatorRegime& regime = allocator_by_name(options.allocator);
    if (options.backend != "libtorch")
      throw InputError(fmt::format("--allocator: applies to --backend libtorch (the {} passes allocate their buffers "
                                   "before the timed region), got --backend {}",
                                   options.backend, options.backend));
    if (!allocator_loaded(regime))
      throw InputError(fmt::format("--allocator {}: this process's malloc is not {}; start dtsim with LD_PRELOAD={} "
                                   "(Debian package {})",
                                   regime.name, regime.name, regime.preload, regime.package));
  }
  if (options.backend == "cudnn") {
#ifdef DTSIM_HAVE_CUDNN
    return run_plugin(model, options, plugin_path("DTSIM_CUDNN_PLUGIN", DTSIM_INSTALL_BIN_TO_PLUGIN, DTSIM_CUDNN_PLUGIN),
                      CUDNN_PLUGIN_SYMBOL);
#else
    throw Failure("--backend cudnn: this dtsim was built without cuDNN (CUDA/cuDNN not found at configure time)");
#endif
  }
  if (options.backend == "libtorch") {
#ifdef DTSIM_HAVE_TORCH
    return run_plugin(model, options, plugin_path("DTSIM_TORCH_PLUGIN", nullptr, DTSIM_TORCH_PLUGIN), TORCH_PLUGIN_SYMBOL);
#else
    throw Failure("--backend libtorch: this dtsim was built without libtorch (libtorch-dev not found at configure "
                  "time, or -DDTSIM_WITH_TORCH=OFF)");
#endif
  }
  const int threads = calibration_threads(options);
  CalibrateSummary summary;
  summary.db_path = options.db_path.empty() ? default_db_path() : options.db_path;
  CalibrationDb db = CalibrationDb::load(summary.db_path);  // a corrupt file stops here, untouched

  // oneDNN fixes the thread count when a primitive is created: set it first.
  omp_set_num_threads(threads);
  const HostInfo host = current_host("onednn", threads, options.instances);
  summary.host_key = host.key();
  std::int64_t params = 0;
  for (const auto& layer : model.layers()) params += layer.costs.params;
  const CalibrationBackend onednn{
      [](const models::Layer& layer) { return ops::has_driver(layer); }, [threads] { omp_set_num_threads(threads); },
      [&](const std::vector<const CalibrationItem*>& items) -> std::unique_ptr<TimedWindow> {
        return std::make_unique<OnednnWindow>(items, params, options.max_bytes);
      }};
  run_calibration(model, options, host, threads, db, summary, onednn);
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

namespace {

double ratio_of(const StepCheckRound& r) { return r.step_s > 0 ? r.sum_s / r.step_s : 0; }

template <class F>
std::vector<double> over_rounds(const std::vector<StepCheckRound>& rounds, F f) {
  std::vector<double> v;
  for (const auto& r : rounds) v.push_back(f(r));
  return v;
}

}  // namespace

double StepCheck::median_ratio() const { return rounds.empty() ? 0 : quantile(over_rounds(rounds, ratio_of), 0.5); }
double StepCheck::min_ratio() const { return rounds.empty() ? 0 : quantile(over_rounds(rounds, ratio_of), 0.0); }
double StepCheck::max_ratio() const { return rounds.empty() ? 0 : quantile(over_rounds(rounds, ratio_of), 1.0); }
double StepCheck::median_step_s() const {
  return rounds.empty() ? 0 : quantile(over_rounds(rounds, [](const auto& r) { return r.step_s; }), 0.5);
}
double StepCheck::median_sum_s() const {
  return rounds.empty() ? 0 : quantile(over_rounds(rounds, [](const auto& r) { return r.sum_s; }), 0.5);
}

StepCheck check_step_onednn(const models::Model& model, int threads, int rounds, const CleanTimerOptions& timer_options) {
  if (rounds < 1 || rounds > 1000) throw InputError(fmt::format("--rounds must be in 1..1000, got {}", rounds));
  const int n = resolve_threads(threads);
  omp_set_num_threads(n);
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  constexpr std::int64_t MAX_STEP_BYTES = std::int64_t{8} << 30;
  std::vector<std::unique_ptr<OpRunner>> runners;
  // Distinct (signature, pass) items with how often the step runs them, and the runner that times them.
  struct Part {
    OpRunner* runner;
    Pass pass;
    int count;
  };
  std::vector<Part> parts;  // in the order the step first runs them
  std::map<std::string, std::size_t> part_index;
  std::int64_t params = 0, bytes = 0;
  for (const auto& layer : model.layers()) {
    params += layer.costs.params;
    if (passes_of(layer).empty()) continue;
    runners.push_back(std::make_unique<OpRunner>(engine, layer, MAX_STEP_BYTES - bytes));
    bytes += runners.back()->bytes();
    for (Pass pass : passes_of(layer)) {
      if (!runners.back()->has(pass)) continue;
      auto [it, fresh] = part_index.try_emplace(op_signature(layer) + "|" + std::string(to_string(pass)), parts.size());
      if (fresh) parts.push_back(Part{runners.back().get(), pass, 0});
      ++parts[it->second].count;
    }
  }
  std::unique_ptr<OpRunner> update;
  if (params > 0) update = std::make_unique<OpRunner>(engine, params, MAX_STEP_BYTES - bytes);
  // The step and its parts are timed interleaved, each repeat after a flush of its tensors, exactly as
  // calibrate times passes; each block is a round, and pairing step and parts within a block (seconds)
  // cancels the drift of a shared machine's speed from their ratio.
  const auto flush_all = [&] {
    for (auto& r : runners)
      for (Pass p : {Pass::FWD, Pass::BWD_DATA, Pass::BWD_WEIGHTS}) r->flush(p);
    if (update) update->flush(Pass::FWD);
  };
  std::vector<std::function<void()>> works;
  std::vector<std::function<void()>> flushes;
  std::vector<int> counts;
  works.emplace_back([&] {
    for (auto& r : runners) r->run(Pass::FWD, stream);
    for (auto it = runners.rbegin(); it != runners.rend(); ++it) {
      (*it)->run(Pass::BWD_DATA, stream);
      (*it)->run(Pass::BWD_WEIGHTS, stream);
    }
    if (update) update->run(Pass::FWD, stream);
  });
  flushes.emplace_back(flush_all);
  counts.push_back(0);
  for (const Part& part : parts) {
    works.emplace_back([&, part = part] { part.runner->run(part.pass, stream); });
    flushes.emplace_back([part = part] { part.runner->flush(part.pass); });
    counts.push_back(part.count);
  }
  if (update) {
    works.emplace_back([&] { update->run(Pass::FWD, stream); });
    flushes.emplace_back([&] { update->flush(Pass::FWD); });
    counts.push_back(1);
  }
  CleanTimerOptions timer = timer_options;
  timer.threads = n;
  timer.blocks = rounds;
  timer.max_blocks = std::max(timer.max_blocks, rounds);
  timer.min_repeats = std::max(timer.min_repeats, 3);
  timer.max_repeats = std::max(timer.max_repeats, timer.min_repeats);
  const std::vector<TimingResult> results =
      time_clean_interleaved(works, timer, [&](std::size_t i) { flushes[i](); });

  StepCheck check;
  const std::vector<BlockSample>& step_blocks = results.front().blocks;
  for (std::size_t b = 0; b < step_blocks.size(); ++b) {
    if (!step_blocks[b].clean) {
      ++check.rounds_rejected;
      continue;
    }
    StepCheckRound r{step_blocks[b].median_s, 0};
    for (std::size_t i = 1; i < results.size(); ++i) r.sum_s += counts[i] * results[i].blocks[b].median_s;
    check.rounds.push_back(r);
  }
  return check;
}

}  // namespace dtsim::calibrate
