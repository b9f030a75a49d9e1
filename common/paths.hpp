// Where dtsim finds its shipped data (platforms, devices, calibration data, scenarios).
#pragma once
#include <filesystem>
#include <string>

namespace dtsim {

// The project data root: $DTSIM_DATA_DIR if set, else the source tree dtsim was built from.
std::filesystem::path data_dir();
// The published reference material: $DTSIM_REFERENCE_DIR, else <data_dir>/../shared/reference.
std::filesystem::path reference_dir();

}  // namespace dtsim
