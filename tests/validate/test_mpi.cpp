// Tests of the MPI trainer as launched by `dtsim validate`: the distributed result equals a single
// process on the global batch (allreduce, dtsim's ring, parameter server), and a killed rank or a hung
// command ends with a clear error instead of a hang.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "validate/validate.hpp"

namespace fs = std::filesystem;

namespace {

// The trainer is built next to dtsim.
void use_built_trainer() { setenv("DTSIM_TRAIN", (fs::path(DTSIM_BINARY).parent_path() / "dtsim-train").c_str(), 1); }

std::vector<float> read_floats(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::vector<float> v(fs::file_size(p) / sizeof(float));
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  return v;
}

// Trains lenet5 on synthetic data for K = 4 steps with `ranks` ranks of `batch` samples; returns the
// final parameters.
std::vector<float> train(int ranks, int batch, const std::vector<std::string>& extra, const std::string& tag) {
  const fs::path dir = fs::temp_directory_path() / "dtsim-validate-test-mpi";
  fs::create_directories(dir);
  const fs::path params = dir / (tag + ".bin");
  std::vector<std::string> args{"--model", "lenet5", "--data", "synthetic", "--batch", std::to_string(batch),
                                "--iterations", "3", "--warmup", "1", "--test-samples", "0", "--lr", "0.1",
                                "--fusion-bytes", "60000",  // several buckets
                                "--out", (dir / (tag + ".json")).string(), "--dump-params", params.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  dtsim::validate::launch_trainer(ranks, 1, args, 120);
  return read_floats(params);
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, static_cast<double>(std::abs(a[i] - b[i])));
  return m;
}

}  // namespace

TEST_CASE("validate::mpirun_command: root, oversubscription and thread flags", "[validate]") {
  use_built_trainer();
  const auto cmd = dtsim::validate::mpirun_command(2, 3, {"--model", "lenet5"});
  const auto has = [&](const std::string& s) { return std::find(cmd.begin(), cmd.end(), s) != cmd.end(); };
  CHECK(has("--oversubscribe"));
  CHECK(has("OMP_NUM_THREADS=3"));
  CHECK(has("none"));  // --bind-to none: threads may use every core
  CHECK(cmd.back() == "lenet5");
  if (geteuid() == 0) CHECK(has("--allow-run-as-root"));
  CHECK_THROWS_AS(dtsim::validate::mpirun_command(0, 1, {}), dtsim::InputError);
}

TEST_CASE("validate::trainer: 2 ranks equal 1 process on the global batch (allreduce, ring, ps)", "[validate][mpi]") {
  use_built_trainer();
  const auto single = train(1, 8, {}, "single");
  const auto allreduce = train(2, 4, {"--overlap", "true"}, "allreduce");
  const auto ring = train(2, 4, {"--allreduce", "ring", "--overlap", "false"}, "ring");
  const auto ps = train(2, 4, {"--strategy", "ps"}, "ps");
  REQUIRE(single.size() == 61706u);  // LeNet-5 at 28x28, 10 classes
  CHECK(max_abs_diff(single, allreduce) < 1e-5);
  CHECK(max_abs_diff(single, ring) < 1e-5);
  CHECK(max_abs_diff(single, ps) < 1e-5);
  // And the run did change the weights (an equality of untouched weights would prove nothing).
  const auto other_seed = train(1, 8, {"--seed", "2"}, "seed2");
  CHECK(max_abs_diff(single, other_seed) > 1e-3);
}

TEST_CASE("validate::launch_trainer: a killed rank ends the run with a clear error, not a hang", "[validate][mpi]") {
  use_built_trainer();
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(train(2, 4, {"--fail-rank", "1", "--fail-at-iteration", "2"}, "killed"),
                    Catch::Contains("rank 1 died") && Catch::Contains("signal 9"));
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 60);
}

TEST_CASE("validate::run_command: a command past its timeout is killed with its process group", "[validate]") {
  const auto r = dtsim::validate::run_command({"sh", "-c", "sleep 30 & sleep 30"}, 0.5);
  CHECK(r.timed_out);
  CHECK(r.wall_s < 10);
  const auto ok = dtsim::validate::run_command({"sh", "-c", "echo hello; exit 3"}, 10);
  CHECK_FALSE(ok.timed_out);
  CHECK(ok.exit_code == 3);
  CHECK(ok.output == "hello\n");
}

TEST_CASE("validate::launch_trainer: a trainer input error comes back as an InputError", "[validate][mpi]") {
  use_built_trainer();
  CHECK_THROWS_AS(dtsim::validate::launch_trainer(1, 1, {"--model", "no-such-model", "--data", "synthetic"}, 60),
                  dtsim::InputError);
  CHECK_THROWS_WITH(dtsim::validate::launch_trainer(1, 1, {"--batch", "0", "--data", "synthetic"}, 60),
                    Catch::Contains("--batch"));
}
