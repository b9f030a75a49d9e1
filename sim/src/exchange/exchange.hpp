// Internal to sim/: how gradients are exchanged during an iteration. The training replay
// (training.cpp) owns compute, input I/O, byte accounting and results, and calls an Exchange at fixed
// hooks; each family with hooks (allreduce, for Horovod's cycle) is one file. Every family, also those
// played only as step programs (nn.DataParallel, the parameter servers), is listed once in table.cpp with
// its name, description and properties, from which names, --help and errors come.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/src/plan/program.hpp"
#include "sim/src/trace.hpp"
#include "sim/src/workload.hpp"
#include "sim/src/world.hpp"
#include "sim/training.hpp"

namespace simgrid::s4u {
class Host;
}

namespace dtsim::sim {

using Callback = std::function<void()>;

// What the replay offers an exchange: the world, the plan, and the replay's own accounting.
class ReplayServices {
 public:
  virtual ~ReplayServices() = default;
  virtual World& world() = 0;
  virtual const TrainingPoint& point() const = 0;
  virtual const IterationPlan& plan() const = 0;
  virtual const calibrate::ComputeProfile& profile() const = 0;
  virtual const Layout& layout() const = 0;
  virtual const platforms::Platform& platform() const = 0;
  virtual int workers() const = 0;
  virtual int iterations() const = 0;
  virtual double factor(int rank, int it) const = 0;  // the worker's compute-time factor (variability)
  virtual bool tracing(int it) const = 0;             // this iteration is the one traced
  virtual TraceRecorder& trace() = 0;

  // A worker's compute of `seconds` (factor already applied), recorded on its timeline.
  virtual void compute(int rank, int it, double seconds, const char* what, Callback done) = 0;
  // One flow, counted by node boundary (node -1: storage). `nodes`: the nodes' flows it stands for
  // where that is not its route's fold (World::transfer); 0 for the route's.
  virtual void transfer(simgrid::s4u::Host* src, int src_node, simgrid::s4u::Host* dst, int dst_node, double bytes,
                        Callback done, double nodes = 0) = 0;
  // Bytes moved by a collective whose own flows the replay does not see; per-node NIC shares equal.
  virtual void count_collective_bytes(double inter_node_B, double intra_node_B) = 0;
  // Rank 0's communication interval (rank -1: a collective every rank takes part in).
  virtual void record_comm(int rank, int it, double t0, double t1) = 0;
  // A collective holding `rank`'s device starts / ends (rank -1: every worker); while one is in flight,
  // overlapped compute slows down (compute-communication interference, docs/simulation-training.md).
  virtual void comm_begin(int rank) = 0;
  virtual void comm_end(int rank) = 0;
  virtual void count_activity() = 0;

  // Control back to the replay.
  virtual void release_gate(int rank, int it) = 0;  // one of the events the forward pass waits for
  virtual void backward(int rank, int it) = 0;      // backward in segments, calling bucket_ready
  virtual void update_and_end(int rank, int it) = 0;  // optimizer update on the worker, then end_iteration
  virtual void end_iteration(int rank, int it) = 0;
};

class Exchange {
 public:
  explicit Exchange(ReplayServices& replay) : replay_(replay) {}
  virtual ~Exchange() = default;
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  // Names the exchange's trace tracks.
  virtual void name_tracks() {}
  // Events `rank` waits for before its forward pass of iteration `it` (parameters, a scattered input).
  virtual int forward_gates(int /*rank*/, int /*it*/) const { return 0; }
  // Iteration start: fetch what forward_gates counted, releasing each with replay.release_gate.
  virtual void iteration_start(int /*rank*/, int /*it*/) {}
  // Forward finished: by default backward starts at once.
  virtual void forward_done(int rank, int it) { replay_.backward(rank, it); }
  // Bucket k's gradients are ready on `rank` (backward order).
  virtual void bucket_ready(int rank, int it, std::size_t k) = 0;
  // The rank's backward is over; the exchange ends the iteration (update_and_end or end_iteration).
  virtual void backward_done(int rank, int it) = 0;

 protected:
  ReplayServices& replay_;
};

// What a strategy's exchange family needs from the replay and the checks.
struct ExchangeProperties {
  bool uses_collective = false;   // strategy name is family-collective ("allreduce-ring")
  bool uses_servers = false;      // --ps, placement and balance apply
  bool single_node = false;       // all workers on one node
  bool per_layer_buckets = false; // one bucket per parameter layer (fusion does not apply)
  // With a framework cycle (Horovod), the plan keeps one bucket per parameter layer and the exchange fuses,
  // at each cycle tick, the ready ones up to the fusion threshold (Horovod's tensor fusion).
  bool fuses_ready_per_cycle = false;
  bool asynchronous = false;      // no barrier: a worker never waits for the slowest
};

struct ExchangeFamily {
  std::string name;
  std::string description;
  ExchangeProperties properties;
  // The family's exchange hooks; null for a family played only as step programs (plan never nullopt).
  std::function<std::unique_ptr<Exchange>(ReplayServices&, const Strategy&)> make;
  // A family played as step programs (sim/src/plan/): the ranks' programs for a point, or nullopt where the
  // point needs the exchange's hooks (make). Null: the family always runs through its hooks.
  std::function<std::optional<StepPrograms>(const IterationPlan&, const calibrate::ComputeProfile&,
                                            const TrainingPoint&, const platforms::Platform&, const Layout&)>
      plan = nullptr;
};

const std::vector<ExchangeFamily>& exchange_table();
const ExchangeFamily& exchange_family(const Strategy& strategy);  // Failure for an unchecked strategy

// Factories, one per family file.
std::unique_ptr<Exchange> make_allreduce_exchange(ReplayServices& replay, const Strategy& strategy);
// The allreduce family's step programs (plan_data_parallel), except under a framework runtime that works
// per cycle or around each collective (Horovod's cycle, negotiation and fusion-buffer copies), which the
// exchange's hooks play.
std::optional<StepPrograms> plan_allreduce_family(const IterationPlan& plan, const calibrate::ComputeProfile& profile,
                                                  const TrainingPoint& point);

}  // namespace dtsim::sim
