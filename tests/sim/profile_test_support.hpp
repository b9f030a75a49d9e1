// Shared by the sim tests: a compute profile of equal layers (1 ms per pass each) with the given
// gradient bytes per layer, in forward order (0: a layer without parameters).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "calibrate/profile.hpp"

namespace dtsim::test_profiles {

inline calibrate::ComputeProfile profile_of(const std::vector<std::int64_t>& grad_bytes) {
  calibrate::ComputeProfile p;
  p.batch = 8;
  for (std::size_t i = 0; i < grad_bytes.size(); ++i) {
    calibrate::LayerTime l;
    l.name = "l" + std::to_string(i);
    l.fwd_s = 1e-3;
    l.bwd_data_s = 1e-3;
    l.bwd_weights_s = 1e-3;
    l.grad_bytes = grad_bytes[i];
    p.layers.push_back(l);
  }
  p.update_s = 5e-4;
  return p;
}

}  // namespace dtsim::test_profiles
