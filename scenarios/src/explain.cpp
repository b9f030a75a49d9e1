// The explanation of a point: the shares of rank 0's iteration (compute, each kind of exposed
// communication, input I/O), the busiest resource by measured utilisation, and advice that follows.
#include "scenarios/explain.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace dtsim::scenarios {
namespace {
// A share of the iteration at or above this is worth naming as the limit.
constexpr double NOTABLE_SHARE = 0.1;
// Compute at or above this share of the iteration: the point is compute-bound.
constexpr double COMPUTE_BOUND_SHARE = 0.8;
// A resource moving data at line rate for at least this share of the iteration is what the exposed
// communication waits for (below it, waiting is latency and synchronisation, not bandwidth).
constexpr double SATURATED_SHARE = 0.3;
// Efficiency above 1 by less than this is reported as timing resolution, not as a gain.
constexpr double EFFICIENCY_NOISE = 1e-3;
constexpr double PERCENT = 100;
constexpr double BITS_PER_BYTE = 8;

bool is_nic_side(const std::string& kind) { return kind == "nic" || kind == "switch-port"; }
bool is_intra_node(const std::string& kind) {
  return kind == "pcie-switch" || kind == "device-link" || kind == "nvlink" || kind == "host-staging";
}

std::string pct(double share) { return fmt::format("{:.0f}%", PERCENT * share); }

std::string bytes_text(double b) {
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.1f} MB", b / 1e6);
  return fmt::format("{:.0f} kB", b / 1e3);
}

std::string rate_text(double Bps) {
  const double bits = Bps * BITS_PER_BYTE;
  return bits >= 1e9 ? fmt::format("{:.3g} Gb/s", bits / 1e9) : fmt::format("{:.3g} Mb/s", bits / 1e6);
}

// A link's busy fraction of the exchange window (the time rank 0's exchange is in flight per
// iteration), where the iteration average would dilute a burst at line rate by the compute around it.
// A PS shard's CPU, storage and a point without an exchange keep the iteration average.
double window_utilisation(const sim::ResourceUse& u, const sim::PointResult& r) {
  const double window_s = r.breakdown.communication_s;
  if (u.capacity_Bps <= 0 || window_s <= 0 || u.kind == "storage") return u.utilisation;
  return std::min(1.0, u.bytes / (u.capacity_Bps * window_s));
}

std::string ms(double seconds) { return fmt::format("{:.1f} ms", seconds * 1e3); }

// Names of the exposed parts by strategy family.
struct WaitNames {
  const char* before;
  const char* after;
};
WaitNames wait_names(const ExplainContext& c) {
  if (c.parameter_servers) return {"parameter pull", "gradient push and server update"};
  if (c.single_node) return {"input scatter and parameter broadcast", "gradient reduce"};
  return {"waiting before forward", "gradient allreduce"};
}
}  // namespace

Diagnosis diagnose(const sim::PointResult& r, const ExplainContext& c) {
  Diagnosis d;
  const auto& b = r.breakdown;
  const double iter = std::max(b.compute_s + b.io_stall_s + b.exposed_communication_s, 1e-12);
  d.compute_share = b.compute_s / iter;
  d.io_share = b.io_stall_s / iter;
  d.exposed_share = b.exposed_communication_s / iter;
  d.before_forward_share = b.exposed_before_forward_s / iter;
  d.after_backward_share = b.exposed_after_backward_s / iter;
  if (!r.resources.empty()) {
    d.busiest = r.resources.front();
    d.busiest->utilisation = window_utilisation(*d.busiest, r);
    if (is_nic_side(d.busiest->kind))
      for (const auto& u : r.resources)
        if (u.kind == d.busiest->kind && u.node == d.busiest->node && u.name != d.busiest->name) {
          d.busiest_reverse = u;
          d.busiest_reverse->utilisation = window_utilisation(u, r);
          break;
        }
  }
  if (d.compute_share >= COMPUTE_BOUND_SHARE || (d.io_share < NOTABLE_SHARE && d.exposed_share < NOTABLE_SHARE)) {
    d.limit = Limit::COMPUTE;
  } else if (d.io_share >= d.exposed_share) {
    d.limit = Limit::INPUT_IO;
  } else if (d.busiest && d.busiest->kind == "ps-cpu") {
    // Busier than every link: the busiest shard's CPU applies every worker's pushes one after another,
    // a chain that ends the exchange whether or not it fills the iteration.
    d.limit = Limit::PS_SERVER_CPU;
  } else if (!d.busiest || d.busiest->utilisation < SATURATED_SHARE) {
    d.limit = Limit::LATENCY;
  } else if (c.parameter_servers && is_nic_side(d.busiest->kind) && d.busiest->server >= 0) {
    d.limit = Limit::PS_SERVER_NIC;
  } else if (is_intra_node(d.busiest->kind)) {
    d.limit = Limit::INTRA_NODE;
  } else {
    d.limit = Limit::NETWORK;
  }
  return d;
}

std::string shares_sentence(const sim::PointResult& r, const Diagnosis& d, const ExplainContext& c) {
  const auto names = wait_names(c);
  const auto& b = r.breakdown;
  const double iter = std::max(b.compute_s + b.io_stall_s + b.exposed_communication_s, 1e-12);
  const double kernels_s = b.compute_s - b.compute_variability_s - b.overlap_slowdown_s;
  const double other_s = std::max(0.0, b.exposed_communication_s - b.exposed_before_forward_s - b.exposed_after_backward_s);
  // Every part that shows at the 0.1 ms the sentence prints, so that the parts add up to the iteration.
  std::vector<std::string> parts;
  auto part = [&](const std::string& name, double seconds) {
    if (std::abs(seconds) >= 0.05e-3 || parts.empty())
      parts.push_back(fmt::format("{} {} ({})", name, ms(seconds), pct(seconds / iter)));
  };
  part("compute", kernels_s);
  part("slowest-device factor", b.compute_variability_s);
  part("overlap slowdown", b.overlap_slowdown_s);
  part(fmt::format("exposed {}", names.after), b.exposed_after_backward_s);
  part(fmt::format("exposed {}", names.before), b.exposed_before_forward_s);
  part("other waiting", other_s);
  part("input I/O", b.io_stall_s);
  (void)d;
  std::string text = fmt::format("{} worker{}, worker 0's {:.1f} ms iteration: ", r.workers, r.workers == 1 ? "" : "s",
                                 r.iteration_time_s * 1e3);
  for (std::size_t i = 0; i < parts.size(); ++i) text += (i == 0 ? "" : ", ") + parts[i];
  return text + ".";
}

std::string scaling_gap_sentence(const sim::PointResult& r, const ExplainContext& c) {
  if (!c.baseline || r.workers <= 1 || r.efficiency > 1) return "";
  const auto& one = c.baseline->breakdown;
  const auto& b = r.breakdown;
  const double gap_s = r.iteration_time_s - c.baseline->iteration_time_s;
  if (gap_s < 0.05e-3) return "";
  auto kernels = [](const sim::Breakdown& x) { return x.compute_s - x.compute_variability_s - x.overlap_slowdown_s; };
  std::vector<std::string> parts;
  auto part = [&](const char* name, double seconds) {
    if (std::abs(seconds) >= 0.05e-3) parts.push_back(fmt::format("{} {:+.1f} ms", name, seconds * 1e3));
  };
  part("compute", kernels(b) - kernels(one));
  part("slowest-device factor", b.compute_variability_s - one.compute_variability_s);
  part("overlap slowdown", b.overlap_slowdown_s - one.overlap_slowdown_s);
  part("exposed communication", b.exposed_communication_s - one.exposed_communication_s);
  part("input I/O", b.io_stall_s - one.io_stall_s);
  std::string text = fmt::format("Against one worker's {:.1f} ms iteration (efficiency {:.3f}), {:.1f} ms more: ",
                                 c.baseline->iteration_time_s * 1e3, r.efficiency, gap_s * 1e3);
  for (std::size_t i = 0; i < parts.size(); ++i) text += (i == 0 ? "" : ", ") + parts[i];
  return text + ".";
}

std::string bucket_sentence(const sim::PointResult& r, const ExplainContext& c) {
  if (c.parameter_servers || c.single_node || r.buckets != 1 || r.workers <= 1 || r.gradient_bytes <= 0) return "";
  return fmt::format("One bucket holds all {} of gradients, so the exchange starts only once backward has ended; "
                     "a smaller fusion buffer (--fusion-mb, {} now) lets it overlap the rest of backward.",
                     bytes_text(r.gradient_bytes), bytes_text(c.fusion_bytes));
}

std::string resource_sentence(const Diagnosis& d) {
  if (!d.busiest) return "";
  const auto& u = *d.busiest;
  if (u.kind == "ps-cpu") return fmt::format("Busiest resource: the {}, busy {} of the iteration.", u.name, pct(u.utilisation));
  const std::string shard = u.server >= 0 ? fmt::format(", which hosts PS shard {}", u.server) : "";
  std::string text = fmt::format("Busiest resource: {}{}: {} per iteration, moving data at its {} line rate {} of "
                                 "the exchange window",
                                 u.name, shard, bytes_text(u.bytes), rate_text(u.capacity_Bps), pct(u.utilisation));
  if (d.busiest_reverse)
    text += fmt::format("; its other direction {} ({})", pct(d.busiest_reverse->utilisation),
                        bytes_text(d.busiest_reverse->bytes));
  return text + ".";
}

std::string advice_sentence(const sim::PointResult& r, const Diagnosis& d, const ExplainContext& c) {
  const std::string net = c.network.empty() ? "the network" : c.network;
  switch (d.limit) {
    case Limit::COMPUTE:
      return fmt::format("Compute-bound on {}: the exchange is hidden behind compute, so {} would gain at most {} "
                         "of the iteration.",
                         c.device.empty() ? "the device" : c.device,
                         c.parameter_servers ? "more servers or a faster network" : "a faster network or fusion buffer",
                         pct(d.exposed_share + d.io_share));
    case Limit::INPUT_IO:
      return fmt::format("Input-bound: worker 0 waits {} of the iteration for its {} batch; faster storage (a local "
                         "SSD, a wider parallel file system) or deeper prefetching helps, the exchange does not.",
                         pct(d.io_share), bytes_text(c.batch_input_bytes));
    case Limit::PS_SERVER_CPU:
      return fmt::format("The servers' CPUs applying every worker's push limit: more servers ({} now) split the "
                         "shards, down to the largest variable, which one server applies {} times per iteration "
                         "whatever the count.",
                         r.ps_servers, r.workers);
    case Limit::PS_SERVER_NIC:
      if (c.most_servers_tried > r.ps_servers)
        return fmt::format("The parameter servers' NICs limit at the count the search chose ({} for {} workers): "
                           "the larger counts it tried did not spread the pulls and pushes further; {}allreduce "
                           "removes the servers altogether.",
                           r.ps_servers, r.workers,
                           c.dedicated_servers ? "" : "dedicated servers keep the workers' own traffic off those NICs, ");
      if (r.ps_servers < r.workers && (c.dedicated_servers || r.ps_servers < r.nodes))
        return fmt::format("The parameter servers' NICs limit: more servers ({} now for {} workers) spread the "
                           "pulls and pushes over more NICs.",
                           r.ps_servers, r.workers);
      if (!c.dedicated_servers)
        return "The parameter servers' NICs limit and every worker node already hosts a shard: dedicated servers "
               "keep the workers' own traffic off those NICs, or allreduce removes the servers altogether.";
      return fmt::format("The parameter servers' NICs limit with {} dedicated servers already: allreduce moves "
                         "2(n-1)/n of the gradients per worker instead of funnelling them through servers.",
                         r.ps_servers);
    case Limit::NETWORK:
      return fmt::format("The network limits: {} runs at line rate while workers wait; a faster network than {} "
                         "(or fewer bytes: fp16 gradients) shortens the exchange.",
                         d.busiest->name, net);
    case Limit::INTRA_NODE:
      return fmt::format("The node's internal links limit: {} runs at line rate; a faster intra-node path (NVLink, "
                         "fewer GPUs per PCIe switch) shortens the exchange more than a faster network.",
                         d.busiest->name);
    case Limit::LATENCY:
      if (!c.parameter_servers && !c.single_node && r.buckets == 1 && r.workers > 1)
        return fmt::format("No link is busy over the exchange window (busiest {}), so the exposed time is the one "
                           "exchange's latency and synchronisation after backward: larger messages cannot help, a "
                           "smaller bucket that starts the exchange during backward can.",
                           d.busiest ? pct(d.busiest->utilisation) : "0%");
      if (!c.parameter_servers && !c.single_node && r.buckets > 1)
        return fmt::format("No link is busy over the exchange window (busiest {}), so the exposed time is per-exchange latency and "
                           "synchronisation over {} exchanges: a larger fusion buffer ({} now) means fewer, larger "
                           "exchanges.",
                           d.busiest ? pct(d.busiest->utilisation) : "0%", r.buckets, bytes_text(c.fusion_bytes));
      return fmt::format("No link is busy over the exchange window (busiest {}), so the exposed time is latency and synchronisation "
                         "(waiting for the slowest worker), not bandwidth: a lower-latency network or fewer, larger "
                         "messages help, more bandwidth does not.",
                         d.busiest ? pct(d.busiest->utilisation) : "0%");
  }
  return "";
}

std::string efficiency_note(const sim::PointResult& r, const ExplainContext& c) {
  if (r.efficiency <= 1 || !c.baseline) return "";
  const auto& one = *c.baseline;
  if (r.efficiency < 1 + EFFICIENCY_NOISE)
    return fmt::format("Efficiency {:.3f} is 1 within the simulation's timing resolution (iteration {:.3f} ms "
                       "against {:.3f} ms for one worker).",
                       r.efficiency, r.iteration_time_s * 1e3, one.iteration_time_s * 1e3);
  if (one.breakdown.exposed_communication_s > r.breakdown.exposed_communication_s)
    return fmt::format("Efficiency {:.3f} is above 1 because one worker alone waits longer for its own exchange "
                       "({:.2f} ms exposed per iteration) than each of these workers does ({:.2f} ms).",
                       r.efficiency, one.breakdown.exposed_communication_s * 1e3,
                       r.breakdown.exposed_communication_s * 1e3);
  return fmt::format("Efficiency {:.3f} is above 1: one worker's iteration takes {:.3f} ms, each of these "
                     "workers' {:.3f} ms (compute {:.3f} ms against {:.3f} ms).",
                     r.efficiency, one.iteration_time_s * 1e3, r.iteration_time_s * 1e3, one.breakdown.compute_s * 1e3,
                     r.breakdown.compute_s * 1e3);
}

namespace {
// "11", "11 and 16", "11, 16 and 32".
template <class T, class Fn>
std::string and_list(const std::vector<T>& items, Fn&& text) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i)
    out += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + text(items[i]);
  return out;
}

// What a resource is to a search, the same whichever node it sits on: its kind, whether it carries a
// PS shard's traffic, and its direction ("nic|worker|sending").
std::string resource_role(const sim::ResourceUse& u) {
  const std::string dir = u.name.find("(sending)") != std::string::npos     ? "sending"
                          : u.name.find("(receiving)") != std::string::npos ? "receiving"
                                                                            : "";
  const bool named_by_node = u.kind == "nic" || u.kind == "switch-port";
  return u.kind + "|" + (named_by_node ? (u.server >= 0 ? "server" : "worker") : u.name) + "|" + dir;
}

// The role in words: "the workers' own NIC (sending)".
std::string role_words(const sim::ResourceUse& u) {
  const std::string dir = u.name.find("(sending)") != std::string::npos     ? " (sending)"
                          : u.name.find("(receiving)") != std::string::npos ? " (receiving)"
                                                                            : "";
  const char* part = u.kind == "nic" ? "NIC" : "switch port";
  if (u.kind == "nic" || u.kind == "switch-port")
    return u.server >= 0 ? fmt::format("the {} of the nodes that host a PS shard{}", part, dir)
                         : fmt::format("the workers' own {}{}", part, dir);
  if (u.kind == "ps-cpu") return "the busiest PS shard's CPU";
  return u.name;
}

// A resource within this share of a point's busiest counts as limiting it too (a NIC and the server
// NIC carrying the same bytes).
constexpr double CO_LIMITING_SHARE = 0.01;
}  // namespace

std::string ps_tie_sentence(const std::vector<sim::PointResult>& tied, const ExplainContext& c, double tolerance) {
  if (tied.size() < 2) return "";
  const std::string counts = and_list(tied, [](const sim::PointResult& r) { return std::to_string(r.ps_servers); });
  const std::string head = fmt::format("The server search found {} servers alike (throughput within {:.1f}% of the "
                                       "best) and reports the fewest, {}",
                                       counts, PERCENT * tolerance, tied.front().ps_servers);
  std::vector<Diagnosis> ds;
  for (const auto& r : tied) ds.push_back(diagnose(r, c));
  const bool same_limit = std::all_of(ds.begin(), ds.end(), [&](const Diagnosis& d) { return d.limit == ds[0].limit; });
  if (same_limit && ds[0].limit == Limit::COMPUTE)
    return head + fmt::format(": compute fills the iteration at each ({} of it), so more servers cannot shorten it.",
                              and_list(ds, [](const Diagnosis& d) { return pct(d.compute_share); }));
  if (same_limit && ds[0].limit == Limit::INPUT_IO)
    return head + fmt::format(": input I/O limits each alike ({} of the iteration).",
                              and_list(ds, [](const Diagnosis& d) { return pct(d.io_share); }));
  if (same_limit && ds[0].limit == Limit::PS_SERVER_CPU)
    return head + fmt::format(": the busiest PS shard's CPU limits each alike, busy {} of the iteration applying the "
                              "workers' pushes: that shard holds the largest variable, which more servers cannot split.",
                              and_list(ds, [](const Diagnosis& d) { return pct(d.busiest->utilisation); }));
  if (same_limit && ds[0].limit == Limit::LATENCY)
    return head + ": no link is busy at any of them, so latency and synchronisation set the iteration, which more "
                  "servers do not shorten.";
  // A resource role that limits every tied point: within CO_LIMITING_SHARE of each point's busiest.
  // The workers' own links first, as the likeliest reason more servers do not help.
  std::vector<const sim::ResourceUse*> candidates;
  for (const auto& u : tied.front().resources) candidates.push_back(&u);
  std::stable_sort(candidates.begin(), candidates.end(), [](const sim::ResourceUse* a, const sim::ResourceUse* b) {
    return (a->server < 0) > (b->server < 0);
  });
  for (const sim::ResourceUse* role : candidates) {
    std::vector<double> use;
    for (const auto& r : tied) {
      const double top = r.resources.empty() ? 0 : window_utilisation(r.resources.front(), r);
      for (const auto& u : r.resources)
        if (const double busy = window_utilisation(u, r);
            resource_role(u) == resource_role(*role) && busy >= top - CO_LIMITING_SHARE && busy >= SATURATED_SHARE) {
          use.push_back(busy);
          break;
        }
    }
    if (use.size() == tied.size())
      return head + fmt::format(": {} limits {} servers alike, moving data at line rate {} of the exchange window, so "
                                "more servers do not shorten the exchange.",
                                role_words(*role), counts, and_list(use, [](double u) { return pct(u); }));
  }
  return head + fmt::format(": their busiest resources differ ({}).",
                            and_list(tied, [](const sim::PointResult& r) {
                              return fmt::format("{} server{}: {}", r.ps_servers, r.ps_servers == 1 ? "" : "s",
                                                 r.resources.empty() ? "none measured" : r.resources.front().name);
                            }));
}

std::string explain_point(const sim::PointResult& r, const ExplainContext& c, const std::string& search_note) {
  const Diagnosis d = diagnose(r, c);
  // One measured fact per sentence; why a server count was chosen goes before the advice, which stays
  // last but for the efficiency note.
  std::vector<std::string> sentences{shares_sentence(r, d, c), scaling_gap_sentence(r, c), resource_sentence(d),
                                     search_note, bucket_sentence(r, c), advice_sentence(r, d, c), efficiency_note(r, c)};
  std::string text;
  for (const auto& s : sentences)
    if (!s.empty()) text += (text.empty() ? "" : " ") + s;
  return text;
}

std::string efficiency_note_in(const std::string& explanation) {
  // explain_point writes the note last, and it is the only sentence that starts with "Efficiency ".
  const std::size_t at = explanation.find("Efficiency ");
  return at == std::string::npos ? "" : explanation.substr(at);
}

std::string wrap_paragraph(const std::string& text, std::size_t columns) {
  std::string out, line;
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t space = text.find(' ', i);
    const std::string word = text.substr(i, space == std::string::npos ? std::string::npos : space - i);
    i = space == std::string::npos ? text.size() : space + 1;
    if (word.empty()) continue;
    if (!line.empty() && line.size() + 1 + word.size() > columns) {
      out += line + '\n';
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty()) out += line + '\n';
  return out;
}

}  // namespace dtsim::scenarios
