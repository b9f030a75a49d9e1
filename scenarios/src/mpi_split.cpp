// OpenMPI for `dtsim sweep` under mpirun, reached through dlopen/dlsym of libmpi (calling MPI_Init
// directly would bind to libsimgrid's SMPI, start SMPI and abort).
#include "scenarios/src/mpi_split.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "common/errors.hpp"

namespace dtsim::scenarios {

struct MpiApi {
  using Fn0 = int (*)();
  using FnInit = int (*)(int*, char***);
  using FnFlag = int (*)(int*);
  using FnCommInt = int (*)(void*, int*);
  using FnComm = int (*)(void*);
  using FnAllreduce = int (*)(const void*, void*, int, void*, void*, void*);
  FnFlag initialized = nullptr;
  FnInit init = nullptr;
  Fn0 finalize = nullptr;
  FnCommInt comm_rank = nullptr, comm_size = nullptr;
  FnComm barrier = nullptr;
  FnAllreduce allreduce = nullptr;
  void* comm_world = nullptr;
  void* int_type = nullptr;
  void* op_max = nullptr;
  void* op_sum = nullptr;
};

namespace {

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? std::atoi(v) : 0;
}

// Loaded once per process: libmpi stays loaded until exit (MPI cannot be re-initialized anyway).
const MpiApi& load_openmpi() {
  static const MpiApi api = [] {
    void* h = ::dlopen("libmpi.so.40", RTLD_NOW | RTLD_GLOBAL);
    if (h == nullptr) h = ::dlopen("libmpi.so", RTLD_NOW | RTLD_GLOBAL);
    if (h == nullptr)
      throw Failure(fmt::format("launched by mpirun but OpenMPI's libmpi cannot be loaded: {}", ::dlerror()));
    MpiApi a;
    auto sym = [&](const char* name) {
      void* p = ::dlsym(h, name);
      if (p == nullptr) throw Failure(fmt::format("OpenMPI's libmpi lacks {}", name));
      return p;
    };
    a.initialized = reinterpret_cast<MpiApi::FnFlag>(sym("MPI_Initialized"));
    a.init = reinterpret_cast<MpiApi::FnInit>(sym("MPI_Init"));
    a.finalize = reinterpret_cast<MpiApi::Fn0>(sym("MPI_Finalize"));
    a.comm_rank = reinterpret_cast<MpiApi::FnCommInt>(sym("MPI_Comm_rank"));
    a.comm_size = reinterpret_cast<MpiApi::FnCommInt>(sym("MPI_Comm_size"));
    a.barrier = reinterpret_cast<MpiApi::FnComm>(sym("MPI_Barrier"));
    a.allreduce = reinterpret_cast<MpiApi::FnAllreduce>(sym("MPI_Allreduce"));
    a.comm_world = sym("ompi_mpi_comm_world");
    a.int_type = sym("ompi_mpi_int");
    a.op_max = sym("ompi_mpi_op_max");
    a.op_sum = sym("ompi_mpi_op_sum");
    return a;
  }();
  return api;
}

}  // namespace

MpiSession::MpiSession(bool allow) {
  const int launched = std::max(env_int("OMPI_COMM_WORLD_SIZE"), env_int("PMI_SIZE"));
  if (!allow || launched <= 1) return;
  api_ = &load_openmpi();
  int inited = 0;
  api_->initialized(&inited);
  if (!inited) {
    api_->init(nullptr, nullptr);
    we_initialized_ = true;
  }
  api_->comm_rank(api_->comm_world, &rank_);
  api_->comm_size(api_->comm_world, &size_);
  active_ = size_ > 1;
}

void MpiSession::finalize() {
  if (we_initialized_) api_->finalize();
  we_initialized_ = false;
}

void MpiSession::barrier() const {
  if (active_) api_->barrier(api_->comm_world);
}

int MpiSession::allreduce_int(int value, bool max) const {
  int out = value;
  if (active_) api_->allreduce(&value, &out, 1, api_->int_type, max ? api_->op_max : api_->op_sum, api_->comm_world);
  return out;
}

}  // namespace dtsim::scenarios
