// Op signatures, passes and per-pass work of a layer (see calibrate/op_signature.hpp).
#include "calibrate/op_signature.hpp"

#include <fmt/format.h>

#include "common/errors.hpp"
#include "models/op_rows.hpp"

namespace dtsim::calibrate {
namespace {

constexpr double BYTES_PER_FP32 = 4.0;
// SGD with momentum per parameter: v = mu*v + g (a multiply and an add), w = w - lr*v (one more
// multiply-add, counted as one op here: the step is memory bound and FLOPs barely matter).
constexpr double UPDATE_FLOPS_PER_PARAM = 3.0;
// Reads w, v, g and writes w, v.
constexpr double UPDATE_BYTES_PER_PARAM = 5.0 * BYTES_PER_FP32;

}  // namespace

std::string_view to_string(Pass pass) {
  switch (pass) {
    case Pass::FWD: return "fwd";
    case Pass::BWD_DATA: return "bwd_data";
    case Pass::BWD_WEIGHTS: return "bwd_weights";
  }
  return "?";
}

std::optional<Pass> pass_by_name_or_null(std::string_view name) {
  for (Pass p : {Pass::FWD, Pass::BWD_DATA, Pass::BWD_WEIGHTS})
    if (to_string(p) == name) return p;
  return std::nullopt;
}

std::string_view to_string(OpClass c) {
  switch (c) {
    case OpClass::CONV: return "conv";
    case OpClass::FC: return "fc";
    case OpClass::BATCH_NORM: return "batch_norm";
    case OpClass::ELTWISE: return "eltwise";
    case OpClass::POOL: return "pool";
    case OpClass::LRN: return "lrn";
    case OpClass::SOFTMAX: return "softmax";
    case OpClass::ADD: return "add";
    case OpClass::CONCAT: return "concat";
    case OpClass::DROPOUT: return "dropout";
    case OpClass::UPDATE: return "update";
    case OpClass::NONE: return "none";
  }
  return "?";
}

OpClass op_class_of(models::OpKind op) {
  using models::OpKind;
  switch (op) {
    case OpKind::CONV2D: return OpClass::CONV;
    case OpKind::FULLY_CONNECTED: return OpClass::FC;
    case OpKind::BATCH_NORM: return OpClass::BATCH_NORM;
    case OpKind::RELU:
    case OpKind::TANH: return OpClass::ELTWISE;
    case OpKind::MAX_POOL:
    case OpKind::AVG_POOL:
    case OpKind::GLOBAL_AVG_POOL: return OpClass::POOL;
    case OpKind::LRN: return OpClass::LRN;
    case OpKind::SOFTMAX_LOSS: return OpClass::SOFTMAX;
    case OpKind::ADD: return OpClass::ADD;
    case OpKind::CONCAT: return OpClass::CONCAT;
    case OpKind::DROPOUT: return OpClass::DROPOUT;
    case OpKind::INPUT:
    case OpKind::FLATTEN:
    case OpKind::ROW: return OpClass::NONE;
  }
  return OpClass::NONE;
}

std::optional<OpClass> op_class_by_name_or_null(std::string_view name) {
  for (OpClass c : {OpClass::CONV, OpClass::FC, OpClass::BATCH_NORM, OpClass::ELTWISE, OpClass::POOL, OpClass::LRN,
                    OpClass::SOFTMAX, OpClass::ADD, OpClass::CONCAT, OpClass::DROPOUT, OpClass::UPDATE})
    if (to_string(c) == name) return c;
  return std::nullopt;
}

OpClass op_class_of(const models::Layer& layer) {
  if (!layer.row) return op_class_of(layer.op);
  const auto c = op_class_by_name_or_null(layer.row->cost_class);
  // A row naming no device-model class would be costed as nothing: refuse rather than predict 0 s.
  if (!c) throw Failure(fmt::format("no cost model for op {} yet (class '{}')", layer.row->name, layer.row->cost_class));
  return *c;
}

bool is_compute_class(OpClass c) { return c == OpClass::CONV || c == OpClass::FC; }

std::string op_signature(const models::Layer& layer) {
  using models::OpKind;
  const auto& p = layer.params;
  std::string key = std::string(models::op_name(layer));
  for (const auto& s : layer.src_shapes) key += " src=" + models::to_string(s);
  key += " dst=" + models::to_string(layer.dst_shape);
  switch (layer.op) {
    case OpKind::CONV2D:
      key += fmt::format(" k={}x{} s={}x{} p={}x{} d={}x{} g={} bias={}", p.kernel_h, p.kernel_w, p.stride_h,
                         p.stride_w, p.pad_h, p.pad_w, p.dilation_h, p.dilation_w, p.groups, p.bias ? 1 : 0);
      break;
    case OpKind::FULLY_CONNECTED: key += fmt::format(" bias={}", p.bias ? 1 : 0); break;
    case OpKind::MAX_POOL:
    case OpKind::AVG_POOL:
      key += fmt::format(" k={}x{} s={}x{} p={}x{}", p.kernel_h, p.kernel_w, p.stride_h, p.stride_w, p.pad_h, p.pad_w);
      if (layer.op == OpKind::AVG_POOL) key += fmt::format(" incl_pad={}", p.count_include_pad ? 1 : 0);
      break;
    case OpKind::LRN: key += fmt::format(" size={}", p.lrn_size); break;
    case OpKind::ROW:
      for (const auto& f : layer.row->fields) {
        if (f.name == "block") continue;  // where the layer sits, not what its kernels do
        switch (f.type) {
          case models::RowField::Type::INT: key += fmt::format(" {}={}", f.name, p.seq.*f.int_field); break;
          case models::RowField::Type::BOOL: key += fmt::format(" {}={}", f.name, p.seq.*f.bool_field ? 1 : 0); break;
          case models::RowField::Type::RATIO: key += fmt::format(" {}={}", f.name, p.seq.*f.double_field); break;
        }
      }
      break;
    default: break;
  }
  return key;
}

std::string update_signature(std::int64_t params) { return fmt::format("sgd_momentum params={}", params); }

std::vector<Pass> passes_of(const models::Layer& layer) {
  using models::OpKind;
  switch (layer.op) {
    case OpKind::INPUT:
    case OpKind::FLATTEN: return {};
    case OpKind::ROW: {
      std::vector<Pass> passes = {Pass::FWD};
      const auto& c = layer.costs;
      if (layer.row->split_backward) {
        if (c.bwd_data_flops > 0) passes.push_back(Pass::BWD_DATA);
        if (c.bwd_weights_flops > 0) passes.push_back(Pass::BWD_WEIGHTS);
      } else if (c.bwd_data_flops + c.bwd_weights_flops > 0 || c.bwd_bytes > 0) {
        passes.push_back(Pass::BWD_DATA);  // one backward kernel (norms, attention, elementwise)
      }
      return passes;
    }
    case OpKind::CONV2D:
    case OpKind::FULLY_CONNECTED:
      // The first layer (fed by the input only) needs no gradient w.r.t. its input.
      if (layer.costs.bwd_data_flops == 0) return {Pass::FWD, Pass::BWD_WEIGHTS};
      return {Pass::FWD, Pass::BWD_DATA, Pass::BWD_WEIGHTS};
    default: return {Pass::FWD, Pass::BWD_DATA};
  }
}

PassWork pass_work(const models::Layer& layer, Pass pass) {
  const auto& c = layer.costs;
  double src_el = 0;
  for (const auto& s : layer.src_shapes) src_el += static_cast<double>(s.elements());
  const double dst_el = static_cast<double>(layer.dst_shape.elements());
  const double w = static_cast<double>(c.params);
  if (layer.row) {
    const bool split = layer.row->split_backward;
    switch (pass) {
      case Pass::FWD: return {c.fwd_flops, c.fwd_bytes};
      case Pass::BWD_DATA:
        if (split) return {c.bwd_data_flops, layer.row_bytes.bwd_data};
        return {c.bwd_data_flops + c.bwd_weights_flops, c.bwd_bytes};
      case Pass::BWD_WEIGHTS:
        if (split) return {c.bwd_weights_flops, layer.row_bytes.bwd_weights};
        return {0, 0};
    }
    return {};
  }
  const bool split = layer.op == models::OpKind::CONV2D || layer.op == models::OpKind::FULLY_CONNECTED;
  switch (pass) {
    case Pass::FWD: return {c.fwd_flops, c.fwd_bytes};
    case Pass::BWD_DATA:
      if (split) return {c.bwd_data_flops, BYTES_PER_FP32 * (dst_el + w + src_el)};
      // Parameter-free ops and batch norm: one backward primitive does everything.
      return {c.bwd_data_flops + c.bwd_weights_flops, c.bwd_bytes};
    case Pass::BWD_WEIGHTS:
      if (split) return {c.bwd_weights_flops, BYTES_PER_FP32 * (src_el + dst_el + w)};
      return {0, 0};
  }
  return {};
}

PassWork update_work(std::int64_t params) {
  const double p = static_cast<double>(params);
  return {UPDATE_FLOPS_PER_PARAM * p, UPDATE_BYTES_PER_PARAM * p};
}

}  // namespace dtsim::calibrate
