// Tests of apps/main.cpp: exit codes and strict parsing of the command line as a whole.
#include <catch2/catch.hpp>

#include "tests/support/run_cli.hpp"

using dtsim::test::run_cli;

TEST_CASE("cli::main: no subcommand is bad input (exit 2)", "[cli]") {
  const auto r = run_cli({});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("subcommand is required") != std::string::npos);
}

TEST_CASE("cli::main: unknown options and subcommands are errors (exit 2)", "[cli]") {
  CHECK(run_cli({"--no-such-flag"}).exit_code == 2);
  CHECK(run_cli({"no-such-command"}).exit_code == 2);
}

TEST_CASE("cli::main: --help and --version succeed", "[cli]") {
  const auto help = run_cli({"--help"});
  CHECK(help.exit_code == 0);
  CHECK(help.out.find("dtsim") != std::string::npos);
  const auto version = run_cli({"--version"});
  CHECK(version.exit_code == 0);
  CHECK(version.out.find("0.1.0") != std::string::npos);
  // The build id: the version and 12 hex digits of the sources' hash (cmake/build_id.cmake).
  const auto at = version.out.find("0.1.0+src.");
  REQUIRE(at != std::string::npos);
  const std::string digest = version.out.substr(at + 10, 12);
  CHECK(digest.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(digest.size() == 12);
}
