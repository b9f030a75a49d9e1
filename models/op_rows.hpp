// The op-row table: transformer ops as rows (name, fields, shape rule, cost rule), not enum cases.
// A layer of a row op has OpKind::ROW and Layer::row pointing here; formulas in models/README.md.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "models/model.hpp"

namespace dtsim::models {

// One hyper-parameter a row reads from SeqParams (YAML key = name).
struct RowField {
  enum class Type { INT, BOOL, RATIO };
  std::string_view name;
  Type type = Type::INT;
  std::int64_t SeqParams::*int_field = nullptr;
  bool SeqParams::*bool_field = nullptr;
  double SeqParams::*double_field = nullptr;
  bool required = false;
};

// One pass of a row op, in the order of calibrate::Pass.
enum class RowPass { FWD, BWD_DATA, BWD_WEIGHTS };

// One kernel a row op's pass runs, for a tensor-kernel model (calibrate/gpu_kernel_model.hpp):
// GEMM C[m,n] = A[m,k] B[k,n] (`calls` times), flash attention, or a memory-bound op over `bytes`
// (FP32 bytes of its least traffic; the caller scales them to the training precision).
struct RowKernel {
  enum class Kind { GEMM, ATTENTION, MEMORY };
  Kind kind = Kind::MEMORY;
  double m = 0, n = 0, k = 0, calls = 1;                         // GEMM
  double batch = 0, heads = 0, kv_heads = 0, seq = 0, head_dim = 0;  // ATTENTION
  bool causal = false;
  std::string_view memory_op;  // MEMORY: op name of the memory fit (layer_norm, gelu_tanh, softmax, ...)
  double bytes = 0;
};

struct OpRow {
  std::string_view name;
  std::string_view summary;
  std::size_t min_inputs = 1, max_inputs = 1;
  std::vector<RowField> fields;
  // Device-model class of its kernels (calibrate/op_signature.hpp OpClass names: "fc" for GEMM-bound
  // ops, "eltwise", "batch_norm" for norms, "add", "dropout", "softmax").
  std::string_view cost_class;
  // True when backward runs separate data- and weight-gradient kernels (GEMMs); false for one kernel.
  bool split_backward = false;
  // Shape and cost rule: sets dst_shape, costs, saved and row_bytes from src_shapes and params.seq.
  // Throws InputError "<where>: <what>" on bad fields or shapes.
  void (*infer)(Layer& layer, const std::string& where) = nullptr;
  // The kernels one pass of an inferred layer runs (empty for a pass it does not run).
  std::vector<RowKernel> (*kernels)(const Layer& layer, RowPass pass) = nullptr;
};

// Every row, in table order.
const std::vector<OpRow>& op_rows();
// The row named `name`, or nullptr.
const OpRow* op_row_by_name_or_null(std::string_view name);

}  // namespace dtsim::models
