// Running functions in forked child processes and getting their text results back, one at a time or
// a pool of them. SimGrid allows one simulation per process (a second Engine keeps the old clock), so
// every simulated point runs in its own child; errors in a child come back with their kind and message.
#pragma once
#include <cstddef>
#include <functional>
#include <string>

namespace dtsim {

// Forks, runs `work` in the child, returns the string it produced. An InputError or Failure thrown
// in the child is re-thrown here with its message; a crashed child becomes a Failure naming the signal.
std::string run_in_child(const std::function<std::string()>& work);

// Runs `work(i)` for i in [0, n) in forked children, `jobs` at a time; `done(i, ok, text)` is called
// in the parent as each finishes (text = result, or "input error: ..." / "failed: ..." / the signal
// when !ok). Stops launching when `stop()` turns true and terminates the running children, whose
// results are dropped. `skip(i)`, when given, is asked in the parent as task i's turn to start comes (so
// it sees every `done` before it): true leaves task i out, unrun and unreported. Returns the count
// finished; InputError when jobs < 1.
std::size_t run_process_pool(std::size_t n, int jobs, const std::function<std::string(std::size_t)>& work,
                             const std::function<void(std::size_t, bool, const std::string&)>& done,
                             const std::function<bool()>& stop,
                             const std::function<bool(std::size_t)>& skip = {});

// Writes all of `data` to `fd`, retrying on EINTR; stops quietly at an error (the reader sees it short).
void write_all(int fd, const std::string& data);

}  // namespace dtsim
