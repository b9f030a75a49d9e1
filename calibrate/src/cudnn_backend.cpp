// cuDNN/cuBLAS timing of layer shapes on a GPU: the same (signature, pass) items as the oneDNN path,
// timed with the legacy cuDNN API (heuristic algorithm choice, workspace outside the timed region).
#include "calibrate/src/cudnn_backend.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "calibrate/op_signature.hpp"
#include "calibrate/src/pass_entry.hpp"
#include "common/errors.hpp"

namespace dtsim::calibrate {
namespace {

using models::OpKind;

void ck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Failure(fmt::format("CUDA {}: {}", what, cudaGetErrorString(e)));
}
void ck(cudnnStatus_t e, const char* what) {
  if (e != CUDNN_STATUS_SUCCESS) throw Failure(fmt::format("cuDNN {}: {}", what, cudnnGetErrorString(e)));
}
void ck(cublasStatus_t e, const char* what) {
  if (e != CUBLAS_STATUS_SUCCESS) throw Failure(fmt::format("cuBLAS {}: status {}", what, static_cast<int>(e)));
}

// Handles and device buffers of one calibration run; everything is released in the destructor.
class Gpu {
 public:
  Gpu() {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
      throw Failure("--backend cudnn: no GPU (cudaGetDeviceCount found no CUDA device)");
    if (cudnnCreate(&cudnn_) != CUDNN_STATUS_SUCCESS)
      throw Failure("--backend cudnn: no GPU (cudnnCreate failed: CUDNN_STATUS_NOT_INITIALIZED)");
    ck(cublasCreate(&cublas_), "cublasCreate");
    ck(cudaGetDeviceProperties(&props_, 0), "cudaGetDeviceProperties");
    // Twice the L2: one memset over it displaces every line a timed kernel left behind.
    flush_bytes_ = 2 * static_cast<std::size_t>(std::max(props_.l2CacheSize, 1 << 20));
    ck(cudaMalloc(&flush_, flush_bytes_), "cudaMalloc (L2 flush buffer)");
  }
  ~Gpu() {
    if (flush_) cudaFree(flush_);
    if (cublas_) cublasDestroy(cublas_);
    if (cudnn_) cudnnDestroy(cudnn_);
  }
  Gpu(const Gpu&) = delete;
  Gpu& operator=(const Gpu&) = delete;
  cudnnHandle_t cudnn() const { return cudnn_; }
  cublasHandle_t cublas() const { return cublas_; }
  const cudaDeviceProp& props() const { return props_; }
  // Inside a training step the other layers run between two executions of a layer, so its tensors
  // come from HBM, not from the L2 a back-to-back repeat leaves warm: flush before each repeat.
  void flush_l2() {
    ck(cudaMemset(flush_, 1, flush_bytes_), "cudaMemset (L2 flush)");
    ck(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }

 private:
  void* flush_ = nullptr;
  std::size_t flush_bytes_ = 0;
  cudnnHandle_t cudnn_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cudaDeviceProp props_{};
};

// Device buffers and descriptors owned by one layer's runner.
class GpuRunner {
 public:
  GpuRunner(Gpu& gpu, std::int64_t max_bytes) : gpu_(gpu), max_bytes_(max_bytes) {}
  ~GpuRunner() {
    for (void* p : buffers_) cudaFree(p);
    for (auto t : tensors_) cudnnDestroyTensorDescriptor(t);
    for (auto f : filters_) cudnnDestroyFilterDescriptor(f);
    for (auto c : convs_) cudnnDestroyConvolutionDescriptor(c);
    for (auto a : acts_) cudnnDestroyActivationDescriptor(a);
    for (auto p : pools_) cudnnDestroyPoolingDescriptor(p);
    for (auto l : lrns_) cudnnDestroyLRNDescriptor(l);
    for (auto o : ops_) cudnnDestroyOpTensorDescriptor(o);
  }
  GpuRunner(const GpuRunner&) = delete;
  GpuRunner& operator=(const GpuRunner&) = delete;

  float* alloc(std::int64_t elements) {
    const std::int64_t bytes = std::max<std::int64_t>(elements, 1) * 4;
    if (used_ + bytes > max_bytes_)
      throw InputError(fmt::format("--batch: a layer would need {:.2f} GiB of GPU memory for calibration",
                                   static_cast<double>(used_ + bytes) / (1 << 30)));
    void* p = nullptr;
    ck(cudaMalloc(&p, static_cast<std::size_t>(bytes)), "cudaMalloc");
    ck(cudaMemset(p, 0, static_cast<std::size_t>(bytes)), "cudaMemset");
    buffers_.push_back(p);
    used_ += bytes;
    return static_cast<float*>(p);
  }
  cudnnTensorDescriptor_t tensor(const models::Shape& s) {
    cudnnTensorDescriptor_t t;
    ck(cudnnCreateTensorDescriptor(&t), "cudnnCreateTensorDescriptor");
    tensors_.push_back(t);
    ck(cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, static_cast<int>(s.n),
                                  static_cast<int>(s.c), static_cast<int>(s.h), static_cast<int>(s.w)),
       "cudnnSetTensor4dDescriptor");
    return t;
  }
  void set(Pass pass, std::function<void()> f, std::string impl) {
    work_[pass] = std::move(f);
    impl_[pass] = std::move(impl);
  }
  bool has(Pass pass) const { return work_.count(pass) > 0; }
  void run(Pass pass) {
    work_.at(pass)();
    ck(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  std::string impl(Pass pass) const { return impl_.count(pass) ? impl_.at(pass) : ""; }

  Gpu& gpu_;
  std::int64_t max_bytes_;
  std::int64_t used_ = 0;
  std::vector<void*> buffers_;
  std::vector<cudnnTensorDescriptor_t> tensors_;
  std::vector<cudnnFilterDescriptor_t> filters_;
  std::vector<cudnnConvolutionDescriptor_t> convs_;
  std::vector<cudnnActivationDescriptor_t> acts_;
  std::vector<cudnnPoolingDescriptor_t> pools_;
  std::vector<cudnnLRNDescriptor_t> lrns_;
  std::vector<cudnnOpTensorDescriptor_t> ops_;
  std::map<Pass, std::function<void()>> work_;
  std::map<Pass, std::string> impl_;
};

const float ONE = 1.0f, ZERO = 0.0f;

void build_conv(GpuRunner& r, const models::Layer& layer, bool need_bwd_data) {
  const auto& p = layer.params;
  const auto& s = layer.src_shapes.front();
  const auto& d = layer.dst_shape;
  auto* h = r.gpu_.cudnn();
  auto x = r.tensor(s), y = r.tensor(d);
  cudnnFilterDescriptor_t w;
  ck(cudnnCreateFilterDescriptor(&w), "cudnnCreateFilterDescriptor");
  r.filters_.push_back(w);
  ck(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, static_cast<int>(d.c),
                                static_cast<int>(s.c / p.groups), p.kernel_h, p.kernel_w),
     "cudnnSetFilter4dDescriptor");
  cudnnConvolutionDescriptor_t conv;
  ck(cudnnCreateConvolutionDescriptor(&conv), "cudnnCreateConvolutionDescriptor");
  r.convs_.push_back(conv);
  ck(cudnnSetConvolution2dDescriptor(conv, p.pad_h, p.pad_w, p.stride_h, p.stride_w, p.dilation_h, p.dilation_w,
                                     CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
     "cudnnSetConvolution2dDescriptor");
  ck(cudnnSetConvolutionGroupCount(conv, p.groups), "cudnnSetConvolutionGroupCount");
  float* xs = r.alloc(s.elements());
  float* ys = r.alloc(d.elements());
  float* ws = r.alloc(layer.costs.params);
  float* dx = r.alloc(s.elements());
  float* dy = r.alloc(d.elements());
  float* dw = r.alloc(layer.costs.params);
  int n = 0;
  cudnnConvolutionFwdAlgoPerf_t fp;
  ck(cudnnGetConvolutionForwardAlgorithm_v7(h, x, w, conv, y, 1, &n, &fp), "forward algorithm");
  float* fws = r.alloc(static_cast<std::int64_t>(fp.memory / 4 + 1));
  r.set(Pass::FWD, [=] {
    ck(cudnnConvolutionForward(h, &ONE, x, xs, w, ws, conv, fp.algo, fws, fp.memory, &ZERO, y, ys),
       "cudnnConvolutionForward");
  }, fmt::format("cudnn_fwd_algo{}", static_cast<int>(fp.algo)));
  if (need_bwd_data) {
    cudnnConvolutionBwdDataAlgoPerf_t bp;
    ck(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, w, y, conv, x, 1, &n, &bp), "backward-data algorithm");
    float* bws = r.alloc(static_cast<std::int64_t>(bp.memory / 4 + 1));
    r.set(Pass::BWD_DATA, [=] {
      ck(cudnnConvolutionBackwardData(h, &ONE, w, ws, y, dy, conv, bp.algo, bws, bp.memory, &ZERO, x, dx),
         "cudnnConvolutionBackwardData");
    }, fmt::format("cudnn_bwd_data_algo{}", static_cast<int>(bp.algo)));
  }
  cudnnConvolutionBwdFilterAlgoPerf_t wp;
  ck(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, x, y, conv, w, 1, &n, &wp), "backward-filter algorithm");
  float* wws = r.alloc(static_cast<std::int64_t>(wp.memory / 4 + 1));
  r.set(Pass::BWD_WEIGHTS, [=] {
    ck(cudnnConvolutionBackwardFilter(h, &ONE, x, xs, y, dy, conv, wp.algo, wws, wp.memory, &ZERO, w, dw),
       "cudnnConvolutionBackwardFilter");
  }, fmt::format("cudnn_bwd_filter_algo{}", static_cast<int>(wp.algo)));
}

void build_fc(GpuRunner& r, const models::Layer& layer, bool need_bwd_data) {
  const auto& s = layer.src_shapes.front();
  const int n = static_cast<int>(s.n), k = static_cast<int>(s.per_sample()), m = static_cast<int>(layer.dst_shape.c);
  auto* h = r.gpu_.cublas();
  float* x = r.alloc(s.elements());
  float* w = r.alloc(static_cast<std::int64_t>(k) * m);
  float* y = r.alloc(static_cast<std::int64_t>(n) * m);
  float* dx = r.alloc(s.elements());
  float* dy = r.alloc(static_cast<std::int64_t>(n) * m);
  float* dw = r.alloc(static_cast<std::int64_t>(k) * m);
  // Column-major view: Y^T (m x n) = W (m x k, stored as k-major rows) * X^T (k x n).
  r.set(Pass::FWD, [=] {
    ck(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &ONE, w, k, x, k, &ZERO, y, m), "sgemm fwd");
  }, "cublas_sgemm");
  if (need_bwd_data)
    r.set(Pass::BWD_DATA, [=] {
      ck(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, k, n, m, &ONE, w, k, dy, m, &ZERO, dx, k), "sgemm bwd data");
    }, "cublas_sgemm");
  r.set(Pass::BWD_WEIGHTS, [=] {
    ck(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, k, m, n, &ONE, x, k, dy, m, &ZERO, dw, k), "sgemm bwd weights");
  }, "cublas_sgemm");
}

void build_layer(GpuRunner& r, const models::Layer& layer) {
  const auto passes = passes_of(layer);
  const bool need_bwd_data = std::count(passes.begin(), passes.end(), Pass::BWD_DATA) > 0;
  const auto& s = layer.src_shapes.front();
  const auto& d = layer.dst_shape;
  auto* h = r.gpu_.cudnn();
  const auto& p = layer.params;
  switch (layer.op) {
    case OpKind::CONV2D: build_conv(r, layer, need_bwd_data); return;
    case OpKind::FULLY_CONNECTED: build_fc(r, layer, need_bwd_data); return;
    case OpKind::BATCH_NORM: {
      auto x = r.tensor(s);
      auto c = r.tensor(models::Shape{1, s.c, 1, 1});
      float *xs = r.alloc(s.elements()), *ys = r.alloc(s.elements()), *dx = r.alloc(s.elements()),
            *dy = r.alloc(s.elements());
      float *scale = r.alloc(s.c), *bias = r.alloc(s.c), *rm = r.alloc(s.c), *rv = r.alloc(s.c),
            *sm = r.alloc(s.c), *sv = r.alloc(s.c), *ds = r.alloc(s.c), *db = r.alloc(s.c);
      const double eps = std::max(p.bn_epsilon, CUDNN_BN_MIN_EPSILON);
      r.set(Pass::FWD, [=] {
        ck(cudnnBatchNormalizationForwardTraining(h, CUDNN_BATCHNORM_SPATIAL, &ONE, &ZERO, x, xs, x, ys, c, scale,
                                                  bias, 0.1, rm, rv, eps, sm, sv),
           "batch norm forward");
      }, "cudnn_bn_spatial");
      r.set(Pass::BWD_DATA, [=] {
        ck(cudnnBatchNormalizationBackward(h, CUDNN_BATCHNORM_SPATIAL, &ONE, &ZERO, &ONE, &ZERO, x, xs, x, dy, x, dx,
                                           c, scale, ds, db, eps, sm, sv),
           "batch norm backward");
      }, "cudnn_bn_spatial");
      return;
    }
    case OpKind::RELU:
    case OpKind::TANH: {
      cudnnActivationDescriptor_t a;
      ck(cudnnCreateActivationDescriptor(&a), "cudnnCreateActivationDescriptor");
      r.acts_.push_back(a);
      ck(cudnnSetActivationDescriptor(a, layer.op == OpKind::RELU ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_TANH,
                                      CUDNN_NOT_PROPAGATE_NAN, 0.0),
         "cudnnSetActivationDescriptor");
      auto x = r.tensor(s);
      float *xs = r.alloc(s.elements()), *ys = r.alloc(s.elements()), *dx = r.alloc(s.elements()),
            *dy = r.alloc(s.elements());
      r.set(Pass::FWD, [=] { ck(cudnnActivationForward(h, a, &ONE, x, xs, &ZERO, x, ys), "activation fwd"); },
            "cudnn_activation");
      r.set(Pass::BWD_DATA, [=] {
        ck(cudnnActivationBackward(h, a, &ONE, x, ys, x, dy, x, xs, &ZERO, x, dx), "activation bwd");
      }, "cudnn_activation");
      return;
    }
    case OpKind::MAX_POOL:
    case OpKind::AVG_POOL:
    case OpKind::GLOBAL_AVG_POOL: {
      const bool global = layer.op == OpKind::GLOBAL_AVG_POOL;
      cudnnPoolingDescriptor_t pd;
      ck(cudnnCreatePoolingDescriptor(&pd), "cudnnCreatePoolingDescriptor");
      r.pools_.push_back(pd);
      const auto mode = layer.op == OpKind::MAX_POOL ? CUDNN_POOLING_MAX
                        : (global || p.count_include_pad) ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                          : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
      ck(cudnnSetPooling2dDescriptor(pd, mode, CUDNN_NOT_PROPAGATE_NAN, global ? static_cast<int>(s.h) : p.kernel_h,
                                     global ? static_cast<int>(s.w) : p.kernel_w, global ? 0 : p.pad_h,
                                     global ? 0 : p.pad_w, global ? 1 : p.stride_h, global ? 1 : p.stride_w),
         "cudnnSetPooling2dDescriptor");
      auto x = r.tensor(s), y = r.tensor(d);
      float *xs = r.alloc(s.elements()), *ys = r.alloc(d.elements()), *dx = r.alloc(s.elements()),
            *dy = r.alloc(d.elements());
      r.set(Pass::FWD, [=] { ck(cudnnPoolingForward(h, pd, &ONE, x, xs, &ZERO, y, ys), "pooling fwd"); },
            "cudnn_pooling");
      r.set(Pass::BWD_DATA, [=] {
        ck(cudnnPoolingBackward(h, pd, &ONE, y, ys, y, dy, x, xs, &ZERO, x, dx), "pooling bwd");
      }, "cudnn_pooling");
      return;
    }
    case OpKind::LRN: {
      cudnnLRNDescriptor_t l;
      ck(cudnnCreateLRNDescriptor(&l), "cudnnCreateLRNDescriptor");
      r.lrns_.push_back(l);
      ck(cudnnSetLRNDescriptor(l, static_cast<unsigned>(p.lrn_size), p.lrn_alpha, p.lrn_beta, p.lrn_k),
         "cudnnSetLRNDescriptor");
      auto x = r.tensor(s);
      float *xs = r.alloc(s.elements()), *ys = r.alloc(s.elements()), *dx = r.alloc(s.elements()),
            *dy = r.alloc(s.elements());
      r.set(Pass::FWD, [=] {
        ck(cudnnLRNCrossChannelForward(h, l, CUDNN_LRN_CROSS_CHANNEL_DIM1, &ONE, x, xs, &ZERO, x, ys), "lrn fwd");
      }, "cudnn_lrn");
      r.set(Pass::BWD_DATA, [=] {
        ck(cudnnLRNCrossChannelBackward(h, l, CUDNN_LRN_CROSS_CHANNEL_DIM1, &ONE, x, ys, x, dy, x, xs, &ZERO, x, dx),
           "lrn bwd");
      }, "cudnn_lrn");
      return;
    }
    case OpKind::SOFTMAX_LOSS:
    case OpKind::ADD:
    case OpKind::DROPOUT: {
      // Softmax forward; every backward (and add/dropout forward) is one 2-operand tensor op.
      cudnnOpTensorDescriptor_t o;
      ck(cudnnCreateOpTensorDescriptor(&o), "cudnnCreateOpTensorDescriptor");
      r.ops_.push_back(o);
      const auto op = layer.op == OpKind::DROPOUT ? CUDNN_OP_TENSOR_MUL : CUDNN_OP_TENSOR_ADD;
      ck(cudnnSetOpTensorDescriptor(o, op, CUDNN_DATA_FLOAT, CUDNN_NOT_PROPAGATE_NAN), "cudnnSetOpTensorDescriptor");
      auto x = r.tensor(s);
      float *a = r.alloc(s.elements()), *b = r.alloc(s.elements()), *c = r.alloc(s.elements());
      auto binary = [=](const float* alpha2) {
        return [=] { ck(cudnnOpTensor(h, o, &ONE, x, a, alpha2, x, b, &ZERO, x, c), "cudnnOpTensor"); };
      };
      if (layer.op == OpKind::SOFTMAX_LOSS) {
        r.set(Pass::FWD, [=] {
          ck(cudnnSoftmaxForward(h, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_INSTANCE, &ONE, x, a, &ZERO, x, c),
             "softmax fwd");
        }, "cudnn_softmax");
        static const float MINUS_ONE = -1.0f;
        r.set(Pass::BWD_DATA, binary(&MINUS_ONE), "cudnn_op_tensor");
      } else {
        r.set(Pass::FWD, binary(&ONE), "cudnn_op_tensor");
        r.set(Pass::BWD_DATA, binary(&ONE), "cudnn_op_tensor");
      }
      return;
    }
    case OpKind::CONCAT: {
      // Forward copies each input into its channel slice; backward copies the slices back out.
      float* dst = r.alloc(d.elements());
      std::vector<std::pair<float*, std::int64_t>> parts;  // buffer, channels
      for (const auto& in : layer.src_shapes) parts.emplace_back(r.alloc(in.elements()), in.c);
      const std::int64_t plane = d.h * d.w, n = d.n, dc = d.c;
      auto copy = [=](bool forward) {
        return [=] {
          std::int64_t offset = 0;
          for (const auto& [buf, c] : parts) {
            const std::size_t width = static_cast<std::size_t>(c * plane) * 4;
            const std::size_t dpitch = static_cast<std::size_t>(dc * plane) * 4;
            float* slice = dst + offset * plane;
            if (forward)
              ck(cudaMemcpy2DAsync(slice, dpitch, buf, width, width, static_cast<std::size_t>(n),
                                   cudaMemcpyDeviceToDevice),
                 "concat copy");
            else
              ck(cudaMemcpy2DAsync(buf, width, slice, dpitch, width, static_cast<std::size_t>(n),
                                   cudaMemcpyDeviceToDevice),
                 "split copy");
            offset += c;
          }
        };
      };
      r.set(Pass::FWD, copy(true), "cuda_memcpy2d");
      r.set(Pass::BWD_DATA, copy(false), "cuda_memcpy2d");
      return;
    }
    case OpKind::INPUT:
    case OpKind::FLATTEN: return;
    case OpKind::ROW: throw Failure(fmt::format("no cuDNN timing driver for op {} yet", models::op_name(layer)));
  }
}

void build_update(GpuRunner& r, std::int64_t params) {
  auto* h = r.gpu_.cublas();
  float *w = r.alloc(params), *v = r.alloc(params), *g = r.alloc(params);
  const int n = static_cast<int>(std::min<std::int64_t>(params, 1 << 30));
  static const float MOMENTUM = 0.9f, NEG_LR = -0.01f;
  r.set(Pass::FWD, [=] {
    ck(cublasSscal(h, n, &MOMENTUM, v, 1), "sscal");
    ck(cublasSaxpy(h, n, &ONE, g, 1, v, 1), "saxpy");
    ck(cublasSaxpy(h, n, &NEG_LR, v, 1, w, 1), "saxpy");
  }, "cublas_axpy");
}

}  // namespace

CalibrateSummary calibrate_model_cudnn(const models::Model& model, const CalibrateOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  Gpu gpu;  // throws the "no GPU" Failure first
  CalibrateSummary summary;
  summary.db_path = options.db_path.empty() ? default_db_path() : options.db_path;
  CalibrationDb db = CalibrationDb::load(summary.db_path);
  HostInfo host;
  host.backend = "cudnn";
  host.device_model = gpu.props().name;
  host.isa = fmt::format("sm_{}{}", gpu.props().major, gpu.props().minor);
  host.library_version = fmt::format("cuDNN {}.{}.{}", CUDNN_MAJOR, CUDNN_MINOR, CUDNN_PATCHLEVEL);
  host.threads = 0;
  host.cache_state = fmt::format("L2 flushed ({} KiB x 2 written before each repeat)", gpu.props().l2CacheSize >> 10);
  summary.host_key = host.key();

  struct Item {
    std::string signature;
    Pass pass;
    const models::Layer* layer;
  };
  std::vector<Item> items;
  std::map<std::string, bool> seen;
  std::int64_t params = 0;
  for (const auto& layer : model.layers()) {
    params += layer.costs.params;
    for (Pass pass : passes_of(layer))
      if (seen.emplace(op_signature(layer) + "|" + std::string(to_string(pass)), true).second)
        items.push_back({op_signature(layer), pass, &layer});
  }
  if (options.include_update && params > 0) items.push_back({update_signature(params), Pass::FWD, nullptr});
  summary.items = static_cast<int>(items.size());

  CleanTimerOptions timer = options.timer;
  timer.threads = 1;
  timer.check_disturbance = false;  // GPU kernels: host CPU time says nothing about disturbance
  std::unique_ptr<GpuRunner> runner;
  std::string runner_sig;
  int done = 0;
  for (const Item& item : items) {
    const std::string pass_name(to_string(item.pass));
    CalibrateProgress progress{++done, summary.items, item.signature, pass_name, false, true};
    if (const PassEntry* e = db.find(host.key(), item.signature, pass_name); e && e->status == EntryStatus::MEASURED) {
      ++summary.reused;
      progress.reused = true;
      if (options.progress) options.progress(progress);
      continue;
    }
    if (!runner || runner_sig != item.signature) {
      runner.reset();
      runner = std::make_unique<GpuRunner>(gpu, options.max_bytes);
      if (item.layer) build_layer(*runner, *item.layer);
      else build_update(*runner, params);
      runner_sig = item.signature;
    }
    if (!runner->has(item.pass)) continue;
    const TimingResult t = time_clean([&] { runner->run(item.pass); }, timer, [&] { gpu.flush_l2(); });
    const PassEntry entry = timed_entry(t, item.layer, item.pass, params, runner->impl(item.pass));
    db.put(host, item.signature, pass_name, entry);
    db.save(summary.db_path);
    ++summary.timed;
    if (options.progress) options.progress(progress);
  }
  summary.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace dtsim::calibrate

// Entry point of the plugin, found by dlsym (see CUDNN_PLUGIN_SYMBOL).
extern "C" void dtsim_calibrate_model_cudnn(const dtsim::models::Model* model,
                                            const dtsim::calibrate::CalibrateOptions* options,
                                            dtsim::calibrate::CalibrateSummary* summary) {
  *summary = dtsim::calibrate::calibrate_model_cudnn(*model, *options);
}
