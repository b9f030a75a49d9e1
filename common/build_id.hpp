// The build's identity: dtsim's version and a hash of the sources that make a prediction
// (cmake/build_id.cmake), e.g. "0.1.0+src.3f2a9c41d0e7". Two binaries with the same id predict alike.
#pragma once

namespace dtsim {

const char* build_id();

}  // namespace dtsim
