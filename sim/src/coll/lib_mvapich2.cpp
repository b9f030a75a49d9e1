// MVAPICH2's allreduce tuning table for TACC Stampede (Xeon E5-2680, 16 cores, Mellanox FDR: the
// MV2_ARCH_INTEL_XEON_E5_2680_16 / MV2_HCA_MLX_CX_FDR table of MVAPICH2's allreduce_tuning.c, as
// transcribed in SimGrid's smpi_mvapich2_selector_stampede.hpp): the first row whose process count is
// >= the communicator's (the last row beyond it), then the first size range whose upper bound is >= the
// message: point-to-point recursive doubling below the row's threshold, reduce-scatter + allgather
// (Rabenseifner: dtsim's `rhd`) above it.
#include <array>

#include "sim/src/coll/library.hpp"

namespace dtsim::sim {
namespace {

struct Mv2Row {
  int max_ranks;       // "numproc" of the row
  double rd_up_to_B;   // recursive doubling up to this size (inclusive), reduce-scatter-allgather above
};

// Rows of the Stampede table: 16: rd to 1 KiB; 32-512: rd to 16 KiB; 1024: rd to 8 KiB; 2048: rd to 64 B,
// then reduce / multicast two-level variants to 4 KiB that dtsim does not model (run as rd), rs above.
constexpr std::array<Mv2Row, 8> STAMPEDE_ROWS{{
    {16, 1024}, {32, 16384}, {64, 16384}, {128, 16384}, {256, 16384}, {512, 16384}, {1024, 8192}, {2048, 4096},
}};

LibraryChoice mvapich2_choose(const LibraryCall& call, const std::string& forced) {
  if (!forced.empty()) return {forced, "-", 1.0, 0};
  std::size_t row = 0;
  while (row + 1 < STAMPEDE_ROWS.size() && call.ranks > STAMPEDE_ROWS[row].max_ranks) ++row;
  return {call.bytes <= STAMPEDE_ROWS[row].rd_up_to_B ? "rd" : "rhd", "-", 1.0, 0};
}

}  // namespace

CollectiveLibrary library_mvapich2() {
  return {"mvapich2-2.3",
          "MVAPICH2 2.3 Stampede (FDR) table: recursive doubling up to 1-16 KiB by rank count, Rabenseifner above",
          mvapich2_choose, CUDA_PEER_P2P_LEVEL};
}

}  // namespace dtsim::sim
