// `dtsim models`: list the built-in model zoo with default input, parameters and forward GFLOPs per sample.
#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "apps/command.hpp"
#include "common/table.hpp"
#include "models/zoo.hpp"

namespace dtsim::apps {
namespace {

struct ModelsArgs {
  std::string format = "table";
};

void run(const ModelsArgs& a) {
  const TextFormat format = parse_text_format(a.format);
  Table table({"model", "input", "classes", "layers", "params", "fwd_GFLOP_per_sample"});
  nlohmann::json list = nlohmann::json::array();
  std::vector<std::string> names = models::zoo_names();
  for (const auto& t : models::transformer_zoo_names()) names.push_back(t);
  for (const auto& name : names) {
    const models::Model m = models::build_zoo_model(name, models::ModelOptions{});
    const auto& in = m.input_shape();
    const auto totals = m.totals();
    std::int64_t classes = 0;
    for (const auto& l : m.layers())
      if (l.op == models::OpKind::SOFTMAX_LOSS || l.name == "head" || l.name == "lm_head" || l.name == "mlm.head")
        classes = l.dst_shape.c;  // classes, or the vocabulary of a language model
    const double gflop = totals.fwd_flops / static_cast<double>(m.batch()) / 1e9;
    table.add_row({name, fmt::format("{}x{}x{}", in.c, in.h, in.w), std::to_string(classes),
                   std::to_string(m.layers().size() - 1), std::to_string(totals.params), fmt::format("{:.3f}", gflop)});
    list.push_back({{"model", name},
                    {"input", {in.c, in.h, in.w}},
                    {"classes", classes},
                    {"layers", m.layers().size() - 1},
                    {"params", totals.params},
                    {"fwd_flops_per_sample", totals.fwd_flops / static_cast<double>(m.batch())}});
  }
  if (format == TextFormat::JSON)
    std::cout << list.dump(2) << '\n';
  else
    table.print(std::cout, format);
}

const CommandRegistrar registrar("models", 10, [](CLI::App& root) {
  auto args = std::make_shared<ModelsArgs>();
  CLI::App* cmd = root.add_subcommand("models", "List the built-in model zoo (default input, parameters, GFLOPs)");
  cmd->add_option("--format", args->format, "Output format: table, csv or json")->capture_default_str();
  cmd->callback([args] { run(*args); });
});

}  // namespace
}  // namespace dtsim::apps
