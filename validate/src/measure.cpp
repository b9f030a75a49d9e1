// Reading dtsim-train reports: per-phase medians and spreads over the iterations that ran undisturbed,
// and latency/bandwidth fits of the MPI ping-pong and allreduce curves.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "common/stats.hpp"
#include "common/errors.hpp"
#include "validate/validate.hpp"

namespace dtsim::validate {
namespace {

using nlohmann::json;

// Disturbance check over windows of consecutive iterations (a /proc/stat tick is 10 ms, so a single
// short iteration cannot be judged): the same threshold as common/clean_timer.hpp's default.
constexpr double WINDOW_MIN_S = 0.2;
constexpr double MAX_OTHER_BUSY_FRACTION = 0.15;
// Messages from this size on are bandwidth-dominated; the slope over them gives the bandwidth.
constexpr double BANDWIDTH_FIT_MIN_BYTES = 256.0 * 1024;
// Around a given message size, the fit uses sizes within this factor either way.
constexpr double FIT_WINDOW_FACTOR = 8;

json parse(const std::string& text, const char* what) {
  // The trainer's stdout may carry other lines (MPI warnings); the report is the last JSON object.
  const auto start = text.find("{\n");
  if (start == std::string::npos) throw Failure(fmt::format("{}: no JSON report in the trainer output", what));
  try {
    return json::parse(text.substr(start));
  } catch (const json::exception& e) {
    throw Failure(fmt::format("{}: malformed JSON report ({})", what, e.what()));
  }
}

// Least-squares slope of y over x.
double slope(const std::vector<std::pair<double, double>>& pts) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [x, y] : pts) {
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const double n = static_cast<double>(pts.size());
  const double den = n * sxx - sx * sx;
  return den > 0 ? (n * sxy - sx * sy) / den : 0;
}

}  // namespace

double PhaseFigures::error_pct() const {
  if (predicted_ms < 0 || measured_ms <= 0) return 0;
  return (predicted_ms - measured_ms) / measured_ms * 100.0;
}

MeasuredRun summarize_report(const std::string& report_json) {
  const json r = parse(report_json, "dtsim-train report");
  MeasuredRun run;
  try {
    run.ranks = r.at("ranks").get<int>();
    const int cpus = std::max(1, r.at("online_cpus").get<int>());
    std::vector<json> iters;
    for (const auto& it : r.at("iterations"))
      if (!it.at("warmup").get<bool>()) iters.push_back(it);
    if (iters.empty()) throw Failure("dtsim-train report: no timed iteration");
    // Windows of consecutive iterations lasting >= WINDOW_MIN_S; a window is clean when the CPU time of
    // processes other than the ranks stayed under MAX_OTHER_BUSY_FRACTION of the machine.
    std::vector<bool> keep(iters.size(), false);
    std::size_t begin = 0;
    while (begin < iters.size()) {
      double wall = 0, busy = 0, own = 0;
      std::size_t end = begin;
      while (end < iters.size() && wall < WINDOW_MIN_S) {
        wall += iters[end].at("total_s").get<double>();
        busy += iters[end].at("machine_busy_s").get<double>();
        own += iters[end].at("own_cpu_s").get<double>();
        ++end;
      }
      const double other = std::max(0.0, busy - own) / (wall * cpus);
      for (std::size_t k = begin; k < end; ++k) keep[k] = other < MAX_OTHER_BUSY_FRACTION && busy >= 0;
      begin = end;
    }
    run.iterations_kept = static_cast<int>(std::count(keep.begin(), keep.end(), true));
    run.iterations_rejected = static_cast<int>(iters.size()) - run.iterations_kept;
    run.clean = run.iterations_kept > 0;
    const std::vector<std::pair<std::string, std::string>> phases{
        {"iteration", "total_s"}, {"data", "data_s"},         {"forward", "forward_s"},
        {"backward", "backward_s"}, {"exchange", "exchange_s"}, {"update", "update_s"}};
    for (const auto& [name, key] : phases) {
      std::vector<double> v;
      for (std::size_t k = 0; k < iters.size(); ++k)
        if (keep[k] || !run.clean) v.push_back(iters[k].at(key).get<double>() * 1e3);
      PhaseFigures f;
      f.measured_ms = quantile(v, 0.5);
      f.spread_pct = f.measured_ms > 0 ? (quantile(v, 0.75) - quantile(v, 0.25)) / f.measured_ms * 100 : 0;
      run.phases[name] = f;
    }
    const auto& losses = r.at("losses");
    if (!losses.empty()) {
      run.loss_first = losses.front().get<double>();
      run.loss_last = losses.back().get<double>();
    }
    run.test_accuracy_before = r.at("test_accuracy_before").get<double>();
    run.test_accuracy_after = r.at("test_accuracy_after").get<double>();
  } catch (const json::exception& e) {
    throw Failure(fmt::format("dtsim-train report: missing or wrong field ({})", e.what()));
  }
  return run;
}

CommFit fit_comm(const std::string& bench_json, double around_bytes) {
  const json r = parse(bench_json, "dtsim-train --bench-comm report");
  CommFit fit;
  try {
    const int p = r.at("ranks").get<int>();
    for (const auto& e : r.at("pingpong")) fit.pingpong_points.emplace_back(e.at("bytes").get<double>(), e.at("time_s").get<double>());
    for (const auto& e : r.at("allreduce")) fit.allreduce_points.emplace_back(e.at("bytes").get<double>(), e.at("time_s").get<double>());
    if (fit.pingpong_points.size() < 3 || fit.allreduce_points.size() < 3 || p < 2)
      throw Failure("dtsim-train --bench-comm report: too few points");
    const double lo = around_bytes > 0 ? around_bytes / FIT_WINDOW_FACTOR : BANDWIDTH_FIT_MIN_BYTES;
    const double hi = around_bytes > 0 ? around_bytes * FIT_WINDOW_FACTOR : 1e300;
    auto large = [&](const std::vector<std::pair<double, double>>& pts) {
      std::vector<std::pair<double, double>> out;
      for (const auto& pt : pts)
        if (pt.first >= lo && pt.first <= hi) out.push_back(pt);
      if (out.size() < 2)
        throw Failure(fmt::format("dtsim-train --bench-comm: fewer than 2 message sizes in [{:.0f}, {:.0f}] bytes", lo,
                                  std::min(hi, 1e18)));
      return out;
    };
    const double pp_slope = slope(large(fit.pingpong_points));
    const double ar_slope = slope(large(fit.allreduce_points));
    if (!(pp_slope > 0) || !(ar_slope > 0))
      throw Failure("dtsim-train --bench-comm: time does not grow with the message size; cannot fit a bandwidth");
    fit.pingpong_latency_s = fit.pingpong_points.front().second;
    fit.pingpong_bandwidth_Bps = 1.0 / pp_slope;
    // Ring allreduce: t = 2(p-1) alpha + 2(p-1)/p * bytes / beta.
    fit.allreduce_latency_s = fit.allreduce_points.front().second / (2.0 * (p - 1));
    fit.allreduce_bandwidth_Bps = 2.0 * (p - 1) / p / ar_slope;
  } catch (const json::exception& e) {
    throw Failure(fmt::format("dtsim-train --bench-comm report: missing or wrong field ({})", e.what()));
  }
  return fit;
}

}  // namespace dtsim::validate
