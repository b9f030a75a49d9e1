// Error types shared by every dtsim folder; `apps/main.cpp` maps them to exit codes once.
#pragma once
#include <stdexcept>
#include <string>

namespace dtsim {

// Bad input from the user (file, flag, name, size): exit code 2. The message is one line
// that names the file, the field and what was expected.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A failure while doing valid work (a kernel failed, a child process died): exit code 1.
class Failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace dtsim
