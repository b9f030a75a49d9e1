// libFuzzer target: a scenario file read as each command reads it: `predict --scenario` (load_scenario)
// and `sweep`/`sweep --list` (parse the sweep block, expand it, parse every point).
#include <fmt/format.h>

#include <algorithm>

#include "common/yaml_util.hpp"
#include "fuzz/fuzz_input.hpp"
#include "scenarios/scenario.hpp"
#include "scenarios/sweep.hpp"

namespace {
// Sweeps up to a million points are valid input; expanding them would only measure the fuzzer's
// patience, so larger ones are parsed but not expanded.
constexpr std::size_t MAX_EXPANDED_POINTS = 256;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static dtsim::fuzz::ScratchFile file("scenario.yaml");
  const std::string& path = file.write(data, size);
  namespace sc = dtsim::scenarios;
  dtsim::fuzz::run_loader([&] { (void)sc::load_scenario(path); });
  return dtsim::fuzz::run_loader([&] {
    // apps/cmd_sweep.cpp's reading, step by step.
    const dtsim::yaml::Origin origin{path};
    const YAML::Node node = dtsim::yaml::load_file(path);
    if (!node.IsMap()) throw dtsim::InputError(fmt::format("{}: a scenario must be a map of fields", path));
    const sc::SweepSpec spec = sc::parse_sweep(node["sweep"], origin);
    std::size_t points = 1;  // saturates at MAX_EXPANDED_POINTS + 1
    auto times = [&](std::size_t n) { points = std::min(points * std::max<std::size_t>(n, 1), MAX_EXPANDED_POINTS + 1); };
    for (const auto& a : spec.product) times(a.values.size());
    for (const auto& g : spec.zips) times(g.front().values.size());
    if (points > MAX_EXPANDED_POINTS) return;
    sc::validate_points(sc::expand_sweep(node, spec, origin), origin);
  });
}
