// Small statistics shared by calibration and validation.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

namespace dtsim {

// Linearly interpolated quantile q in [0, 1] of `v` (0 for an empty vector); median is q = 0.5.
inline double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

}  // namespace dtsim
