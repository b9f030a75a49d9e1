// Communication patterns simulated alone over a platform: collectives, parameter-server traffic and
// ping-pong. Each call runs its own SimGrid simulation in a child process (one engine per process).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "platforms/platform.hpp"

namespace dtsim::sim {

enum class CommMode { AUTO, COARSE, FINE };  // AUTO: coarse above COARSE_ABOVE_RANKS ranks
enum class PsPlacement { COLOCATED, DEDICATED };
enum class PsBalance { GREEDY, ROUND_ROBIN, MXNET };

// Patterns of `dtsim comm`: every collective of the collective table ("allreduce-ring", "broadcast-binomial",
// ...) and "ps" (the training replay's synchronous parameter-server exchange). InputError listing the
// accepted names for anything else.
void check_comm_pattern(const std::string& name);
std::vector<std::string> comm_pattern_names();
std::string comm_pattern_help();  // one line per pattern: "name: description"
CommMode comm_mode_by_name(const std::string& name);
std::string to_string(CommMode m);
PsPlacement ps_placement_by_name(const std::string& name);
PsBalance ps_balance_by_name(const std::string& name);
std::string to_string(PsBalance b);
std::string to_string(PsPlacement p);

// Byte sizes with optional suffix: B, KB/MB/GB/TB (decimal, 1000^n) or KiB/MiB/GiB/TiB (binary, 1024^n),
// case-insensitive; e.g. "25MB" = 25e6, "1000KB" = 1e6, "4MiB" = 4194304. Throws InputError naming
// `what` (a flag or field) for anything else, for values <= 0 and for values above 1 PB.
double parse_byte_size(const std::string& text, const std::string& what);

// AUTO means coarse above this many ranks (docs/simulation-comm.md: where fine mode gets slow and
// where the two modes were checked to agree).
inline constexpr int COARSE_ABOVE_RANKS = 64;
// AUTO -> COARSE or FINE for a collective over `ranks` ranks; COARSE/FINE unchanged.
CommMode resolve_mode(CommMode mode, int ranks);

struct CommRequest {
  std::string pattern = "allreduce-ring";
  int workers = 2;
  int workers_per_node = 0;  // 0 = platform default
  double bytes = 0;          // message size: the buffer being reduced / broadcast / pushed and pulled
  CommMode mode = CommMode::AUTO;
  int ps_servers = 1;
  PsPlacement ps_placement = PsPlacement::COLOCATED;
};

struct CommResult {
  double time_s = 0;
  double algbw_Bps = 0;  // bytes / time (NCCL-tests convention)
  double busbw_Bps = 0;  // algbw x pattern factor (allreduce: 2(n-1)/n)
  CommMode mode_used = CommMode::COARSE;
  std::int64_t flows = 0;   // SimGrid communications created
  double wall_s = 0;        // host time the simulation took
};

// Runs in a child process. Throws InputError for impossible requests (more workers than the platform
// holds, bytes <= 0 ...). busbw = algbw x the algorithm's factor (allreduce 2(n-1)/n; broadcast and PS 1).
CommResult simulate_comm(const platforms::Platform& platform, const CommRequest& request);

struct PingPongPoint {
  double bytes = 0;
  double time_s = 0;         // one-way time (half the round trip)
  double bandwidth_Bps = 0;  // bytes / time_s
};
// NetPIPE-style: node 0's CPU side to node 1's, through both NICs; one message each way per size,
// all sizes in one simulation, one after the other. InputError if the platform has fewer than 2 nodes.
std::vector<double> default_pingpong_sizes();         // 1 B .. 16 MiB by powers of two, plus 1000 KB
std::vector<PingPongPoint> simulate_pingpong(const platforms::Platform& platform, const std::vector<double>& sizes);

}  // namespace dtsim::sim
