// Where dtsim finds its shipped data (platforms, devices, calibration data, scenarios, plot script).
#pragma once
#include <filesystem>
#include <string>

namespace dtsim {

// The folder of the running executable (from /proc/self/exe); empty if it cannot be read.
std::filesystem::path executable_dir();
// The installed data folder (<prefix>/share/dtsim, found from the binary's folder) when it holds platforms/devices.yaml (an installed dtsim), else empty.
std::filesystem::path installed_data_dir();
// The project data root: $DTSIM_DATA_DIR if set, else the installed data beside the binary
// (<prefix>/share/dtsim), else the source tree dtsim was built from.
std::filesystem::path data_dir();
// The published accuracy tables: $DTSIM_REFERENCE_DIR, else <data_dir>/benchmarks/data.
std::filesystem::path reference_dir();
// A shipped data file that $`env_name` may replace: the variable's value when set, else <data_dir>/`shipped`.
std::string replaceable_data_file(const char* env_name, const std::filesystem::path& shipped);
// Whether a shipped data file that $`env_name` may replace is there to read at `path` (the variable's value
// when set, else the shipped file): false when the shipped file is absent (the data is optional), InputError
// naming the variable when it names a file that does not exist (never a silent fallback to none).
bool replaceable_data_file_exists(const std::string& path, const char* env_name);

}  // namespace dtsim
