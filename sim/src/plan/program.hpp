// Internal to sim/: step programs. What each rank does in one training iteration, as data: a small DAG
// of typed tasks (compute, a collective on a process group, send/recv between two ranks, flows between
// roles, waits). Planners (plan/*.cpp) build programs from the model, the calibration and the parallel
// layout without SimGrid; the executor (training.cpp) plays any program on the World, just in time.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dtsim::sim {

// A set of ranks that run collectives together (Megatron-LM's process groups, NCCL communicators).
// `ranks` are in the group's own rank order (ring order of its collectives).
struct ProcessGroup {
  std::string name;  // "world", "dp 3", "tp 0", ...
  std::vector<int> ranks;
};

enum class TaskKind {
  COMPUTE,     // the rank's device busy for `seconds` (before the rank's compute factor)
  COLLECTIVE,  // `operation` over `group`, `bytes` per rank (the buffer each rank contributes or holds)
  SEND,        // `bytes` to rank `peer`; completes when the matching RECV has received them
  RECV,        // `bytes` from rank `peer`
  DELAY,       // `seconds` of wall time that holds no device (a copy engine, a runtime's wait)
  INPUT,       // waits for the rank's next input batch (--data real; at once with synthetic data)
  FLOW,        // `bytes` from role `src` to role `dst` (a server, the node's host, storage), one-sided
  SERVE,       // `seconds` of work on role `dst`'s processor (a server's CPU applying a push), first come
               // first served behind the work queued there before; or, on a serving queue (`queue`), `calls`
               // calls on its threads (an RPC server's)
  BARRIER,     // waits until every member of `group` has reached its n-th barrier on it, then `seconds` more
               // (the servers' update after the last push); holds neither stream
};
// "compute", "collective", ...
const char* to_string(TaskKind kind);

// What a task stands for in the iteration's breakdown and the trace.
enum class TaskPhase { FORWARD, BACKWARD, UPDATE, COMMUNICATION };

// A collective that runs on the compute stream right after a compute task, priced once per kind by running
// it on the network (ParallelLayout::fold_local_collectives): `count` calls of `operation` over the group
// in slot `group`, `bytes` each.
struct InlineCollective {
  std::string operation;
  int group = -1;
  double bytes = 0;
  int count = 1;
};

// An endpoint of a FLOW task: a role, never a SimGrid host; the executor maps it onto the platform.
enum class RoleKind {
  RANK,       // the rank's own device
  SERVER,     // parameter-server shard `index` (dedicated node or colocated, as the point places servers)
  NODE_HOST,  // the rank's node's host CPU and memory
  STORAGE,    // the rank's node's input storage (its SSD, or the parallel file system's client)
};
struct Role {
  RoleKind kind = RoleKind::RANK;
  int index = -1;  // SERVER: the shard
  bool operator==(const Role&) const = default;
};
// "rank", "server 3", "node host", "storage".
std::string to_string(const Role& role);

struct Task {
  TaskKind kind = TaskKind::COMPUTE;
  TaskPhase phase = TaskPhase::FORWARD;
  std::string label{};        // "forward", "backward to bucket 3: conv5_3 .. fc6", "allreduce bucket 0"
  double seconds = 0;         // COMPUTE, DELAY
  std::string operation{};    // COLLECTIVE: "allreduce", "reduce-scatter", "allgather", "broadcast", "alltoall"
  int group = -1;             // COLLECTIVE, BARRIER: a slot of the rank's groups (StepPrograms::rank_groups)
  int peer = -1;              // SEND / RECV: a slot of the rank's peers (StepPrograms::rank_peers)
  double bytes = 0;           // COLLECTIVE, SEND, RECV
  int tag = 0;                // SEND / RECV: a send matches the receive of the same tag, in order
  Role src{}, dst{};          // FLOW; SERVE: dst (a SERVER or NODE_HOST)
  // SERVE: -1, the role's processor (one FIFO of `seconds`); else a slot of StepPrograms::serve_queues, whose
  // threads on role `dst` run `calls` calls.
  int queue = -1;
  double calls = 0;           // SERVE on a serving queue
  // COLLECTIVE: an algorithm of the operation's table played as its flows alone: no collective library
  // (choice, protocol, call latency) and no kernels on the members' devices, so no interference (copies
  // by copy engines, as nn.DataParallel's replicate). Empty: the collective library plays it.
  std::string algorithm{};
  // COLLECTIVE: once a collective of its kind (operation, bytes, group shape) has run on the network, later
  // ones wait its measured duration instead of moving their bytes again (plan/layout.cpp "Folds").
  bool priced = false;
  // COLLECTIVE, a framework runtime around the collective (Horovod's background cycle):
  // cycle_s > 0: once every member has reached it, it starts only at the next multiple of cycle_s of the clock.
  double cycle_s = 0;
  // fuse_up_to_B > 0: at its start it absorbs the following collectives of its group (same operation, fuse_up_to_B
  // > 0) that every member has ready, while the fused bytes stay within fuse_up_to_B, and runs them as one
  // collective of their summed bytes (tensor fusion); the absorbed tasks complete with it.
  double fuse_up_to_B = 0;
  // negotiation_B > 0: before the collective, a latency-bound allreduce of these bytes over the group (recursive
  // halving-doubling, message by message) played once; later ones wait its measured duration.
  double negotiation_B = 0;
  // copy_s_per_B > 0: a collective holding at least copy_min_items items (after fusion) copies its bytes into a
  // buffer before and out after, bytes x copy_s_per_B each (a fusion buffer, DDP's buckets); items: the tensors
  // the task's bytes hold. copy_on_cores: each copy is a computation of that many seconds on every member's
  // device, sharing it with what the device computes meanwhile (a CPU worker's copies take its cores), else a
  // delay that holds no device.
  double copy_s_per_B = 0;
  int copy_min_items = 1;
  bool copy_on_cores = false;
  int items = 1;
  // COLLECTIVE: the framework hands the library host buffers (CollectiveLibrary::framework_stages_to_host, the
  // framework staging GPU tensors itself): no kernels on the members' devices, so no interference.
  bool host_buffers = false;
  // COLLECTIVE: the threads of each member's process that a library running on the worker's cores reduces
  // with (LibraryCall::rank_threads).
  int library_threads = 1;
  std::vector<int> deps{};    // indices of earlier tasks of the same program
  std::vector<InlineCollective> inline_collectives{};  // COMPUTE: run after it on the compute stream
  // Trace arguments (bucket index, layers, ...), copied into the trace event.
  std::vector<std::pair<std::string, double>> args{};
};

// One rank's iteration. Tasks are in a topological order (every dep is an earlier index). A rank runs
// one compute at a time, in program order among the ready ones (the device's compute stream), and one
// collective at a time (its communication stream), also in program order; sends, receives, flows, serves,
// delays, barriers and the input wait hold neither. The iteration ends when every task is done. A program with an INPUT task
// starts when its iteration does and waits for the input batch there; one without starts once the batch
// is in (--data real). SEND / RECV / FLOW / SERVE / DELAY tasks of phase COMMUNICATION count in the rank's
// communication time (a serve from when it is ready, queueing included); others (an input scatter, an
// output gather) belong to the forward or backward pass.
struct RankProgram {
  std::vector<Task> tasks;
  int add(Task task);  // appends, returns its index
};

// The serving threads of a queue every role a SERVE names has one of (an RPC server's threads): each call
// takes per_call_s of one thread, calls run in arrival order on the earliest-free thread.
struct ServeQueue {
  std::string name;
  int threads = 1;
  double per_call_s = 0;
};

// Folded nodes (optional): each group's first node stands for the group where the platform's routes
// allow (World::fold_nodes against the `refs` roles' hosts; all groups of one size). Each rank of a
// member node then mirrors the rank of the same local index on the first node (same program): its FLOW,
// SERVE, DELAY, SEND and RECV tasks are done when that representative's same task of the same iteration
// is, and start nothing (so a fold's sends and receives stay inside its nodes, as a node's local copies
// do). The representative's flows and sends carry its group's k nodes' bytes (k - 1 where the flow's
// server sits on a member node: that member's own flow stays inside its node), its serves do k nodes'
// work. Its computes, collectives and barriers are each rank's own. `weighted`: flows take the max-min
// share of the node flows they stand for (World::set_weighted_folds), for folds that leave some nodes out.
// A fold is refused (every rank plays its own program) where a mirror's compute factor differs from its
// representative's in some iteration (shared_pace: where a rank's differs between iterations).
// Beyond a budget (max_flows > 0): while the representatives' flows per iteration (groups x
// flows_per_group) exceed it, up to 2, 4, ... consecutive groups whose nodes cross the same busy links
// (World::route_classes against scale_refs, one device's bytes_to / bytes_from each per iteration) fold
// together with load-scaled links (World::fold_nodes_scaled), the fewest groups that fit; a group marked
// `alone` never merges. Where the world refuses that, half as many; then the exact fold of `groups`.
struct NodeFold {
  std::vector<std::vector<int>> groups{};
  std::vector<Role> refs{};  // SERVER roles (the other kinds are each node's own)
  bool weighted = false;
  double max_flows = 0, flows_per_group = 0;
  std::vector<Role> scale_refs{};
  std::vector<double> bytes_to{}, bytes_from{};  // per scale ref
  std::vector<bool> alone{};                     // per group
  // Asynchronous workers: the fold needs persistent compute factors (each rank's alike in every iteration)
  // and the ranks of a group (device j of each of its nodes) then share one pace, the harmonic mean of
  // their factors (their mean compute rate); the grouping beyond the budget keeps at least min_groups.
  bool shared_pace = false;
  int min_groups = 0;
};

// Every rank's program. Ranks that do the same work share one program (all data-parallel replicas, all
// ranks of one pipeline stage): a task names its group and its peer by slot, and each rank maps the
// slots to its own groups and peers. So programs stay small at 16,384 ranks, and ranks with one program
// and alike routes can later be folded.
struct StepPrograms {
  std::vector<ProcessGroup> groups;
  std::vector<RankProgram> programs;            // distinct programs
  std::vector<int> program_of;                  // per rank: index into programs
  std::vector<std::vector<int>> rank_groups;    // per rank: group slot -> index into groups
  std::vector<std::vector<int>> rank_peers;     // per rank: peer slot -> rank
  // Folded ranks (optional, per rank): the ranks whose work this rank's program stands for; it computes at
  // the slowest of their device factors (plan/layout.cpp "Folds"). Empty: its own.
  std::vector<std::vector<int>> stands_for;
  // Rank 0's analytic shares of its iteration (Breakdown): the ideal pipeline bubble and recomputation.
  double bubble_s = 0, recompute_s = 0;
  // Samples of the whole job per iteration (throughput); 0: each rank's batch (data parallelism).
  double samples_per_iteration = 0;
  // Parameter-server shards that FLOW tasks address (Role SERVER 0 .. servers - 1).
  int servers = 0;
  std::vector<ServeQueue> serve_queues;  // SERVE tasks' queue slots
  NodeFold fold;
  // Seconds the busiest server's processor works per iteration, reported as a resource (0: none).
  double busiest_server_s = 0;
  // Flows no larger than their route's bandwidth-delay product skip the solver (World::set_latency_bound_bypass).
  bool latency_bound_bypass = false;
  int ranks() const { return static_cast<int>(program_of.size()); }
  const RankProgram& of(int rank) const { return programs[static_cast<std::size_t>(program_of[static_cast<std::size_t>(rank)])]; }
  int group_of(int rank, const Task& t) const { return group_of_slot(rank, t.group); }
  int group_of_slot(int rank, int slot) const { return rank_groups[static_cast<std::size_t>(rank)][static_cast<std::size_t>(slot)]; }
  int peer_of(int rank, const Task& t) const { return rank_peers[static_cast<std::size_t>(rank)][static_cast<std::size_t>(t.peer)]; }
};

// Checks what the executor relies on: every rank has a program and its slots; deps point to earlier
// tasks; at most one INPUT task per program; a FLOW's roles are a server in range or another role, two
// different ones; a SERVE runs on a server in range or the node's host; every collective's group contains the rank and every member issues the same sequence of
// (operation, bytes) collectives and barriers on that group; a SERVE's queue and a fold's references exist; every SEND has a RECV of the same bytes on its peer in
// the same order; times and bytes finite and >= 0. Throws Failure (a planner bug, not bad input).
void check_programs(const StepPrograms& programs);

// The group every rank belongs to, in rank order.
ProcessGroup world_group(int ranks);

}  // namespace dtsim::sim
