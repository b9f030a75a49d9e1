// Chrome trace-event JSON writer for one simulated iteration (times in microseconds).
#include "sim/src/trace.hpp"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "common/errors.hpp"

namespace dtsim::sim {
namespace {
constexpr double US_PER_S = 1e6;
const char* group_name(int pid) {
  switch (pid) {
    case 1: return "workers";
    case 2: return "parameter servers";
    case 3: return "gradient exchange";
    case 4: return "input I/O";
    default: return "other";
  }
}
}  // namespace

void TraceRecorder::name_track(Group group, int track, const std::string& name) {
  names_.push_back({static_cast<int>(group), track, name});
}

void TraceRecorder::add(Group group, int track, const std::string& name, const std::string& category,
                        double start_s, double end_s) {
  events_.push_back({static_cast<int>(group), track, name, category, start_s, end_s});
}

std::string TraceRecorder::to_json() const {
  nlohmann::json events = nlohmann::json::array();
  for (int pid = 1; pid <= 4; ++pid)
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 0},
                      {"args", {{"name", group_name(pid)}}}});
  for (const auto& n : names_)
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", n.pid}, {"tid", n.tid},
                      {"args", {{"name", n.name}}}});
  for (const auto& e : events_)
    events.push_back({{"name", e.name},
                      {"cat", e.cat},
                      {"ph", "X"},
                      {"ts", e.start_s * US_PER_S},
                      {"dur", (e.end_s - e.start_s) * US_PER_S},
                      {"pid", e.pid},
                      {"tid", e.tid}});
  return nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump();
}

void TraceRecorder::write(const std::string& path) const {
  std::ofstream out(path);
  if (!out) throw Failure(fmt::format("--trace: cannot write '{}'", path));
  out << to_json() << '\n';
  if (!out) throw Failure(fmt::format("--trace: error while writing '{}'", path));
}

}  // namespace dtsim::sim
