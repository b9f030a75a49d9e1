// One libtorch driver per layer kind: the torch module (or functional op) an eager PyTorch training step
// runs for a dtsim layer, with its input tensors and, for the loss, its labels. The libtorch calibrator
// (runner.cpp) times them; tests/torch checks each against its dtsim layer. Only calibrate/torch/ and
// tests/torch include this header (it pulls in libtorch).
#pragma once
#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/model.hpp"

namespace dtsim::torch_ops {

// A layer as PyTorch runs it: the module holding its parameters (null for add and concat), the call
// an eager forward makes, and one input tensor per dtsim input (NCHW; N x features before a Linear).
struct TorchOp {
  std::shared_ptr<torch::nn::Module> module;
  std::function<at::Tensor(const std::vector<at::Tensor>&)> forward;
  std::vector<at::Tensor> srcs;
  std::string impl;  // what PyTorch calls, e.g. "nn.Conv2d", "torch.cat"

  std::vector<at::Tensor> parameters() const;  // the module's trainable parameters (empty without one)
  std::int64_t parameter_count() const;
};

// Builds the op of `layer` (training mode, parameters and inputs filled with values in [-1, 1]).
// InputError for a kind without a driver (input, flatten).
TorchOp build_torch_op(const models::Layer& layer);
// True when `op` has a libtorch driver (every kind with a training pass except flatten and input).
bool has_torch_driver(models::OpKind op);
// True when `layer` has a driver: its kind's, or for a row (transformer) op its row's (every row but
// rotary, moe_router, moe_experts, patch_embed and cls_head).
bool has_torch_driver(const models::Layer& layer);
// The op names that have a driver, in table order.
std::vector<std::string> torch_driver_names();

// The sizes PyTorch gives the tensor of `shape` feeding or leaving a layer of kind `op`: N x (C*H*W)
// around fully_connected and softmax_loss, N x C x H x W otherwise.
std::vector<std::int64_t> torch_sizes(const models::Shape& shape, models::OpKind op);

// "libtorch 1.13.1".
std::string libtorch_version_string();

}  // namespace dtsim::torch_ops
