// build_profile / anchor_profile: per-layer times of a model on a device from the calibration
// database (cached per file) and the device model.
#include "calibrate/profile.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "calibrate/database.hpp"
#include "calibrate/device_model.hpp"
#include "calibrate/gpu_kernel_model.hpp"
#include "calibrate/op_signature.hpp"
#include "common/errors.hpp"

namespace dtsim::calibrate {
namespace {

struct CachedModel {
  CalibrationDb db;
  HostModel host;
};

// The database and the host model of `backend` fitted from it, re-read only when the file changes (size
// or mtime).
std::shared_ptr<const CachedModel> cached_model(const std::string& path, const std::string& backend,
                                                const std::string& allocator) {
  struct Slot {
    long long mtime_ns = -1;
    long long size = -1;
    std::shared_ptr<const CachedModel> model;
  };
  static std::mutex mutex;
  static std::map<std::string, Slot> cache;
  struct stat st {};
  long long mtime_ns = -2, size = -2;
  if (::stat(path.c_str(), &st) == 0) {
    mtime_ns = static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
    size = static_cast<long long>(st.st_size);
  }
  std::lock_guard lock(mutex);
  Slot& slot = cache[path + "\n" + backend + "\n" + allocator];
  if (!slot.model || slot.mtime_ns != mtime_ns || slot.size != size) {
    auto fresh = std::make_shared<CachedModel>();
    fresh->db = CalibrationDb::load(path);
    fresh->host = fit_host_model(fresh->db, backend, allocator);
    slot = Slot{mtime_ns, size, std::move(fresh)};
  }
  return slot.model;
}

struct HostEff {
  double efficiency = 0;
  bool measured = false;
};

// The entry of `signature`/`pass` under host `key` when it was measured cleanly; nullptr otherwise.
const PassEntry* measured_entry(const CalibrationDb& db, const std::string& key, const std::string& signature,
                                const std::string& pass) {
  const PassEntry* e = db.find(key, signature, pass);
  return e && e->status == EntryStatus::MEASURED ? e : nullptr;
}

// Host efficiency of one pass: exact entry, else the same shape at the nearest calibrated batch,
// else the class fallback.
// `shape_key`: shape_pass_key(signature, pass).
HostEff host_eff_for(const CachedModel& c, const std::string& signature, Pass pass, const std::string& shape_key,
                     OpClass op_class, std::int64_t batch) {
  if (c.host.has_host()) {
    if (const PassEntry* e = measured_entry(c.db, c.host.host.key(), signature, std::string(to_string(pass))))
      return {host_efficiency(c.host.host, *e), true};
    if (auto it = c.host.by_shape.find(shape_key); it != c.host.by_shape.end()) {
      const auto& m = it->second;
      auto best = m.begin();
      for (auto b = m.begin(); b != m.end(); ++b)
        if (std::llabs(b->first - batch) < std::llabs(best->first - batch)) best = b;
      return {best->second, false};
    }
  }
  return {fallback_efficiency(c.host, op_class, pass), false};
}

// The database host that ran on this very device with this worker's threads and per-node process count,
// if any: its measured entries are the prediction itself, with no roofline in between (the roofline of a
// resolved host is assumed, not measured, and would clamp passes that beat it).
std::optional<HostInfo> same_machine_host(const CalibrationDb& db, const std::string& backend,
                                          const std::string& allocator, const platforms::Device& device,
                                          const WorkerPlacement& placement) {
  if (device.kind != platforms::DeviceKind::CPU || device.cpu_model.empty()) return std::nullopt;
  for (const auto& h : db.hosts())
    if (h.backend == backend && h.allocator == allocator && h.device_model == device.cpu_model &&
        h.threads == placement.threads &&
        h.instances == placement.workers_per_node)
      return h;
  return std::nullopt;
}

bool compute_bound_on_host(const HostModel& m, const PassWork& w, OpClass op_class) {
  const double peak = m.host.core_peak_flops * std::max(m.host.threads, 1);
  if (!(peak > 0) || !(m.host.mem_bandwidth_Bps > 0)) return is_compute_class(op_class);
  return w.flops / peak >= w.bytes / m.host.mem_bandwidth_Bps;
}

}  // namespace

double ComputeProfile::fwd_s() const {
  double s = 0;
  for (const auto& l : layers) s += l.fwd_s;
  return s;
}

double ComputeProfile::bwd_s() const {
  double s = 0;
  for (const auto& l : layers) s += l.bwd_s();
  return s;
}

double ComputeProfile::step_compute_s() const { return fwd_s() + bwd_s() + update_s; }

std::int64_t ComputeProfile::grad_bytes() const {
  std::int64_t b = 0;
  for (const auto& l : layers) b += l.grad_bytes;
  return b;
}

ComputeProfile build_profile(const models::Model& model, const platforms::Device& device,
                             const ProfileOptions& options) {
  if (options.threads < 0 || options.threads > 4096)
    throw InputError(fmt::format("threads per worker must be in 0..4096, got {}", options.threads));
  if (options.workers_per_node < 1 || options.workers_per_node > 4096)
    throw InputError(fmt::format("workers per node must be in 1..4096, got {}", options.workers_per_node));
  if (options.cpu_sockets < 1 || options.cpu_sockets > 64)
    throw InputError(fmt::format("cpu sockets must be in 1..64, got {}", options.cpu_sockets));
  if (model.batch() < 1) throw InputError(fmt::format("model '{}': batch must be >= 1", model.name()));
  const bool gpu = device.kind == platforms::DeviceKind::GPU;
  const PrecisionRow& prec = precision_row(options.precision);
  if (options.precision != Precision::FP32) {
    if (!gpu)
      throw InputError(fmt::format("precision {} needs a GPU with tensor cores; '{}' is a CPU", prec.name, device.name));
    precision_peak_flops(device, options.precision);  // throws for a GPU without the precision's tensor cores
  }
  // GPUs, and a CPU the model has a fit for (DeepBench's Xeon Phi): the kernel model times their
  // convolutions and GEMMs; everything else follows the device model.
  const KernelCoefficients* kernels = GpuKernelModel::builtin().coefficients_or_null(device.name, options.precision);
  const bool has_cnn_layers = std::any_of(model.layers().begin(), model.layers().end(),
                                          [](const models::Layer& l) { return kernel_model_applies(l.op); });
  if (gpu && !prec.cnn_fit && has_cnn_layers)
    throw InputError(fmt::format("precision {}: the GPU kernel model of convolution and fully-connected layers was "
                                 "fitted at fp32 and fp16 only (DeepBench); model '{}' has such layers (use fp32, "
                                 "fp16-mixed or bf16-mixed)",
                                 prec.name, model.name()));
  if (gpu && options.precision != Precision::FP32 && prec.cnn_fit && !kernels && has_cnn_layers)
    throw InputError(fmt::format("device '{}': the GPU kernel model has no {} fit or fallback for it "
                                 "(calibrate/data/gpu_kernels.json)",
                                 device.name, prec.name));
  // Activations, weight copies and gradients at the precision's element size.
  const double byte_scale = element_bytes(options.precision) / element_bytes(Precision::FP32);

  const std::string path = options.db_path.empty() ? default_db_path() : options.db_path;
  if (options.backend != "onednn" && options.backend != "libtorch")
    throw InputError(fmt::format("calibration backend must be 'onednn' or 'libtorch', got '{}'", options.backend));
  std::string backend = options.backend;
  // The heap regime matters where passes allocate in the timed region (libtorch); oneDNN's has none.
  const AllocatorRegime& regime = allocator_by_name(options.allocator, "allocator");
  std::string allocator = backend == "libtorch" ? regime.name : "";
  auto cached = cached_model(path, backend, allocator);
  if (!cached->host.has_host() && backend != "onednn") {
    // no libtorch calibration in this regime in this database: the oneDNN one, said in the profile
    backend = "onednn";
    allocator = "";
    cached = cached_model(path, backend, allocator);
  }

  // The framework's measured thread scaling, where the table describes its ops (options.backend: what the
  // framework runs, even when another backend's calibration stands in for the host).
  const ThreadScaling& table = ThreadScaling::builtin();
  const ThreadScaling* scaling = !table.empty() && table.backend == options.backend ? &table : nullptr;
  WorkerPlacement placement;
  placement.workers_per_node = options.workers_per_node;
  placement.cpu_sockets = options.cpu_sockets;
  ComputeProfile profile;
  profile.model = model.name();
  profile.device = device.name;
  profile.batch = static_cast<int>(model.batch());
  profile.precision = options.precision;
  profile.calibration_backend = backend;
  profile.calibration_allocator = allocator;
  profile.compute_model = kernels ? fmt::format("kernel model ({})", kernels->fitted_on) : "device model";
  if (device.kind == platforms::DeviceKind::CPU) {
    const int node_cores = std::max(device.cores, 1) * options.cpu_sockets;
    placement.threads = options.threads > 0 ? options.threads : std::max(1, node_cores / options.workers_per_node);
    profile.threads = placement.threads;
  }

  const std::optional<HostInfo> same = same_machine_host(cached->db, backend, allocator, device, placement);
  const std::string same_key = same ? same->key() : "";
  // A measured entry of the same machine and threads, used as-is; nullptr otherwise.
  auto as_measured = [&](const std::string& signature, const std::string& pass) -> const PassEntry* {
    return same ? measured_entry(cached->db, same_key, signature, pass) : nullptr;
  };
  profile.same_machine = same.has_value();

  double measured_s = 0, total_s = 0;
  std::map<std::string, double> by_source;  // seconds of forward+backward per source (ComputeProfile::sources)
  const std::string kernel_source =
      !kernels ? ""
      : kernels->fitted_on == device.name
          ? fmt::format("kernel model of {} (its own timings)", device.name)
          : fmt::format("kernel model of {} (fallback for {})", kernels->fitted_on, device.name);
  // On a GPU the transformer (row) layers are timed from the GEMM, attention and memory kernels their rows
  // list, pass by pass, wherever the tensor-kernel model has a fit (own or fallback) of every kernel that
  // pass runs (§4d): a dense-attention BERT on a V100 needs GEMM and memory fits only, flash attention an
  // attention fit in the precision's attention type. GEMMs run at the precision row's matrix precision (fp32
  // with TF32 off, as PyTorch's default; tf32; fp16; bf16; fp8 under Transformer Engine, whose attention
  // stays in bf16). A pass without those fits keeps the device model, and its source says which fit it lacked.
  const GpuKernelModel& tensor_model = GpuKernelModel::builtin();
  const std::string_view gemm_precision = prec.gemm;
  const std::string tensor_fits_of_device = gpu ? tensor_model.tensor_source(device.name) : "";
  const std::string tensor_source =
      tensor_fits_of_device.empty() ? "" : fmt::format("tensor-kernel model ({})", tensor_fits_of_device);
  bool any_tensor_pass = false;
  std::int64_t params = 0;
  for (const auto& layer : model.layers()) {
    if (layer.op == models::OpKind::INPUT) continue;
    LayerTime t;
    t.name = layer.name;
    t.op = std::string(models::op_name(layer));
    t.block = layer.row ? static_cast<int>(layer.params.seq.block) : -1;
    t.grad_bytes = static_cast<std::int64_t>(static_cast<double>(layer.costs.params) * element_bytes(options.precision));
    params += layer.costs.params;
    const OpClass op_class = op_class_of(layer);
    const std::string signature = op_signature(layer);
    const auto passes = passes_of(layer);
    bool all_measured = !passes.empty();
    for (Pass pass : passes) {
      double s = 0;
      bool measured = true;
      std::string source = "measured on this machine";
      std::optional<double> tensor_s;
      std::string missing_fit;  // the tensor-kernel fit this row pass lacks, when the device has some
      if (!tensor_source.empty() && layer.row) {
        missing_fit = row_tensor_missing_fit(tensor_model, layer, pass, device, gemm_precision, prec.attention);
        if (missing_fit.empty())
          tensor_s = row_tensor_pass_s(tensor_model, layer, pass, device, gemm_precision, byte_scale, prec.attention);
      }
      if (tensor_s) {
        s = *tensor_s;
        measured = false;  // timed on the lent GPU, not from this host's calibration entries
        source = tensor_source;
        any_tensor_pass = true;
      } else if (const PassEntry* exact = as_measured(signature, std::string(to_string(pass)))) {
        s = exact->time_s;
      } else {
        PassWork work = pass_work(layer, pass);
        const std::string shape_key = shape_pass_key(signature, to_string(pass));
        const HostEff he = host_eff_for(*cached, signature, pass, shape_key, op_class, model.batch());
        const bool host_bound = compute_bound_on_host(cached->host, work, op_class);
        work.bytes *= byte_scale;
        const bool by_kernel_model = kernels && kernel_model_applies(layer.op);
        s = by_kernel_model ? kernel_pass_s(*kernels, layer, pass, device, options.precision,
                                            kernel_share(device, placement.threads, placement.cpu_sockets))
                            : predict_pass_s(cached->host, op_class, work, he.efficiency, host_bound, device, placement,
                                             scaling, shape_key);
        measured = he.measured;
        source = by_kernel_model ? kernel_source
                 : he.measured   ? "device model from this host's measured entries"
                                 : "device model from op-class fallbacks";
        if (!missing_fit.empty()) source += fmt::format(" (no tensor-kernel fit for {})", missing_fit);
      }
      by_source[source] += s;
      (pass == Pass::FWD ? t.fwd_s : pass == Pass::BWD_DATA ? t.bwd_data_s : t.bwd_weights_s) = s;
      total_s += s;
      if (measured) measured_s += s;
      all_measured = all_measured && measured;
    }
    t.measured = all_measured;
    profile.layers.push_back(std::move(t));
  }
  if (any_tensor_pass) profile.compute_model = "tensor-kernel model (rows); " + profile.compute_model;
  if (params > 0) {
    if (const PassEntry* exact = as_measured(update_signature(params), "fwd")) {
      profile.update_s = exact->time_s;
    } else {
      double eff = fallback_efficiency(cached->host, OpClass::UPDATE, Pass::FWD);
      if (cached->host.has_host())
        if (const PassEntry* e = measured_entry(cached->db, cached->host.host.key(), update_signature(params), "fwd"))
          eff = host_efficiency(cached->host.host, *e);
      profile.update_s = predict_pass_s(cached->host, OpClass::UPDATE, update_work(params), eff, false, device, placement);
    }
  }
  profile.coverage = total_s > 0 ? measured_s / total_s : 0;
  for (const auto& [source, seconds] : by_source)
    if (total_s > 0 && seconds > 0) profile.sources.emplace_back(source, seconds / total_s);
  std::stable_sort(profile.sources.begin(), profile.sources.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  if (options.anchor_samples_per_s) anchor_profile(profile, *options.anchor_samples_per_s);
  return profile;
}

void anchor_profile(ComputeProfile& profile, double samples_per_s) {
  if (!(samples_per_s > 0) || !std::isfinite(samples_per_s))
    throw InputError(fmt::format("anchor throughput must be a finite number of samples/s > 0, got {}", samples_per_s));
  const double step = profile.step_compute_s();
  if (!(step > 0)) throw Failure(fmt::format("cannot anchor model '{}': its predicted step time is 0", profile.model));
  const double factor = profile.batch / (samples_per_s * step);
  for (auto& l : profile.layers) {
    l.fwd_s *= factor;
    l.bwd_data_s *= factor;
    l.bwd_weights_s *= factor;
  }
  profile.update_s *= factor;
  profile.anchor_factor *= factor;
}

std::string describe_sources(const ComputeProfile& profile) {
  std::string out;
  for (const auto& [source, share] : profile.sources)
    out += fmt::format("{}{:.0f}% {}", out.empty() ? "" : ", ", 100 * share, source);
  return out;
}

}  // namespace dtsim::calibrate
