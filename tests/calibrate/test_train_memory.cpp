// Tests of calibrate/train_memory.hpp: bytes per parameter per precision and optimizer, ZeRO division,
// Korthikanti et al.'s activation formula, recompute policies, and that Llama 2 7B BF16 + Adam does not
// fit one 80 GB A100.
#include <catch2/catch.hpp>

#include <map>

#include "calibrate/calibrate.hpp"
#include "calibrate/op_signature.hpp"
#include "calibrate/profile.hpp"
#include "calibrate/train_memory.hpp"
#include "common/errors.hpp"
#include "models/zoo.hpp"
#include "platforms/device.hpp"

using namespace dtsim;
using namespace dtsim::calibrate;

namespace {
models::Model build(const std::string& name, int s, int b = 1) {
  models::ModelOptions o;
  o.batch = b;
  o.seq_len = s;
  return models::build_zoo_model(name, o);
}
const platforms::Device& a100() { return platforms::DeviceCatalog::builtin().by_name("a100-sxm4-80gb"); }
}  // namespace

TEST_CASE("calibrate::TrainMemory: Llama 2 7B BF16 + Adam does not fit one 80 GB A100", "[calibrate]") {
  const auto m = build("llama2_7b", 4096);
  TrainMemoryOptions o;  // bf16-mixed, Adam, no ZeRO
  const TrainMemory mem = estimate_train_memory(m, o, a100());
  const double p = 6'738'415'616.0;
  // 2 (BF16 weights) + 2 (gradients) + 12 (FP32 master + two moments) = 16 bytes per parameter.
  CHECK(mem.weights_B + mem.gradients_B + mem.optimizer_B == Approx(16 * p));
  CHECK(16 * p / 1e9 == Approx(107.8).epsilon(0.001));
  CHECK(mem.total_B() > a100().mem_capacity_B);
  // ZeRO-3 over 8 divides all three; ZeRO-1 only the optimizer state; ZeRO-2 also the gradients.
  o.zero_stage = 3;
  o.dp = 8;
  const TrainMemory z3 = estimate_train_memory(m, o, a100());
  CHECK(z3.weights_B + z3.gradients_B + z3.optimizer_B == Approx(16 * p / 8));
  CHECK(z3.activations_B == Approx(mem.activations_B));
  o.zero_stage = 1;
  const TrainMemory z1 = estimate_train_memory(m, o, a100());
  CHECK(z1.weights_B + z1.gradients_B + z1.optimizer_B == Approx((2 + 2 + 12.0 / 8) * p));
  o.zero_stage = 2;
  const TrainMemory z2 = estimate_train_memory(m, o, a100());
  CHECK(z2.weights_B + z2.gradients_B + z2.optimizer_B == Approx((2 + 2.0 / 8 + 12.0 / 8) * p));
}

TEST_CASE("calibrate::TrainMemory: bytes per parameter of each precision and optimizer", "[calibrate]") {
  const auto m = build("gpt2", 128);
  const double p = 124'439'808.0;
  const std::map<std::string, double> adam = {
      {"fp32", 16}, {"tf32", 16}, {"fp16-mixed", 16}, {"bf16-mixed", 16}, {"fp8", 18}};
  for (const auto& [precision, bytes] : adam) {
    INFO(precision);
    TrainMemoryOptions o;
    o.precision = precision;
    const TrainMemory mem = estimate_train_memory(m, o, a100());
    CHECK(mem.weights_B + mem.gradients_B + mem.optimizer_B == Approx(bytes * p));
    o.optimizer = Optimizer::SGD;
    const TrainMemory sgd = estimate_train_memory(m, o, a100());
    CHECK(mem.optimizer_B - sgd.optimizer_B == Approx(4 * p));  // one moment fewer
  }
  CHECK_THROWS_AS(training_precision_by_name("int4"), InputError);
  CHECK_THROWS_AS(recompute_by_name("some"), InputError);
  TrainMemoryOptions bad;
  bad.zero_stage = 4;
  CHECK_THROWS_AS(estimate_train_memory(m, bad, a100()), InputError);
  CHECK_THROWS_AS(estimate_train_memory(models::build_zoo_model("resnet50", {}), TrainMemoryOptions{}, a100()),
                  InputError);
}

TEST_CASE("calibrate::TrainMemory: a GPT layer keeps s b h (34 + 5 a s / h) bytes (Korthikanti et al.)",
          "[calibrate]") {
  // 16-bit activations, no parallelism; LayerNorm statistics (FP32 mean and rstd) are left out of the
  // paper's count and reported apart.
  const int s = 512, b = 2;
  const auto m = build("megatron_1.7b", s, b);
  const double h = 2304, a = 24;
  const auto& bf16 = training_precision_by_name("bf16-mixed");
  double none = 0, selective = 0, stats = 0;
  for (const auto& l : m.layers())
    if (l.row && l.params.seq.block == 0) {
      none += saved_bytes(l, bf16, Recompute::NONE) - l.saved.fixed_bytes;
      selective += saved_bytes(l, bf16, Recompute::SELECTIVE) - l.saved.fixed_bytes;
      stats += l.saved.fixed_bytes;
    }
  CHECK(none == Approx(s * b * h * (34 + 5 * a * s / h)).epsilon(1e-12));
  CHECK(selective == Approx(34 * s * b * h).epsilon(1e-12));  // selective drops the 5as/h term
  CHECK(stats == Approx(2 * 2 * 4.0 * s * b));                 // two LayerNorms x (mean, rstd) x FP32
  // Over the model: full recompute keeps each layer's input (2 s b h) plus one layer being recomputed.
  TrainMemoryOptions o;
  o.recompute = Recompute::FULL;
  const TrainMemory full = estimate_train_memory(m, o, a100());
  o.recompute = Recompute::NONE;
  const TrainMemory all = estimate_train_memory(m, o, a100());
  const double outside = all.activations_B - 24 * (none + stats);
  CHECK(full.activations_B == Approx(outside + 24 * 2 * s * b * h + none + stats));
}

TEST_CASE("calibrate::TrainMemory: transformer layers have passes, work and a device-model time", "[calibrate]") {
  const auto m = build("llama2_7b", 256);
  for (const auto& l : m.layers()) {
    if (!l.row) continue;
    INFO(l.name);
    const auto passes = passes_of(l);
    REQUIRE(!passes.empty());
    for (Pass pass : passes) {
      const PassWork w = pass_work(l, pass);
      CHECK((w.flops > 0 || w.bytes > 0));
    }
    CHECK(op_class_of(l) != OpClass::NONE);
  }
  ProfileOptions po;
  po.db_path = std::string(DTSIM_SOURCE_DIR) + "/calibrate/data/calibration.json";
  const ComputeProfile prof = build_profile(m, platforms::DeviceCatalog::builtin().by_name("h100-sxm5"), po);
  REQUIRE(prof.layers.size() + 1 == m.layers().size());
  for (const auto& t : prof.layers) {
    INFO(t.name);
    CHECK(t.fwd_s > 0);
  }
  // The attention core at 256 tokens does 4 b a s^2 d FLOPs forward: at least that over the FP32 peak.
  const auto& dev = platforms::DeviceCatalog::builtin().by_name("h100-sxm5");
  for (const auto& t : prof.layers)
    if (t.name == "layers.0.attn.core")
      CHECK(t.fwd_s >= m.by_name("layers.0.attn.core").costs.fwd_flops / dev.peak_flops);
}

TEST_CASE("calibrate::TrainMemory: a tensor-parallel rank keeps s b h (10 + 24/t + 5 a s / h t), s b h (34/t + 5 a s / h t) "
          "with sequence parallelism (Korthikanti et al.)",
          "[calibrate]") {
  const int s = 512, b = 2, t = 4;
  models::ModelOptions mo;
  mo.batch = b;
  mo.seq_len = s;
  mo.tensor_parallel = t;
  const auto m = models::build_zoo_model("megatron_1.7b", mo);
  const double h = 2304, a = 24;
  TrainMemoryOptions o;
  o.precision = "bf16-mixed";
  o.include = [](const models::Layer& l) { return l.row && l.params.seq.block == 0; };
  double stats = 0;
  for (const auto& l : m.layers())
    if (l.row && l.params.seq.block == 0) stats += l.saved.fixed_bytes;
  const double tp_only = estimate_train_memory(m, o, a100()).activations_B - stats;
  CHECK(tp_only == Approx(s * b * h * (10 + 24.0 / t + 5 * a * s / (h * t))).epsilon(1e-12));
  o.sequence_parallel = t;
  const double sp = estimate_train_memory(m, o, a100()).activations_B;
  // The LayerNorm statistics are split over the sequence as well.
  CHECK(sp - stats / t == Approx(s * b * h * (34.0 / t + 5 * a * s / (h * t))).epsilon(1e-12));
  // A stage keeps up to pp micro-batches in flight: activations scale, weights do not.
  o.activation_sets = 3;
  const auto three = estimate_train_memory(m, o, a100());
  CHECK(three.activations_B == Approx(3 * sp));
}
