// The rank grid of a parallel layout and its process groups (Megatron-LM's RankGenerator order).
#include "sim/src/plan/rank_grid.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "common/errors.hpp"

namespace dtsim::sim {

RankGrid::RankGrid(std::vector<GridDim> dims) : dims_(std::move(dims)) {
  for (std::size_t i = 0; i < dims_.size(); ++i) {
    if (dims_[i].size < 1) throw InputError(fmt::format("parallel layout: {} = {} (expected >= 1)", dims_[i].name, dims_[i].size));
    for (std::size_t j = 0; j < i; ++j)
      if (dims_[j].name == dims_[i].name) throw InputError(fmt::format("parallel layout: {} named twice", dims_[i].name));
  }
}

int RankGrid::ranks() const {
  int n = 1;
  for (const auto& d : dims_) n *= d.size;
  return n;
}

int RankGrid::stride(std::size_t d) const {
  int s = 1;
  for (std::size_t i = 0; i < d; ++i) s *= dims_[i].size;
  return s;
}

int RankGrid::size_of(const std::string& dim) const {
  for (const auto& d : dims_)
    if (d.name == dim) return d.size;
  return 1;
}

int RankGrid::coordinate(int rank, const std::string& dim) const {
  for (std::size_t i = 0; i < dims_.size(); ++i)
    if (dims_[i].name == dim) return rank / stride(i) % dims_[i].size;
  return 0;
}

ProcessGroup RankGrid::group_of(int rank, const std::string& dim) const {
  for (std::size_t i = 0; i < dims_.size(); ++i) {
    if (dims_[i].name != dim) continue;
    const int s = stride(i);
    const int base = rank - rank / s % dims_[i].size * s;
    ProcessGroup g;
    for (int k = 0; k < dims_[i].size; ++k) g.ranks.push_back(base + k * s);
    // Groups are numbered in order of their first rank.
    const int low = base % s, high = base / (s * dims_[i].size);
    g.name = fmt::format("{} {}", dim, high * s + low);
    return g;
  }
  return {fmt::format("{} {}", dim, rank), {rank}};
}

std::vector<ProcessGroup> RankGrid::groups(const std::string& dim) const {
  std::vector<ProcessGroup> out;
  std::vector<bool> seen(static_cast<std::size_t>(ranks()), false);
  for (int r = 0; r < ranks(); ++r) {
    if (seen[static_cast<std::size_t>(r)]) continue;
    out.push_back(group_of(r, dim));
    for (int q : out.back().ranks) seen[static_cast<std::size_t>(q)] = true;
  }
  return out;
}

std::vector<ProcessGroup> RankGrid::joint_groups(const std::vector<std::string>& dims) const {
  std::string name;
  for (const auto& d : dims) name += (name.empty() ? "" : "-") + d;
  // Ranks with equal coordinates along every other dimension share a group; ascending rank order is the
  // grid's mixed-radix order of the grouped coordinates.
  std::map<std::vector<int>, std::size_t> index;
  std::vector<ProcessGroup> out;
  for (int r = 0; r < ranks(); ++r) {
    std::vector<int> key;
    for (const auto& d : dims_)
      if (std::find(dims.begin(), dims.end(), d.name) == dims.end()) key.push_back(coordinate(r, d.name));
    auto [it, added] = index.try_emplace(key, out.size());
    if (added) out.push_back({fmt::format("{} {}", name, out.size()), {}});
    out[it->second].ranks.push_back(r);
  }
  return out;
}

}  // namespace dtsim::sim
