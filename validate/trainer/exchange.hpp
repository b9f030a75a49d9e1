// Gradient exchange of the MPI trainer: buckets of contiguous gradients averaged with MPI_Allreduce
// (blocking or MPI_Iallreduce overlapped with backward), dtsim's own ring over point-to-point, or a
// parameter server on rank 0 (push gradients, server update, pull parameters).
#pragma once
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "validate/src/net.hpp"

namespace dtsim::validate {

enum class ExchangeStrategy { ALLREDUCE, PS };
enum class AllreduceAlgo { MPI, RING };  // MPI_Allreduce, or reduce-scatter + all-gather over MPI_Sendrecv

struct Bucket {
  std::size_t first_slice = 0, last_slice = 0;  // inclusive range of Net::slices()
  std::int64_t offset = 0, count = 0;           // elements of the flat gradient buffer
  std::size_t pending = 0;                      // slices whose gradient is not final yet
  bool started = false;
  std::vector<MPI_Request> requests;
};

class Exchange {
 public:
  // Buckets are filled from the last layer backwards until each holds >= fusion_bytes (the last one may
  // hold less). Throws InputError for fusion_bytes <= 0.
  Exchange(MPI_Comm comm, Net& net, ExchangeStrategy strategy, AllreduceAlgo algo, bool overlap, double fusion_bytes);

  // Called by Net::backward when a slice's gradient is final; starts its bucket when overlap is on.
  void on_slice_done(std::size_t slice);
  // Starts the remaining buckets and waits for all of them; gradients are then averaged over ranks
  // (allreduce) or summed on rank 0 (PS).
  void finish_gradients();
  // PS: rank 0 sends the updated parameters to every worker, workers receive them.
  void pull_parameters();
  // Resets the per-iteration state (before backward).
  void begin_iteration();

  const std::vector<Bucket>& buckets() const { return buckets_; }
  bool is_server() const { return rank_ == 0; }

 private:
  void start(Bucket& b);
  void ring_allreduce(float* data, std::int64_t count);

  MPI_Comm comm_;
  Net& net_;
  ExchangeStrategy strategy_;
  AllreduceAlgo algo_;
  bool overlap_;
  int rank_ = 0, size_ = 1;
  std::vector<Bucket> buckets_;
  std::vector<std::size_t> bucket_of_slice_;
  std::vector<float> ps_recv_;   // server: one gradient copy per worker
  std::vector<float> ring_tmp_;
};

}  // namespace dtsim::validate
