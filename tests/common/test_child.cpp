// Tests of common/child.hpp: results and errors cross the process boundary intact, one child or a pool.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <csignal>
#include <string>
#include <vector>

#include "common/child.hpp"
#include "common/errors.hpp"

using namespace dtsim;

TEST_CASE("common::run_in_child: returns the child's text", "[common]") {
  CHECK(run_in_child([] { return std::string("hello\n") + std::string(100000, 'x'); }).size() == 100006);
}

TEST_CASE("common::run_in_child: InputError and Failure keep their type and message", "[common]") {
  CHECK_THROWS_AS(run_in_child([]() -> std::string { throw InputError("bad size"); }), InputError);
  CHECK_THROWS_WITH(run_in_child([]() -> std::string { throw Failure("broke"); }), "broke");
}

TEST_CASE("common::run_in_child: a crashed child is a Failure naming the signal", "[common]") {
  CHECK_THROWS_WITH(run_in_child([]() -> std::string {
                      std::raise(SIGSEGV);
                      return "";
                    }),
                    Catch::Contains("signal 11"));
}

TEST_CASE("common::run_process_pool: reports worker crashes and bad job counts", "[common]") {
  std::vector<std::string> errors;
  run_process_pool(
      2, 2,
      [](std::size_t i) -> std::string {
        if (i == 1) ::kill(::getpid(), SIGKILL);
        return "fine";
      },
      [&](std::size_t i, bool ok, const std::string& text) { errors.push_back(std::to_string(i) + (ok ? "+" : "-") + text); },
      [] { return false; });
  std::sort(errors.begin(), errors.end());
  REQUIRE(errors.size() == 2);
  CHECK(errors[0] == "0+fine");
  CHECK(errors[1].find("1-worker process died with signal") == 0);
  CHECK_THROWS_AS(run_process_pool(1, 0, [](std::size_t) { return std::string(); },
                                   [](std::size_t, bool, const std::string&) {}, [] { return false; }),
                  InputError);
}

TEST_CASE("common::run_process_pool: runs every task once, at most `jobs` at a time, errors keep their kind",
          "[common]") {
  std::vector<std::string> seen(6);
  const std::size_t finished = run_process_pool(
      6, 3,
      [](std::size_t i) -> std::string {
        if (i == 4) throw InputError("bad field");
        if (i == 5) throw Failure("broke");
        return std::to_string(i * i);
      },
      [&](std::size_t i, bool ok, const std::string& text) { seen[i] += (ok ? "+" : "-") + text; },
      [] { return false; });
  CHECK(finished == 6);
  CHECK(seen == std::vector<std::string>{"+0", "+1", "+4", "+9", "-input error: bad field", "-failed: broke"});
}

TEST_CASE("common::run_process_pool: stop() ends the pool and drops the running tasks", "[common]") {
  int calls = 0;
  std::size_t reported = 0;
  const std::size_t finished = run_process_pool(
      4, 2,
      [](std::size_t) -> std::string {
        ::pause();  // never finishes on its own
        return "";
      },
      [&](std::size_t, bool, const std::string&) { ++reported; }, [&] { return ++calls > 2; });
  CHECK(finished == 0);
  CHECK(reported == 0);
}
