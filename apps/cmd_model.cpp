// `dtsim model show NAME|FILE`: per-layer shapes, parameters, FLOPs and bytes of a zoo or YAML model,
// then totals (convention in models/README.md); `model export` writes the YAML schema; `model bench`
// times building a model.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>

#include "apps/command.hpp"
#include "common/errors.hpp"
#include "calibrate/memory.hpp"
#include "calibrate/train_memory.hpp"
#include "common/table.hpp"
#include "platforms/device.hpp"
#include "models/yaml_io.hpp"
#include "models/zoo.hpp"

namespace dtsim::apps {
namespace {

struct ModelArgs {
  std::string model;
  int batch = 1;
  std::string input;  // "HxW" or "S"
  int channels = 0;
  int classes = 0;
  std::string format = "table";
  std::string precision = "fp32";  // show: memory at this precision
  std::string device;              // show: check the memory against this device
  int micro_batch = 0;             // transformers: alias of --batch
  int seq_len = 0;                 // transformers: tokens per sample (0 = the model's default)
  bool flash_attention = false;
  int zero = 0;                    // show, transformers: ZeRO stage
  int dp = 1;                      // show, transformers: data-parallel size
  std::string recompute = "none";  // show, transformers
  std::string optimizer = "adam";  // show, transformers
};

int parse_side(std::string_view text, const std::string& whole) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1)
    throw InputError(fmt::format("--input: expected HxW with positive integers (e.g. 224x224), got '{}'", whole));
  return value;
}

models::ModelOptions options_of(const ModelArgs& a) {
  models::ModelOptions o;
  o.batch = a.batch;
  o.channels = a.channels;
  o.classes = a.classes;
  if (a.channels < 0) throw InputError(fmt::format("--channels: expected a positive integer, got {}", a.channels));
  if (a.classes < 0) throw InputError(fmt::format("--classes: expected a positive integer, got {}", a.classes));
  if (a.batch < 1) throw InputError(fmt::format("--batch: expected a positive integer, got {}", a.batch));
  if (a.micro_batch < 0)
    throw InputError(fmt::format("--micro-batch: expected a positive integer, got {}", a.micro_batch));
  if (a.micro_batch > 0) {
    if (a.batch != 1 && a.batch != a.micro_batch)
      throw InputError("--batch and --micro-batch are the same thing: give one");
    o.batch = a.micro_batch;
  }
  if (a.seq_len < 0) throw InputError(fmt::format("--seq-len: expected a positive integer, got {}", a.seq_len));
  o.seq_len = a.seq_len;
  o.flash_attention = a.flash_attention;
  if (!a.input.empty()) {
    const auto x = a.input.find('x');
    if (x == std::string::npos) {
      o.input_h = o.input_w = parse_side(a.input, a.input);
    } else {
      o.input_h = parse_side(std::string_view(a.input).substr(0, x), a.input);
      o.input_w = parse_side(std::string_view(a.input).substr(x + 1), a.input);
    }
  }
  return o;
}

// FLOP and byte counts are whole numbers; print them as integers.
std::int64_t whole(double v) { return static_cast<std::int64_t>(std::llround(v)); }

nlohmann::json costs_json(const models::LayerCosts& c) {
  return {{"params", c.params},
          {"fwd_flops", whole(c.fwd_flops)},
          {"bwd_data_flops", whole(c.bwd_data_flops)},
          {"bwd_weights_flops", whole(c.bwd_weights_flops)},
          {"activation_bytes", whole(c.activation_bytes)},
          {"weight_bytes", whole(c.weight_bytes)}};
}

std::vector<std::string> cost_cells(const models::LayerCosts& c) {
  return {std::to_string(c.params),          std::to_string(whole(c.fwd_flops)),
          std::to_string(whole(c.bwd_data_flops)), std::to_string(whole(c.bwd_weights_flops)),
          std::to_string(whole(c.activation_bytes)), std::to_string(whole(c.weight_bytes))};
}

// Transformers: per-layer table as for CNNs, then the training memory of one data-parallel worker
// (calibrate/train_memory.hpp) and whether it fits the device.
// The memory terms of a worker (CNN or transformer estimate: the same fields), with the device and the verdict.
template <class Memory>
nlohmann::json memory_json(const Memory& mem, const std::string& device, bool fits) {
  return {{"weights_B", whole(mem.weights_B)},         {"gradients_B", whole(mem.gradients_B)},
          {"optimizer_B", whole(mem.optimizer_B)},     {"activations_B", whole(mem.activations_B)},
          {"workspace_B", whole(mem.workspace_B)},     {"runtime_B", whole(mem.runtime_B)},
          {"total_B", whole(mem.total_B())},           {"device", device},
          {"fits", fits}};
}

// One row per layer (shape, parameters, FLOPs per pass, bytes) and a TOTAL row.
Table layer_table(const models::Model& m, const models::LayerCosts& totals) {
  Table table({"name", "op", "output_shape", "params", "fwd_flops", "bwd_data_flops", "bwd_weights_flops",
               "activation_bytes", "weight_bytes"});
  for (const auto& l : m.layers()) {
    if (l.op == models::OpKind::INPUT) continue;
    std::vector<std::string> row = {l.name, std::string(models::op_name(l)), models::to_string(l.dst_shape)};
    for (auto& cell : cost_cells(l.costs)) row.push_back(std::move(cell));
    table.add_row(std::move(row));
  }
  std::vector<std::string> total_row = {"TOTAL", "", ""};
  for (auto& cell : cost_cells(totals)) total_row.push_back(std::move(cell));
  table.add_row(std::move(total_row));
  return table;
}

void show_transformer(const ModelArgs& a, const models::Model& m, TextFormat format) {
  const auto totals = m.totals();
  calibrate::TrainMemoryOptions o;
  o.precision = std::string(calibrate::training_precision_by_name(a.precision).name);
  o.optimizer = calibrate::optimizer_by_name(a.optimizer);
  o.recompute = calibrate::recompute_by_name(a.recompute);
  o.zero_stage = a.zero;
  o.dp = a.dp;
  platforms::Device generic;  // no device: a GPU without capacity (runtime reserve counted, no check)
  const platforms::Device& dev = a.device.empty() ? generic : platforms::DeviceCatalog::builtin().by_name(a.device);
  const auto mem = calibrate::estimate_train_memory(m, o, dev);
  const bool fits = !(dev.mem_capacity_B > 0) || mem.total_B() <= dev.mem_capacity_B;
  const std::int64_t tokens = m.layers().size() > 1 ? m.layers()[1].dst_shape.h : 0;
  if (format == TextFormat::JSON) {
    nlohmann::json layers = nlohmann::json::array();
    for (const auto& l : m.layers()) {
      if (l.op == models::OpKind::INPUT) continue;
      nlohmann::json j = {{"name", l.name},
                          {"op", std::string(models::op_name(l))},
                          {"output_shape", {l.dst_shape.n, l.dst_shape.c, l.dst_shape.h, l.dst_shape.w}}};
      j.update(costs_json(l.costs));
      layers.push_back(std::move(j));
    }
    nlohmann::json out = {{"model", m.name()},
                                {"micro_batch", m.batch()},
                                {"seq_len", tokens},
                                {"layers", std::move(layers)},
                                {"totals", costs_json(totals)},
                                {"memory", memory_json(mem, a.device, fits)}};
    out["memory"].update({{"precision", o.precision},
                          {"optimizer", a.optimizer},
                          {"recompute", a.recompute},
                          {"zero", a.zero},
                          {"dp", a.dp}});
    std::cout << out.dump(2) << '\n';
    return;
  }
  const Table table = layer_table(m, totals);
  const double token_count = static_cast<double>(m.batch()) * static_cast<double>(tokens);
  if (format == TextFormat::TABLE)
    std::cout << fmt::format("model {}: micro-batch {}, sequence {}, {} layers, {} parameters, {:.3f} GFLOP forward "
                             "({:.3f} GFLOP per token)\n",
                             m.name(), m.batch(), tokens, m.layers().size() - 1, totals.params, totals.fwd_flops / 1e9,
                             token_count > 0 ? totals.fwd_flops / token_count / 1e9 : 0.0);
  table.print(std::cout, format);
  if (format == TextFormat::TABLE) {
    std::cout << fmt::format("training memory per worker ({}, {}, recompute {}, ZeRO {} over dp {}): {}\n",
                             o.precision, a.optimizer, a.recompute, a.zero, a.dp, calibrate::describe(mem));
    if (!a.device.empty())
      std::cout << fmt::format("{} on {}: {:.2f} GiB of memory\n", fits ? "fits" : "does NOT fit", dev.name,
                               dev.mem_capacity_B / (1024.0 * 1024 * 1024));
  }
}

void show(const ModelArgs& a) {
  const TextFormat format = parse_text_format(a.format);
  const models::Model m = models::load_model(a.model, options_of(a));
  const auto& in = m.input_shape();
  const auto totals = m.totals();
  if (m.has_rows()) {
    show_transformer(a, m, format);
    return;
  }
  if (a.zero != 0 || a.dp != 1 || a.recompute != "none" || a.optimizer != "adam")
    throw InputError(fmt::format("--zero, --dp, --recompute and --optimizer apply to transformer models; '{}' is a CNN",
                                 a.model));
  const auto precision = calibrate::precision_by_name(a.precision);
  platforms::Device generic;  // no device: a GPU without capacity (runtime reserve counted, no check)
  const platforms::Device& dev = a.device.empty() ? generic : platforms::DeviceCatalog::builtin().by_name(a.device);
  const auto mem = calibrate::estimate_memory(m, precision, dev);
  const bool fits = !(dev.mem_capacity_B > 0) || dev.kind != platforms::DeviceKind::GPU || mem.total_B() <= dev.mem_capacity_B;
  if (format == TextFormat::JSON) {
    nlohmann::json layers = nlohmann::json::array();
    for (const auto& l : m.layers()) {
      if (l.op == models::OpKind::INPUT) continue;
      nlohmann::json j = {{"name", l.name},
                          {"op", std::string(models::op_name(l))},
                          {"output_shape", {l.dst_shape.n, l.dst_shape.c, l.dst_shape.h, l.dst_shape.w}}};
      j.update(costs_json(l.costs));
      layers.push_back(std::move(j));
    }
    nlohmann::json out = {{"model", m.name()},
                                {"batch", m.batch()},
                                {"input", {in.c, in.h, in.w}},
                                {"layers", std::move(layers)},
                                {"totals", costs_json(totals)},
                                {"memory", memory_json(mem, a.device, fits)}};
    out["memory"]["precision"] = std::string(calibrate::to_string(precision));
    std::cout << out.dump(2) << '\n';
    return;
  }
  const Table table = layer_table(m, totals);
  if (format == TextFormat::TABLE)
    std::cout << fmt::format("model {}: batch {}, input {}x{}x{}, {} layers, {} parameters, {:.3f} GFLOP forward\n",
                             m.name(), m.batch(), in.c, in.h, in.w, m.layers().size() - 1, totals.params,
                             totals.fwd_flops / 1e9);
  table.print(std::cout, format);
  if (format == TextFormat::TABLE) {
    std::cout << fmt::format("training memory at batch {}, {} (SGD with momentum): {}\n", m.batch(),
                             calibrate::to_string(precision), calibrate::describe(mem));
    if (!a.device.empty())
      std::cout << fmt::format("{} on {}: {:.2f} GiB of memory\n", fits ? "fits" : "does NOT fit", dev.name,
                               dev.mem_capacity_B / (1024.0 * 1024 * 1024));
  }
}

// Benchmark of the build-time target (the simulator builds a model for every prediction): builds the
// model `repeat` times and prints the median and best wall time.
void bench(const ModelArgs& a, int repeat) {
  if (repeat < 1) throw InputError(fmt::format("--repeat: expected a positive integer, got {}", repeat));
  const models::ModelOptions o = options_of(a);
  std::vector<double> ms;
  std::size_t layers = 0;
  for (int i = 0; i < repeat; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const models::Model m = models::load_model(a.model, o);
    const auto t1 = std::chrono::steady_clock::now();
    layers = m.layers().size() - 1;
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  std::cout << fmt::format("build {} batch {}: {} layers, median {:.3f} ms, best {:.3f} ms over {} builds\n", a.model,
                           a.batch, layers, ms[ms.size() / 2], ms.front(), repeat);
}

void export_yaml(const ModelArgs& a) { std::cout << models::model_to_yaml(models::load_model(a.model, options_of(a))); }

void add_model_options(CLI::App* cmd, ModelArgs& args) {
  cmd->add_option("model", args.model, "Zoo model name (see `dtsim models`) or a YAML model file")->required();
  cmd->add_option("--batch", args.batch, "Batch size (costs are for the whole batch)")->capture_default_str();
  cmd->add_option("--input", args.input, "Input height x width, e.g. 224x224 or 32 (default: the model's)");
  cmd->add_option("--channels", args.channels, "Input channels (default: the model's)");
  cmd->add_option("--classes", args.classes, "Number of classes (default: the model's)");
  cmd->add_option("--micro-batch", args.micro_batch, "Transformers: samples per micro-batch (same as --batch)");
  cmd->add_option("--seq-len", args.seq_len, "Transformers: tokens per sample (default: the model's context)");
  cmd->add_flag("--flash-attention", args.flash_attention, "Transformers: fused attention (no s x s matrix kept)");
}

const CommandRegistrar registrar("model", 11, [](CLI::App& root) {
  CLI::App* model = root.add_subcommand("model", "Inspect one model: per-layer shapes and costs, or export it");
  model->require_subcommand(1);
  auto show_args = std::make_shared<ModelArgs>();
  CLI::App* show_cmd = model->add_subcommand(
      "show", "Per layer: output shape, parameters, forward/backward FLOPs, activation and weight bytes; totals");
  add_model_options(show_cmd, *show_args);
  show_cmd->add_option("--format", show_args->format, "Output format: table, csv or json")->capture_default_str();
  show_cmd->add_option("--precision", show_args->precision,
                       "Precision of the memory estimate: fp32|fp16-mixed (transformers also tf32|bf16-mixed|fp8)")
      ->capture_default_str();
  show_cmd->add_option("--zero", show_args->zero, "Transformers: ZeRO stage 0-3 over --dp")->capture_default_str();
  show_cmd->add_option("--dp", show_args->dp, "Transformers: data-parallel size")->capture_default_str();
  show_cmd->add_option("--recompute", show_args->recompute, "Transformers: activation recompute none|selective|full")
      ->capture_default_str();
  show_cmd->add_option("--optimizer", show_args->optimizer, "Transformers: adam|sgd")->capture_default_str();
  show_cmd->add_option("--device", show_args->device, "Check the training memory against this device's capacity");
  show_cmd->callback([show_args] { show(*show_args); });

  auto export_args = std::make_shared<ModelArgs>();
  CLI::App* export_cmd =
      model->add_subcommand("export", "Print the model in the YAML schema of docs/model-schema.md (reloads exactly)");
  add_model_options(export_cmd, *export_args);
  export_cmd->callback([export_args] { export_yaml(*export_args); });

  auto bench_args = std::make_shared<ModelArgs>();
  auto repeat = std::make_shared<int>(20);
  CLI::App* bench_cmd =
      model->add_subcommand("bench", "Time building the model (shape inference and costs): median and best of --repeat");
  add_model_options(bench_cmd, *bench_args);
  bench_cmd->add_option("--repeat", *repeat, "Number of builds")->capture_default_str();
  bench_cmd->callback([bench_args, repeat] { bench(*bench_args, *repeat); });
});

}  // namespace
}  // namespace dtsim::apps
