// dtsim-train: the real data-parallel trainer that `dtsim validate` launches with mpirun. Builds the
// models/ graph, trains it on oneDNN with MPI gradient exchange, times every phase of every iteration
// (outside-the-timer disturbance data included) and writes one JSON report from rank 0.
// Also `--bench-comm`: ping-pong and allreduce curves of this machine's MPI, for calibration.
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "common/clean_timer.hpp"
#include "common/errors.hpp"
#include "models/zoo.hpp"
#include "validate/src/data.hpp"
#include "validate/src/net.hpp"
#include "validate/trainer/exchange.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
namespace dv = dtsim::validate;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Args {
  std::string model = "lenet5";
  int batch = 32;
  int iterations = 20;
  int warmup = 3;
  int threads = 1;
  std::string data = "fashion-mnist";
  std::string data_dir;
  std::string strategy = "allreduce";
  std::string allreduce = "mpi";
  bool overlap = true;
  double fusion_bytes = 64.0 * 1024 * 1024;
  float lr = 0.05f;
  float momentum = 0.9f;
  std::uint64_t seed = 1;
  int test_samples = 1000;
  int print_every = 0;
  bool time_layers = false;
  std::string out;
  std::string dump_params;
  int fail_rank = -1;
  int fail_at = -1;
  bool bench_comm = false;
  int bench_repeats = 20;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Ping-pong rank 0 <-> 1 and MPI_Allreduce over all ranks, per size; medians of `repeats`.
json bench_comm(const Args& a, int rank, int size) {
  if (size < 2) throw dtsim::InputError("--bench-comm needs at least 2 ranks");
  if (a.bench_repeats < 1) throw dtsim::InputError("--bench-repeats must be >= 1");
  json out{{"ranks", size}, {"pingpong", json::array()}, {"allreduce", json::array()}};
  std::vector<float> buf(1 << 22), buf2(1 << 22);  // 16 MiB, the largest message
  for (std::int64_t bytes = 4; bytes <= (std::int64_t{1} << 24); bytes *= 2) {
    const int n = static_cast<int>(bytes / 4);
    const int reps = bytes > (1 << 21) ? std::max(3, a.bench_repeats / 4) : a.bench_repeats;
    std::vector<double> pp, ar;
    for (int r = -2; r < reps; ++r) {  // two warm-up exchanges
      MPI_Barrier(MPI_COMM_WORLD);
      const auto t0 = Clock::now();
      if (rank == 0) {
        MPI_Send(buf.data(), n, MPI_FLOAT, 1, 0, MPI_COMM_WORLD);
        MPI_Recv(buf.data(), n, MPI_FLOAT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else if (rank == 1) {
        MPI_Recv(buf.data(), n, MPI_FLOAT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf.data(), n, MPI_FLOAT, 0, 0, MPI_COMM_WORLD);
      }
      if (r >= 0) pp.push_back(since(t0) / 2);
      MPI_Barrier(MPI_COMM_WORLD);
      const auto t1 = Clock::now();
      MPI_Allreduce(buf.data(), buf2.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double t = since(t1), tmax = 0;
      MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (r >= 0) ar.push_back(tmax);
    }
    out["pingpong"].push_back({{"bytes", bytes}, {"time_s", median(pp)}});
    out["allreduce"].push_back({{"bytes", bytes}, {"time_s", median(ar)}});
  }
  return out;
}

json train(const Args& a, int rank, int size) {
  if (a.batch < 1) throw dtsim::InputError(fmt::format("--batch must be >= 1, got {}", a.batch));
  if (a.iterations < 1) throw dtsim::InputError(fmt::format("--iterations must be >= 1, got {}", a.iterations));
  if (a.warmup < 0) throw dtsim::InputError(fmt::format("--warmup must be >= 0, got {}", a.warmup));
  if (!(a.lr > 0)) throw dtsim::InputError(fmt::format("--lr must be > 0, got {}", a.lr));
  if (!(a.momentum >= 0 && a.momentum < 1))
    throw dtsim::InputError(fmt::format("--momentum must be in [0, 1), got {}", a.momentum));

  dv::Dataset train_set, test_set;
  if (a.data == "fashion-mnist") {
    const std::string dir = a.data_dir.empty() ? dv::default_fashion_mnist_dir() : a.data_dir;
    train_set = dv::load_fashion_mnist(dir, "train");
    test_set = dv::load_fashion_mnist(dir, "t10k");
  } else if (a.data == "synthetic") {
    train_set = dv::make_synthetic(std::int64_t{a.batch} * size * 16, 28, 28, 10, a.seed);
    test_set = dv::make_synthetic(std::max(a.test_samples, a.batch), 28, 28, 10, a.seed + 1);
  } else {
    throw dtsim::InputError(fmt::format("--data must be fashion-mnist or synthetic, got '{}'", a.data));
  }
  dtsim::models::ModelOptions mo;
  mo.batch = a.batch;
  mo.input_h = train_set.height;
  mo.input_w = train_set.width;
  mo.channels = 1;
  mo.classes = train_set.classes;
  const auto model = dtsim::models::load_model(a.model, mo);
  dv::Net net(model, {a.threads, a.seed, a.time_layers});
  const auto& in = model.input_shape();

  dv::ExchangeStrategy strategy;
  if (a.strategy == "allreduce") strategy = dv::ExchangeStrategy::ALLREDUCE;
  else if (a.strategy == "ps") strategy = dv::ExchangeStrategy::PS;
  else throw dtsim::InputError(fmt::format("--strategy must be allreduce or ps, got '{}'", a.strategy));
  dv::AllreduceAlgo algo;
  if (a.allreduce == "mpi") algo = dv::AllreduceAlgo::MPI;
  else if (a.allreduce == "ring") algo = dv::AllreduceAlgo::RING;
  else throw dtsim::InputError(fmt::format("--allreduce must be mpi or ring, got '{}'", a.allreduce));
  dv::Exchange exchange(MPI_COMM_WORLD, net, strategy, algo, a.overlap, a.fusion_bytes);
  // Every rank starts from rank 0's weights (they are seeded identically; this makes it certain).
  MPI_Bcast(net.params(), static_cast<int>(net.param_count()), MPI_FLOAT, 0, MPI_COMM_WORLD);

  auto evaluate = [&](void) {
    // Rank 0 scores the first test_samples test images in batches of the local batch size.
    std::vector<int> labels;
    const auto order = [&] {
      std::vector<std::int64_t> o(test_set.count);
      std::iota(o.begin(), o.end(), 0);
      return o;
    }();
    std::int64_t correct = 0, seen = 0;
    const std::int64_t limit = std::min<std::int64_t>(a.test_samples, test_set.count);
    for (std::int64_t first = 0; first + a.batch <= limit; first += a.batch) {
      dv::fill_batch(test_set, order, first, a.batch, static_cast<int>(in.h), static_cast<int>(in.w),
                     static_cast<int>(in.c), net.input(), labels);
      correct += net.forward(labels, false).correct;
      seen += a.batch;
    }
    return seen ? static_cast<double>(correct) / static_cast<double>(seen) : 0.0;
  };

  json report{{"model", a.model}, {"ranks", size}, {"batch", a.batch}, {"threads", a.threads},
              {"strategy", a.strategy}, {"allreduce", a.allreduce}, {"overlap", a.overlap}, {"data", a.data},
              {"params", net.param_count()}, {"grad_bytes", net.param_count() * 4},
              {"buckets", exchange.buckets().size()}, {"warmup", a.warmup}, {"online_cpus", dtsim::online_cpus()}};
  if (rank == 0) {
    report["test_accuracy_before"] = evaluate();
    report["implementations"] = net.implementations();
  }
  MPI_Barrier(MPI_COMM_WORLD);

  const auto order = dv::epoch_order(train_set.count, a.seed);
  const std::int64_t global_batch = std::int64_t{a.batch} * size;
  std::vector<int> labels;
  json iters = json::array();
  std::vector<double> losses;
  for (int it = 0; it < a.warmup + a.iterations; ++it) {
    if (it == a.warmup) net.reset_layer_timings();
    if (it == a.fail_at && rank == a.fail_rank) {
      std::fprintf(stderr, "dtsim-train: rank %d killing itself at iteration %d (--fail-rank test hook)\n", rank, it);
      std::fflush(stderr);
      raise(SIGKILL);
    }
    const double cpu0 = dtsim::process_cpu_s();
    const double busy0 = rank == 0 ? dtsim::machine_busy_s() : 0;
    const auto t0 = Clock::now();
    // data: this rank's shard of the global batch
    dv::fill_batch(train_set, order, it * global_batch + std::int64_t{rank} * a.batch, a.batch, static_cast<int>(in.h),
                   static_cast<int>(in.w), static_cast<int>(in.c), net.input(), labels);
    const double data_s = since(t0);
    auto t = Clock::now();
    const auto stats = net.forward(labels, true);
    const double forward_s = since(t);
    t = Clock::now();
    exchange.begin_iteration();
    net.backward([&](std::size_t slice) { exchange.on_slice_done(slice); });
    const double backward_s = since(t);
    t = Clock::now();
    exchange.finish_gradients();
    double exchange_s = since(t);
    t = Clock::now();
    if (strategy == dv::ExchangeStrategy::ALLREDUCE || rank == 0) net.sgd_update(a.lr, a.momentum);
    const double update_s = since(t);
    t = Clock::now();
    exchange.pull_parameters();
    exchange_s += since(t);
    const double total_s = since(t0);
    // Outside the timed region: gather what the report needs.
    const double busy1 = rank == 0 ? dtsim::machine_busy_s() : 0;
    double own_cpu = dtsim::process_cpu_s() - cpu0, all_cpu = 0, total_max = 0, loss_sum = 0;
    MPI_Reduce(&own_cpu, &all_cpu, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&total_s, &total_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&stats.loss, &loss_sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      const double loss = loss_sum / size;
      losses.push_back(loss);
      if (a.print_every > 0 && (it % a.print_every == 0 || it + 1 == a.warmup + a.iterations))
        std::fprintf(stderr, "dtsim-train: iteration %d loss %.4f (%.2f ms)\n", it, loss, total_max * 1e3);
      iters.push_back({{"warmup", it < a.warmup}, {"total_s", total_max}, {"data_s", data_s},
                       {"forward_s", forward_s}, {"backward_s", backward_s}, {"exchange_s", exchange_s},
                       {"update_s", update_s}, {"own_cpu_s", all_cpu}, {"machine_busy_s", busy1 - busy0},
                       {"loss", loss}});
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    report["iterations"] = iters;
    report["test_accuracy_after"] = evaluate();
    report["losses"] = losses;
    json layers = json::array();
    if (a.time_layers)
      for (const auto& l : net.layer_timings())
        layers.push_back({{"name", l.name}, {"op", l.op}, {"fwd_s", l.fwd_s / a.iterations}, {"bwd_s", l.bwd_s / a.iterations}});
    report["layers"] = layers;
    if (!a.dump_params.empty()) {
      std::ofstream f(a.dump_params, std::ios::binary);
      f.write(reinterpret_cast<const char*>(net.params()), static_cast<std::streamsize>(net.param_count() * 4));
      if (!f) throw dtsim::Failure(fmt::format("--dump-params: cannot write {}", a.dump_params));
    }
  }
  return report;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"dtsim-train: real data-parallel training on oneDNN + MPI (launched by `dtsim validate`)", "dtsim-train"};
  app.add_option("--model", a.model, "zoo name or model file (lenet5, resnet20, ...)");
  app.add_option("--batch", a.batch, "samples per rank and iteration");
  app.add_option("--iterations", a.iterations, "timed iterations");
  app.add_option("--warmup", a.warmup, "untimed iterations first");
  app.add_option("--threads", a.threads, "oneDNN (OpenMP) threads per rank");
  app.add_option("--data", a.data, "fashion-mnist or synthetic");
  app.add_option("--data-dir", a.data_dir, "directory of the Fashion-MNIST IDX .gz files");
  app.add_option("--strategy", a.strategy, "allreduce or ps (rank 0 is the parameter server)");
  app.add_option("--allreduce", a.allreduce, "mpi (MPI_Allreduce) or ring (point-to-point ring)");
  app.add_option("--overlap", a.overlap, "exchange buckets during backward (true/false)");
  app.add_option("--fusion-bytes", a.fusion_bytes, "gradient bucket size in bytes");
  app.add_option("--lr", a.lr, "learning rate");
  app.add_option("--momentum", a.momentum, "SGD momentum");
  app.add_option("--seed", a.seed, "weights and data order seed");
  app.add_option("--test-samples", a.test_samples, "test images scored before and after training");
  app.add_option("--print-every", a.print_every, "print the loss every N iterations (0: never)");
  app.add_flag("--time-layers", a.time_layers, "report per-layer forward/backward times");
  app.add_option("--out", a.out, "write the JSON report here (default: stdout)");
  app.add_option("--dump-params", a.dump_params, "write the final parameters (raw float32) here");
  app.add_option("--fail-rank", a.fail_rank, "test hook: this rank kills itself ...");
  app.add_option("--fail-at-iteration", a.fail_at, "... at this iteration");
  app.add_flag("--bench-comm", a.bench_comm, "measure ping-pong and allreduce curves instead of training");
  app.add_option("--bench-repeats", a.bench_repeats, "repeats per size for --bench-comm");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "dtsim-train: error: %s (see --help)\n", e.what());
    return 2;
  }
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int code = 0;
  try {
    const json report = a.bench_comm ? bench_comm(a, rank, size) : train(a, rank, size);
    if (rank == 0) {
      if (a.out.empty()) {
        std::cout << report.dump(1) << '\n';
      } else {
        std::ofstream f(a.out);
        f << report.dump(1) << '\n';
        if (!f) throw dtsim::Failure(fmt::format("--out: cannot write {}", a.out));
      }
    }
  } catch (const dtsim::InputError& e) {
    std::fprintf(stderr, "dtsim-train: error: %s\n", e.what());
    code = 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtsim-train: failed (rank %d): %s\n", rank, e.what());
    code = 1;
  }
  if (code != 0) MPI_Abort(MPI_COMM_WORLD, code);  // never leave the other ranks waiting
  MPI_Finalize();
  return 0;
}
