// Checks of the shipped-data lookup (common/paths.hpp).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "common/errors.hpp"
#include "common/paths.hpp"

TEST_CASE("common::Paths: a replaceable data file is read when there, optional when shipped, an error when "
          "its variable names none") {
  namespace fs = std::filesystem;
  const char* var = "DTSIM_TEST_REPLACEABLE_FILE";
  const fs::path there = fs::temp_directory_path() / ("dtsim_paths_" + std::to_string(::getpid()) + ".json");
  std::ofstream(there) << "{}";
  const std::string missing = there.string() + ".missing";
  ::unsetenv(var);
  CHECK(dtsim::replaceable_data_file_exists(there.string(), var));
  CHECK_FALSE(dtsim::replaceable_data_file_exists(missing, var));  // the shipped file is optional
  ::setenv(var, missing.c_str(), 1);
  CHECK(dtsim::replaceable_data_file_exists(there.string(), var));
  CHECK_THROWS_WITH(dtsim::replaceable_data_file_exists(missing, var),
                    Catch::Contains("$DTSIM_TEST_REPLACEABLE_FILE") && Catch::Contains(missing));
  CHECK_THROWS_AS(dtsim::replaceable_data_file_exists(missing, var), dtsim::InputError);
  ::unsetenv(var);
  fs::remove(there);
}
