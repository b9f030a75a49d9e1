// Run a function in a forked child process and get its text result back.
// SimGrid allows one simulation per process (a second Engine keeps the old clock), so every
// simulated point runs in its own child; errors in the child come back as the same exception type.
#pragma once
#include <functional>
#include <string>

namespace dtsim {

// Forks, runs `work` in the child, returns the string it produced. An InputError or Failure thrown
// in the child is re-thrown here with its message; a crashed child becomes a Failure naming the signal.
std::string run_in_child(const std::function<std::string()>& work);

}  // namespace dtsim
