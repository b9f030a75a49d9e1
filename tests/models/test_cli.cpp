// Tests of `dtsim models` and `dtsim model show` through the real binary (popen): JSON totals and exit codes.
#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <sys/wait.h>

namespace {
struct Run {
  int exit_code;
  std::string out;  // stdout and stderr together
};
Run run(const std::string& args, bool merge_stderr = true) {
  const std::string cmd = std::string(DTSIM_BINARY) + " " + args + (merge_stderr ? " 2>&1" : " 2>/dev/null");
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  std::array<char, 4096> buf{};
  while (std::size_t n = std::fread(buf.data(), 1, buf.size(), pipe)) out.append(buf.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}
}  // namespace

TEST_CASE("models::Cli: model show resnet50 --format json totals 25557032 parameters", "[models][cli]") {
  const Run r = run("model show resnet50 --format json --batch 2", false);
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["model"] == "resnet50");
  CHECK(j["batch"] == 2);
  CHECK(j["input"] == nlohmann::json::array({3, 224, 224}));
  CHECK(j["totals"]["params"] == 25557032);
  std::int64_t sum = 0;
  for (const auto& l : j["layers"]) sum += l["params"].get<std::int64_t>();
  CHECK(sum == 25557032);
  CHECK(j["layers"][0]["name"] == "conv1");
  CHECK(j["layers"][0]["output_shape"] == nlohmann::json::array({2, 64, 112, 112}));
  for (const char* key : {"fwd_flops", "bwd_data_flops", "bwd_weights_flops", "activation_bytes", "weight_bytes"})
    CHECK(j["totals"].contains(key));
}

TEST_CASE("models::Cli: unknown model exits 2 with a one-line error", "[models][cli]") {
  const Run r = run("model show resnet51");
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("unknown model 'resnet51'") != std::string::npos);
  CHECK(r.out.find('\n') == r.out.size() - 1);
}

TEST_CASE("models::Cli: bad options exit 2", "[models][cli]") {
  CHECK(run("model show resnet50 --batch 0").exit_code == 2);
  CHECK(run("model show inception_v3 --input 8x8").exit_code == 2);
  CHECK(run("model show resnet50 --batch -4").exit_code == 2);
  CHECK(run("model show resnet50 --classes 0").exit_code == 0);  // 0 = the default
  CHECK(run("model show resnet50 --input axb").exit_code == 2);
  CHECK(run("model show resnet50 --format xml").exit_code == 2);
  CHECK(run("model show resnet50 --no-such-flag").exit_code == 2);
}

TEST_CASE("models::Cli: models lists the zoo and csv output has a header", "[models][cli]") {
  const Run list = run("models --format csv", false);
  REQUIRE(list.exit_code == 0);
  CHECK(list.out.find("resnet152,3x224x224,1000,") != std::string::npos);
  CHECK(list.out.find("inception_v3,3x299x299") != std::string::npos);
  const Run show = run("model show lenet5 --format csv", false);
  REQUIRE(show.exit_code == 0);
  CHECK(show.out.rfind("name,op,output_shape,params,", 0) == 0);
  CHECK(show.out.find("TOTAL,,,61706,") != std::string::npos);
}

TEST_CASE("models::Cli: model export writes a file that model show reads back with the same totals", "[models][cli]") {
  const std::string path = "dtsim_test_export_densenet121.yaml";
  REQUIRE(run("model export densenet121 --input 64 --classes 10 > " + path, false).exit_code == 0);
  const Run from_file = run("model show " + path + " --format csv --batch 4", false);
  const Run from_zoo = run("model show densenet121 --input 64 --classes 10 --format csv --batch 4", false);
  std::remove(path.c_str());
  REQUIRE(from_file.exit_code == 0);
  CHECK(from_file.out == from_zoo.out);
  CHECK(from_zoo.out.find("classifier,fully_connected,4x10x1x1,10250,") != std::string::npos);
}

TEST_CASE("models::Cli: model show of a transformer prints its memory and whether it fits", "[models][cli]") {
  const Run big = run("model show llama2_7b --seq-len 4096 --micro-batch 1 --precision bf16-mixed "
                      "--device a100-sxm4-80gb --format json",
                      false);
  REQUIRE(big.exit_code == 0);
  const auto j = nlohmann::json::parse(big.out);
  CHECK(j["totals"]["params"] == 6738415616LL);
  CHECK(j["memory"]["fits"] == false);
  const Run sharded = run("model show llama2_7b --seq-len 4096 --micro-batch 1 --precision bf16-mixed --zero 3 "
                          "--dp 8 --recompute selective --flash-attention --device a100-sxm4-80gb --format json",
                          false);
  REQUIRE(sharded.exit_code == 0);
  CHECK(nlohmann::json::parse(sharded.out)["memory"]["fits"] == true);
  CHECK(run("model show resnet50 --zero 1").exit_code == 2);
  CHECK(run("model show gpt2 --precision int8").exit_code == 2);
  const Run hf = run("model show " + std::string(DTSIM_SOURCE_DIR) + "/models/examples/hf/gpt2/config.json "
                     "--seq-len 64 --format json", false);
  REQUIRE(hf.exit_code == 0);
  CHECK(nlohmann::json::parse(hf.out)["totals"]["params"] == 124439808LL);
}
