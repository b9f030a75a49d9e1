// Tests of `dtsim predict` / `model show`: the memory check's exit code and override, and --precision.
#include <catch2/catch.hpp>

#include "tests/support/run_cli.hpp"

using dtsim::test::run_cli;

TEST_CASE("cli::predict: a worker that does not fit its GPU is bad input unless oversubscription is allowed", "[cli]") {
  const auto big = run_cli({"predict", "--model", "resnet50", "--platform", "gtx1080ti-cluster", "--batch", "1024"});
  CHECK(big.exit_code == 2);
  CHECK(big.err.find("does not fit on 'gtx-1080ti'") != std::string::npos);
  CHECK(big.err.find("activations") != std::string::npos);
  const auto forced = run_cli({"predict", "--model", "resnet50", "--platform", "gtx1080ti-cluster", "--batch", "1024",
                               "--allow-oversubscribe", "--format", "csv"});
  CHECK(forced.exit_code == 0);
  const auto fits = run_cli({"predict", "--model", "resnet50", "--platform", "gtx1080ti-cluster", "--batch", "32",
                             "--format", "csv"});
  CHECK(fits.exit_code == 0);
}

TEST_CASE("cli::predict: --precision fp16-mixed needs tensor cores; bad values are bad input", "[cli]") {
  CHECK(run_cli({"predict", "--model", "resnet50", "--platform", "gtx1080ti-cluster", "--batch", "32", "--precision",
                 "fp16-mixed"})
            .exit_code == 2);
  CHECK(run_cli({"predict", "--model", "resnet50", "--platform", "taiwania2-ib", "--batch", "32", "--precision", "fp8"})
            .exit_code == 2);
  CHECK(run_cli({"predict", "--model", "resnet50", "--platform", "taiwania2-ib", "--batch", "32", "--precision",
                 "fp16-mixed", "--format", "csv"})
            .exit_code == 0);
}

TEST_CASE("cli::model: show prints the training memory and whether it fits a device", "[cli]") {
  const auto r = run_cli({"model", "show", "resnet50", "--batch", "1024", "--device", "gtx-1080ti"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("training memory at batch 1024, fp32") != std::string::npos);
  CHECK(r.out.find("does NOT fit on gtx-1080ti") != std::string::npos);
}
