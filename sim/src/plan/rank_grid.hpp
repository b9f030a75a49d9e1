// Internal to sim/: the rank grid of a parallel layout and the process groups that follow from it, the way
// Megatron-LM's parallel_state builds them (core/parallel_state.py, RankGenerator): rank = a mixed-radix
// number over the dimensions in order, the first dimension fastest ("tp-cp-dp-pp": tensor-parallel ranks
// adjacent, hence inside a node; pipeline stages farthest apart, across nodes).
#pragma once
#include <string>
#include <vector>

#include "sim/src/plan/program.hpp"

namespace dtsim::sim {

struct GridDim {
  std::string name;  // "tp", "cp", "dp", "pp", "ep"
  int size = 1;
};

class RankGrid {
 public:
  // Dimensions fastest first. Throws InputError for a size < 1 or a repeated name.
  explicit RankGrid(std::vector<GridDim> dims);
  int ranks() const;                      // product of the sizes
  const std::vector<GridDim>& dims() const { return dims_; }
  int size_of(const std::string& dim) const;  // 1 for a dimension the grid does not have
  // The coordinate of `rank` along `dim` (0 for a dimension the grid does not have).
  int coordinate(int rank, const std::string& dim) const;
  // The groups along `dim`: ranks that differ only in that coordinate, each in coordinate order, the
  // groups in order of their first rank. Named "<dim> <i>".
  std::vector<ProcessGroup> groups(const std::string& dim) const;
  // The group along `dim` that `rank` belongs to.
  ProcessGroup group_of(int rank, const std::string& dim) const;
  // The groups along several dimensions at once: ranks that differ only in those coordinates (Megatron-LM's
  // data-parallel group with context parallelism, "dp-cp"), each in rank order, the groups in order of their
  // first rank. Named "<dims joined by '-'> <i>".
  std::vector<ProcessGroup> joint_groups(const std::vector<std::string>& dims) const;

 private:
  int stride(std::size_t d) const;
  std::vector<GridDim> dims_;
};

}  // namespace dtsim::sim
