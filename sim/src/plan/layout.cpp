// Planner: a transformer's parallel layout (ParallelLayout): tensor, pipeline (GPipe, 1F1B, interleaved
// 1F1B), context and expert parallelism composed with data parallelism and ZeRO 0-3, each rank's iteration
// as a step program. Method and sources: docs/parallel-layouts.md.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "common/errors.hpp"
#include "sim/src/plan/planners.hpp"
#include "sim/src/plan/rank_grid.hpp"

namespace dtsim::sim {
namespace {

// Group slots of every rank's program, and peer slots.
enum Slot { TP = 0, CP = 1, DP = 2, EP = 3, EXPERT_DP = 4, EMBEDDING = 5 };
enum Peer { PREV = 0, NEXT = 1 };

// One model chunk (a contiguous range of blocks, a pipeline stage or one of its virtual stages).
struct Chunk {
  double fwd_s = 0, bwd_s = 0, recompute_s = 0;
  double grad_B = 0, expert_grad_B = 0;
  int blocks = 0, attention = 0, moe = 0;
  bool embedding = false, head = false;
  // Per block of the chunk, forward order: forward seconds, backward seconds (recompute included) and dense
  // (non-expert) gradient bytes.
  std::vector<double> block_fwd_s, block_bwd_s, block_grad_B;
};

struct Step {
  bool forward;
  int micro;
  int chunk;  // model chunk index on this pipeline rank (0..vp-1)
};

// The schedule of pipeline rank `s`: GPipe (every forward, then every backward in reverse), 1F1B
// (PipeDream-flush: pp-s-1 warm-up forwards, then one forward one backward), or Megatron-LM's interleaved
// 1F1B over vp model chunks (core/pipeline_parallel/schedules.py: warm-up (pp-s-1) x 2 + (vp-1) x pp,
// micro-batches in groups of pp per chunk).
std::vector<Step> schedule_of(const ParallelLayout& L, int s) {
  const int m = L.micro_batches, pp = L.pp, vp = L.vp;
  std::vector<Step> out;
  if (L.schedule == "gpipe") {
    for (int k = 0; k < vp; ++k)
      for (int j = 0; j < m; ++j) out.push_back({true, j, k});
    for (int k = vp - 1; k >= 0; --k)
      for (int j = m - 1; j >= 0; --j) out.push_back({false, j, k});
    return out;
  }
  if (vp == 1) {
    const int warmup = std::min(pp - s - 1, m);
    for (int j = 0; j < warmup; ++j) out.push_back({true, j, 0});
    for (int i = 0; i < m - warmup; ++i) {
      out.push_back({true, warmup + i, 0});
      out.push_back({false, i, 0});
    }
    for (int j = m - warmup; j < m; ++j) out.push_back({false, j, 0});
    return out;
  }
  const int total = m * vp;
  auto micro = [&](int k) { return (k / (pp * vp)) * pp + k % pp; };
  auto fchunk = [&](int k) { return (k / pp) % vp; };
  auto bchunk = [&](int k) { return vp - 1 - (k / pp) % vp; };
  const int warmup = std::min((pp - s - 1) * 2 + (vp - 1) * pp, total);
  for (int k = 0; k < warmup; ++k) out.push_back({true, micro(k), fchunk(k)});
  for (int i = 0; i < total - warmup; ++i) {
    out.push_back({true, micro(warmup + i), fchunk(warmup + i)});
    out.push_back({false, micro(i), bchunk(i)});
  }
  for (int k = total - warmup; k < total; ++k) out.push_back({false, micro(k), bchunk(k)});
  return out;
}

}  // namespace

std::vector<int> layout_chunk_blocks(const ParallelLayout& L, int blocks) {
  const int chunks = L.pp * L.vp;
  if (!L.stage_layers.empty()) {
    if (static_cast<int>(L.stage_layers.size()) != chunks)
      throw InputError(fmt::format("--stage-layers: {} entries, expected pp x vp = {}", L.stage_layers.size(), chunks));
    int sum = 0;
    for (std::size_t c = 0; c < L.stage_layers.size(); ++c) {
      const int v = L.stage_layers[c];
      const bool end = c == 0 || c + 1 == L.stage_layers.size();  // holds the embedding or the output layer
      if (v < (end ? 0 : 1))
        throw InputError(fmt::format("--stage-layers: chunk {} needs >= {} layers, got {}", c, end ? 0 : 1, v));
      sum += v;
    }
    if (sum != blocks)
      throw InputError(fmt::format("--stage-layers: the entries add up to {} layers, the model has {}", sum, blocks));
    return L.stage_layers;
  }
  // Up to two chunks fewer layers than chunks: the first and the last chunk hold only the embedding and the
  // output layer (Llama 3 405B's 126 layers on 16 x 8 chunks; Dubey et al. 2024, §3.3.2).
  if (blocks < chunks - 2 || (blocks < chunks && L.pp * L.vp < 3))
    throw InputError(fmt::format("--pp: {} pipeline stages x {} virtual stages = {} chunks, more than the model's {} "
                                 "layers (plus the embedding and output chunks)",
                                 L.pp, L.vp, chunks, blocks));
  if (blocks < chunks) {
    std::vector<int> out(static_cast<std::size_t>(chunks), 1);
    out.front() = 0;
    if (chunks - blocks == 2) out.back() = 0;
    return out;
  }
  std::vector<int> out(static_cast<std::size_t>(chunks), blocks / chunks);
  const int extra = blocks % chunks;
  // Spread from the second chunk on (the first carries the embedding), wrapping if needed.
  for (int e = 0; e < extra; ++e) ++out[static_cast<std::size_t>((1 + e) % chunks)];
  return out;
}

namespace {

std::vector<Chunk> build_chunks(const calibrate::ComputeProfile& profile, const ParallelLayout& L) {
  int blocks = 0;
  for (const auto& l : profile.layers) blocks = std::max(blocks, l.block + 1);
  if (blocks == 0) throw InputError(fmt::format("model '{}' has no transformer blocks: parallel layouts apply to transformers", profile.model));
  const auto per_chunk = layout_chunk_blocks(L, blocks);
  std::vector<int> chunk_of_block;
  for (std::size_t c = 0; c < per_chunk.size(); ++c)
    for (int b = 0; b < per_chunk[c]; ++b) chunk_of_block.push_back(static_cast<int>(c));
  std::vector<Chunk> chunks(per_chunk.size());
  bool seen_block = false;
  int last_block = -1;
  const bool full = L.recompute == "full", selective = L.recompute == "selective";
  for (const auto& l : profile.layers) {
    int c = 0;
    if (l.block >= 0) {
      c = chunk_of_block[static_cast<std::size_t>(l.block)];
      seen_block = true;
    } else {
      c = seen_block ? static_cast<int>(chunks.size()) - 1 : 0;
    }
    Chunk& ch = chunks[static_cast<std::size_t>(c)];
    ch.fwd_s += l.fwd_s;
    const bool attention = l.op == "attention";
    double recompute = 0;
    if (l.block >= 0 && (full || (selective && attention))) recompute = l.fwd_s;
    ch.bwd_s += l.bwd_s() + recompute;
    ch.recompute_s += recompute;
    const bool expert = l.op == "moe_experts";
    (expert ? ch.expert_grad_B : ch.grad_B) += static_cast<double>(l.grad_bytes);
    if (l.op == "embedding" || l.op == "patch_embed") ch.embedding = true;
    if (l.op == "lm_head" || l.op == "cls_head") ch.head = true;
    if (attention) ++ch.attention;
    if (expert) ++ch.moe;
    if (l.block >= 0 && l.block != last_block) {
      ++ch.blocks;
      last_block = l.block;
      ch.block_grad_B.push_back(0.0);
      ch.block_bwd_s.push_back(0.0);
      ch.block_fwd_s.push_back(0.0);
    }
    if (!ch.block_fwd_s.empty() && l.block >= 0) ch.block_fwd_s.back() += l.fwd_s;
    if (!expert) {
      if (!ch.block_grad_B.empty() && l.block >= 0) ch.block_grad_B.back() += static_cast<double>(l.grad_bytes);
    }
    if (!ch.block_bwd_s.empty() && l.block >= 0) ch.block_bwd_s.back() += l.bwd_s() + recompute;
  }
  return chunks;
}

// The collectives one micro-batch's forward (or backward) of a chunk runs on its tensor-, context- and
// expert-parallel groups, in Megatron-LM's accounting: two per block each way (after the attention's and
// the MLP's row-parallel linears in forward; before their column-parallel linears in backward), one for the
// vocab-parallel embedding in forward and one for the output layer's input gradient in backward; with
// sequence parallelism each allreduce is a reduce-scatter plus an allgather of the same buffer. Ring
// attention gathers each layer's keys and values (and reduce-scatters their gradients in backward); an MoE
// layer dispatches and combines tokens with two alltoalls each way. Full recompute repeats the forward's.
std::vector<InlineCollective> local_collectives(const ParallelLayout& L, const Chunk& ch, bool forward) {
  std::vector<InlineCollective> out;
  const bool full = L.recompute == "full";
  if (L.tp > 1) {
    // A replicated embedding and output layer (ParallelLayout::replicated_vocab) compute whole on every rank.
    const bool vocab_split = !L.replicated_vocab;
    const int embedding = ch.embedding && vocab_split ? 1 : 0, head = ch.head && vocab_split ? 1 : 0;
    int calls = 2 * ch.blocks + (forward ? embedding : head);
    if (!forward && full) calls += 2 * ch.blocks + embedding;
    if (L.sequence_parallel) {
      out.push_back({"reduce-scatter", TP, L.tp_bytes, calls});
      out.push_back({"allgather", TP, L.tp_bytes, calls});
    } else {
      out.push_back({"allreduce", TP, L.tp_bytes, calls});
    }
  }
  if (L.cp > 1 && ch.attention > 0) {
    const int gathers = ch.attention * (forward ? 1 : (full ? 2 : 1));
    out.push_back({"allgather", CP, L.cp_kv_bytes, gathers});
    if (!forward) out.push_back({"reduce-scatter", CP, L.cp_kv_bytes, ch.attention});
  }
  if (L.ep > 1 && ch.moe > 0) out.push_back({"alltoall", EP, L.ep_bytes, 2 * ch.moe * (!forward && full ? 2 : 1)});
  return out;
}

// A chunk's forward or backward as per-block units (seconds, dense gradient bytes) in execution order
// (backward: last block first), and the chunk's work outside blocks (embedding, final norm, output layer).
struct Unit {
  double seconds = 0, grad_B = 0;
};
struct BlockUnits {
  std::vector<Unit> blocks;
  Unit outside;
};
BlockUnits block_units(const Chunk& ch, bool forward) {
  BlockUnits out;
  double block_s = 0, block_B = 0;
  for (std::size_t i = 0; i < ch.block_fwd_s.size(); ++i) {
    const double s = forward ? ch.block_fwd_s[i] : ch.block_bwd_s[i];
    out.blocks.push_back({s, ch.block_grad_B[i]});
    block_s += s;
    block_B += ch.block_grad_B[i];
  }
  if (!forward) std::reverse(out.blocks.begin(), out.blocks.end());
  out.outside = {std::max(0.0, (forward ? ch.fwd_s : ch.bwd_s) - block_s), std::max(0.0, ch.grad_B - block_B)};
  return out;
}

// Gradient buckets of a chunk's last backward, in backward order: blocks whose dense gradients add up to
// the fusion size (Megatron-LM's DDP buckets, PyTorch DDP's 25 MiB), the chunk's non-block layers with the
// first bucket when they are the output layer (its backward runs first) and with the last otherwise (the
// embedding's runs last).
std::vector<Unit> buckets_of(const Chunk& ch, double fusion_B) {
  const BlockUnits units = block_units(ch, false);
  std::vector<Unit> out;
  Unit cur = ch.head ? units.outside : Unit{};
  for (const Unit& b : units.blocks) {
    cur.seconds += b.seconds;
    cur.grad_B += b.grad_B;
    if (fusion_B > 0 && cur.grad_B >= fusion_B) {
      out.push_back(cur);
      cur = {};
    }
  }
  if (!ch.head) {
    cur.seconds += units.outside.seconds;
    cur.grad_B += units.outside.grad_B;
  }
  if (cur.seconds > 0 || cur.grad_B > 0 || out.empty()) out.push_back(cur);
  return out;
}

// ZeRO-3 units of one chunk's forward or backward: one per block in execution order, the chunk's work
// outside blocks folded into the first unit executed, its expert gradients spread evenly over the blocks.
std::vector<Unit> zero3_units(const Chunk& ch, bool forward) {
  BlockUnits units = block_units(ch, forward);
  if (units.blocks.empty()) return {units.outside};
  if (ch.expert_grad_B > 0)
    for (auto& u : units.blocks) u.grad_B += ch.expert_grad_B / static_cast<double>(units.blocks.size());
  units.blocks.front().seconds += units.outside.seconds;
  units.blocks.front().grad_B += units.outside.grad_B;
  return units.blocks;
}

// The optimizer step of pipeline rank `s`: its chunks' share of the profile's step (ZeRO 1-3: of its shard over
// the `dp` ranks of the gradient group, data- and context-parallel).
double stage_update_s(const calibrate::ComputeProfile& profile, const ParallelLayout& L, int dp,
                      const std::vector<Chunk>& chunks, int s) {
  double total_grad_B = 0, rank_grad_B = 0;
  for (const auto& c : chunks) total_grad_B += c.grad_B + c.expert_grad_B;
  for (int k = 0; k < L.vp; ++k) {
    const Chunk& ch = chunks[static_cast<std::size_t>(k * L.pp + s)];
    rank_grad_B += ch.grad_B + ch.expert_grad_B;
  }
  return total_grad_B > 0 ? profile.update_s * rank_grad_B / total_grad_B / (L.zero >= 1 ? dp : 1) : 0.0;
}

}  // namespace

LayoutStageTimes layout_stage_times(const calibrate::ComputeProfile& profile, const ParallelLayout& L, int workers,
                                    int pipeline_rank) {
  check_layout(L, workers);
  if (pipeline_rank < 0 || pipeline_rank >= L.pp)
    throw InputError(fmt::format("pipeline rank {} is outside 0..{} (--pp {})", pipeline_rank, L.pp - 1, L.pp));
  const std::vector<Chunk> chunks = build_chunks(profile, L);
  LayoutStageTimes out;
  for (int k = 0; k < L.vp; ++k) {
    const Chunk& ch = chunks[static_cast<std::size_t>(k * L.pp + pipeline_rank)];
    out.fwd_s += ch.fwd_s;
    out.bwd_s += ch.bwd_s;
  }
  out.update_s = stage_update_s(profile, L, workers / L.model_parallel() * L.cp, chunks, pipeline_rank);
  return out;
}

void check_layout(const ParallelLayout& L, int workers) {
  const auto need = [](int v, const char* flag) {
    if (v < 1 || v > (1 << 16)) throw InputError(fmt::format("{}: must be in 1..65536, got {}", flag, v));
  };
  need(L.tp, "--tp");
  need(L.pp, "--pp");
  need(L.vp, "--vp");
  need(L.cp, "--cp");
  need(L.ep, "--ep");
  if (L.micro_batches < 1) throw InputError(fmt::format("--global-batch: gives {} micro-batches per replica", L.micro_batches));
  if (L.zero < 0 || L.zero > 3) throw InputError(fmt::format("--zero: must be 0, 1, 2 or 3, got {}", L.zero));
  if (L.schedule != "1f1b" && L.schedule != "gpipe")
    throw InputError(fmt::format("--schedule: unknown schedule '{}' (known: 1f1b, gpipe)", L.schedule));
  if (L.recompute != "none" && L.recompute != "selective" && L.recompute != "full")
    throw InputError(fmt::format("--recompute: unknown policy '{}' (known: none, selective, full)", L.recompute));
  const long long mp = static_cast<long long>(L.tp) * L.pp * L.cp;
  if (workers % mp != 0)
    throw InputError(fmt::format("--workers: {} workers are not a multiple of tp x pp x cp = {} x {} x {} = {}", workers,
                                 L.tp, L.pp, L.cp, mp));
  const int dp = static_cast<int>(workers / mp);
  if (dp % L.ep != 0)
    throw InputError(fmt::format("--ep: expert parallelism {} must divide the data-parallel size {} (workers / (tp x pp x cp))",
                                 L.ep, dp));
  if (L.vp > 1 && L.pp == 1) throw InputError("--vp: virtual stages need a pipeline (--pp > 1)");
  if (L.vp > 1 && L.schedule == "gpipe") throw InputError("--vp: the interleaved schedule is 1F1B's (--schedule 1f1b)");
  if (L.vp > 1 && L.micro_batches % L.pp != 0)
    throw InputError(fmt::format("--vp: the interleaved schedule needs micro-batches ({}) in multiples of --pp ({}), as "
                                 "Megatron-LM requires",
                                 L.micro_batches, L.pp));
  std::vector<std::string> dims;
  std::string rest = L.order;
  while (!rest.empty()) {
    const auto dash = rest.find('-');
    dims.push_back(rest.substr(0, dash));
    rest = dash == std::string::npos ? "" : rest.substr(dash + 1);
  }
  auto sorted = dims;
  std::sort(sorted.begin(), sorted.end());
  if (sorted != std::vector<std::string>{"cp", "dp", "pp", "tp"})
    throw InputError(fmt::format("--order: '{}' must name tp, cp, dp and pp once each, fastest first (e.g. tp-cp-dp-pp)",
                                 L.order));
}

namespace {
// The layout's rank grid: its dimensions in the order L.order names them, fastest first (dp: the
// data-parallel size).
RankGrid layout_grid(const ParallelLayout& L, int dp) {
  std::vector<GridDim> dims;
  std::string rest = L.order;
  while (!rest.empty()) {
    const auto dash = rest.find('-');
    const std::string d = rest.substr(0, dash);
    dims.push_back({d, d == "tp" ? L.tp : d == "cp" ? L.cp : d == "dp" ? dp : L.pp});
    rest = dash == std::string::npos ? "" : rest.substr(dash + 1);
  }
  return RankGrid(dims);
}
}  // namespace

StepPrograms plan_layout(const calibrate::ComputeProfile& profile, const TrainingPoint& point) {
  const ParallelLayout& L = point.layout;
  check_layout(L, point.workers);
  const int W = point.workers;
  const int dp = W / L.model_parallel();
  const int dp_cp = dp * L.cp;  // the gradient group's size (DP slot)
  const RankGrid grid = layout_grid(L, dp);
  const std::vector<Chunk> chunks = build_chunks(profile, L);
  const int pp = L.pp, vp = L.vp, m = L.micro_batches;
  const int total_chunks = pp * vp;

  StepPrograms out;
  out.samples_per_iteration = L.samples_per_iteration;
  // Groups: every dimension's, the expert groups (ep consecutive data-parallel ranks) and the expert
  // data-parallel groups (the data-parallel ranks with the same expert shard), and the embedding group of
  // the first and last pipeline stages (tied input and output embeddings).
  std::vector<std::vector<int>> slot_group(static_cast<std::size_t>(W), std::vector<int>(6, -1));
  auto add_groups = [&](const std::vector<ProcessGroup>& groups, int slot) {
    for (const auto& g : groups) {
      const int index = static_cast<int>(out.groups.size());
      out.groups.push_back(g);
      for (int r : g.ranks) slot_group[static_cast<std::size_t>(r)][static_cast<std::size_t>(slot)] = index;
    }
  };
  add_groups(grid.groups("tp"), TP);
  add_groups(grid.groups("cp"), CP);
  // Gradients, ZeRO shards and their gathers span the data-parallel ranks together with the context-parallel
  // ones: those hold the same weights and see other parts of the same sequences (Megatron-LM's
  // DistributedDataParallel and distributed optimizer use get_data_parallel_group(with_context_parallel=True),
  // core/distributed/distributed_data_parallel.py).
  add_groups(L.cp > 1 ? grid.joint_groups({"cp", "dp"}) : grid.groups("dp"), DP);
  const auto dp_groups = grid.groups("dp");
  {
    std::vector<ProcessGroup> ep_groups, edp_groups;
    for (const auto& g : dp_groups) {
      const int n = static_cast<int>(g.ranks.size());
      for (int e = 0; e < n / L.ep; ++e) {
        ProcessGroup pg{fmt::format("ep {}.{}", g.name, e), {}};
        for (int i = 0; i < L.ep; ++i) pg.ranks.push_back(g.ranks[static_cast<std::size_t>(e * L.ep + i)]);
        ep_groups.push_back(std::move(pg));
      }
      for (int i = 0; i < L.ep; ++i) {
        ProcessGroup pg{fmt::format("expert-dp {}.{}", g.name, i), {}};
        for (int e = 0; e < n / L.ep; ++e) pg.ranks.push_back(g.ranks[static_cast<std::size_t>(e * L.ep + i)]);
        edp_groups.push_back(std::move(pg));
      }
    }
    add_groups(ep_groups, EP);
    add_groups(edp_groups, EXPERT_DP);
  }
  // Tied embeddings across the first and last stage: Megatron-LM allreduces the embedding's gradient
  // between them after the backward; the last stage's output layer then holds a copy of the embedding
  // weights. The profile's tied head has no gradient of its own, so the copy's bytes are the first
  // chunk's embedding gradient.
  double embedding_grad_B = 0;
  for (const auto& l : profile.layers)
    if (l.op == "embedding") embedding_grad_B += static_cast<double>(l.grad_bytes);
  bool tied = false;
  for (const auto& l : profile.layers)
    if (l.op == "lm_head" && l.grad_bytes == 0) tied = true;
  const bool embedding_group = pp > 1 && tied && embedding_grad_B > 0;
  if (embedding_group) {
    std::vector<ProcessGroup> groups;
    for (const auto& g : grid.groups("pp"))
      groups.push_back({fmt::format("embedding {}", g.name), {g.ranks.front(), g.ranks.back()}});
    add_groups(groups, EMBEDDING);
  }

  // One program per pipeline rank.
  double rank0_bubble = 0, rank0_recompute = 0;
  for (int s = 0; s < pp; ++s) {
    RankProgram p;
    const auto steps = schedule_of(L, s);
    int prev_compute = -1;
    std::vector<int> grad_done;  // gradient collectives (and the last backward) the update waits for
    std::vector<int> remaining_backward(static_cast<std::size_t>(vp), m);
    int last_compute = -1;
    std::vector<int> recent;  // ZeRO-3 unit computes, in order
    // A compute with its node-local collectives: inline (folded), or each call a collective task of its own
    // on the communication stream, the next compute after the last (fold_local_collectives false).
    auto add_compute = [&](Task t) {
      if (L.fold_local_collectives || t.inline_collectives.empty()) return p.add(std::move(t));
      const auto calls = std::move(t.inline_collectives);
      t.inline_collectives.clear();
      const std::string label = t.label;
      int last = p.add(std::move(t));
      for (const auto& c : calls)
        for (int k = 0; k < c.count; ++k)
          last = p.add({.kind = TaskKind::COLLECTIVE, .phase = TaskPhase::COMMUNICATION,
                        .label = fmt::format("{} after {}", c.operation, label), .operation = c.operation,
                        .group = c.group, .bytes = c.bytes, .deps = {last}});
      return last;
    };
    auto tag = [&](bool forward, int micro, int global_chunk) { return (global_chunk * m + micro) * 2 + (forward ? 0 : 1); };
    for (const Step& st : steps) {
      const int g = st.chunk * pp + s;  // global chunk
      const Chunk& ch = chunks[static_cast<std::size_t>(g)];
      const bool first = g == 0, last = g == total_chunks - 1;
      const std::string where = fmt::format("micro-batch {}{}", st.micro, vp > 1 ? fmt::format(" chunk {}", st.chunk) : "");
      std::vector<int> deps;
      if (prev_compute >= 0) deps.push_back(prev_compute);
      if (st.forward && !first) {
        // The activation from the previous chunk (pipeline rank s-1, or the last rank's previous chunk).
        deps.push_back(p.add({.kind = TaskKind::RECV, .phase = TaskPhase::COMMUNICATION,
                              .label = "receive activation " + where, .peer = PREV, .bytes = L.pp_bytes,
                              .tag = tag(true, st.micro, g - 1)}));
      }
      if (!st.forward && !last) {
        deps.push_back(p.add({.kind = TaskKind::RECV, .phase = TaskPhase::COMMUNICATION,
                              .label = "receive gradient " + where, .peer = NEXT, .bytes = L.pp_bytes,
                              .tag = tag(false, st.micro, g + 1)}));
      }
      if (L.zero == 3 && dp_cp > 1) {
        // FSDP full shard / ZeRO-3, one unit per block (FSDP's transformer-block wrapping): each block's
        // weights gathered before its forward and again before its backward, prefetched one block ahead
        // (the gather of a unit waits for the compute two units back), its gradient reduce-scattered after
        // its backward. Work outside blocks goes with the first unit in forward order (the last in backward).
        const auto units = zero3_units(ch, st.forward);
        const auto inline_comm = local_collectives(L, ch, st.forward);
        for (std::size_t u = 0; u < units.size(); ++u) {
          std::vector<int> gather_deps;
          if (recent.size() >= 2) gather_deps.push_back(recent[recent.size() - 2]);
          const int gather = p.add({.kind = TaskKind::COLLECTIVE, .phase = TaskPhase::COMMUNICATION,
                                    .label = fmt::format("allgather weights ({}) {} unit {}",
                                                         st.forward ? "forward" : "backward", where, u),
                                    .operation = "allgather", .group = DP,
                                    .bytes = units[u].grad_B * L.param_bytes_per_grad_byte,
                                    .priced = L.fold_replicas, .deps = gather_deps});
          std::vector<int> unit_deps = deps;
          unit_deps.push_back(gather);
          const int c = add_compute({.kind = TaskKind::COMPUTE, .phase = st.forward ? TaskPhase::FORWARD : TaskPhase::BACKWARD,
                               .label = fmt::format("{} {} unit {}", st.forward ? "forward" : "backward", where, u),
                               .seconds = units[u].seconds, .deps = unit_deps,
                               .inline_collectives = u + 1 == units.size() ? inline_comm : std::vector<InlineCollective>{},
                               .args = {{"micro_batch", st.micro}, {"chunk", st.chunk}, {"unit", static_cast<double>(u)}}});
          recent.push_back(c);
          deps = {c};
          if (!st.forward)
            grad_done.push_back(p.add({.kind = TaskKind::COLLECTIVE, .phase = TaskPhase::COMMUNICATION,
                                       .label = fmt::format("reduce-scatter gradients {} unit {}", where, u),
                                       .operation = "reduce-scatter", .group = DP, .bytes = units[u].grad_B,
                                       .priced = L.fold_replicas, .deps = {c}}));
        }
        prev_compute = last_compute = deps.front();
        if (st.forward && !last)
          p.add({.kind = TaskKind::SEND, .phase = TaskPhase::COMMUNICATION, .label = "send activation " + where,
                 .peer = NEXT, .bytes = L.pp_bytes, .tag = tag(true, st.micro, g), .deps = {last_compute}});
        if (!st.forward && !first)
          p.add({.kind = TaskKind::SEND, .phase = TaskPhase::COMMUNICATION, .label = "send gradient " + where,
                 .peer = PREV, .bytes = L.pp_bytes, .tag = tag(false, st.micro, g), .deps = {last_compute}});
        continue;
      }
      const bool last_backward = !st.forward && --remaining_backward[static_cast<std::size_t>(st.chunk)] == 0;
      const auto inline_comm = local_collectives(L, ch, st.forward);
      int done = -1;
      if (st.forward) {
        done = add_compute({.kind = TaskKind::COMPUTE, .phase = TaskPhase::FORWARD, .label = "forward " + where,
                      .seconds = ch.fwd_s, .deps = deps, .inline_collectives = inline_comm,
                      .args = {{"micro_batch", st.micro}, {"chunk", st.chunk}}});
      } else if (!last_backward || dp_cp == 1) {
        done = add_compute({.kind = TaskKind::COMPUTE, .phase = TaskPhase::BACKWARD, .label = "backward " + where,
                      .seconds = ch.bwd_s, .deps = deps, .inline_collectives = inline_comm,
                      .args = {{"micro_batch", st.micro}, {"chunk", st.chunk}}});
      } else {
        // The last micro-batch's backward of this chunk, cut at gradient buckets: each bucket reduced over
        // the data-parallel group as soon as its backward ends (overlapped with the rest).
        const auto buckets = buckets_of(ch, point.runtime.fusion_bytes);
        for (std::size_t k = 0; k < buckets.size(); ++k) {
          std::vector<InlineCollective> share = inline_comm;
          // The inline collectives go with the last segment (their count is per chunk, not per bucket).
          if (k + 1 < buckets.size()) share.clear();
          done = add_compute({.kind = TaskKind::COMPUTE, .phase = TaskPhase::BACKWARD,
                        .label = fmt::format("backward {} bucket {}", where, k), .seconds = buckets[k].seconds,
                        .deps = deps, .inline_collectives = share,
                        .args = {{"micro_batch", st.micro}, {"chunk", st.chunk}, {"bucket", static_cast<double>(k)}}});
          deps = {done};
          grad_done.push_back(p.add({.kind = TaskKind::COLLECTIVE, .phase = TaskPhase::COMMUNICATION,
                                     .label = fmt::format("{} gradients chunk {} bucket {}",
                                                          L.zero >= 1 ? "reduce-scatter" : "allreduce", st.chunk, k),
                                     .operation = L.zero >= 1 ? "reduce-scatter" : "allreduce", .group = DP,
                                     .bytes = buckets[k].grad_B, .deps = {done}}));
        }
        if (ch.expert_grad_B > 0 && L.ep > 1 && dp / L.ep > 1)
          grad_done.push_back(p.add({.kind = TaskKind::COLLECTIVE, .phase = TaskPhase::COMMUNICATION,
                                     .label = fmt::format("{} expert gradients chunk {}",
                                                          L.zero >= 1 ? "reduce-scatter" : "allreduce", st.chunk),
                                     .operation = L.zero >= 1 ? "reduce-scatter" : "allreduce", .group = EXPERT_DP,
                                     .bytes = ch.expert_grad_B, .deps = {done}}));
        else if (ch.expert_grad_B > 0 && L.ep == 1 && dp_cp > 1)
          grad_done.push_back(p.add({.kind = TaskKind::COLLECTIVE, .phase = TaskPhase::COMMUNICATION,
                                     .label = fmt::format("allreduce expert gradients chunk {}", st.chunk),
                                     .operation = L.zero >= 1 ? "reduce-scatter" : "allreduce", .group = DP,
                                     .bytes = ch.expert_grad_B, .deps = {done}}));
      }
      prev_compute = last_compute = done;
      if (st.forward && !last)
        p.add({.kind = TaskKind::SEND, .phase = TaskPhase::COMMUNICATION, .label = "send activation " + where,
               .peer = NEXT, .bytes = L.pp_bytes, .tag = tag(true, st.micro, g), .deps = {done}});
      if (!st.forward && !first)
        p.add({.kind = TaskKind::SEND, .phase = TaskPhase::COMMUNICATION, .label = "send gradient " + where,
               .peer = PREV, .bytes = L.pp_bytes, .tag = tag(false, st.micro, g), .deps = {done}});
    }
    grad_done.push_back(last_compute);
    const bool has_embedding = chunks[static_cast<std::size_t>(s)].embedding;
    const bool has_head = chunks[static_cast<std::size_t>((vp - 1) * pp + s)].head;
    if (embedding_group && (has_embedding || has_head) && (s == 0 || s == pp - 1))
      grad_done.push_back(p.add({.kind = TaskKind::COLLECTIVE, .phase = TaskPhase::COMMUNICATION,
                                 .label = "allreduce tied embedding gradients", .operation = "allreduce",
                                 .group = EMBEDDING, .bytes = embedding_grad_B, .deps = {last_compute}}));
    // The optimizer step over this rank's chunks (its share of the profile's step; ZeRO 1-3: of its shard).
    double rank_grad_B = 0, recompute = 0;
    for (int k = 0; k < vp; ++k) {
      const Chunk& ch = chunks[static_cast<std::size_t>(k * pp + s)];
      rank_grad_B += ch.grad_B + ch.expert_grad_B;
      recompute += ch.recompute_s * m;
    }
    const double update_s = stage_update_s(profile, L, dp_cp, chunks, s);
    const int update = p.add({.kind = TaskKind::COMPUTE, .phase = TaskPhase::UPDATE, .label = "optimizer update",
                              .seconds = update_s, .deps = grad_done});
    if ((L.zero == 1 || L.zero == 2) && dp_cp > 1)
      p.add({.kind = TaskKind::COLLECTIVE, .phase = TaskPhase::COMMUNICATION, .label = "allgather updated weights",
             .operation = "allgather", .group = DP, .bytes = rank_grad_B * L.param_bytes_per_grad_byte,
             .deps = {update}});
    if (s == 0) {
      rank0_recompute = recompute;
      // The ideal bubble: (pp - 1) chunk-times of forward and backward of the slowest stage, over vp.
      double slowest = 0;
      for (int q = 0; q < pp; ++q) {
        double t = 0;
        for (int k = 0; k < vp; ++k) t += chunks[static_cast<std::size_t>(k * pp + q)].fwd_s + chunks[static_cast<std::size_t>(k * pp + q)].bwd_s;
        slowest = std::max(slowest, t);
      }
      rank0_bubble = pp > 1 ? (pp - 1) * slowest / vp : 0.0;
    }
    out.programs.push_back(std::move(p));
  }
  out.bubble_s = rank0_bubble;
  out.recompute_s = rank0_recompute;
  out.program_of.resize(static_cast<std::size_t>(W));
  out.rank_groups.resize(static_cast<std::size_t>(W));
  out.rank_peers.resize(static_cast<std::size_t>(W));
  // Folds (docs/parallel-layouts.md "Folds"). Tensor-parallel ranks run in lock-step (their collectives are
  // inline and priced alike, at the group's slowest device): only tensor rank 0 of each group plays its
  // program, the others an empty one. Data-parallel replicas run alike until their gradient collectives:
  // only replica 0 plays the pipeline, the others only its data-parallel collectives (in the same order,
  // so that every collective still spans the whole group on the network), and replica 0 computes at the
  // slowest device of the ranks it stands for.
  const bool fold_tp = L.fold_local_collectives && L.tp > 1;
  const bool fold_dp = L.fold_replicas && dp > 1;
  const int programs_played = pp;
  if (fold_dp)
    for (int s = 0; s < pp; ++s) {
      RankProgram q;
      std::vector<int> index(out.programs[static_cast<std::size_t>(s)].tasks.size(), -1);
      for (const Task& t : out.programs[static_cast<std::size_t>(s)].tasks)
        if (t.kind == TaskKind::COLLECTIVE && (t.group == DP || t.group == EXPERT_DP)) {
          Task c = t;
          c.deps.clear();
          q.add(std::move(c));
        }
      out.programs.push_back(std::move(q));
    }
  const int empty_program = static_cast<int>(out.programs.size());
  if (fold_tp) out.programs.emplace_back();
  out.stands_for.assign(static_cast<std::size_t>(W), {});
  const auto pp_groups = grid.groups("pp");
  for (const auto& g : pp_groups)
    for (int s = 0; s < pp; ++s) {
      const int r = g.ranks[static_cast<std::size_t>(s)];
      const bool tp_rep = !fold_tp || grid.coordinate(r, "tp") == 0;
      const bool dp_rep = !fold_dp || grid.coordinate(r, "dp") == 0;
      out.program_of[static_cast<std::size_t>(r)] = !tp_rep ? empty_program : dp_rep ? s : programs_played + s;
      if (tp_rep && dp_rep && (fold_tp || fold_dp))
        for (int q = 0; q < W; ++q)
          if (grid.coordinate(q, "pp") == s && grid.coordinate(q, "cp") == grid.coordinate(r, "cp") &&
              (fold_tp || grid.coordinate(q, "tp") == grid.coordinate(r, "tp")) &&
              (fold_dp || grid.coordinate(q, "dp") == grid.coordinate(r, "dp")))
            out.stands_for[static_cast<std::size_t>(r)].push_back(q);
      out.rank_peers[static_cast<std::size_t>(r)] = {g.ranks[static_cast<std::size_t>((s + pp - 1) % pp)],
                                                     g.ranks[static_cast<std::size_t>((s + 1) % pp)]};
    }
  for (int r = 0; r < W; ++r) {
    auto& slots = slot_group[static_cast<std::size_t>(r)];
    if (slots[EMBEDDING] < 0) slots.resize(EMBEDDING);  // only the first and last stages hold it
    out.rank_groups[static_cast<std::size_t>(r)] = slots;
  }
  return out;
}

namespace {

// The ranks of `rank`'s group in each slot, as plan_layout builds them (empty: no such group).
std::vector<std::vector<int>> slot_ranks(const RankGrid& grid, const ParallelLayout& L, int rank, bool embedding_group) {
  std::vector<std::vector<int>> out(6);
  out[TP] = grid.group_of(rank, "tp").ranks;
  out[CP] = grid.group_of(rank, "cp").ranks;
  const auto dp_group = grid.group_of(rank, "dp").ranks;
  if (L.cp > 1) {
    for (int c : out[CP])
      for (int q : grid.group_of(c, "dp").ranks) out[DP].push_back(q);
  } else {
    out[DP] = dp_group;
  }
  const int n = static_cast<int>(dp_group.size());
  const int i = static_cast<int>(std::find(dp_group.begin(), dp_group.end(), rank) - dp_group.begin());
  const int e = i / L.ep, j = i % L.ep;
  for (int k = 0; k < L.ep; ++k) out[EP].push_back(dp_group[static_cast<std::size_t>(e * L.ep + k)]);
  for (int k = 0; k < n / L.ep; ++k) out[EXPERT_DP].push_back(dp_group[static_cast<std::size_t>(k * L.ep + j)]);
  const auto pipeline = grid.group_of(rank, "pp").ranks;
  const int s = grid.coordinate(rank, "pp");
  if (embedding_group && (s == 0 || s == L.pp - 1)) out[EMBEDDING] = {pipeline.front(), pipeline.back()};
  return out;
}

}  // namespace

// The longest path of plan_layout's programs played on the schedules directly (docs/layout-search.md
// "Pruning by bound"): every compute of a pipeline rank one after the other in its schedule's order, its
// inline collectives after it, a forward after the previous chunk's forward of its micro-batch and the
// activation's transfer, a backward after the next chunk's backward and the gradient's; rank 0 starts at
// 0 (its receives are posted then), the others at minus infinity (they may start earlier). Then rank 0's
// gradient collectives after their buckets' (or ZeRO-3 units') backward, the update after them and ZeRO
// 1-2's gather of the updated weights. The programs' last backward cut at buckets and ZeRO-3's units add up
// to the chunk's backward and forward. Beside it, each pipeline rank's compute and communication streams.
LayoutScheduleBound layout_schedule_bound(const calibrate::ComputeProfile& profile, const TrainingPoint& point,
                                          const CommLowerBound* comm, double overlap_slowdown) {
  const ParallelLayout& L = point.layout;
  check_layout(L, point.workers);
  const int dp = point.workers / L.model_parallel();
  const int dp_cp = dp * L.cp;  // the optimizer's shards (plan_layout's DP slot)
  const std::vector<Chunk> chunks = build_chunks(profile, L);
  const int pp = L.pp, vp = L.vp, m = L.micro_batches, total = pp * vp;
  constexpr double UNREACHED = -std::numeric_limits<double>::infinity();
  const double NOT_YET = std::numeric_limits<double>::quiet_NaN();
  // Replica 0's pipeline ranks and the geometry of each one's groups (plan_layout's).
  double embedding_grad_B = 0;
  bool tied = false;
  for (const auto& l : profile.layers) {
    if (l.op == "embedding") embedding_grad_B += static_cast<double>(l.grad_bytes);
    if (l.op == "lm_head" && l.grad_bytes == 0) tied = true;
  }
  const bool embedding_group = pp > 1 && tied && embedding_grad_B > 0;
  std::vector<int> stage_rank(static_cast<std::size_t>(pp), 0);
  std::vector<std::vector<GroupGeometry>> geo(static_cast<std::size_t>(pp), std::vector<GroupGeometry>(6));
  if (comm) {
    const RankGrid grid = layout_grid(L, dp);
    stage_rank = grid.group_of(0, "pp").ranks;
    for (int s = 0; s < pp; ++s) {
      const int r = stage_rank[static_cast<std::size_t>(s)];
      const auto slots = slot_ranks(grid, L, r, embedding_group);
      for (std::size_t k = 0; k < slots.size(); ++k)
        if (!slots[k].empty()) geo[static_cast<std::size_t>(s)][k] = comm->geometry(slots[k]);
    }
  }
  const auto coll_s = [&](int s, const std::string& op, double bytes, int slot) {
    return comm ? comm->collective_s(op, bytes, geo[static_cast<std::size_t>(s)][static_cast<std::size_t>(slot)]) : 0.0;
  };
  const auto p2p_s = [&](int from, int to) {
    return comm && pp > 1 ? comm->p2p_s(L.pp_bytes, stage_rank[static_cast<std::size_t>(from)], stage_rank[static_cast<std::size_t>(to)])
                          : 0.0;
  };
  // Each chunk's inline (tensor/context/expert) collectives, forward and backward, on its pipeline rank.
  std::vector<double> inline_fwd(static_cast<std::size_t>(total), 0.0), inline_bwd(inline_fwd.size(), 0.0);
  for (int g = 0; g < total; ++g)
    for (const bool forward : {true, false})
      for (const auto& c : local_collectives(L, chunks[static_cast<std::size_t>(g)], forward))
        (forward ? inline_fwd : inline_bwd)[static_cast<std::size_t>(g)] += c.count * coll_s(g % pp, c.operation, c.bytes, c.group);
  // Finish of each (micro-batch, global chunk) forward and backward.
  std::vector<double> fwd(static_cast<std::size_t>(m) * total, NOT_YET), bwd(fwd.size(), NOT_YET);
  const auto at = [&](int micro, int g) { return static_cast<std::size_t>(g) * m + static_cast<std::size_t>(micro); };
  std::vector<std::vector<Step>> steps(static_cast<std::size_t>(pp));
  for (int s = 0; s < pp; ++s) steps[static_cast<std::size_t>(s)] = schedule_of(L, s);
  std::vector<std::size_t> next(static_cast<std::size_t>(pp), 0);
  std::vector<double> clock(static_cast<std::size_t>(pp), UNREACHED), busy(static_cast<std::size_t>(pp), 0.0);
  std::vector<double> comm_busy(static_cast<std::size_t>(pp), 0.0), inline_busy(static_cast<std::size_t>(pp), 0.0);
  clock[0] = 0;
  const bool zero3 = L.zero == 3 && dp_cp > 1;
  const std::string grad_op = L.zero >= 1 ? "reduce-scatter" : "allreduce";
  double rank0_grads_end = 0;  // the latest of rank 0's gradient collectives (the update waits for them)
  double rank0_sends_end = 0;  // the latest of its sends
  std::vector<int> remaining_backward(static_cast<std::size_t>(vp), m);
  for (std::size_t left = static_cast<std::size_t>(pp); left > 0;) {
    bool moved = false;
    for (int s = 0; s < pp; ++s) {
      auto& k = next[static_cast<std::size_t>(s)];
      const auto& mine = steps[static_cast<std::size_t>(s)];
      if (k == mine.size()) continue;
      for (; k < mine.size(); ++k) {
        const Step& st = mine[k];
        const int g = st.chunk * pp + s;
        double input = UNREACHED;
        if (st.forward && g > 0) input = fwd[at(st.micro, g - 1)];
        if (!st.forward && g < total - 1) input = bwd[at(st.micro, g + 1)];
        if (std::isnan(input)) break;  // its input is not computed yet
        const bool receives = st.forward ? g > 0 : g < total - 1;
        if (receives) {
          const double transfer = p2p_s(st.forward ? (g - 1) % pp : (g + 1) % pp, s);
          // Rank 0 posts its receives at its start: a transfer ends after both ends are posted.
          input = (s == 0 ? std::max(input, 0.0) : input) + transfer;  // -inf stays -inf
        }
        const Chunk& ch = chunks[static_cast<std::size_t>(g)];
        const double seconds = st.forward ? ch.fwd_s : ch.bwd_s;
        const double local_s = (st.forward ? inline_fwd : inline_bwd)[static_cast<std::size_t>(g)];
        double& c = clock[static_cast<std::size_t>(s)];
        const double begin = std::max(c, input);
        c = begin + seconds + local_s;  // -inf stays -inf
        (st.forward ? fwd : bwd)[at(st.micro, g)] = c;
        busy[static_cast<std::size_t>(s)] += seconds;
        if (L.fold_local_collectives) inline_busy[static_cast<std::size_t>(s)] += local_s;
        if (!L.fold_local_collectives) comm_busy[static_cast<std::size_t>(s)] += local_s;
        moved = true;
        if (!comm) continue;
        // The collectives this step puts on the rank's communication stream; rank 0's after its computes.
        const bool sends = st.forward ? g < total - 1 : g > 0;
        if (s == 0 && sends) rank0_sends_end = std::max(rank0_sends_end, c + p2p_s(0, st.forward ? (g + 1) % pp : (g - 1) % pp));
        if (zero3) {
          double unit_end = begin;
          const auto units = zero3_units(ch, st.forward);
          for (std::size_t u = 0; u < units.size(); ++u) {
            comm_busy[static_cast<std::size_t>(s)] += coll_s(s, "allgather", units[u].grad_B * L.param_bytes_per_grad_byte, DP);
            if (st.forward) continue;
            const double rs = coll_s(s, "reduce-scatter", units[u].grad_B, DP);
            comm_busy[static_cast<std::size_t>(s)] += rs;
            unit_end += units[u].seconds + (u + 1 == units.size() ? local_s : 0.0);  // inline ones after the last
            if (s == 0) rank0_grads_end = std::max(rank0_grads_end, unit_end + rs);
          }
          continue;
        }
        // Other ranks' gradient collectives count in their stream's load (below), not on rank 0's path.
        if (s != 0 || st.forward || --remaining_backward[static_cast<std::size_t>(st.chunk)] > 0 || dp_cp == 1) continue;
        // Rank 0's last backward of this chunk, cut at buckets: each bucket's collective after its part.
        double bucket_end = begin;
        const auto buckets = buckets_of(ch, point.runtime.fusion_bytes);
        for (std::size_t b = 0; b < buckets.size(); ++b) {
          bucket_end += buckets[b].seconds + (b + 1 == buckets.size() ? local_s : 0.0);
          rank0_grads_end = std::max(rank0_grads_end, bucket_end + coll_s(s, grad_op, buckets[b].grad_B, DP));
        }
        if (ch.expert_grad_B > 0 && L.ep > 1 && dp / L.ep > 1)
          rank0_grads_end = std::max(rank0_grads_end, bucket_end + coll_s(s, grad_op, ch.expert_grad_B, EXPERT_DP));
        else if (ch.expert_grad_B > 0 && L.ep == 1 && dp_cp > 1)
          rank0_grads_end = std::max(rank0_grads_end, bucket_end + coll_s(s, grad_op, ch.expert_grad_B, DP));
      }
      if (k == mine.size()) --left;
    }
    if (!moved && left > 0) throw Failure("pipeline schedules wait on each other in a cycle (planner bug)");
  }
  LayoutScheduleBound out;
  for (int s = 0; s < pp; ++s) {
    const double update = stage_update_s(profile, L, dp_cp, chunks, s);
    const double compute = busy[static_cast<std::size_t>(s)] + update, local = inline_busy[static_cast<std::size_t>(s)];
    out.busiest_s = std::max(out.busiest_s, compute + local);
    // The gradient collectives (non-ZeRO-3: each chunk's whole gradients over its last backward's buckets),
    // the tied embedding's allreduce and ZeRO 1-2's gather of the updated weights.
    double rank_grad_B = 0;
    for (int k = 0; k < vp; ++k) {
      const Chunk& ch = chunks[static_cast<std::size_t>(k * pp + s)];
      rank_grad_B += ch.grad_B + ch.expert_grad_B;
      if (!comm || zero3 || dp_cp == 1) continue;
      double dense_B = 0;
      for (const Unit& b : buckets_of(ch, point.runtime.fusion_bytes)) dense_B += b.grad_B;
      comm_busy[static_cast<std::size_t>(s)] += coll_s(s, grad_op, dense_B, DP);
      if (ch.expert_grad_B > 0 && L.ep > 1 && dp / L.ep > 1)
        comm_busy[static_cast<std::size_t>(s)] += coll_s(s, grad_op, ch.expert_grad_B, EXPERT_DP);
      else if (ch.expert_grad_B > 0 && L.ep == 1)
        comm_busy[static_cast<std::size_t>(s)] += coll_s(s, grad_op, ch.expert_grad_B, DP);
    }
    const bool has_embedding = chunks[static_cast<std::size_t>(s)].embedding;
    const bool has_head = chunks[static_cast<std::size_t>((vp - 1) * pp + s)].head;
    const double embedding_s = embedding_group && (has_embedding || has_head) && (s == 0 || s == pp - 1)
                                   ? coll_s(s, "allreduce", embedding_grad_B, EMBEDDING)
                                   : 0.0;
    const double gather_s = (L.zero == 1 || L.zero == 2) && dp_cp > 1
                                ? coll_s(s, "allgather", rank_grad_B * L.param_bytes_per_grad_byte, DP)
                                : 0.0;
    comm_busy[static_cast<std::size_t>(s)] += embedding_s + gather_s;
    out.comm_busiest_s = std::max(out.comm_busiest_s, comm_busy[static_cast<std::size_t>(s)]);
    out.overlapped_s = std::max(out.overlapped_s, streams_lower_bound_s(compute, local, comm_busy[static_cast<std::size_t>(s)], overlap_slowdown));
    if (s == 0) {
      // The update waits for the last compute, the gradient collectives and the embedding's allreduce.
      const double update_end = std::max({clock[0] + embedding_s, rank0_grads_end}) + update;
      out.rank0_path_s = std::max(update_end + gather_s, rank0_sends_end);
    }
  }
  return out;
}

}  // namespace dtsim::sim
