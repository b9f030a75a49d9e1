// Tests of the disturbance-checked timer (common/clean_timer.hpp): block sizing, medians, rejection.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "common/clean_timer.hpp"
#include "common/errors.hpp"

namespace {

// Busy-spins for `s` seconds so the process's own CPU time advances with the wall clock.
void spin_for(double s) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(s);
  volatile double x = 0;
  while (std::chrono::steady_clock::now() < end) x = x + 1.0;
}

}  // namespace

TEST_CASE("calibrate::CleanTimer: sizes blocks and reports the median of a known work", "[calibrate]") {
  dtsim::CleanTimerOptions o;
  o.blocks = 3;
  o.min_block_s = 0.01;
  o.check_disturbance = false;
  const auto r = dtsim::time_clean([] { spin_for(0.002); }, o);
  REQUIRE(r.blocks_kept == 3);
  REQUIRE(r.blocks_rejected == 0);
  REQUIRE(r.clean());
  CHECK(r.median_s == Approx(0.002).epsilon(0.5));
  CHECK(r.median_s >= 0.002);
  CHECK(r.blocks[0].repeats >= 5);  // 0.01 s / 0.002 s
}

TEST_CASE("calibrate::CleanTimer: a sleeping block is rejected by the own-CPU check", "[calibrate]") {
  // Sleeping uses no CPU: own CPU / wall is ~0, exactly what preemption by another process looks like.
  dtsim::CleanTimerOptions o;
  o.blocks = 2;
  o.max_blocks = 3;
  o.min_block_s = 0.0;
  const auto r = dtsim::time_clean([] { std::this_thread::sleep_for(std::chrono::milliseconds(3)); }, o);
  CHECK(r.blocks_kept == 0);
  CHECK(r.blocks_rejected == 3);
  CHECK_FALSE(r.clean());
  CHECK(r.median_s == 0);
  for (const auto& b : r.blocks) CHECK(b.own_cpu_ratio < 0.5);
}

TEST_CASE("calibrate::CleanTimer: spinning work counts its own CPU time", "[calibrate]") {
  dtsim::CleanTimerOptions o;
  o.blocks = 1;
  o.max_blocks = 1;
  o.min_block_s = 0.03;
  const auto r = dtsim::time_clean([] { spin_for(0.005); }, o);
  REQUIRE(r.blocks.size() == 1);
  // On a busy machine the block may be rejected, but our own ratio must be near 1 unless preempted.
  CHECK(r.blocks[0].own_cpu_ratio > 0.3);
  CHECK(r.blocks[0].own_cpu_ratio < 1.2);
  CHECK(dtsim::machine_busy_s() > 0);
  CHECK(dtsim::online_cpus() >= 1);
}

TEST_CASE("calibrate::CleanTimer: nonsensical options are an InputError", "[calibrate]") {
  dtsim::CleanTimerOptions o;
  o.threads = 0;
  CHECK_THROWS_AS(dtsim::time_clean([] {}, o), dtsim::InputError);
  o = {};
  o.max_blocks = 1;
  o.blocks = 2;
  CHECK_THROWS_AS(dtsim::time_clean([] {}, o), dtsim::InputError);
  o = {};
  o.min_block_s = -1;
  CHECK_THROWS_AS(dtsim::time_clean([] {}, o), dtsim::InputError);
}
