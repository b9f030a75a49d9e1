// GPU kernel model: time of a convolution or GEMM pass on a GPU (or on DeepBench's one CPU, the Xeon
// Phi 7250) from per-device coefficients fitted to DeepBench's published kernel timings, and of the
// tensor kernels of transformer layers (GEMM by shape and precision, flash attention, memory-bound ops)
// from timings on lent H100/H200 GPUs (calibrate/fit/fit_gpu_kernels.py -> data/gpu_kernels.json).
// Method, fitted numbers and cross-validation: docs/calibration.md §4b and §4d.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "calibrate/op_signature.hpp"
#include "models/model.hpp"
#include "platforms/device.hpp"

namespace dtsim::calibrate {

// Arithmetic precision of training, one row each (precision_rows()): FP32; TF32 tensor-core matmuls with FP32
// storage; FP16 or BF16 tensor-core math with FP32 accumulation and master weights (activations, weight
// copies and gradients in 16 bits); FP8 as NVIDIA Transformer Engine runs it (the GEMMs of linear layers in
// FP8, attention and everything else in BF16; Transformer Engine docs, "Using FP8 with Transformer Engine").
enum class Precision { FP32, TF32, FP16_MIXED, BF16_MIXED, FP8 };
struct PrecisionRow {
  Precision precision;
  std::string_view name;          // "fp32", "tf32", "fp16-mixed", "bf16-mixed", "fp8"
  std::string_view help;
  double element_bytes;           // activations and gradients
  std::string_view gemm;          // MathPrecision of transformer GEMMs ("fp32", "tf32", "fp16", "bf16", "fp8")
  std::string_view attention;     // MathPrecision of the attention core
  // The DeepBench-fitted CNN kernel model's precision that covers this one (convolutions and FC layers),
  // or nullopt when none does (tf32, fp8: no conv timings at those precisions).
  std::optional<Precision> cnn_fit;
  bool mixed;                     // FP32 master weights beside a 16-bit weight copy
};
const std::vector<PrecisionRow>& precision_rows();
const PrecisionRow& precision_row(Precision precision);
std::string_view to_string(Precision precision);  // "fp32", "fp16-mixed", ...
// Throws InputError naming the accepted values.
Precision precision_by_name(std::string_view name);
std::string precision_names();  // "fp32|tf32|fp16-mixed|bf16-mixed|fp8"
// Bytes of one activation / gradient element at `precision` (4 or 2).
double element_bytes(Precision precision);

// Fitted coefficients of one device at one precision:
// t = launch_s + max(flops / (peak * eff[class] * fill), bytes / (bandwidth * mem_eff)),
// fill = out / (out + half_fill[pass]), out = elements the pass writes.
struct KernelCoefficients {
  double launch_s = 0;
  double mem_eff = 0;
  double eff_default = 0;                    // for a class the fit never saw
  std::map<std::string, double> eff;         // "gemm", "conv_fwd/w3", "conv_bwd_data/k1", ...
  std::map<std::string, double> half_fill;   // "gemm", "conv_fwd", "conv_bwd_data", "conv_bwd_weights"
  std::string fitted_on;                     // catalog name(s) of the DeepBench GPU(s) the fit comes from
};

// A GEMM C[m,n] = A[m,k] B[k,n]. Its training pass names the operand layout cuBLAS runs: forward
// y = x w^T, backward-data dx = dy w, backward-weights dw = dy^T x (k = the tokens).
struct GemmShape {
  double m = 0, n = 0, k = 0;
};
// Scaled dot-product attention (flash backend): batch x heads query sequences of length seq over kv_heads
// key/value heads (GQA when fewer), head_dim wide; causal masks the upper triangle.
struct AttentionShape {
  double batch = 0, heads = 0, kv_heads = 0, seq = 0, head_dim = 0;
  bool causal = false;
};

// A matrix precision a tensor kernel runs at, one row of a table: name ("fp32", "tf32", "fp16", "bf16",
// "fp8"), bytes per element, and the devices.yaml peak it runs against.
struct MathPrecision {
  std::string_view name;
  double element_bytes;
  double platforms::Device::*peak_flops;
  std::string_view peak_field;
};
// InputError naming the accepted names for any other.
const MathPrecision& math_precision_by_name(std::string_view name);
// The device's peak at `precision`; InputError naming the devices.yaml field when the device states none.
double math_peak_flops(const platforms::Device& device, const MathPrecision& precision);

class GpuKernelModel {
 public:
  // The shipped model: <data_dir>/calibrate/data/gpu_kernels.json (or $DTSIM_GPU_KERNELS), loaded once;
  // an empty model when the shipped file is absent; InputError when $DTSIM_GPU_KERNELS names no file.
  static const GpuKernelModel& builtin();
  // The file builtin() reads: $DTSIM_GPU_KERNELS, else <data_dir>/calibrate/data/gpu_kernels.json.
  static std::string builtin_path();
  // Loads a model file; InputError naming the file and the field on a malformed one.
  static GpuKernelModel load(const std::string& path);

  // Coefficients for a catalog device at a precision (its own fit, else its documented fallback),
  // or nullptr when the model has none.
  const KernelCoefficients* coefficients_or_null(const std::string& device, Precision precision) const;
  // Adds coefficients for a device (tests and fallbacks).
  void set(const std::string& device, Precision precision, KernelCoefficients coefficients);

  // Tensor kernels (§4d), from the device's own fit or its fallback's, at the device's own peaks and
  // bandwidth. InputError when the model has no fit of that kind for the device, or the device states no
  // peak for the precision. Seconds of one call.
  double gemm_s(const platforms::Device& device, std::string_view precision, const GemmShape& shape,
                Pass pass) const;
  // Forward, or backward (dq, dk, dv). Precisions measured: bf16, fp16.
  double attention_s(const platforms::Device& device, std::string_view precision, const AttentionShape& shape,
                     bool backward) const;
  // A memory-bound op over `bytes` (the least it must move: each input read once, each output written
  // once). Ops fitted: layer_norm, rms_norm_fused, rmsnorm_torch_ops, gelu_tanh, gelu_erf, silu_mul, softmax,
  // dropout (fwd, bwd), residual_add (fwd); another op takes the median efficiency of the fitted ones.
  double memory_op_s(const platforms::Device& device, std::string_view op, bool backward, double bytes) const;
  // Where the tensor-kernel figures of `device` come from, per kind, for prediction headers, e.g.
  // "gemm, attention, memory: measured on h200-sxm"; "" when the model has none.
  std::string tensor_source(const std::string& device) const;
  // True when the model times `kind` ("gemm", "attention", "memory") on `device` (own fit or fallback)
  // at `precision` (a MathPrecision name; memory fits hold for every precision).
  bool has_tensor_fit(const std::string& device, std::string_view kind, std::string_view precision) const;

  struct TensorFits;  // parsed "tensor" block (gpu_kernel_model.cpp)

 private:
  std::map<std::string, KernelCoefficients> by_key_;  // "device|precision"
  std::shared_ptr<const TensorFits> tensor_;
};

// Seconds of one pass of a transformer (OpKind::ROW) layer from the tensor kernels its row lists
// (models::OpRow::kernels): GEMMs at `gemm_precision` (a MathPrecision name), flash attention at
// `attention_precision` (empty: the GEMMs'), memory-bound ops over the row's FP32 bytes times `byte_scale`
// (element bytes / 4).
// nullopt when the model lacks a fit one of those kernels needs (e.g. flash attention in fp32, or a row
// without kernels): the caller then keeps its other timing.
std::optional<double> row_tensor_pass_s(const GpuKernelModel& model, const models::Layer& layer, Pass pass,
                                        const platforms::Device& device, std::string_view gemm_precision,
                                        double byte_scale, std::string_view attention_precision = {});

// The first kernel of that pass the model has no fit for, as "<kind> in <precision>" (e.g. "attention in
// fp32") or "memory", or "" when row_tensor_pass_s times the pass; "kernels" for a row that lists none.
std::string row_tensor_missing_fit(const GpuKernelModel& model, const models::Layer& layer, Pass pass,
                                   const platforms::Device& device, std::string_view gemm_precision,
                                   std::string_view attention_precision = {});

// True for the layers the kernel model times: conv2d and fully_connected.
bool kernel_model_applies(models::OpKind op);

// Compute peak of `device` at `precision`: its GEMM peak (FP32, or the tensor-core peak of the precision's
// GEMMs; InputError when the device states none).
double precision_peak_flops(const platforms::Device& device, Precision precision);

// Predicted time (s) of one pass of a conv2d / fully_connected `layer` on `device` at `precision`.
// A device that states sgemm_efficiency (Kepler, fitted from Maxwell) has the compute efficiencies
// scaled by sgemm_efficiency / eff["gemm"] when that is below 1. `share` scales both roofs: the part
// of the fitted device the worker runs on (1 for a GPU; a CPU worker's cores over the socket's, as
// kernel_share computes). Returns 0 for a pass with no work.
double kernel_pass_s(const KernelCoefficients& k, const models::Layer& layer, Pass pass,
                     const platforms::Device& device, Precision precision, double share = 1.0);

// The part of a fitted device a worker with `threads` threads runs on: 1 for a GPU; for a CPU (fitted
// on one whole socket, e.g. DeepBench's Xeon Phi) threads / cores, at most `sockets` sockets' worth.
double kernel_share(const platforms::Device& device, int threads, int sockets);

}  // namespace dtsim::calibrate
