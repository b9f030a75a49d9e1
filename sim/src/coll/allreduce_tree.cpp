// NCCL's pipelined double binary tree allreduce (NCCL 2.4; Sanders, Speck & Traeff 2009): the bytes are
// split over two binary trees of the nodes, the second the mirror (even node counts) or shift (odd) of
// the first, so that most leaves of one tree are interior in the other; inside a node the ranks form a
// chain below the node's head. Each tree reduces its half up to the root and broadcasts it down, in
// chunks, so reduction and broadcast run as one pipeline. Fine mode sends every chunk on every edge
// (one chunk in flight per edge and direction: see TREE_SLOTS); coarse mode sends one flow per edge and direction and
// adds the pipeline's fill, (2 x depth - 1) chunk times, in closed form.
#include <simgrid/s4u/Host.hpp>

#include <algorithm>
#include <cmath>
#include <memory>

#include "common/errors.hpp"
#include "sim/src/coll/collective.hpp"
#include "sim/src/world.hpp"

namespace dtsim::sim {
namespace s4u = simgrid::s4u;
namespace {

// NCCL's step size with the Simple protocol: NCCL_BUFFSIZE (4 MiB default) / NCCL_STEPS (8), per the
// NCCL environment-variable documentation and src/include/device.h of NCCL 2.4-2.18.
constexpr double TREE_CHUNK_B = 4.0 * 1024 * 1024 / 8;
// Chunks in flight per connection. NCCL has NCCL_STEPS (8) slots, but a connection delivers its chunks
// in order, whereas SimGrid shares concurrent flows fairly (8 chunks would all land together, 8 times
// late): one chunk at a time reproduces in-order delivery, at one hop latency per chunk (1-5 us
// against 40-500 us for 512 KiB at 1-12 GB/s).
constexpr int TREE_SLOTS = 1;

// One tree over positions 0..n-1 (parent -1 at the root).
struct Tree {
  std::vector<int> parent;
  std::vector<std::vector<int>> children;
};

// In-order balanced binary tree over node positions [lo, hi): the middle is the root of the range.
int build_in_order(int lo, int hi, std::vector<int>& parent) {
  if (lo >= hi) return -1;
  const int mid = lo + (hi - lo) / 2;
  const int left = build_in_order(lo, mid, parent);
  const int right = build_in_order(mid + 1, hi, parent);
  if (left >= 0) parent[static_cast<std::size_t>(left)] = mid;
  if (right >= 0) parent[static_cast<std::size_t>(right)] = mid;
  return mid;
}

// The two node trees: the second maps position v to n-1-v (even n) or (v+1) mod n (odd n).
std::array<std::vector<int>, 2> node_trees(int nodes) {
  std::vector<int> first(static_cast<std::size_t>(nodes), -1);
  build_in_order(0, nodes, first);
  std::vector<int> second(static_cast<std::size_t>(nodes), -1);
  auto map = [nodes](int v) { return nodes % 2 == 0 ? nodes - 1 - v : (v + 1) % nodes; };
  for (int v = 0; v < nodes; ++v)
    if (first[static_cast<std::size_t>(v)] >= 0)
      second[static_cast<std::size_t>(map(v))] = map(first[static_cast<std::size_t>(v)]);
  return {first, second};
}

// Rank-level tree over list positions: node heads follow the node tree, the others chain below them.
Tree rank_tree(const std::vector<std::vector<int>>& groups, const std::vector<int>& node_parent,
               const std::vector<int>& position_of_rank_start) {
  Tree t;
  int n = 0;
  for (auto& g : groups) n += static_cast<int>(g.size());
  t.parent.assign(static_cast<std::size_t>(n), -1);
  t.children.assign(static_cast<std::size_t>(n), {});
  for (std::size_t v = 0; v < groups.size(); ++v) {
    const int head = position_of_rank_start[v];
    const int up = node_parent[v];
    if (up >= 0) t.parent[static_cast<std::size_t>(head)] = position_of_rank_start[static_cast<std::size_t>(up)];
    for (std::size_t i = 1; i < groups[v].size(); ++i)
      t.parent[static_cast<std::size_t>(head) + i] = head + static_cast<int>(i) - 1;
  }
  for (int p = 0; p < n; ++p)
    if (t.parent[static_cast<std::size_t>(p)] >= 0) t.children[static_cast<std::size_t>(t.parent[static_cast<std::size_t>(p)])].push_back(p);
  return t;
}

// Edges on the longest path to the root of a tree given by its parent vector.
int depth_of(const std::vector<int>& parent) {
  int deepest = 0;
  for (std::size_t p = 0; p < parent.size(); ++p) {
    int d = 0;
    for (int q = static_cast<int>(p); parent[static_cast<std::size_t>(q)] >= 0; q = parent[static_cast<std::size_t>(q)]) ++d;
    deepest = std::max(deepest, d);
  }
  return deepest;
}

// The two rank trees of `ranks` (positions in the list, node-major grouping as in the world).
std::array<Tree, 2> trees_for(const World& w, const std::vector<int>& ranks, std::vector<int>& order) {
  const auto groups = coll::group_by_node(w, ranks);
  std::vector<int> start;
  order.clear();
  for (auto& g : groups) {
    start.push_back(static_cast<int>(order.size()));
    order.insert(order.end(), g.begin(), g.end());
  }
  const auto nt = node_trees(static_cast<int>(groups.size()));
  return {rank_tree(groups, nt[0], start), rank_tree(groups, nt[1], start)};
}

// ---- fine: every chunk on every edge ----
struct TreeRun {
  Tree tree;
  int chunks = 0;
  double chunk_B = 0, last_B = 0;
  std::vector<int> up_sent;         // chunks sent to the parent (completed)
  std::vector<int> up_issued;       // sends to the parent started (at most TREE_SLOTS ahead of up_sent)
  std::vector<int> down_have;       // chunks held for the broadcast (root: reduced ones)
  std::vector<std::vector<int>> down_sent;  // per position and child: chunks sent
  std::vector<std::vector<int>> down_issued;
  double size(int k) const { return k == chunks - 1 ? last_B : chunk_B; }
};

void tree_fine(World& w, const std::vector<int>& ranks, double bytes, Done done) {
  std::vector<int> order;
  auto trees = trees_for(w, ranks, order);
  const int n = static_cast<int>(order.size());
  std::vector<s4u::Host*> hosts;
  for (int r : order) hosts.push_back(w.worker_host(r));
  const double half = bytes / 2;
  const int chunks = std::max(1, static_cast<int>(std::ceil(half / TREE_CHUNK_B)));
  auto runs = std::make_shared<std::array<TreeRun, 2>>();
  for (int t = 0; t < 2; ++t) {
    auto& run = (*runs)[static_cast<std::size_t>(t)];
    run.tree = trees[static_cast<std::size_t>(t)];
    run.chunks = chunks;
    run.chunk_B = half / chunks;
    run.last_B = half - run.chunk_B * (chunks - 1);
    run.up_sent.assign(static_cast<std::size_t>(n), 0);
    run.up_issued.assign(static_cast<std::size_t>(n), 0);
    run.down_have.assign(static_cast<std::size_t>(n), 0);
    run.down_sent.assign(static_cast<std::size_t>(n), {});
    run.down_issued.assign(static_cast<std::size_t>(n), {});
    for (int p = 0; p < n; ++p) {
      run.down_sent[static_cast<std::size_t>(p)].assign(run.tree.children[static_cast<std::size_t>(p)].size(), 0);
      run.down_issued[static_cast<std::size_t>(p)].assign(run.tree.children[static_cast<std::size_t>(p)].size(), 0);
    }
  }
  // Every position must receive every chunk of both trees (root: hold it reduced).
  auto finished = coll::countdown(2 * n * chunks, std::move(done));
  auto pump = std::make_shared<std::function<void(int, int)>>();
  *pump = [&w, runs, hosts, finished, weak = std::weak_ptr<std::function<void(int, int)>>(pump)](int t, int p) {
    auto self = weak.lock();
    auto& run = (*runs)[static_cast<std::size_t>(t)];
    const auto up = static_cast<std::size_t>(p);
    const auto& kids = run.tree.children[up];
    // Chunks fully reduced at p: delivered by every child (a leaf has its own data at once).
    int reduced = run.chunks;
    for (int c : kids) reduced = std::min(reduced, run.up_sent[static_cast<std::size_t>(c)]);
    const int parent = run.tree.parent[up];
    if (parent < 0) {
      while (run.down_have[up] < reduced) {
        ++run.down_have[up];
        finished();
      }
    } else {
      while (run.up_issued[up] < reduced && run.up_issued[up] - run.up_sent[up] < TREE_SLOTS) {
        const int k = run.up_issued[up]++;
        w.transfer(hosts[up], hosts[static_cast<std::size_t>(parent)], run.size(k), [self, runs, t, p, parent]() {
          ++(*runs)[static_cast<std::size_t>(t)].up_sent[static_cast<std::size_t>(p)];
          (*self)(t, p);
          (*self)(t, parent);
        });
      }
    }
    for (std::size_t c = 0; c < kids.size(); ++c) {
      const int child = kids[c];
      while (run.down_issued[up][c] < run.down_have[up] && run.down_issued[up][c] - run.down_sent[up][c] < TREE_SLOTS) {
        const int k = run.down_issued[up][c]++;
        w.transfer(hosts[up], hosts[static_cast<std::size_t>(child)], run.size(k),
                   [self, runs, finished, t, p, c, child]() {
                     auto& r = (*runs)[static_cast<std::size_t>(t)];
                     ++r.down_sent[static_cast<std::size_t>(p)][c];
                     ++r.down_have[static_cast<std::size_t>(child)];
                     finished();
                     (*self)(t, p);
                     (*self)(t, child);
                   });
      }
    }
  };
  // The pump refers to itself weakly; each transfer in flight holds it, so it lives until the last one.
  for (int t = 0; t < 2; ++t)
    for (int p = 0; p < n; ++p) (*pump)(t, p);
}

// ---- coarse: one flow per edge and direction, pipeline fill in closed form ----
// The fill is a chunk's trip up the deepest path and back down: an inter-node hop takes the chunk's
// share of the measured steady state (the NIC is what the edges share), an intra-node hop the chunk
// at its own route's rate, each plus the hop latency.
// One channel's coarse trees: their flows (each edge up and down, bytes / 2 each) and what runs once
// they have all ended (the pipeline fill, then done).
struct CoarseTrees {
  std::vector<std::pair<s4u::Host*, s4u::Host*>> edges;
  double flow_B = 0;
  Done flows_done;
};

CoarseTrees tree_coarse(World& w, const std::vector<int>& ranks, double bytes, Done done) {
  std::vector<int> order;
  const auto trees = trees_for(w, ranks, order);
  const double half = bytes / 2;
  const double chunk_B = std::min(TREE_CHUNK_B, half);
  double hop_latency_s = 0;
  int flows = 0;
  // Per position and tree: inter-node hops to the root, and the intra-node hops' time to the root.
  struct PathCost {
    int hops = 0, inter_hops = 0;
    double intra_s = 0;
  };
  std::vector<PathCost> paths;
  for (const auto& t : trees) {
    for (std::size_t p = 0; p < t.parent.size(); ++p)
      if (t.parent[p] >= 0) {
        flows += 2;
        hop_latency_s = std::max(hop_latency_s, w.message_latency_s(w.worker_host(order[p]),
                                                                    w.worker_host(order[static_cast<std::size_t>(t.parent[p])]),
                                                                    chunk_B));
      }
    for (std::size_t p = 0; p < t.parent.size(); ++p) {
      PathCost c;
      for (int q = static_cast<int>(p); t.parent[static_cast<std::size_t>(q)] >= 0; q = t.parent[static_cast<std::size_t>(q)]) {
        const int child = order[static_cast<std::size_t>(q)];
        const int up = order[static_cast<std::size_t>(t.parent[static_cast<std::size_t>(q)])];
        ++c.hops;
        if (w.node_of(child) != w.node_of(up))
          ++c.inter_hops;
        else
          c.intra_s += chunk_B / w.route_bandwidth_Bps(w.worker_host(child), w.worker_host(up));
      }
      paths.push_back(c);
    }
  }
  const double t0 = w.now();
  const double chunk_fraction = std::min(1.0, TREE_CHUNK_B / half);
  const double chunks = std::ceil(1 / chunk_fraction);
  CoarseTrees out;
  out.flow_B = half;
  out.flows_done = [&w, t0, hop_latency_s, chunk_fraction, chunks, paths, done = std::move(done)]() {
    const double inter_chunk_s = (w.now() - t0) * chunk_fraction;
    double deepest_s = 0, top_s = 0;
    for (const auto& c : paths) {
      const double s = c.inter_hops * inter_chunk_s + c.intra_s + c.hops * hop_latency_s;
      if (s > deepest_s) {
        deepest_s = s;
        top_s = (c.inter_hops > 0 ? inter_chunk_s : c.intra_s / std::max(1, c.hops)) + hop_latency_s;
      }
    }
    // Up and down the deepest path, its top hop once: (2 depth - 1) hops when all hops are alike.
    w.after((chunks - 1) * hop_latency_s + 2 * deepest_s - top_s, done);
  };
  for (const auto& t : trees)
    for (std::size_t p = 0; p < t.parent.size(); ++p) {
      const int parent = t.parent[p];
      if (parent < 0) continue;
      auto* a = w.worker_host(order[p]);
      auto* b = w.worker_host(order[static_cast<std::size_t>(parent)]);
      out.edges.emplace_back(a, b);
      out.edges.emplace_back(b, a);
    }
  if (static_cast<int>(out.edges.size()) != flows) throw Failure("tree_coarse: flow count (internal error)");
  return out;
}

// Every channel's coarse trees at once. Alone on the network (World::transfer_together), all their flows
// are solved together in closed form: the same ends but for the spread of the flows' start latencies,
// and no SimGrid activity. Otherwise each flow is a SimGrid flow.
void trees_coarse(World& w, const std::vector<std::vector<int>>& channels, double share_B, Done done) {
  auto all = coll::countdown(static_cast<int>(channels.size()), std::move(done));
  std::vector<CoarseTrees> plans;
  std::vector<std::pair<s4u::Host*, s4u::Host*>> flows;
  std::vector<int> groups;
  std::vector<Done> ends;
  for (const auto& c : channels) {
    plans.push_back(tree_coarse(w, c, share_B, all));
    flows.insert(flows.end(), plans.back().edges.begin(), plans.back().edges.end());
    groups.insert(groups.end(), plans.back().edges.size(), static_cast<int>(ends.size()));
    ends.push_back(plans.back().flows_done);
  }
  if (w.transfer_together(flows, groups, plans.front().flow_B, std::move(ends))) return;
  for (auto& plan : plans) {
    auto flow_done = coll::countdown(static_cast<int>(plan.edges.size()), std::move(plan.flows_done));
    for (const auto& [a, b] : plan.edges) w.transfer(a, b, plan.flow_B, flow_done);
  }
}

void tree_start(World& world, const std::vector<int>& ranks, double bytes, CommMode mode, Done done) {
  // Channels over rail NICs (coll::rail_channels): each channel's trees have other node heads, whose NICs
  // carry that channel's inter-node edges.
  const auto channels = coll::rail_channels(world, ranks);
  const double share_B = bytes / static_cast<double>(channels.size());
  if (mode == CommMode::FINE) {
    auto all = coll::countdown(static_cast<int>(channels.size()), std::move(done));
    for (const auto& c : channels) tree_fine(world, c, share_B, all);
    return;
  }
  // Coarse: 2 trees x (n - 1) edges x 2 directions of flows per channel; an identical set of trees that
  // ran alone is reused (coll::run_alone_or_reuse), as the ring is.
  std::int64_t own_flows = 0;
  for (const auto& c : channels) own_flows += 4 * (static_cast<std::int64_t>(c.size()) - 1);
  coll::run_alone_or_reuse(world, coll::collective_signature("tree", channels, bytes), own_flows,
                           [&world, channels, share_B](Done d) { trees_coarse(world, channels, share_B, std::move(d)); },
                           std::move(done));
}

ByteSplit tree_bytes(const RankGeometry& g, double bytes) {
  // Per tree, each edge carries bytes/2 up and bytes/2 down: 2 trees x edges x bytes.
  return {2.0 * (g.nodes - 1) * bytes, 2.0 * (g.ranks - g.nodes) * bytes};
}

}  // namespace

// The two node trees, exposed for tests (tree shape properties).
std::array<std::vector<int>, 2> double_binary_trees(int nodes) { return node_trees(nodes); }

CollectiveAlgorithm allreduce_tree() {
  return {
      "allreduce", "tree",
      "NCCL's pipelined double binary tree: two complementary node trees, 512 KiB chunks, chains inside nodes",
      tree_start,
      [](int n) { return 2.0 * (n - 1) / n; },
      tree_bytes,
      [](const UniformNetwork& net, int n, double bytes) {
        // One rank per node: each rank sends (and receives) at most 2 x bytes in total over both trees
        // (interior in one tree: bytes/2 up + 2 x bytes/2 down; a leaf in the other: bytes/2 up);
        // the pipeline adds (2 depth - 1) chunk hops.
        const auto trees = node_trees(n);
        double worst_B = 0;
        int depth = 0;
        for (int v = 0; v < n; ++v) {
          double out = 0;
          for (const auto& t : trees) {
            int kids = 0;
            for (int c : t) kids += c == v ? 1 : 0;
            out += (t[static_cast<std::size_t>(v)] >= 0 ? bytes / 2 : 0) + kids * bytes / 2;
          }
          worst_B = std::max(worst_B, out);
        }
        for (const auto& t : trees) depth = std::max(depth, depth_of(t));
        const double chunk_B = std::min(TREE_CHUNK_B, bytes / 2);
        const double chunks = std::ceil(bytes / 2 / chunk_B);
        return worst_B / net.bandwidth_Bps + (chunks - 1) * net.latency_s +
               (2 * depth - 1) * (net.latency_s + chunk_B / net.bandwidth_Bps);
      },
  };
}

}  // namespace dtsim::sim
