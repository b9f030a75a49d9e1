// The progress line of work run in child processes (a sweep's points, `--ps auto`'s server counts) on
// stderr: done/total, failures, rate and ETA; a `\r` line on a terminal, one line per update otherwise.
// Private to scenarios/src.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <string>

namespace dtsim::scenarios {

class Progress {
 public:
  // `label` starts the line ("sweep", "ps auto, 64 workers"), `unit` names what is counted ("points");
  // `already` items count as done before this run; `prefix` goes first (an MPI rank).
  Progress(bool enabled, std::size_t total, std::size_t already, std::string label = "sweep",
           std::string unit = "points", std::string prefix = "");
  // Counts `more` items that were not known when the line started (a search's next candidates).
  void add_total(std::size_t more) { total_ += more; }
  // Takes `fewer` items that will not run (left out) off the total.
  void remove_total(std::size_t fewer) { total_ -= std::min(total_, fewer); }
  // One item finished; prints the line.
  void finished(bool failed);
  void show() const;
  // Ends an unfinished terminal line (interrupted).
  void end() const;

 private:
  bool enabled_;
  std::size_t total_, done_, ran_ = 0, failed_ = 0;
  std::string label_, unit_, prefix_;
  bool tty_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace dtsim::scenarios
