// Tests of common/child.hpp: results and errors cross the process boundary intact.
#include <catch2/catch.hpp>

#include <csignal>

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
