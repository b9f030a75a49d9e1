// The libtorch calibration loop: the items, database reuse, windows and co-run copies of the oneDNN loop
// (calibrate/src/calibrate.cpp), with each pass run as an eager PyTorch step runs it. A backward pass is
// timed after an untimed forward that records the autograd graph it walks. Method: docs/calibration.md.
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <immintrin.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "calibrate/src/pass_entry.hpp"
#include "calibrate/torch/plugin.hpp"
#include "calibrate/torch/torch_ops.hpp"
#include "common/errors.hpp"

namespace dtsim::calibrate {
namespace {

constexpr int MAX_THREADS = 1024;
// Same windows as the oneDNN loop (calibrate.cpp): at most this many passes, closed past this many bytes.
constexpr std::size_t WINDOW_PASSES = 32;
constexpr std::int64_t WINDOW_BYTES = std::int64_t{512} << 20;
// SGD hyper-parameters of the timed update (values do not change the time).
constexpr double SGD_LEARNING_RATE = 0.01;
constexpr double SGD_MOMENTUM = 0.9;
constexpr std::size_t LINE_BYTES = 64;

// Writes back and drops a tensor's bytes from every cache level, as the oneDNN runner does.
void flush_tensor(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage() || t.nbytes() == 0) return;
  const auto* base = static_cast<const char*>(t.data_ptr());
  const std::size_t lines = (t.nbytes() + LINE_BYTES - 1) / LINE_BYTES;
  for (std::size_t i = 0; i < lines; ++i) _mm_clflush(base + i * LINE_BYTES);
}

struct Item {
  std::string signature;
  Pass pass = Pass::FWD;
  const models::Layer* layer = nullptr;  // null for the update
};

// One layer's torch op and the state between a backward's untimed forward and the timed backward.
class LayerRunner {
 public:
  explicit LayerRunner(const models::Layer& layer)
      : op_(torch_ops::build_torch_op(layer)), passes_(passes_of(layer)), needs_data_grad_(layer.needs_data_grad) {
    has_bwd_weights_ = std::count(passes_.begin(), passes_.end(), Pass::BWD_WEIGHTS) > 0;
    at::NoGradGuard no_grad;
    grad_dst_ = at::ones_like(op_.forward(op_.srcs));
  }
  // Untimed: the inputs and parameters require the gradients the pass computes (a forward records what
  // the step's backward will need); a backward pass runs its forward here. Then every tensor is flushed.
  void prepare(Pass pass) {
    const bool srcs_grad = pass == Pass::BWD_DATA || (pass == Pass::FWD && needs_data_grad_);
    const bool params_grad = pass != Pass::BWD_DATA || !has_bwd_weights_;
    for (auto& s : op_.srcs) {
      s.requires_grad_(srcs_grad);
      s.mutable_grad().reset();  // the gradient leaves as a fresh tensor, as it would flow upstream
    }
    for (auto& p : op_.parameters()) p.requires_grad_(params_grad);
    if (pass != Pass::FWD) dst_ = op_.forward(op_.srcs);
    for (const auto& s : op_.srcs) flush_tensor(s);
    for (const auto& p : op_.parameters()) {
      flush_tensor(p);
      flush_tensor(p.grad());
    }
    flush_tensor(dst_);
    flush_tensor(grad_dst_);
    _mm_mfence();
  }
  // Timed: the forward (graph recorded and dropped), or the backward through autograd.
  void run(Pass pass) {
    if (pass == Pass::FWD) {
      (void)op_.forward(op_.srcs);
      return;
    }
    dst_.backward(grad_dst_);
    dst_.reset();
  }
  const std::string& impl() const { return op_.impl; }

 private:
  torch_ops::TorchOp op_;
  std::vector<Pass> passes_;
  bool needs_data_grad_ = false;
  bool has_bwd_weights_ = false;
  at::Tensor grad_dst_;
  at::Tensor dst_;
};

// The optimizer step of an eager loop: torch::optim::SGD with momentum over the model's parameter
// tensors (each layer's, in its own shapes), then zero_grad() as the next iteration starts with.
class UpdateRunner {
 public:
  explicit UpdateRunner(const models::Model& model) {
    for (const auto& layer : model.layers()) {
      if (layer.costs.params == 0 || !torch_ops::has_torch_driver(layer.op)) continue;
      for (const auto& p : torch_ops::build_torch_op(layer).parameters()) {
        at::Tensor w = p.detach().clone().requires_grad_(true);
        w.mutable_grad() = at::ones_like(w).mul_(1e-3);
        params_.push_back(w);
      }
    }
    optimizer_ = std::make_unique<torch::optim::SGD>(
        params_, torch::optim::SGDOptions(SGD_LEARNING_RATE).momentum(SGD_MOMENTUM));
  }
  void prepare() {
    for (const auto& p : params_) {
      flush_tensor(p);
      flush_tensor(p.grad());
    }
    _mm_mfence();
  }
  void run() {
    optimizer_->step();
    optimizer_->zero_grad();
  }

 private:
  std::vector<at::Tensor> params_;
  std::unique_ptr<torch::optim::SGD> optimizer_;
};

// The runners of one window: one LayerRunner per signature (shared by its passes), the update's own.
class Window {
 public:
  Window(const std::vector<const Item*>& items, const models::Model& model) : items_(items) {
    for (const Item* item : items) {
      if (item->layer == nullptr) {
        update_ = std::make_unique<UpdateRunner>(model);
        by_item_.push_back(nullptr);
        continue;
      }
      if (runners_.empty() || last_signature_ != item->signature) {
        runners_.push_back(std::make_unique<LayerRunner>(*item->layer));
        last_signature_ = item->signature;
      }
      by_item_.push_back(runners_.back().get());
    }
  }
  std::size_t size() const { return items_.size(); }
  void prepare(std::size_t i) {
    if (by_item_[i]) by_item_[i]->prepare(items_[i]->pass);
    else update_->prepare();
  }
  void run(std::size_t i) {
    if (by_item_[i]) by_item_[i]->run(items_[i]->pass);
    else update_->run();
  }
  std::string impl(std::size_t i) const { return by_item_[i] ? by_item_[i]->impl() : "optim.SGD(momentum)+zero_grad"; }

 private:
  std::vector<const Item*> items_;
  std::vector<std::unique_ptr<LayerRunner>> runners_;
  std::unique_ptr<UpdateRunner> update_;
  std::vector<LayerRunner*> by_item_;
  std::string last_signature_;
};

}  // namespace

CalibrateSummary calibrate_model_libtorch(const models::Model& model, const CalibrateOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (options.threads < 0 || options.threads > MAX_THREADS)
    throw InputError(fmt::format("--threads must be in 0..{} (0 = every CPU), got {}", MAX_THREADS, options.threads));
  const int threads = options.threads == 0 ? online_cpus() : options.threads;
  if (options.instances < 1 || threads * options.instances > online_cpus())
    throw InputError(fmt::format("--instances must be in 1..{} for {} thread(s) each: co-run copies need a CPU per "
                                 "thread, got {}",
                                 std::max(online_cpus() / threads, 1), threads, options.instances));
  CalibrateSummary summary;
  summary.db_path = options.db_path.empty() ? default_db_path() : options.db_path;
  CalibrationDb db = CalibrationDb::load(summary.db_path);  // a corrupt file stops here, untouched

  at::set_num_threads(threads);
  HostInfo host = current_host("libtorch", threads, options.instances);
  host.library_version = torch_ops::libtorch_version_string();
  host.cache_state = "tensors flushed (clflush), passes timed interleaved, up to 32 per window; each backward "
                     "after an untimed forward";
  summary.host_key = host.key();

  std::vector<Item> items;
  std::map<std::string, bool> seen;
  std::int64_t params = 0;
  for (const auto& layer : model.layers()) {
    params += layer.costs.params;
    if (!torch_ops::has_torch_driver(layer.op)) continue;
    const std::string sig = op_signature(layer);
    for (Pass pass : passes_of(layer)) {
      const std::string key = sig + "|" + std::string(to_string(pass));
      if (seen.emplace(key, true).second) items.push_back({sig, pass, &layer});
    }
  }
  if (options.include_update && params > 0) items.push_back({update_signature(params), Pass::FWD, nullptr});
  summary.items = static_cast<int>(items.size());

  CleanTimerOptions timer = options.timer;
  timer.threads = threads * options.instances;

  int done = 0;
  const auto report = [&](const Item& item, bool reused, bool clean) {
    CalibrateProgress progress{++done, summary.items, item.signature, std::string(to_string(item.pass)), reused, clean};
    if (options.progress) options.progress(progress);
  };
  std::vector<const Item*> pending;
  for (const Item& item : items) {
    const PassEntry* existing = db.find(host.key(), item.signature, std::string(to_string(item.pass)));
    if (existing && existing->status == EntryStatus::MEASURED) {
      ++summary.reused;
      report(item, true, true);
    } else {
      pending.push_back(&item);
    }
  }

  std::size_t next = 0;
  while (next < pending.size()) {
    std::vector<const Item*> window_items;
    {
      std::int64_t bytes = 0;
      std::string last_sig;
      while (next < pending.size() &&
             (window_items.empty() || (bytes < WINDOW_BYTES && window_items.size() < WINDOW_PASSES))) {
        const Item* item = pending[next];
        if (item->signature != last_sig) {
          const PassWork w = item->layer ? pass_work(*item->layer, item->pass) : update_work(params);
          if (!window_items.empty() && bytes >= WINDOW_BYTES) break;
          bytes += static_cast<std::int64_t>(w.bytes);
          last_sig = item->signature;
        }
        window_items.push_back(item);
        ++next;
      }
    }
    Window main(window_items, model);
    // Co-run copies: each thread builds its own ops and runs the window's passes until the timing ends.
    std::atomic<bool> stop{false};
    std::atomic<int> ready{0};
    std::vector<std::thread> neighbours;
    std::exception_ptr neighbour_error;
    std::mutex error_mutex;
    for (int k = 1; k < options.instances; ++k) {
      neighbours.emplace_back([&] {
        try {
          at::set_num_threads(threads);
          Window copy(window_items, model);
          ++ready;
          while (!stop.load())
            for (std::size_t i = 0; i < copy.size() && !stop.load(); ++i) {
              copy.prepare(i);
              copy.run(i);
            }
        } catch (...) {
          std::lock_guard lock(error_mutex);
          neighbour_error = std::current_exception();
          ++ready;
        }
      });
    }
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
        for (std::size_t i = 0; i < main.size(); ++i) works.emplace_back([&, i] { main.run(i); });
        results = time_clean_interleaved(works, timer, [&](std::size_t i) { main.prepare(i); });
      }
    }
    if (neighbour_error) std::rethrow_exception(neighbour_error);
    for (std::size_t i = 0; i < main.size(); ++i) {
      const Item& item = *window_items[i];
      const PassEntry entry = timed_entry(results[i], item.layer, item.pass, params, main.impl(i));
      db.put(host, item.signature, std::string(to_string(item.pass)), entry);
      if (results[i].clean()) ++summary.timed;
      else ++summary.disturbed;
    }
    db.save(summary.db_path);
    for (std::size_t i = 0; i < main.size(); ++i) report(*window_items[i], false, results[i].clean());
  }
  summary.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace dtsim::calibrate
