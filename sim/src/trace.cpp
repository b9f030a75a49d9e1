// Chrome trace-event JSON writer (times in microseconds): complete events for tracks whose slices
// nest, async begin/end pairs for tracks of concurrent flows, counter events for utilisation.
#include "sim/src/trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "common/errors.hpp"

namespace dtsim::sim {
namespace {
constexpr double US_PER_S = 1e6;
// Slices closer than this (seconds) are treated as touching, not overlapping (floating-point sums).
constexpr double NEST_TOLERANCE_S = 1e-12;
constexpr int FIRST_GROUP = 1, LAST_GROUP = 5;
const char* group_name(int pid) {
  switch (pid) {
    case 1: return "workers";
    case 2: return "parameter servers";
    case 3: return "gradient exchange";
    case 4: return "input I/O";
    case 5: return "network utilisation";
    default: return "other";
  }
}
}  // namespace

bool slices_nest(std::vector<std::pair<double, double>> slices) {
  // Longest first among equal starts, so a parent precedes its children.
  std::sort(slices.begin(), slices.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second > b.second;
  });
  std::vector<double> open_ends;
  for (const auto& [start, end] : slices) {
    while (!open_ends.empty() && open_ends.back() <= start + NEST_TOLERANCE_S) open_ends.pop_back();
    if (!open_ends.empty() && end > open_ends.back() + NEST_TOLERANCE_S) return false;
    open_ends.push_back(end);
  }
  return true;
}

void TraceRecorder::name_track(Group group, int track, const std::string& name) {
  names_.push_back({static_cast<int>(group), track, name});
}

void TraceRecorder::add(Group group, int track, const std::string& name, const std::string& category,
                        double start_s, double end_s, Args args) {
  events_.push_back({static_cast<int>(group), track, name, category, start_s, end_s, std::move(args)});
}

void TraceRecorder::counter(Group group, const std::string& series, double time_s, double value) {
  samples_.push_back({static_cast<int>(group), series, time_s, value});
}

std::string TraceRecorder::to_json() const {
  nlohmann::json events = nlohmann::json::array();
  for (int pid = FIRST_GROUP; pid <= LAST_GROUP; ++pid)
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 0},
                      {"args", {{"name", group_name(pid)}}}});
  std::map<std::pair<int, int>, std::string> track_names;
  for (const auto& n : names_) {
    track_names[{n.pid, n.tid}] = n.name;
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", n.pid}, {"tid", n.tid},
                      {"args", {{"name", n.name}}}});
  }
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> by_track;
  for (const auto& e : events_) by_track[{e.pid, e.tid}].emplace_back(e.start_s, e.end_s);
  std::map<std::pair<int, int>, bool> nests;
  for (const auto& [track, slices] : by_track) nests[track] = slices_nest(slices);
  long async_id = 0;
  for (const auto& e : events_) {
    nlohmann::json args = nlohmann::json::object();
    for (const auto& [k, v] : e.args) args[k] = v;
    if (nests.at({e.pid, e.tid})) {
      events.push_back({{"name", e.name}, {"cat", e.cat}, {"ph", "X"}, {"ts", e.start_s * US_PER_S},
                        {"dur", (e.end_s - e.start_s) * US_PER_S}, {"pid", e.pid}, {"tid", e.tid}, {"args", args}});
      continue;
    }
    // Concurrent flows: each its own async slice, grouped under the track's name and category.
    const auto tn = track_names.find({e.pid, e.tid});
    const std::string group = (tn == track_names.end() ? fmt::format("track {}", e.tid) : tn->second) + ": " + e.cat;
    args["what"] = e.name;
    const std::string id = fmt::format("0x{:x}", ++async_id);
    events.push_back({{"name", group}, {"cat", e.cat}, {"ph", "b"}, {"id", id}, {"ts", e.start_s * US_PER_S},
                      {"pid", e.pid}, {"tid", e.tid}, {"args", args}});
    events.push_back({{"name", group}, {"cat", e.cat}, {"ph", "e"}, {"id", id}, {"ts", e.end_s * US_PER_S},
                      {"pid", e.pid}, {"tid", e.tid}});
  }
  for (const auto& s : samples_)
    events.push_back({{"name", s.series}, {"ph", "C"}, {"ts", s.time_s * US_PER_S}, {"pid", s.pid}, {"tid", 0},
                      {"args", {{"utilisation_pct", s.value}}}});
  return nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump();
}

void TraceRecorder::write(const std::string& path) const {
  std::ofstream out(path);
  if (!out) throw Failure(fmt::format("--trace: cannot write '{}'", path));
  out << to_json() << '\n';
  if (!out) throw Failure(fmt::format("--trace: error while writing '{}'", path));
}

}  // namespace dtsim::sim
