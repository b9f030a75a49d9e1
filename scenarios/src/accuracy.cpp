// Accuracy report: maps each published row (Piz Daint Inception-v3, GTX 1080 Ti MXNet ResNet-50)
// to a scenario, predicts it in worker processes and computes the error per row and MAPE per study.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "common/child.hpp"
#include "common/errors.hpp"
#include "common/paths.hpp"
#include "scenarios/accuracy.hpp"
#include "scenarios/scenario.hpp"
#include "scenarios/sweep.hpp"

namespace dtsim::scenarios {
namespace {

// Piz Daint and the GTX 1080 Ti cluster in SYSTEMS.md: GPUs per node.
constexpr int GTX1080TI_GPUS_PER_NODE = 4;

YAML::Node base_scenario(const std::string& model, const std::string& platform, int batch, int workers) {
  YAML::Node n;
  n["model"] = model;
  n["platform"] = platform;
  n["batch"] = batch;
  n["workers"] = workers;
  return n;
}

std::string strategy_of_update(const std::string& update, const YAML::Node& at, const yaml::Origin& origin) {
  if (update == "parameter_server") return "ps";
  if (update == "distributed_replicated") return "ps-replicated";
  yaml::fail(at, origin, "row", fmt::format("unknown variable_update '{}' (expected parameter_server or "
                                            "distributed_replicated)", update));
}

void rows_piz_daint(const std::string& key, const YAML::Node& study, const yaml::Origin& origin,
                    std::vector<AccuracyRow>& out) {
  const std::string model = yaml::required<std::string>(study, "model", origin, key);
  const int batch = yaml::required<int>(study, "batch_per_worker", origin, key);
  for (const auto& r : study["rows"]) {
    if (!r.IsSequence() || r.size() != 5)
      yaml::fail(r, origin, key, "row must be [workers, parameter_servers, variable_update, real_data, images_per_s]");
    AccuracyRow row;
    row.study = key;
    row.workers = r[0].as<int>();
    row.ps = r[1].as<int>();
    row.variable_update = r[2].as<std::string>();
    row.strategy = strategy_of_update(row.variable_update, r[2], origin);
    row.variant = r[3].as<bool>() ? "real" : "synthetic";
    row.measured = r[4].as<double>();
    if (row.workers < 1 || row.ps < 1 || !(row.measured > 0))
      yaml::fail(r, origin, key, "workers, parameter_servers and images_per_s must be > 0");
    row.scenario = base_scenario(model, "piz-daint", batch, row.workers);
    row.scenario["strategy"] = row.strategy;
    row.scenario["ps"] = row.ps;
    row.scenario["data"] = row.variant;
    out.push_back(std::move(row));
  }
}

void rows_gtx1080ti(const std::string& key, const YAML::Node& study, const yaml::Origin& origin,
                    std::vector<AccuracyRow>& out) {
  const std::string model = yaml::required<std::string>(study, "model", origin, key);
  const int batch = yaml::required<int>(study, "batch_per_worker", origin, key);
  const bool real = yaml::optional<bool>(study, "real_data", false, origin, key);
  for (const auto& r : study["rows"]) {
    if (!r.IsSequence() || r.size() != 2) yaml::fail(r, origin, key, "row must be [workers, images_per_s]");
    AccuracyRow row;
    row.study = key;
    row.workers = r[0].as<int>();
    row.measured = r[1].as<double>();
    if (row.workers < 1 || !(row.measured > 0)) yaml::fail(r, origin, key, "workers and images_per_s must be > 0");
    row.variant = real ? "real" : "synthetic";
    // MXNet dist_device_sync: the node's GPUs are summed on a GPU, then one push/pull per node to the
    // ps-lite servers (dtsim's ps-replicated), with ps-lite's placement (big arrays split over all
    // servers, the others by key hash). Assumption: one server per node, as ps-lite's launcher does.
    row.variable_update = "dist_device_sync";
    row.strategy = "ps-replicated";
    row.ps = (row.workers + GTX1080TI_GPUS_PER_NODE - 1) / GTX1080TI_GPUS_PER_NODE;
    row.scenario = base_scenario(model, "gtx1080ti-cluster", batch, row.workers);
    row.scenario["strategy"] = row.strategy;
    row.scenario["ps"] = row.ps;
    row.scenario["ps_balance"] = "mxnet";
    row.scenario["data"] = row.variant;
    out.push_back(std::move(row));
  }
}

}  // namespace

double error_pct(const AccuracyRow& row) { return 100.0 * (row.predicted - row.measured) / row.measured; }

std::vector<AccuracyRow> load_accuracy_rows(const AccuracyOptions& options) {
  const std::string path = options.measurements.empty()
                               ? (reference_dir() / "open-measurements.yaml").string()
                               : options.measurements;
  const yaml::Origin origin{path};
  const YAML::Node root = yaml::load_file(path);
  if (!root.IsMap()) throw InputError(fmt::format("{}: expected a map of studies", path));
  std::vector<AccuracyRow> rows;
  bool found = options.study.empty();
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    const YAML::Node study = kv.second;
    if (!options.study.empty() && key != options.study) continue;
    found = true;
    if (!study.IsMap() || !study["rows"]) continue;  // facts without a table
    if (!study["rows"].IsSequence()) yaml::fail(study["rows"], origin, key, "rows must be a list");
    std::vector<AccuracyRow> these;
    const std::string system = yaml::optional<std::string>(study, "system", "", origin, key);
    try {
      if (system == "piz-daint")
        rows_piz_daint(key, study, origin, these);
      else if (system.rfind("gtx1080ti-cluster", 0) == 0)
        rows_gtx1080ti(key, study, origin, these);
      else
        continue;  // a study dtsim has no mapping for yet
    } catch (const YAML::BadConversion& e) {
      throw InputError(fmt::format("{}:{}: {}: a row value has the wrong type", path, e.mark.line + 1, key));
    }
    if (options.max_rows > 0 && static_cast<int>(these.size()) > options.max_rows) these.resize(options.max_rows);
    // Anchor: the measured 1-worker throughput of the same variant.
    for (auto& r : these) {
      if (!options.anchored) continue;
      for (const auto& a : these)
        if (a.variant == r.variant && a.workers == 1) {
          r.scenario["anchor"] = a.measured;
          r.anchor = r.workers == 1;
          break;
        }
    }
    for (auto& r : these) rows.push_back(std::move(r));
  }
  if (!found) throw InputError(fmt::format("--study: no study '{}' in {}", options.study, path));
  return rows;
}

std::vector<AccuracyRow> run_accuracy(const AccuracyOptions& options) {
  std::vector<AccuracyRow> rows = load_accuracy_rows(options);
  const yaml::Origin origin{"open-measurements row"};
  run_process_pool(
      rows.size(), options.jobs,
      [&](std::size_t i) {
        const Scenario s = parse_scenario_node(rows[i].scenario, origin);
        const auto results = predict_scenario(s);
        for (const auto& r : results)
          if (r.workers == rows[i].workers) return fmt::format("{:.17g}", r.throughput);
        throw Failure(fmt::format("no prediction for {} workers", rows[i].workers));
      },
      [&](std::size_t i, bool ok, const std::string& text) {
        if (ok)
          rows[i].predicted = std::stod(text);
        else
          rows[i].error = text;
      },
      [] { return false; });
  return rows;
}

std::vector<AccuracyStudy> summarize_accuracy(const std::vector<AccuracyRow>& rows) {
  std::vector<AccuracyStudy> out;
  auto add = [&](const std::string& study, const std::string& variant) {
    AccuracyStudy s{study, variant, "", 0, 0, 0};
    double sum = 0;
    for (const auto& r : rows) {
      if (r.study != study || (variant != "all" && r.variant != variant) || r.anchor || !r.error.empty()) continue;
      const double e = std::abs(error_pct(r));
      sum += e;
      s.max_abs_error_pct = std::max(s.max_abs_error_pct, e);
      ++s.rows;
    }
    s.mape_pct = s.rows > 0 ? sum / s.rows : 0;
    out.push_back(s);
  };
  std::vector<std::string> studies;
  std::map<std::string, std::vector<std::string>> variants;
  for (const auto& r : rows) {
    if (variants.find(r.study) == variants.end()) studies.push_back(r.study);
    auto& v = variants[r.study];
    if (std::find(v.begin(), v.end(), r.variant) == v.end()) v.push_back(r.variant);
  }
  for (const auto& s : studies) {
    for (const auto& v : variants[s]) add(s, v);
    if (variants[s].size() > 1) add(s, "all");
  }
  return out;
}

}  // namespace dtsim::scenarios
