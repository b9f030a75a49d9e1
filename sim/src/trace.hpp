// Internal to sim/: a timeline recorder that writes Chrome/Perfetto trace-event JSON (SimGrid's own
// Paje tracing breaks with cluster zones, see docs/simgrid-notes.md), one track per worker, server or link.
#pragma once
#include <string>
#include <vector>

namespace dtsim::sim {

class TraceRecorder {
 public:
  // Track groups (Chrome "pid"): each holds named tracks ("tid").
  enum class Group { WORKERS = 1, SERVERS = 2, EXCHANGES = 3, INPUT = 4 };

  // Names a track once (a "thread_name" metadata event).
  void name_track(Group group, int track, const std::string& name);
  // One complete event ("ph":"X") from start_s to end_s on a track.
  void add(Group group, int track, const std::string& name, const std::string& category, double start_s,
           double end_s);
  bool empty() const { return events_.empty(); }
  // Writes {"traceEvents":[...],"displayTimeUnit":"ms"}; throws Failure when the file cannot be written.
  void write(const std::string& path) const;
  std::string to_json() const;

 private:
  struct Event {
    int pid, tid;
    std::string name, cat;
    double start_s, end_s;
  };
  struct TrackName {
    int pid, tid;
    std::string name;
  };
  std::vector<Event> events_;
  std::vector<TrackName> names_;
};

}  // namespace dtsim::sim
