// Standalone communication patterns: names, byte-size parsing, and simulate_comm / simulate_pingpong,
// each one SimGrid simulation of a World in a child process.
#include "sim/comm.hpp"

#include <simgrid/s4u/Host.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/child.hpp"
#include "common/errors.hpp"
#include "sim/src/coll/collective.hpp"
#include "sim/src/world.hpp"
#include "sim/training.hpp"

namespace dtsim::sim {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

constexpr double MAX_BYTES = 1e15;      // 1 PB: anything larger is a typo, not a gradient
constexpr int MAX_WORKERS = 1 << 20;    // beyond any platform file
const std::string PS_PATTERN = "ps";

// `dtsim comm --pattern ps` runs the training replay's synchronous PS exchange on a model of `servers`
// equal variables of bytes/servers each and no compute: one pull of every shard, one push back.
calibrate::ComputeProfile ps_alone_profile(double bytes, int servers) {
  calibrate::ComputeProfile p;
  p.model = "comm-ps";
  p.batch = 1;
  for (int s = 0; s < servers; ++s) {
    calibrate::LayerTime l;
    l.name = fmt::format("shard{}", s);
    l.op = "fc";
    l.grad_bytes = static_cast<std::int64_t>(std::llround(bytes / servers));
    p.layers.push_back(l);
  }
  return p;
}

}  // namespace

void check_comm_pattern(const std::string& name) {
  for (const auto& n : comm_pattern_names())
    if (n == name) return;
  std::string known;
  for (const auto& n : comm_pattern_names()) known += (known.empty() ? "" : ", ") + n;
  throw InputError(fmt::format("--pattern: unknown pattern '{}' (expected one of: {})", name, known));
}

std::vector<std::string> comm_pattern_names() {
  std::vector<std::string> names;
  for (const auto& a : collective_table()) names.push_back(a.full_name());
  names.push_back(PS_PATTERN);
  return names;
}

std::string comm_pattern_help() {
  std::string out;
  for (const auto& a : collective_table()) out += fmt::format("  {}: {}\n", a.full_name(), a.description);
  out += fmt::format("  {}: {}\n", PS_PATTERN,
                     "synchronous parameter servers: every worker pulls bytes/servers from each shard and pushes it back");
  return out;
}

CommMode comm_mode_by_name(const std::string& name) {
  for (auto m : {CommMode::AUTO, CommMode::COARSE, CommMode::FINE})
    if (to_string(m) == name) return m;
  throw InputError(fmt::format("--mode: unknown mode '{}' (expected auto, coarse or fine)", name));
}

std::string to_string(CommMode m) {
  switch (m) {
    case CommMode::AUTO: return "auto";
    case CommMode::COARSE: return "coarse";
    case CommMode::FINE: return "fine";
  }
  return "?";
}

PsPlacement ps_placement_by_name(const std::string& name) {
  if (name == "colocated") return PsPlacement::COLOCATED;
  if (name == "dedicated") return PsPlacement::DEDICATED;
  throw InputError(fmt::format("ps placement: unknown value '{}' (expected colocated or dedicated)", name));
}

std::string to_string(PsPlacement p) { return p == PsPlacement::DEDICATED ? "dedicated" : "colocated"; }

PsBalance ps_balance_by_name(const std::string& name) {
  if (name == "greedy") return PsBalance::GREEDY;
  if (name == "round-robin" || name == "round_robin") return PsBalance::ROUND_ROBIN;
  if (name == "mxnet") return PsBalance::MXNET;
  throw InputError(fmt::format("ps balance: unknown value '{}' (expected greedy, round-robin or mxnet)", name));
}

std::string to_string(PsBalance b) {
  switch (b) {
    case PsBalance::GREEDY: return "greedy";
    case PsBalance::ROUND_ROBIN: return "round-robin";
    case PsBalance::MXNET: return "mxnet";
  }
  return "greedy";
}

double parse_byte_size(const std::string& text, const std::string& what) {
  size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(text, &pos);
  } catch (const std::exception&) {
    throw InputError(fmt::format("{}: '{}' is not a size (expected e.g. 25MB, 1000KB, 4MiB or 1048576)", what, text));
  }
  std::string unit = lower(text.substr(pos));
  unit.erase(std::remove_if(unit.begin(), unit.end(), [](unsigned char c) { return std::isspace(c); }), unit.end());
  static const std::vector<std::pair<std::string, double>> units = {
      {"", 1},       {"b", 1},          {"kb", 1e3},          {"mb", 1e6},          {"gb", 1e9},          {"tb", 1e12},
      {"k", 1e3},    {"m", 1e6},        {"g", 1e9},           {"kib", 1024.0},      {"mib", 1048576.0},
      {"gib", 1073741824.0},            {"tib", 1099511627776.0}};
  auto it = std::find_if(units.begin(), units.end(), [&](const auto& u) { return u.first == unit; });
  if (it == units.end())
    throw InputError(fmt::format("{}: unknown size unit in '{}' (expected B, KB, MB, GB, TB (x1000) or KiB, MiB, "
                                 "GiB, TiB (x1024))",
                                 what, text));
  const double bytes = value * it->second;
  if (!std::isfinite(bytes) || bytes <= 0 || bytes > MAX_BYTES)
    throw InputError(fmt::format("{}: size '{}' must be > 0 and at most 1 PB", what, text));
  return bytes;
}

CommResult simulate_comm(const platforms::Platform& platform, const CommRequest& request) {
  const std::string file = platform.file.empty() ? platform.name : platform.file;
  if (request.workers < 2 || request.workers > MAX_WORKERS)
    throw InputError(fmt::format("--workers: {} workers asked (expected 2 .. {})", request.workers, MAX_WORKERS));
  if (!(std::isfinite(request.bytes) && request.bytes > 0 && request.bytes <= MAX_BYTES))
    throw InputError(fmt::format("--bytes: {} bytes (expected > 0 and at most 1 PB)", request.bytes));
  const int wpn = request.workers_per_node > 0 ? request.workers_per_node : platform.default_workers_per_node();
  if (request.workers_per_node < 0)
    throw InputError(fmt::format("--workers-per-node: {} (expected >= 1, or 0 for the platform default)",
                                 request.workers_per_node));
  check_comm_pattern(request.pattern);
  const bool ps = request.pattern == PS_PATTERN;
  if (ps && (request.ps_servers < 1 || request.ps_servers > MAX_WORKERS))
    throw InputError(fmt::format("--ps: {} servers (expected >= 1)", request.ps_servers));
  Layout layout;
  layout.workers_per_node = std::min(wpn, request.workers);
  layout.nodes = (request.workers + layout.workers_per_node - 1) / layout.workers_per_node;
  layout.dedicated_ps_nodes = ps && request.ps_placement == PsPlacement::DEDICATED ? request.ps_servers : 0;
  const long capacity = static_cast<long>(platform.nodes) * wpn;
  if (request.workers > capacity)
    throw InputError(fmt::format("{}: --workers {} exceeds the platform's {} nodes x {} workers per node", file,
                                 request.workers, platform.nodes, wpn));

  const CommMode used = resolve_mode(request.mode, request.workers);
  CommResult r;
  r.mode_used = used;
  double busbw_factor = 1;
  if (ps) {
    TrainingPoint point;
    point.workers = request.workers;
    point.workers_per_node = layout.workers_per_node;
    point.strategy = strategy_by_name("ps", "--pattern");
    point.ps.servers = request.ps_servers;
    point.ps.placement = request.ps_placement;
    point.ps.balance = PsBalance::ROUND_ROBIN;
    point.fidelity.iterations = 1;
    point.fidelity.comm_mode = request.mode;
    const auto res = simulate_training(platform, ps_alone_profile(request.bytes, request.ps_servers), point);
    r.time_s = res.iteration_time_s;
    r.flows = res.flows;
    r.wall_s = res.wall_s;
  } else {
    const auto* found = collective_by_full_name_or_null(request.pattern);
    if (!found) throw Failure(fmt::format("--pattern '{}' passed the check but has no algorithm (internal error)", request.pattern));
    const auto& algorithm = *found;
    busbw_factor = algorithm.busbw_factor(request.workers);
    const std::string text = run_in_child([&]() {
      const auto wall0 = std::chrono::steady_clock::now();
      World world(platform, layout);
      world.set_solve_together(true);  // one collective, alone on the network
      std::vector<int> ranks(request.workers);
      for (int i = 0; i < request.workers; ++i) ranks[i] = i;
      double end_s = -1;
      start_collective(world, algorithm, ranks, request.bytes, used, [&]() { end_s = world.now(); });
      world.run();
      if (end_s < 0) throw Failure("communication pattern did not complete");
      const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
      return nlohmann::json{{"time_s", end_s}, {"flows", world.flows_started()}, {"wall_s", wall_s}}.dump();
    });
    const auto j = nlohmann::json::parse(text);
    r.time_s = j.at("time_s").get<double>();
    r.flows = j.at("flows").get<std::int64_t>();
    r.wall_s = j.at("wall_s").get<double>();
  }
  if (r.time_s <= 0) throw Failure(fmt::format("simulated time {} s for a {}-byte transfer", r.time_s, request.bytes));
  r.algbw_Bps = request.bytes / r.time_s;
  r.busbw_Bps = r.algbw_Bps * busbw_factor;
  return r;
}

std::vector<double> default_pingpong_sizes() {
  std::vector<double> sizes;
  for (double b = 1; b <= 16.0 * 1048576; b *= 2) sizes.push_back(b);
  sizes.push_back(1e6);  // 1000 KB, the size of the published Taiwania 2 comparison
  std::sort(sizes.begin(), sizes.end());
  return sizes;
}

std::vector<PingPongPoint> simulate_pingpong(const platforms::Platform& platform, const std::vector<double>& sizes) {
  const std::string file = platform.file.empty() ? platform.name : platform.file;
  if (platform.nodes < 2)
    throw InputError(fmt::format("{}: pingpong runs between two nodes but the platform has nodes: {}", file,
                                 platform.nodes));
  if (sizes.empty()) throw InputError("pingpong: no message sizes");
  for (double s : sizes)
    if (!(std::isfinite(s) && s > 0 && s <= MAX_BYTES))
      throw InputError(fmt::format("pingpong: message size {} (expected > 0 and at most 1 PB)", s));
  const std::string text = run_in_child([&]() {
    Layout layout;
    layout.nodes = 2;
    layout.workers_per_node = 1;
    World world(platform, layout);
    auto* a = world.node_host(0);
    auto* b = world.node_host(1);
    std::vector<double> times(sizes.size(), 0);
    // Sizes one after the other: ping a->b, pong b->a, next size.
    std::function<void(size_t)> next = [&](size_t i) {
      if (i == sizes.size()) return;
      const double t0 = world.now();
      world.transfer(a, b, sizes[i], [&, i, t0]() {
        world.transfer(b, a, sizes[i], [&, i, t0]() {
          times[i] = (world.now() - t0) / 2;
          next(i + 1);
        });
      });
    };
    next(0);
    world.run();
    return nlohmann::json(times).dump();
  });
  const auto times = nlohmann::json::parse(text).get<std::vector<double>>();
  std::vector<PingPongPoint> points;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (times[i] <= 0) throw Failure(fmt::format("pingpong: simulated time {} s for {} bytes", times[i], sizes[i]));
    points.push_back({sizes[i], times[i], sizes[i] / times[i]});
  }
  return points;
}

}  // namespace dtsim::sim
