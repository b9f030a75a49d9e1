// Step programs: validation of what the executor relies on (docs/simulation-training.md "Step programs").
#include "sim/src/plan/program.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "common/errors.hpp"
#include "sim/src/coll/collective.hpp"

namespace dtsim::sim {

const char* to_string(TaskKind kind) {
  switch (kind) {
    case TaskKind::COMPUTE: return "compute";
    case TaskKind::COLLECTIVE: return "collective";
    case TaskKind::SEND: return "send";
    case TaskKind::RECV: return "recv";
    case TaskKind::DELAY: return "delay";
    case TaskKind::INPUT: return "input";
    case TaskKind::FLOW: return "flow";
    case TaskKind::SERVE: return "serve";
    case TaskKind::BARRIER: return "barrier";
  }
  return "?";
}

std::string to_string(const Role& role) {
  switch (role.kind) {
    case RoleKind::RANK: return "rank";
    case RoleKind::SERVER: return fmt::format("server {}", role.index);
    case RoleKind::NODE_HOST: return "node host";
    case RoleKind::STORAGE: return "storage";
  }
  return "?";
}

int RankProgram::add(Task task) {
  tasks.push_back(std::move(task));
  return static_cast<int>(tasks.size()) - 1;
}

ProcessGroup world_group(int ranks) {
  ProcessGroup g{"world", {}};
  for (int r = 0; r < ranks; ++r) g.ranks.push_back(r);
  return g;
}

void check_programs(const StepPrograms& programs) {
  const int n = programs.ranks();
  if (n == 0) throw Failure("step programs without ranks (planner bug)");
  if (programs.rank_groups.size() != static_cast<std::size_t>(n) || programs.rank_peers.size() != static_cast<std::size_t>(n))
    throw Failure("step programs: group or peer slots missing for some ranks (planner bug)");
  std::vector<std::map<int, int>> position(programs.groups.size());  // group -> rank -> index in group
  for (std::size_t g = 0; g < programs.groups.size(); ++g) {
    const auto& group = programs.groups[g];
    if (group.ranks.empty()) throw Failure(fmt::format("process group '{}' is empty (planner bug)", group.name));
    for (std::size_t i = 0; i < group.ranks.size(); ++i) {
      const int r = group.ranks[i];
      if (r < 0 || r >= n || !position[g].emplace(r, static_cast<int>(i)).second)
        throw Failure(fmt::format("process group '{}': rank {} out of range or listed twice (planner bug)", group.name, r));
    }
  }
  for (const auto& prog : programs.programs) {
    int inputs = 0;
    for (std::size_t i = 0; i < prog.tasks.size(); ++i) {
      const Task& t = prog.tasks[i];
      auto bad = [&](const std::string& what) {
        return Failure(fmt::format("task {} ('{}'): {} (planner bug)", i, t.label, what));
      };
      for (int d : t.deps)
        if (d < 0 || d >= static_cast<int>(i)) throw bad(fmt::format("dependency {} is not an earlier task", d));
      if (!(std::isfinite(t.seconds) && t.seconds >= 0)) throw bad(fmt::format("{} seconds", t.seconds));
      if (!(std::isfinite(t.bytes) && t.bytes >= 0)) throw bad(fmt::format("{} bytes", t.bytes));
      if (t.kind == TaskKind::COLLECTIVE) {
        const auto ops = collective_operations();
        if (std::find(ops.begin(), ops.end(), t.operation) == ops.end())
          throw bad(fmt::format("unknown collective operation '{}'", t.operation));
        if (!t.algorithm.empty() && !collective_or_null(t.operation, t.algorithm))
          throw bad(fmt::format("unknown {} algorithm '{}'", t.operation, t.algorithm));
      }
      if (t.kind == TaskKind::INPUT && ++inputs > 1) throw bad("a second input wait (one batch per iteration)");
      if (t.kind == TaskKind::SERVE && t.dst.kind != RoleKind::SERVER && t.dst.kind != RoleKind::NODE_HOST)
        throw bad(fmt::format("serve on {} (a server or the node's host)", to_string(t.dst)));
      if (t.kind == TaskKind::SERVE && t.queue >= static_cast<int>(programs.serve_queues.size()))
        throw bad(fmt::format("serving queue {} of {}", t.queue, programs.serve_queues.size()));
      if (!(std::isfinite(t.calls) && t.calls >= 0)) throw bad(fmt::format("{} calls", t.calls));
      if (t.kind == TaskKind::FLOW || t.kind == TaskKind::SERVE) {
        for (const Role& role : {t.src, t.dst})
          if (role.kind == RoleKind::SERVER && (role.index < 0 || role.index >= programs.servers))
            throw bad(fmt::format("{} of {} servers", to_string(role), programs.servers));
        if (t.kind == TaskKind::FLOW && t.src == t.dst) throw bad(fmt::format("a flow from {} to itself", to_string(t.src)));
      }
    }
  }
  for (const auto& q : programs.serve_queues)
    if (q.threads < 1 || !(std::isfinite(q.per_call_s) && q.per_call_s >= 0))
      throw Failure(fmt::format("serving queue '{}': {} threads, {} s per call (planner bug)", q.name, q.threads, q.per_call_s));
  for (const Role& ref : programs.fold.refs)
    if (ref.kind != RoleKind::SERVER || ref.index < 0 || ref.index >= programs.servers)
      throw Failure(fmt::format("node fold: reference {} (a server of {}) (planner bug)", to_string(ref), programs.servers));
  // The sequence of (operation, bytes) a program issues on each of its group slots, a barrier as
  // ("barrier", its seconds): computed once per program, so that 16,384 replicas of one program cost one pass.
  using Calls = std::vector<std::pair<std::string, double>>;
  const auto group_call = [](const Task& t) {
    return t.kind == TaskKind::BARRIER ? std::make_pair(std::string("barrier"), t.seconds) : std::make_pair(t.operation, t.bytes);
  };
  std::vector<std::vector<Calls>> slot_calls(programs.programs.size());
  for (std::size_t p = 0; p < programs.programs.size(); ++p)
    for (const Task& t : programs.programs[p].tasks)
      if ((t.kind == TaskKind::COLLECTIVE || t.kind == TaskKind::BARRIER) && t.group >= 0) {
        auto& v = slot_calls[p];
        if (v.size() <= static_cast<std::size_t>(t.group)) v.resize(static_cast<std::size_t>(t.group) + 1);
        v[static_cast<std::size_t>(t.group)].push_back(group_call(t));
      }
  // Each group's members must issue the same sequence on it; the first member's is the reference.
  std::vector<const Calls*> reference(programs.groups.size(), nullptr);
  std::vector<int> reference_rank(programs.groups.size(), -1);
  std::vector<int> members_seen(programs.groups.size(), 0);
  std::map<std::tuple<int, int, int>, std::vector<double>> sends, recvs;  // (sender, receiver, tag)
  for (int r = 0; r < n; ++r) {
    const int p = programs.program_of[static_cast<std::size_t>(r)];
    if (p < 0 || p >= static_cast<int>(programs.programs.size())) throw Failure(fmt::format("rank {} has no program (planner bug)", r));
    const auto& slots_g = programs.rank_groups[static_cast<std::size_t>(r)];
    const auto& slots_p = programs.rank_peers[static_cast<std::size_t>(r)];
    static const Calls none;
    std::vector<bool> slot_used(slots_g.size(), false);
    for (const Task& t : programs.of(r).tasks) {
      auto bad = [&](const std::string& what) {
        return Failure(fmt::format("rank {} task '{}': {} (planner bug)", r, t.label, what));
      };
      if (t.kind == TaskKind::COLLECTIVE || t.kind == TaskKind::BARRIER) {
        if (t.group < 0 || t.group >= static_cast<int>(slots_g.size())) throw bad("no such group slot");
        const int g = slots_g[static_cast<std::size_t>(t.group)];
        if (g < 0 || g >= static_cast<int>(programs.groups.size())) throw bad("unknown process group");
        if (!position[static_cast<std::size_t>(g)].count(r))
          throw bad(fmt::format("rank is not in group '{}'", programs.groups[static_cast<std::size_t>(g)].name));
        slot_used[static_cast<std::size_t>(t.group)] = true;
      } else if (t.kind == TaskKind::SEND || t.kind == TaskKind::RECV) {
        if (t.peer < 0 || t.peer >= static_cast<int>(slots_p.size())) throw bad("no such peer slot");
        const int q = slots_p[static_cast<std::size_t>(t.peer)];
        if (q < 0 || q >= n || q == r) throw bad(fmt::format("peer {}", q));
        (t.kind == TaskKind::SEND ? sends[{r, q, t.tag}] : recvs[{q, r, t.tag}]).push_back(t.bytes);
      }
      for (const InlineCollective& c : t.inline_collectives) {
        if (t.kind != TaskKind::COMPUTE) throw bad("inline collectives on a task that is not a compute");
        if (c.group < 0 || c.group >= static_cast<int>(slots_g.size())) throw bad("inline collective: no such group slot");
        const int g = slots_g[static_cast<std::size_t>(c.group)];
        if (g < 0 || g >= static_cast<int>(programs.groups.size()) || !position[static_cast<std::size_t>(g)].count(r))
          throw bad("inline collective: rank is not in its group");
        if (c.count < 0 || !(std::isfinite(c.bytes) && c.bytes >= 0)) throw bad("inline collective: count or bytes");
        const auto ops = collective_operations();
        if (std::find(ops.begin(), ops.end(), c.operation) == ops.end())
          throw bad(fmt::format("unknown collective operation '{}'", c.operation));
      }
    }
    for (std::size_t slot = 0; slot < slots_g.size(); ++slot) {
      const int g = slots_g[slot];
      if (g < 0 || g >= static_cast<int>(programs.groups.size())) continue;
      const Calls& mine = slot_used[slot] ? slot_calls[static_cast<std::size_t>(p)][slot] : none;
      ++members_seen[static_cast<std::size_t>(g)];
      auto& ref = reference[static_cast<std::size_t>(g)];
      if (!ref) {
        ref = &mine;
        reference_rank[static_cast<std::size_t>(g)] = r;
      } else if (ref != &mine && *ref != mine) {
        throw Failure(fmt::format("process group '{}': rank {} issues other collectives than rank {} (planner bug)",
                                  programs.groups[static_cast<std::size_t>(g)].name, r,
                                  reference_rank[static_cast<std::size_t>(g)]));
      }
    }
  }
  for (std::size_t g = 0; g < programs.groups.size(); ++g)
    if (reference[g] && !reference[g]->empty() && members_seen[g] != static_cast<int>(programs.groups[g].ranks.size()))
      throw Failure(fmt::format("process group '{}': {} of its {} ranks have it in a slot (planner bug)",
                                programs.groups[g].name, members_seen[g], programs.groups[g].ranks.size()));
  if (sends != recvs) throw Failure("step programs: sends and receives do not match (planner bug)");
}

}  // namespace dtsim::sim
