// Runs code against a World in the sim tests: one fresh world per child process (one engine per process).
#pragma once
#include <functional>
#include <string>

#include "common/child.hpp"
#include "sim/src/world.hpp"
#include "tests/sim/comm_test_platforms.hpp"

namespace dtsim::test_platforms {

// Runs `body` on a fresh world in a child; body returns a number, sent back as text.
inline double in_world(const platforms::Platform& p, sim::Layout layout,
                       const std::function<double(sim::World&)>& body) {
  return std::stod(run_in_child([&]() {
    sim::World world(p, layout);
    return fmt_double(body(world));
  }));
}

}  // namespace dtsim::test_platforms
