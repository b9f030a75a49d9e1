// A trainable network executed with oneDNN primitives, built from the same models::Model graph dtsim
// simulates: forward, backward (gradients into one flat buffer) and SGD with momentum. No oneDNN types
// leak out of this header; the MPI trainer (validate/trainer) and the tests drive it.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/model.hpp"

namespace dtsim::validate {

// One layer's slice of the flat parameter/gradient buffers (forward order).
struct ParamSlice {
  std::size_t layer = 0;   // index into Model::layers()
  std::string name;
  std::int64_t offset = 0; // elements into params()/grads()
  std::int64_t count = 0;  // elements
};

struct StepStats {
  double loss = 0;         // mean cross-entropy over the local batch
  int correct = 0;         // arg-max hits in the local batch
};

struct NetOptions {
  int threads = 1;          // OpenMP threads of the oneDNN primitives (fixed at construction)
  std::uint64_t seed = 1;   // weight initialisation (identical on every rank)
  bool time_layers = false; // accumulate per-layer forward/backward wall time
};

// Per-layer accumulated times (time_layers), forward order, input layer excluded.
struct LayerTiming {
  std::string name;
  std::string op;
  double fwd_s = 0;
  double bwd_s = 0;
};

class Net {
 public:
  // Builds primitives for `model` (its batch is the local batch) from the op drivers of calibrate/ops:
  // every op with a driver except dropout, plus flatten, and a final softmax_loss. Throws InputError
  // naming the first unsupported layer.
  Net(const models::Model& model, const NetOptions& options);
  ~Net();
  Net(const Net&) = delete;
  Net& operator=(const Net&) = delete;

  std::int64_t batch() const;
  std::int64_t input_elements() const;  // per batch, NHWC order
  std::int64_t classes() const;
  // The input buffer to fill before forward(): batch x H x W x C floats.
  float* input();

  // Runs the forward pass on input() with `labels` (batch entries in [0, classes)); training uses batch
  // statistics in batch_norm, evaluation uses the running statistics.
  StepStats forward(const std::vector<int>& labels, bool training);
  // Backward pass of the last training forward(); writes grads(). `on_layer_done(slice_index)` is
  // called as soon as a parameter slice's gradient is final (reverse order), for overlapped exchange.
  void backward(const std::function<void(std::size_t)>& on_layer_done = {});
  // SGD with momentum: v = momentum * v + g; w -= lr * v (over every parameter).
  void sgd_update(float lr, float momentum);

  std::int64_t param_count() const;
  float* params();
  float* grads();
  const std::vector<ParamSlice>& slices() const;  // forward order
  std::vector<LayerTiming> layer_timings() const;
  void reset_layer_timings();
  // Implementation names of the oneDNN primitives ("conv1 fwd: jit:avx512_core", ...).
  std::vector<std::string> implementations() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dtsim::validate
