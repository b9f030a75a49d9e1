// `dtsim comm` simulates one communication pattern (allreduce variants, broadcast, parameter server)
// on a platform and prints time, algbw and busbw; `dtsim comm pingpong` prints a NetPIPE-style curve.
#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "apps/command.hpp"
#include "common/errors.hpp"
#include "common/table.hpp"
#include "common/text.hpp"
#include "platforms/platform.hpp"
#include "sim/comm.hpp"

namespace dtsim::apps {
namespace {

struct CommOptions {
  std::string platform;
  std::string pattern;
  int workers = 0;
  int workers_per_node = 0;
  std::string bytes;
  std::string mode = "auto";
  int ps_servers = 1;
  std::string ps_placement = "colocated";
  std::string format = "table";
  std::string sizes;  // pingpong: comma-separated sizes
};

std::string g(double x) { return fmt::format("{:.6g}", x); }

void run_pattern(const CommOptions& o) {
  if (o.platform.empty()) throw InputError("--platform is required (a shipped platform name or a YAML file)");
  if (o.pattern.empty()) {
    std::string names;
    for (const auto& n : sim::comm_pattern_names()) names += (names.empty() ? "" : ", ") + n;
    throw InputError(fmt::format("--pattern is required (one of: {})", names));
  }
  if (o.bytes.empty()) throw InputError("--bytes is required (e.g. 25MB)");
  const TextFormat format = parse_text_format(o.format);
  sim::CommRequest req;
  sim::check_comm_pattern(o.pattern);
  req.pattern = o.pattern;
  req.workers = o.workers;
  req.workers_per_node = o.workers_per_node;
  req.bytes = sim::parse_byte_size(o.bytes, "--bytes");
  req.mode = sim::comm_mode_by_name(o.mode);
  req.ps_servers = o.ps_servers;
  req.ps_placement = sim::ps_placement_by_name(o.ps_placement);
  const bool ps = req.pattern == "ps";
  if (!ps && o.ps_servers != 1)
    throw InputError("--ps: only meaningful with --pattern ps");
  // More shards than workers cannot be faster: each worker's own link already carries the whole
  // model both ways, so past one shard per worker only flows (and simulation time) grow. Colocated
  // servers beyond the workers would also have no worker to live on.
  if (ps && o.workers >= 1 && (o.ps_servers < 1 || o.ps_servers > o.workers))
    throw InputError(fmt::format("--ps: expected 1..{} servers (at most one per worker, {} placement), got {}",
                                 o.workers, o.ps_placement, o.ps_servers));
  const auto platform = platforms::load_platform(o.platform);
  const auto r = sim::simulate_comm(platform, req);
  if (format == TextFormat::JSON) {
    nlohmann::json j{{"platform", platform.name},    {"pattern", req.pattern},
                     {"workers", req.workers},       {"bytes", req.bytes},
                     {"mode", sim::to_string(r.mode_used)}, {"time_s", r.time_s},
                     {"algbw_Bps", r.algbw_Bps},     {"busbw_Bps", r.busbw_Bps},
                     {"flows", r.flows},             {"wall_s", r.wall_s}};
    if (ps) {
      j["ps_servers"] = req.ps_servers;
      j["ps_placement"] = sim::to_string(req.ps_placement);
    }
    std::cout << j.dump(2) << '\n';
    return;
  }
  // The table is read by people (sizes and times with units); CSV keeps bytes and seconds.
  const bool human = format == TextFormat::TABLE;
  Table t({"platform", "pattern", "workers", "bytes", "mode", human ? "time" : "time_s", "algbw_GBps", "busbw_GBps",
           "flows"});
  t.add_row({platform.name, req.pattern, std::to_string(req.workers), human ? human_bytes(req.bytes) : g(req.bytes),
             sim::to_string(r.mode_used), human ? human_seconds(r.time_s) : g(r.time_s), g(r.algbw_Bps / 1e9),
             g(r.busbw_Bps / 1e9), std::to_string(r.flows)});
  t.print(std::cout, format);
}

void run_pingpong(const CommOptions& o) {
  if (o.platform.empty()) throw InputError("--platform is required (a shipped platform name or a YAML file)");
  const TextFormat format = parse_text_format(o.format);
  std::vector<double> sizes;
  if (o.sizes.empty()) {
    sizes = sim::default_pingpong_sizes();
  } else {
    size_t start = 0;
    while (start <= o.sizes.size()) {
      const size_t comma = o.sizes.find(',', start);
      const std::string item = o.sizes.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      sizes.push_back(sim::parse_byte_size(item, "--sizes"));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  const auto platform = platforms::load_platform(o.platform);
  const auto points = sim::simulate_pingpong(platform, sizes);
  if (format == TextFormat::JSON) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& p : points) arr.push_back({{"bytes", p.bytes}, {"time_s", p.time_s}, {"bandwidth_Bps", p.bandwidth_Bps}});
    std::cout << nlohmann::json{{"platform", platform.name}, {"points", arr}}.dump(2) << '\n';
    return;
  }
  const bool human = format == TextFormat::TABLE;
  Table t({"bytes", human ? "time" : "time_us", "bandwidth_MBps"});
  for (const auto& p : points)
    t.add_row({human ? human_bytes(p.bytes) : g(p.bytes), human ? human_seconds(p.time_s) : g(p.time_s * 1e6),
               g(p.bandwidth_Bps / 1e6)});
  t.print(std::cout, format);
}

const CommandRegistrar registrar("comm", 60, [](CLI::App& root) {
  auto opts = std::make_shared<CommOptions>();
  auto* cmd = root.add_subcommand("comm", "Simulate one communication pattern on a platform (time, algbw, busbw)");
  cmd->add_option("--platform", opts->platform, "Shipped platform name or platform YAML file");
  cmd->add_option("--pattern", opts->pattern, "Pattern, one of:\n" + sim::comm_pattern_help());
  cmd->add_option("--workers", opts->workers, "Number of workers (ranks, node-major)");
  cmd->add_option("--workers-per-node", opts->workers_per_node, "Workers per node (default: the platform's GPUs, or 1)");
  cmd->add_option("--bytes", opts->bytes,
                  "Message size: B, KB/MB/GB (decimal, x1000) or KiB/MiB/GiB (binary, x1024), e.g. 25MB");
  cmd->add_option("--mode", opts->mode, "auto|coarse|fine (auto: coarse above 64 ranks)")->capture_default_str();
  cmd->add_option("--ps", opts->ps_servers, "Parameter-server shards (--pattern ps), 1..--workers")->capture_default_str();
  cmd->add_option("--ps-placement", opts->ps_placement, "colocated|dedicated (--pattern ps)")->capture_default_str();
  cmd->add_option("--format", opts->format, "table|csv|json")->capture_default_str();
  cmd->require_subcommand(0, 1);

  auto* pp = cmd->add_subcommand("pingpong", "NetPIPE-style one-way time and bandwidth between two nodes");
  pp->add_option("--platform", opts->platform, "Shipped platform name or platform YAML file")->required();
  pp->add_option("--sizes", opts->sizes, "Comma-separated sizes (default: 1 B .. 16 MiB by powers of two, and 1000KB)");
  pp->add_option("--format", opts->format, "table|csv|json")->capture_default_str();
  pp->callback([opts]() { run_pingpong(*opts); });

  cmd->callback([cmd, pp, opts]() {
    if (cmd->got_subcommand(pp)) return;
    run_pattern(*opts);
  });
});

}  // namespace
}  // namespace dtsim::apps
