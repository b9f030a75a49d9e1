// Bucketed gradient exchange over MPI for the validation trainer (see exchange.hpp).
#include "validate/trainer/exchange.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "common/errors.hpp"

namespace dtsim::validate {

Exchange::Exchange(MPI_Comm comm, Net& net, ExchangeStrategy strategy, AllreduceAlgo algo, bool overlap,
                   double fusion_bytes)
    : comm_(comm), net_(net), strategy_(strategy), algo_(algo), overlap_(overlap) {
  if (!(fusion_bytes > 0)) throw InputError(fmt::format("--fusion-bytes must be > 0, got {}", fusion_bytes));
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  const auto& slices = net_.slices();
  bucket_of_slice_.assign(slices.size(), 0);
  // Backward finishes the last slice first: buckets grow from the end of the flat buffer.
  for (std::size_t k = slices.size(); k-- > 0;) {
    if (buckets_.empty() || static_cast<double>(buckets_.back().count) * sizeof(float) >= fusion_bytes) {
      Bucket b;
      b.last_slice = k;
      buckets_.push_back(b);
    }
    Bucket& b = buckets_.back();
    b.first_slice = k;
    b.offset = slices[k].offset;
    b.count += slices[k].count;
    bucket_of_slice_[k] = buckets_.size() - 1;
  }
  if (strategy_ == ExchangeStrategy::PS && rank_ == 0)
    ps_recv_.assign(static_cast<std::size_t>(net_.param_count()) * std::max(0, size_ - 1), 0.f);
}

void Exchange::begin_iteration() {
  for (auto& b : buckets_) {
    b.pending = b.last_slice - b.first_slice + 1;
    b.started = false;
    b.requests.clear();
  }
}

void Exchange::on_slice_done(std::size_t slice) {
  Bucket& b = buckets_[bucket_of_slice_[slice]];
  if (--b.pending == 0 && overlap_) start(b);
  // MPI progresses non-blocking collectives only inside MPI calls: poke the outstanding ones.
  for (auto& other : buckets_)
    if (other.started && !other.requests.empty()) {
      int done = 0;
      MPI_Testall(static_cast<int>(other.requests.size()), other.requests.data(), &done, MPI_STATUSES_IGNORE);
      if (done) other.requests.clear();
    }
}

void Exchange::start(Bucket& b) {
  b.started = true;
  if (size_ == 1) return;
  float* g = net_.grads() + b.offset;
  const int count = static_cast<int>(b.count);
  if (strategy_ == ExchangeStrategy::PS) {
    const int tag = static_cast<int>(&b - buckets_.data());
    if (rank_ == 0) {
      for (int w = 1; w < size_; ++w) {
        MPI_Request r;
        float* dst = ps_recv_.data() + static_cast<std::size_t>(w - 1) * net_.param_count() + b.offset;
        MPI_Irecv(dst, count, MPI_FLOAT, w, tag, comm_, &r);
        b.requests.push_back(r);
      }
    } else {
      MPI_Request r;
      MPI_Isend(g, count, MPI_FLOAT, 0, tag, comm_, &r);
      b.requests.push_back(r);
    }
    return;
  }
  if (algo_ == AllreduceAlgo::RING) {
    ring_allreduce(g, b.count);  // blocking: interleaved with backward when overlap is on
    return;
  }
  if (overlap_) {
    MPI_Request r;
    MPI_Iallreduce(MPI_IN_PLACE, g, count, MPI_FLOAT, MPI_SUM, comm_, &r);
    b.requests.push_back(r);
  } else {
    MPI_Allreduce(MPI_IN_PLACE, g, count, MPI_FLOAT, MPI_SUM, comm_);
  }
}

void Exchange::finish_gradients() {
  // Start what is left in backward order (the same order as the overlapped path).
  for (auto& b : buckets_)
    if (!b.started) start(b);
  for (auto& b : buckets_)
    if (!b.requests.empty()) {
      MPI_Waitall(static_cast<int>(b.requests.size()), b.requests.data(), MPI_STATUSES_IGNORE);
      b.requests.clear();
    }
  if (size_ == 1) return;
  float* g = net_.grads();
  const std::int64_t n = net_.param_count();
  const float inv = 1.f / static_cast<float>(size_);
  if (strategy_ == ExchangeStrategy::PS) {
    if (rank_ != 0) return;
    for (int w = 1; w < size_; ++w) {
      const float* src = ps_recv_.data() + static_cast<std::size_t>(w - 1) * n;
      for (std::int64_t e = 0; e < n; ++e) g[e] += src[e];
    }
  }
  for (std::int64_t e = 0; e < n; ++e) g[e] *= inv;
}

void Exchange::pull_parameters() {
  if (strategy_ != ExchangeStrategy::PS || size_ == 1) return;
  const int count = static_cast<int>(net_.param_count());
  if (rank_ == 0) {
    std::vector<MPI_Request> reqs(size_ - 1);
    for (int w = 1; w < size_; ++w) MPI_Isend(net_.params(), count, MPI_FLOAT, w, 1 << 20, comm_, &reqs[w - 1]);
    MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
  } else {
    MPI_Recv(net_.params(), count, MPI_FLOAT, 0, 1 << 20, comm_, MPI_STATUS_IGNORE);
  }
}

void Exchange::ring_allreduce(float* data, std::int64_t count) {
  // Reduce-scatter then all-gather around the ring, p-1 steps each, chunk c owned by rank c.
  const int p = size_;
  std::vector<std::int64_t> start(p + 1);
  for (int c = 0; c <= p; ++c) start[c] = count * c / p;
  ring_tmp_.resize(static_cast<std::size_t>(count / p + 1));
  const int right = (rank_ + 1) % p, left = (rank_ - 1 + p) % p;
  for (int step = 0; step < p - 1; ++step) {
    const int send_c = (rank_ - step + p) % p, recv_c = (rank_ - step - 1 + p) % p;
    MPI_Sendrecv(data + start[send_c], static_cast<int>(start[send_c + 1] - start[send_c]), MPI_FLOAT, right, step,
                 ring_tmp_.data(), static_cast<int>(start[recv_c + 1] - start[recv_c]), MPI_FLOAT, left, step, comm_,
                 MPI_STATUS_IGNORE);
    for (std::int64_t e = 0; e < start[recv_c + 1] - start[recv_c]; ++e) data[start[recv_c] + e] += ring_tmp_[e];
  }
  for (int step = 0; step < p - 1; ++step) {
    const int send_c = (rank_ + 1 - step + p) % p, recv_c = (rank_ - step + p) % p;
    MPI_Sendrecv(data + start[send_c], static_cast<int>(start[send_c + 1] - start[send_c]), MPI_FLOAT, right, p + step,
                 data + start[recv_c], static_cast<int>(start[recv_c + 1] - start[recv_c]), MPI_FLOAT, left, p + step,
                 comm_, MPI_STATUS_IGNORE);
  }
}

}  // namespace dtsim::validate
