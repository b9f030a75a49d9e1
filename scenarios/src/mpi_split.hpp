// The MPI side of a sweep launched by mpirun: OpenMPI's entry points resolved at run time (libsimgrid
// exports SMPI's MPI_* symbols, which win the dynamic link), rank and size, and the few collectives
// the sweep needs. Private to scenarios/src.
#pragma once

namespace dtsim::scenarios {

struct MpiApi;

// The ranks of this sweep: one rank (inactive) unless launched by mpirun with more than one process.
class MpiSession {
 public:
  // Joins MPI when `allow` and the environment says mpirun started several processes
  // (OMPI_COMM_WORLD_SIZE / PMI_SIZE); Failure when OpenMPI's libmpi cannot be loaded.
  explicit MpiSession(bool allow);
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool active() const { return active_; }
  // Waits for every rank (no-op when inactive).
  void barrier() const;
  // The maximum (or the sum) of `value` over the ranks (`value` itself when inactive).
  int allreduce_int(int value, bool max) const;
  // Finalizes MPI when this session initialized it; called on success only (after an error the
  // process exits and mpirun ends the other ranks, where a collective finalize could hang).
  void finalize();

 private:
  int rank_ = 0, size_ = 1;
  bool active_ = false, we_initialized_ = false;
  const MpiApi* api_ = nullptr;
};

}  // namespace dtsim::scenarios
