// The libtorch driver table (one row per layer kind, as calibrate/ops/registry.cpp for oneDNN) and
// what every driver shares: input tensors, the fill pattern, parameter counts.
#include <fmt/format.h>
#include <torch/version.h>

#include <algorithm>

#include "calibrate/torch/ops/driver_util.hpp"
#include "common/errors.hpp"
#include "models/op_rows.hpp"

namespace dtsim::torch_ops {
namespace detail {
namespace {

using models::OpKind;

struct Driver {
  OpKind op;
  TorchOp (*build)(const models::Layer&);
};

// Adding an op: its file under calibrate/torch/ops/, one row here, one case in tests/torch/.
constexpr Driver DRIVERS[] = {
    {OpKind::CONV2D, build_conv},
    {OpKind::FULLY_CONNECTED, build_inner_product},
    {OpKind::BATCH_NORM, build_batch_norm},
    {OpKind::RELU, build_eltwise},
    {OpKind::TANH, build_eltwise},
    {OpKind::MAX_POOL, build_pooling},
    {OpKind::AVG_POOL, build_pooling},
    {OpKind::GLOBAL_AVG_POOL, build_pooling},
    {OpKind::LRN, build_lrn},
    {OpKind::SOFTMAX_LOSS, build_softmax_loss},
    {OpKind::ADD, build_add},
    {OpKind::CONCAT, build_concat},
    {OpKind::DROPOUT, build_dropout},
};

// Row (transformer) ops by row name (models/op_rows.hpp).
struct RowDriver {
  std::string_view row;
  TorchOp (*build)(const models::Layer&);
};

constexpr RowDriver ROW_DRIVERS[] = {
    {"linear", build_row_linear},
    {"lm_head", build_row_lm_head},
    {"embedding", build_row_embedding},
    {"layer_norm", build_row_layer_norm},
    {"rms_norm", build_row_rms_norm},
    {"attention", build_row_attention},
    {"gelu", build_row_gelu},
    {"swiglu", build_row_swiglu},
    {"residual_add", build_row_residual_add},
    {"hidden_dropout", build_row_hidden_dropout},
};

const RowDriver* row_driver_or_null(const models::Layer& layer) {
  if (!layer.row) return nullptr;
  for (const auto& d : ROW_DRIVERS)
    if (d.row == layer.row->name) return &d;
  return nullptr;
}

const Driver* driver_or_null(OpKind op) {
  const auto* it = std::find_if(std::begin(DRIVERS), std::end(DRIVERS), [op](const Driver& d) { return d.op == op; });
  return it == std::end(DRIVERS) ? nullptr : it;
}

}  // namespace

void fill_pattern(at::Tensor& t) {
  // The oneDNN calibrator's pattern (period 2001, values in [-1, 1)); values do not change kernel times.
  constexpr std::int64_t FILL_PERIOD = 2001;
  constexpr std::int64_t FILL_STEP = 7919;
  const std::int64_t n = t.numel();
  const at::Tensor period =
      (at::arange(FILL_PERIOD, at::kLong).mul(FILL_STEP).remainder(FILL_PERIOD).sub(1000)).to(at::kFloat).mul(1e-3);
  const std::int64_t reps = (n + FILL_PERIOD - 1) / FILL_PERIOD;
  t.copy_(period.repeat({reps}).narrow(0, 0, n).view(t.sizes()));
}

std::vector<at::Tensor> make_srcs(const models::Layer& layer) {
  std::vector<at::Tensor> srcs;
  for (const auto& s : layer.src_shapes) {
    at::Tensor t = at::empty(torch_sizes(s, layer.op), at::kFloat);
    fill_pattern(t);
    srcs.push_back(t);
  }
  return srcs;
}

}  // namespace detail

std::vector<at::Tensor> TorchOp::parameters() const {
  return module ? module->parameters() : std::vector<at::Tensor>{};
}

std::int64_t TorchOp::parameter_count() const {
  std::int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

TorchOp build_torch_op(const models::Layer& layer) {
  const auto* driver = layer.row ? nullptr : detail::driver_or_null(layer.op);
  const auto* row = detail::row_driver_or_null(layer);
  if (driver == nullptr && row == nullptr)
    throw InputError(fmt::format("layer '{}': op '{}' has no libtorch driver (drivers: {})", layer.name,
                                 models::op_name(layer), fmt::join(torch_driver_names(), ", ")));
  TorchOp op = row ? row->build(layer) : driver->build(layer);
  if (op.module) op.module->train();
  return op;
}

bool has_torch_driver(models::OpKind op) { return detail::driver_or_null(op) != nullptr; }

bool has_torch_driver(const models::Layer& layer) {
  return layer.row ? detail::row_driver_or_null(layer) != nullptr : has_torch_driver(layer.op);
}

std::vector<std::string> torch_driver_names() {
  std::vector<std::string> out;
  for (const auto& d : detail::DRIVERS) out.emplace_back(models::to_string(d.op));
  for (const auto& d : detail::ROW_DRIVERS) out.emplace_back(d.row);
  return out;
}

std::vector<std::int64_t> torch_sizes(const models::Shape& shape, models::OpKind op) {
  if (op == models::OpKind::FULLY_CONNECTED || op == models::OpKind::SOFTMAX_LOSS) return {shape.n, shape.per_sample()};
  return {shape.n, shape.c, shape.h, shape.w};
}

std::string libtorch_version_string() { return fmt::format("libtorch {}", TORCH_VERSION); }

}  // namespace dtsim::torch_ops
