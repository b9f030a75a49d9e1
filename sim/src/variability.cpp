// Synchronisation variance in closed form: the expected maximum over n workers of the log-normal
// compute factor (mean 1) that training.cpp draws per worker and iteration. Synchronous training pays
// this maximum every iteration; the tests check the simulation against it.
#include <cmath>

#include "sim/training.hpp"

namespace dtsim::sim {
namespace {
constexpr double Z_RANGE = 12;      // standard deviations integrated on each side
constexpr int INTERVALS = 4000;     // Simpson intervals over [-Z_RANGE, Z_RANGE] (even)
}  // namespace

double expected_max_lognormal_factor(int n, double cv) {
  if (n <= 1 || cv <= 0) return 1.0;
  // X = exp(sigma Z - sigma^2 / 2), Z standard normal: E[max of n] = int x(z) n Phi(z)^(n-1) phi(z) dz.
  const double sigma = std::sqrt(std::log1p(cv * cv));
  const double h = 2 * Z_RANGE / INTERVALS;
  auto f = [&](double z) {
    const double phi = std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI);
    const double Phi = 0.5 * std::erfc(-z / std::sqrt(2.0));
    return std::exp(sigma * z - 0.5 * sigma * sigma) * n * std::pow(Phi, n - 1) * phi;
  };
  double sum = f(-Z_RANGE) + f(Z_RANGE);
  for (int i = 1; i < INTERVALS; ++i) sum += (i % 2 ? 4 : 2) * f(-Z_RANGE + i * h);
  return sum * h / 3;
}

}  // namespace dtsim::sim
