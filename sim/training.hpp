// Data-parallel training simulated over a platform: forward, backward, per-bucket gradient exchange
// (overlapped with backward), optimizer update and input I/O, replayed in SimGrid for N workers.
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "calibrate/profile.hpp"
#include "platforms/platform.hpp"
#include "sim/comm.hpp"

namespace dtsim::sim {

// A strategy is an exchange family ("allreduce", "ps", "ps-replicated", "ps-async",
// "data-parallel-single-node") plus, for families that run a collective, its algorithm ("ring", "tree",
// ...): "allreduce-ring", or "auto" (the collective library picks per call). Names, help and errors come
// from the exchange and collective tables.
struct Strategy {
  std::string exchange = "allreduce";
  // Default "auto": the collective library picks per call, as a real NCCL or MPI job does unless told
  // otherwise (with library `none`, auto is the ring).
  std::string collective = "auto";  // empty for families without a collective
  std::string name() const { return collective.empty() ? exchange : exchange + "-" + collective; }
  bool operator==(const Strategy&) const = default;
};
// "allreduce-ring", "ps", ...; InputError naming `what` and listing every accepted name otherwise.
Strategy strategy_by_name(const std::string& name, const std::string& what = "--strategy");
std::string to_string(const Strategy& s);
std::vector<std::string> strategy_names();
// One line per strategy: "name: description", for --help and docs.
std::string strategy_help();
bool uses_servers(const Strategy& s);     // parameter servers: --ps, placement and balance apply
bool single_node_only(const Strategy& s); // every worker on one node
bool asynchronous(const Strategy& s);     // no barrier: each worker goes on at its own pace

// Collective libraries (NCCL, Open MPI tuned, MVAPICH2, Gloo; docs/collective-libraries.md): the library
// picks each allreduce's algorithm (strategy allreduce-auto) and protocol. A point that names none gets
// one by precedence: framework > platform > default rule (resolve_collective_library).
std::string collective_library_names();  // "none, nccl-2.7, ..."
std::string collective_library_help();   // one line per library
// InputError naming `what` and listing the names when `name` is not a library.
void check_collective_library(const std::string& name, const std::string& what = "--collective-library");
// The default rule when nobody names a library: GPU nodes run NCCL, CPU nodes Open MPI.
inline constexpr const char* DEFAULT_GPU_LIBRARY = "nccl-2.7";
inline constexpr const char* DEFAULT_CPU_LIBRARY = "openmpi-4.0";

enum class DataMode { SYNTHETIC, REAL };
DataMode data_mode_by_name(const std::string& name);

// Folded parameter servers (docs/simulation-training.md "Folded workers"): the exact fold keeps one
// representative per switch; when the representatives would start more flows per iteration than this,
// groups of 2, 4, ... switches are folded with load-scaled links instead (approximate: within 2% of the
// exact fold on Piz Daint ResNet-50 at 512-1,024 workers). A cost budget, not a fitted constant: it
// keeps SimGrid near 10,000 concurrent flows, where a 1,024 x 256 prediction takes about 3 s.
constexpr double PS_FOLD_MAX_FLOWS = 12'000;
// Iterations simulated when a point names none (the first is warm-up). Synchronous workers meet at every
// step, so one warm-up iteration reaches their steady state. Asynchronous ones drift from the common
// start into their own rhythm over several: `ps-async` ResNet-50 on Piz Daint, 64 dedicated servers,
// efficiency at 3, 6 and 10 iterations: 0.863, 0.779, 0.778 (256 workers, unfolded) and 0.285, 0.184,
// 0.177 (1,024 workers, folded); docs/simulation-training.md "Asynchronous steady state".
constexpr int SYNC_ITERATIONS = 3;
constexpr int ASYNC_ITERATIONS = 6;

// Compute-communication interference on GPUs: while a collective's kernels run on a device, the compute
// overlapped with them runs this much slower. Lee et al., "Characterizing Compute-Communication Overlap
// in GPU-Accelerated Distributed Deep Learning" (arXiv 2507.03114, 2025): mean computational slowdown
// 18.9% (max 40.0%) with NCCL collectives overlapped, on A100, H100, MI250 and MI210.
constexpr double OVERLAP_COMPUTE_SLOWDOWN = 1.189;

// Persistent speed spread of same-model devices (docs/simulation-training.md, "Variability"): each worker's
// device computes at a fixed log-normal factor of mean 1 for the whole run, so synchronous training pays
// the slowest of N devices every iteration. Coefficients of variation derived from published spreads:
// GPUs: Sinha et al., "Not All GPUs Are Created Equal", SC'22 (arXiv 2208.11035v3): 8% average
// performance variation among same-SKU V100s (outliers excluded), read as the box-plot whisker range,
// 5.40 standard deviations of a normal spread -> 0.08 / 5.40.
inline constexpr double GPU_SPREAD_RANGE = 0.08;        // Sinha et al. SC'22 abstract: 8% average variation
// CPUs: Acun, Miller, Kale, "Variation Among Processors Under Turbo Boost in HPC Systems", ICS'16: up to 16%
// execution-time difference among the processors of Turbo Boost machines (Edison, Cab, Stampede), read
// as the range of ~10,000 processors, 7.7 standard deviations -> 0.16 / 7.7.
inline constexpr double CPU_SPREAD_RANGE = 0.16;        // Acun et al. ICS'16: up to 16% difference
inline constexpr double WHISKER_RANGE_SIGMAS = 5.396;   // 2 x (Q3 + 1.5 IQR) of a standard normal = 2 x 2.698
inline constexpr double RANGE_10K_SIGMAS = 7.7;         // expected range of 10,000 standard normals (2 x 3.85)
inline constexpr double GPU_DEVICE_CV = GPU_SPREAD_RANGE / WHISKER_RANGE_SIGMAS;  // 0.0148
inline constexpr double CPU_DEVICE_CV = CPU_SPREAD_RANGE / RANGE_10K_SIGMAS;      // 0.0208
// device_cv value meaning "by the platform's device class" (the default of a scenario).
inline constexpr double DEVICE_CV_BY_CLASS = -1;

// Compute variation of the workers. The simulation library's default is none (every closed-form test
// holds); scenarios default to the device-class spread (default_training_point). `--no-variability`
// clears all of it (Variability::none()).
struct Variability {
  double device_cv = 0;           // persistent per-device factor (log-normal, mean 1); DEVICE_CV_BY_CLASS: by class
  double jitter_cv = 0;           // coefficient of variation of each worker's compute per iteration (log-normal, mean 1)
  double straggler_probability = 0;  // per worker and iteration
  double straggler_slowdown = 1;  // compute multiplier of a straggler
  std::uint64_t seed = 1;
  static Variability none() { return {}; }
  bool operator==(const Variability&) const = default;
};

// Expected maximum over n workers of the log-normal jitter factor with coefficient of variation cv
// (numerical integral): what synchronous training pays per iteration for jitter alone.
double expected_max_lognormal_factor(int n, double cv);
// The same with the first of the n devices at exactly 1 (the reference device, TrainingPoint
// device spread): E[max(1, X_1..X_{n-1})], what a synchronous step pays under the device spread.
double expected_max_with_reference_factor(int n, double cv);

// What a framework's runtime adds around each collective (docs/frameworks.md).
struct FrameworkRuntime {
  std::string name = "none";
  bool negotiation = false;    // a small allreduce among all ranks before each collective (Horovod)
  // Gradient copies into a buffer before each collective and back after it: a bucket of at least this many
  // gradient tensors (after fusion) is copied; 0 = none. Horovod 2 (fused tensors go through the fusion buffer,
  // a single one is reduced in place); PyTorch DDP 1 (every gradient is copied into its bucket view).
  // Rates and where they run: docs/frameworks.md "Gradient copies".
  int copy_min_items = 0;
  // Calibration whose per-layer times the framework's compute runs at: "onednn" (kernels at their best),
  // "libtorch" (eager PyTorch ops, `dtsim calibrate --backend libtorch`; oneDNN where none exist).
  std::string calibration = "onednn";
  // The collective library the framework runs on GPU and on CPU workers ("" = the platform's).
  std::string gpu_library{};
  std::string cpu_library{};
  // CPU workers on runs across nodes: cores per process that the communication library's progress
  // servers hold (Intel MLSL's endpoint servers), so compute runs on the process's other cores;
  // `comm_cores_xeon_phi` on Xeon Phi (microarchitecture knights-landing). 0 = none.
  int comm_cores = 0;
  int comm_cores_xeon_phi = 0;
  // PyTorch DDP's buckets (plan_iteration_ddp): formed in forward order, the first up to this many bytes,
  // the later ones up to the fusion size, reduced in reverse. 0 = dtsim's buckets, filled in backward
  // order up to the fusion size (Horovod's fusion).
  double ddp_first_bucket_bytes = 0;
  // The cores per process the servers hold on `cpu` (0 for a GPU).
  int comm_cores_on(const platforms::Device& cpu) const;
  bool operator==(const FrameworkRuntime&) const = default;
};

// A framework profile: its runtime and the defaults it sets (docs/frameworks.md, with sources).
struct FrameworkProfile {
  std::string name;
  std::string description;
  double fusion_bytes = 0;  // bucket / fusion-buffer size
  double cycle_s = 0;       // Horovod's cycle time (0: exchange as soon as ready)
  FrameworkRuntime runtime;
};
const std::vector<FrameworkProfile>& framework_profiles();
// The profile named `name`; InputError naming `what` and listing the names otherwise.
const FrameworkProfile& framework_by_name(const std::string& name, const std::string& what = "--framework");
std::string framework_help();  // one line per profile
// Sets the point's fusion size, cycle time and runtime from the profile.
void apply_framework(struct TrainingPoint& point, const FrameworkProfile& profile);

// A transformer's parallel layout (docs/parallel-layouts.md): tensor (tp), pipeline (pp, with vp virtual
// stages per pipeline rank), context (cp) and expert (ep) parallelism, the rest data parallelism
// (dp = workers / (tp x pp x cp)) with a ZeRO stage; ranks placed in Megatron-LM's order. The planner
// (sim/src/plan/layout.cpp) builds every rank's iteration from it and a profile of one rank's shard of the
// model (models::ModelOptions tensor_parallel ...). Inactive (samples_per_iteration 0): data parallelism
// of the exchange families.
struct ParallelLayout {
  int tp = 1, pp = 1, vp = 1, cp = 1, ep = 1;
  bool sequence_parallel = false;  // Megatron's: tensor-parallel allreduces become reduce-scatter + allgather
  // tp: the embedding and output layer whole on every tensor-parallel rank (models::ModelOptions
  // replicated_vocab), so they run no collectives of their own; false: Megatron's vocab-parallel ones.
  bool replicated_vocab = false;
  int zero = 0;                    // 0: DDP allreduce; 1: sharded optimizer; 2: + gradients; 3: + weights (FSDP)
  std::string schedule = "1f1b";   // gpipe | 1f1b (interleaved when vp > 1)
  std::string order = "tp-cp-dp-pp";  // rank placement, fastest dimension first
  int micro_batches = 1;           // per iteration and data-parallel replica (gradient accumulation)
  std::vector<int> stage_layers{};  // layers per pipeline chunk (pp x vp entries, in chunk order); empty: even
  std::string recompute = "none";  // none | selective (attention core) | full (every block)
  // Node-local tensor, context and expert collectives are priced once each by running them on the network
  // and then charged on the compute stream (docs/parallel-layouts.md "Folds"); false: each one simulated.
  bool fold_local_collectives = true;
  // Data-parallel replicas folded onto replica 0, the others playing only its gradient collectives
  // (docs/parallel-layouts.md "Folds"); false: every replica simulated.
  bool fold_replicas = true;
  // Bytes of one micro-batch, derived from the model by the prediction:
  double tp_bytes = 0;      // a tensor-parallel allreduce: micro-batch x seq/cp x hidden x element bytes
  double pp_bytes = 0;      // an activation (or its gradient) sent between pipeline stages
  double cp_kv_bytes = 0;   // one layer's gathered keys and values over the context-parallel group
  double ep_bytes = 0;      // one MoE alltoall (dispatch or combine) per rank
  double param_bytes_per_grad_byte = 1;  // ZeRO gathers weights of this size per gradient byte
  double samples_per_iteration = 0;      // the global batch; 0: inactive
  bool active() const { return samples_per_iteration > 0; }
  int model_parallel() const { return tp * pp * cp; }
  bool operator==(const ParallelLayout&) const = default;
};

// InputError naming the flag and the constraint for a layout the planner cannot play on `workers` ranks.
void check_layout(const ParallelLayout& layout, int workers);
// One pipeline rank's compute in a layout, as the planner splits the profile of a rank's shard over its
// chunks: forward and backward seconds of one micro-batch (recomputation included), and its optimizer step
// (its share of the profile's update; ZeRO 1-3: of its shard over the data-parallel size of `workers`).
struct LayoutStageTimes {
  double fwd_s = 0, bwd_s = 0, update_s = 0;
};
LayoutStageTimes layout_stage_times(const calibrate::ComputeProfile& profile, const ParallelLayout& layout,
                                    int workers, int pipeline_rank);
// Transformer blocks per pipeline chunk (pp x vp entries, chunk k*pp + s on pipeline rank s): the layout's
// stage_layers, else an even split with the remainder spread from the second chunk on. InputError (naming
// --pp or --stage-layers) when they do not cover `blocks`.
std::vector<int> layout_chunk_blocks(const ParallelLayout& layout, int blocks);

// The parameter servers of the ps* strategies: how many, where, how variables are spread over them, the
// RPC layer their traffic runs through, and the servers' CPU time per gradient byte.
struct ParameterServers {
  int servers = 1;
  PsPlacement placement = PsPlacement::COLOCATED;
  PsBalance balance = PsBalance::GREEDY;
  std::string transport;  // RPC layer of PS traffic ("grpc", "zeromq"; docs/transports.md); "" = none
  // Seconds a server's CPU takes to apply one byte of a worker's gradient to its variables (the optimizer
  // step on the server node's CPU, per gradient byte; docs/simulation-training.md, "Server apply"). Each
  // push is applied on arrival, the server's pushes one after another; 0 = the servers apply once per
  // iteration at the worker's update time (no server CPU). Derived by the prediction.
  double apply_s_per_B = 0;
  bool operator==(const ParameterServers&) const = default;
};

// What the training framework's runtime does around the exchange: gradient buckets, Horovod's cycle,
// overlap with backward, the framework's own costs and the collective library it calls.
struct Runtime {
  double fusion_bytes = 64.0 * 1024 * 1024;  // Horovod's default fusion threshold
  double cycle_s = 0;                        // Horovod cycle time; 0 = exchange as soon as ready
  bool overlap = true;                       // exchange buckets during the remaining backward
  FrameworkRuntime framework;                // what the framework's runtime adds around each collective
  std::string collective_library = "none";   // picks algorithm and protocol per allreduce call; "" = by precedence
  bool operator==(const Runtime&) const = default;
};

// The data pipeline: where each worker's batch comes from and what it costs on the way.
struct Input {
  DataMode data = DataMode::SYNTHETIC;
  double sample_bytes = 0;             // real data: bytes read per sample
  int prefetch_depth = 2;              // batches read ahead
  double metadata_ops_per_sample = 1;  // real data on a parallel FS: file opens per sample (one JPEG each)
  double preprocess_s_per_sample = 0;  // real data: host decode/augment time per sample (0 = not modelled)
  // data-parallel-single-node, derived from the model: the input tensor scattered from device 0 and the
  // outputs gathered on it, per sample.
  double scattered_bytes_per_sample = 0;
  double gathered_bytes_per_sample = 0;
  bool operator==(const Input&) const = default;
};

// How the simulation runs and what it assumes: iterations, the trace, the communication mode, and the
// exact or approximate shortcuts (folds) it may take.
struct Fidelity {
  int iterations = 0;  // simulated iterations (the first is warm-up); 0: resolved_iterations
  CommMode comm_mode = CommMode::AUTO;
  bool interference =
      true;  // GPUs: compute overlapped with a collective slows down (docs/simulation-training.md)
  std::string trace_path;    // non-empty: write a Chrome/Perfetto trace
  int trace_iterations = 1;  // the last N iterations are traced (<= iterations)
  bool ps_fold = true;       // coarse PS with dedicated servers: fold each switch's nodes (exact)
  // Coarse PS, colocated servers, one device per node: each server node's device gets a NIC of its own
  // and its switch link twice the bandwidth ("Split roles", docs/simulation-training.md), so that every
  // switch folds as with dedicated servers.
  bool ps_split_roles = true;
  double ps_fold_max_flows = PS_FOLD_MAX_FLOWS;  // above: fold groups of switches, load-scaled (approximate)
  bool ps_latency_bound_bypass =
      true;  // PS: messages within the route's bandwidth-delay product skip the solver
  bool operator==(const Fidelity&) const = default;
};

// One simulated training set-up, in parts. The fields a user writes are described once, with their keys,
// flags, parsers and writers, in the scenario field table (scenarios/fields.hpp), whose groups are these
// parts; the others are derived by the prediction (server apply time, input and output bytes) or are the
// simulation library's own switches (the PS folds).
struct TrainingPoint {
  int workers = 1;
  int workers_per_node = 0;  // 0 = platform default
  Strategy strategy;
  ParameterServers ps;
  Runtime runtime;
  Input input;
  Fidelity fidelity;
  Variability variability;
  ParallelLayout layout;  // transformers: tensor/pipeline/context/expert layout, ZeRO
  bool operator==(const TrainingPoint&) const = default;
};

// What a new user gets (scenarios start from it): the collective library by precedence and the
// device-class variability on. A TrainingPoint{} has both off.
TrainingPoint default_training_point();

// The iterations a point simulates: its own, or when it names none (0) SYNC_ITERATIONS or, for an
// asynchronous strategy, ASYNC_ITERATIONS, raised to cover the traced iterations after the warm-up one.
int resolved_iterations(const TrainingPoint& point);

// The library a point runs and where the choice came from: "named" (the point names it: scenario or
// flag), "framework <name>", "platform" (its collective_library field), "default rule (GPU nodes)" or
// "default rule (CPU nodes)". InputError naming the platform file and line for an unknown platform value.
struct LibraryResolution {
  std::string name;
  std::string source;
};
LibraryResolution resolve_collective_library(const platforms::Platform& platform, const TrainingPoint& point);

// The persistent device spread a point runs (its device_cv, or by device class) and its source in words.
struct DeviceSpread {
  double cv = 0;
  std::string source;
};
DeviceSpread resolve_device_spread(const platforms::Platform& platform, const TrainingPoint& point);

struct Breakdown {
  double compute_s = 0;                  // forward + backward + update of one worker
  double communication_s = 0;            // wall time during which gradient exchange is in flight
  double exposed_communication_s = 0;    // communication not hidden behind compute
  double io_stall_s = 0;                 // waiting for input
  // exposed_communication_s split by what rank 0 waits for (the rest, if any, is mid-iteration):
  double exposed_before_forward_s = 0;   // parameters (PS pull) or a scattered input before forward
  double exposed_after_backward_s = 0;   // the gradient exchange (and a PS update) after backward
  // compute_s split by why rank 0's compute took longer than the calibrated kernels on the reference
  // device (the rest of compute_s is those kernels):
  double compute_variability_s = 0;      // its device factor: the slowest device's pace (device spread,
                                         // jitter, stragglers; negative when it is faster)
  double overlap_slowdown_s = 0;         // compute overlapped with a collective on a GPU (OVERLAP_COMPUTE_SLOWDOWN)
  // Parallel layouts (ParallelLayout), rank 0's share of the iteration:
  double local_collectives_s = 0;        // tensor/context/expert-parallel collectives on the compute stream
  double bubble_s = 0;                   // the schedule's pipeline bubble on an ideal network
  double recompute_s = 0;                // forward work recomputed in backward (inside compute_s)
};

// One measured resource of the steady-state iterations: a link (NIC, switch port, PCIe switch uplink,
// device link, fabric, storage) or a parameter-server shard's CPU.
struct ResourceUse {
  std::string name;          // in words: "node 0 NIC (sending)", "PS shard 2 CPU"
  std::string kind;          // nic | switch-port | fabric | pcie-switch | device-link | nvlink | storage | ps-cpu
  int node = -1;             // node it belongs to (-1: shared fabric or storage)
  int server = -1;           // a PS shard on that node (NIC, switch port, CPU), else -1
  double bytes = 0;          // carried per iteration (0 for a CPU)
  double capacity_Bps = 0;   // line rate (0 for a CPU)
  double utilisation = 0;    // busy fraction of the measured iterations: bytes / (capacity x time)
};

struct PointResult {
  int workers = 0;
  int nodes = 0;
  int ps_servers = 0;
  double throughput = 0;        // samples/s, whole job
  double efficiency = 0;        // throughput / (workers x 1-worker throughput); set by the caller
  double iteration_time_s = 0;
  Breakdown breakdown;
  std::string bottleneck;       // plain-words explanation; written by the presentation layer (scenarios/)
  double wall_s = 0;            // host time of the simulation
  double inter_node_bytes = 0;  // gradient/parameter bytes crossing node boundaries, per measured iteration
  double intra_node_bytes = 0;  // the same inside nodes (PCIe/NVLink/shared memory)
  int buckets = 0;              // gradient exchanges per worker and iteration
  std::int64_t activities = 0;  // SimGrid activities created (cost of the prediction)
  std::int64_t flows = 0;       // network flows among them
  double gradient_bytes = 0;    // gradient bytes per worker and iteration
  int busiest_nic_node = -1;    // node whose NIC moved the most exchange bytes (one direction)
  double busiest_nic_bytes = 0; // its bytes per iteration in its busier direction
  double busiest_nic_busy = 0;  // that direction's busy fraction of the iteration at the NIC's payload rate
  int busiest_nic_server = -1;  // parameter-server shard on that node, or -1
  // The busiest resources by measured utilisation over the steady-state iterations (SimGrid link
  // usage integrated over time; PS CPU: its update time), busiest first, at most MAX_RESOURCES_REPORTED.
  std::vector<ResourceUse> resources;
  // Transformers (set by the prediction, scenarios/src/layout.cpp; 0 for CNNs):
  double tokens_per_s = 0;                // whole job
  double model_tflops_per_device = 0;     // 6N-style model FLOPs (no recompute) per device per second / 1e12
  double hardware_tflops_per_device = 0;  // FLOPs the devices run, recomputation included
  double mfu = 0, hfu = 0;                // the two over the device's peak at the training precision
  double memory_per_device_B = 0;         // the largest rank's estimate (weights, gradients, optimizer, activations)
};
inline constexpr std::size_t MAX_RESOURCES_REPORTED = 8;

// One field of a result: its name (the JSON key and the CSV column), how to read and write it, and
// whether a sweep's results.csv shows it (results.jsonl and `--format json` carry every field).
struct ResultField {
  const char* name;
  nlohmann::json (*get)(const PointResult& r);
  void (*set)(PointResult& r, const nlohmann::json& value);
  bool in_csv;
};

// Every field of PointResult, in column order: the one list every serialisation derives from.
const std::vector<ResultField>& result_fields();

// The one serialisation of a result (the simulation child's reply, results.jsonl, `--format json`).
nlohmann::json to_json(const PointResult& r);
// Its inverse. Failure naming the field when one is missing or has the wrong type.
PointResult point_result_from_json(const nlohmann::json& j);

// The checks simulate_training runs first, without simulating: InputError (one line naming the flag)
// for a set-up it cannot simulate, so that a caller about to simulate many points learns it at once.
void check_training(const platforms::Platform& platform, const calibrate::ComputeProfile& profile,
                    const TrainingPoint& point);

// Simulates one configuration in a child process. InputError for impossible set-ups.
PointResult simulate_training(const platforms::Platform& platform, const calibrate::ComputeProfile& profile,
                              const TrainingPoint& point);

}  // namespace dtsim::sim
