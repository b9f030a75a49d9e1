// The libtorch calibration backend: its windows for the shared calibration loop
// (calibrate/src/calibration_loop.hpp), each pass run as an eager PyTorch step runs it. A backward pass is
// timed after an untimed forward that records the autograd graph it walks, in the heap regime the user's
// process runs (calibrate/allocator.hpp). Method: docs/calibration.md.
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <immintrin.h>
#include <malloc.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include "calibrate/allocator.hpp"
#include "calibrate/src/calibration_loop.hpp"
#include "calibrate/torch/plugin.hpp"
#include "calibrate/torch/torch_ops.hpp"
#include "common/errors.hpp"

namespace dtsim::calibrate {
namespace {

// SGD hyper-parameters of the timed update (values do not change the time).
constexpr double SGD_LEARNING_RATE = 0.01;
constexpr double SGD_MOMENTUM = 0.9;
constexpr std::size_t LINE_BYTES = 64;
// glibc malloc serves a block of at least M_MMAP_THRESHOLD with a fresh mmap (page faults on first touch,
// munmap on free). Freeing such a block raises the threshold to its size, at most DEFAULT_MMAP_THRESHOLD_MAX
// = 32 MiB on 64-bit, and the heap's trim threshold to twice that (mallopt(3), glibc malloc/malloc.c). The
// held regime sets that ceiling at once, so no block up to 32 MiB is ever faulted in again.
constexpr int GLIBC_MMAP_THRESHOLD_MAX_B = 32 << 20;
constexpr int GLIBC_TRIM_THRESHOLD_B = 2 * GLIBC_MMAP_THRESHOLD_MAX_B;

// The held regime: the heap's thresholds at glibc's ceiling, as MALLOC_MMAP_THRESHOLD_ and
// MALLOC_TRIM_THRESHOLD_ set them in a training process (calibrate/allocator.hpp, "glibc-held").
void hold_heap() {
  if (mallopt(M_MMAP_THRESHOLD, GLIBC_MMAP_THRESHOLD_MAX_B) != 1 ||
      mallopt(M_TRIM_THRESHOLD, GLIBC_TRIM_THRESHOLD_B) != 1)
    throw Failure("libtorch calibration: mallopt refused the held heap's thresholds");
}

// Writes back and drops a tensor's bytes from every cache level, as the oneDNN runner does.
void flush_tensor(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage() || t.nbytes() == 0) return;
  const auto* base = static_cast<const char*>(t.data_ptr());
  const std::size_t lines = (t.nbytes() + LINE_BYTES - 1) / LINE_BYTES;
  for (std::size_t i = 0; i < lines; ++i) _mm_clflush(base + i * LINE_BYTES);
}

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

// One untimed training pass over every layer, as a user's first step runs: in glibc's default regime the
// dynamic mmap threshold then stands where the step's own blocks put it (the largest block freed so far),
// so each timed pass maps and faults in exactly the blocks a training step does (above the threshold:
// e.g. ResNet-18's 512x512 3x3 weight gradients, 2 x 9 MiB each, docs/calibration.md).
void warm_heap(const models::Model& model) {
  for (const auto& layer : model.layers()) {
    if (layer.row || !torch_ops::has_torch_driver(layer.op) || passes_of(layer).empty()) continue;
    LayerRunner runner(layer);
    for (const Pass pass : passes_of(layer)) {
      runner.prepare(pass);
      runner.run(pass);
    }
  }
}

// The optimizer step of an eager loop: torch::optim::SGD with momentum over the model's parameter
// tensors (each layer's, in its own shapes), then zero_grad() as the next iteration starts with.
class UpdateRunner {
 public:
  explicit UpdateRunner(const models::Model& model) {
    for (const auto& layer : model.layers()) {
      if (layer.costs.params == 0 || !torch_ops::has_torch_driver(layer)) continue;
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
class TorchWindow : public TimedWindow {
 public:
  TorchWindow(const std::vector<const CalibrationItem*>& items, const models::Model& model) : items_(items) {
    for (const CalibrationItem* item : items) {
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
  std::size_t size() const override { return items_.size(); }
  void prepare(std::size_t i) override {
    if (by_item_[i]) by_item_[i]->prepare(items_[i]->pass);
    else update_->prepare();
  }
  void run(std::size_t i) override {
    if (by_item_[i]) by_item_[i]->run(items_[i]->pass);
    else update_->run();
  }
  std::string impl(std::size_t i) const override {
    return by_item_[i] ? by_item_[i]->impl() : "optim.SGD(momentum)+zero_grad";
  }

 private:
  std::vector<const CalibrationItem*> items_;
  std::vector<std::unique_ptr<LayerRunner>> runners_;
  std::unique_ptr<UpdateRunner> update_;
  std::vector<LayerRunner*> by_item_;
  std::string last_signature_;
};

}  // namespace

CalibrateSummary calibrate_model_libtorch(const models::Model& model, const CalibrateOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const int threads = calibration_threads(options);
  CalibrateSummary summary;
  summary.db_path = options.db_path.empty() ? default_db_path() : options.db_path;
  CalibrationDb db = CalibrationDb::load(summary.db_path);  // a corrupt file stops here, untouched

  at::set_num_threads(threads);
  const AllocatorRegime& regime = allocator_by_name(options.allocator.empty() ? DEFAULT_ALLOCATOR : options.allocator);
  if (regime.name == "glibc-held") hold_heap();
  else warm_heap(model);  // glibc's default, or a preloaded allocator: its state after a first step
  HostInfo host = current_host("libtorch", threads, options.instances);
  host.library_version = torch_ops::libtorch_version_string();
  host.allocator = regime.name;
  host.cache_state = fmt::format("tensors flushed (clflush), passes timed interleaved, up to 32 per window; each "
                                 "backward after an untimed forward; heap: {}",
                                 regime.name == "glibc-held" ? "held (mmap threshold 32 MiB, trim 64 MiB)"
                                                             : regime.name + " after one untimed step");
  summary.host_key = host.key();

  const CalibrationBackend libtorch{
      [](const models::Layer& layer) { return torch_ops::has_torch_driver(layer); },
      [threads] { at::set_num_threads(threads); },
      [&model](const std::vector<const CalibrationItem*>& items) -> std::unique_ptr<TimedWindow> {
        return std::make_unique<TorchWindow>(items, model);
      }};
  run_calibration(model, options, host, threads, db, summary, libtorch);
  summary.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace dtsim::calibrate
