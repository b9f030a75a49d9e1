// Internal to sim/: a timeline recorder that writes Chrome/Perfetto trace-event JSON (SimGrid's own
// Paje tracing breaks with cluster zones, see docs/simgrid-notes.md): one track per worker, server
// and exchange, counter tracks for link utilisation.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace dtsim::sim {

class TraceRecorder {
 public:
  // Track groups (Chrome "pid"): each holds named tracks ("tid").
  enum class Group { WORKERS = 1, SERVERS = 2, EXCHANGES = 3, INPUT = 4, NETWORK = 5 };
  using Args = std::vector<std::pair<std::string, double>>;  // numeric "args" shown with a slice

  // Names a track once (a "thread_name" metadata event).
  void name_track(Group group, int track, const std::string& name);
  // One slice from start_s to end_s on a track. A track whose slices all nest is written as complete
  // events; one with slices that overlap in part (concurrent flows) as async events, which may overlap.
  void add(Group group, int track, const std::string& name, const std::string& category, double start_s,
           double end_s, Args args = {});
  // A counter track `series` in `group` takes `value` from time_s until its next sample.
  void counter(Group group, const std::string& series, double time_s, double value);
  bool empty() const { return events_.empty(); }
  // Writes {"traceEvents":[...],"displayTimeUnit":"ms"}; throws Failure when the file cannot be written.
  void write(const std::string& path) const;
  std::string to_json() const;

 private:
  struct Event {
    int pid, tid;
    std::string name, cat;
    double start_s, end_s;
    Args args;
  };
  struct TrackName {
    int pid, tid;
    std::string name;
  };
  struct Sample {
    int pid;
    std::string series;
    double time_s, value;
  };
  std::vector<Event> events_;
  std::vector<TrackName> names_;
  std::vector<Sample> samples_;
};

// True when the slices [start, end) nest: any two are disjoint or one contains the other.
bool slices_nest(std::vector<std::pair<double, double>> slices);

}  // namespace dtsim::sim
