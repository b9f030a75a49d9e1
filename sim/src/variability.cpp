// Synchronisation variance: the device spread a point runs (by device class unless it names one) and,
// in closed form, the expected maximum over n workers of the log-normal compute factor (mean 1) that
// training.cpp draws, alone (per-iteration jitter) or beside the reference device 0 at 1 (the device
// spread). Synchronous training pays this maximum; the tests check the simulation against it.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "sim/src/training_checks.hpp"
#include "sim/training.hpp"

namespace dtsim::sim {
namespace {
// Seeds the persistent device factors apart from the per-iteration jitter (same `seed`, own stream).
constexpr std::uint64_t DEVICE_STREAM = 0x9e3779b97f4a7c15ULL;
constexpr double Z_RANGE = 12;      // standard deviations integrated on each side
constexpr int INTERVALS = 4000;     // Simpson intervals over [-Z_RANGE, Z_RANGE] (even)

// E[g(max of m log-normal factors of mean 1 and coefficient of variation cv)] by Simpson's rule over
// z, the maximum's density being m Phi(z)^(m-1) phi(z); 1 when n <= 1 workers or cv <= 0.
template <class G>
double integrate_max(int n, double cv, int m, G g) {
  if (n <= 1 || cv <= 0) return 1.0;
  const double sigma = std::sqrt(std::log1p(cv * cv));
  const double h = 2 * Z_RANGE / INTERVALS;
  auto f = [&](double z) {
    const double phi = std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI);
    const double Phi = 0.5 * std::erfc(-z / std::sqrt(2.0));
    return g(std::exp(sigma * z - 0.5 * sigma * sigma)) * m * std::pow(Phi, m - 1) * phi;
  };
  double sum = f(-Z_RANGE) + f(Z_RANGE);
  for (int i = 1; i < INTERVALS; ++i) sum += (i % 2 ? 4 : 2) * f(-Z_RANGE + i * h);
  return sum * h / 3;
}
}  // namespace

TrainingPoint default_training_point() {
  TrainingPoint p;
  p.runtime.collective_library.clear();
  p.variability.device_cv = DEVICE_CV_BY_CLASS;
  return p;
}

DeviceSpread resolve_device_spread(const platforms::Platform& platform, const TrainingPoint& point) {
  const double cv = point.variability.device_cv;
  if (cv != DEVICE_CV_BY_CLASS) return {cv, cv > 0 ? "named" : "off"};
  if (platform.has_gpus())
    return {GPU_DEVICE_CV, "GPU default: Sinha et al. SC'22, 8% same-SKU spread"};
  return {CPU_DEVICE_CV, "CPU default: Acun et al. ICS'16, up to 16% spread under Turbo Boost"};
}

double expected_max_lognormal_factor(int n, double cv) {
  // X = exp(sigma Z - sigma^2 / 2), Z standard normal: E[max of n] = int x(z) n Phi(z)^(n-1) phi(z) dz.
  return integrate_max(n, cv, n, [](double x) { return x; });
}

double expected_max_with_reference_factor(int n, double cv) {
  // max(1, X_1..X_{n-1}): the reference device at 1 beside n - 1 drawn ones.
  return integrate_max(n, cv, n - 1, [](double x) { return std::max(1.0, x); });
}

std::vector<double> persistent_device_factors(int devices, double cv, std::uint64_t seed) {
  std::vector<double> device(static_cast<std::size_t>(std::max(1, devices)), 1.0);
  if (cv <= 0) return device;
  // Persistent factors from their own stream, drawn in device order: a run on N devices uses the
  // first N draws, so the slowest device of N never gets faster as N grows.
  std::mt19937_64 rng(seed ^ DEVICE_STREAM);
  std::normal_distribution<double> normal(0.0, 1.0);
  const double sigma = std::sqrt(std::log1p(cv * cv));
  for (auto& d : device) d = std::exp(sigma * normal(rng) - 0.5 * sigma * sigma);
  // Device 0, the one a 1-worker baseline (and an anchor) runs on, is the reference device at the
  // spread's mean: a measured single-GPU rate describes an unknown, so typical, device. Its own draw
  // (0.986 at the default seed on GPUs, 0.980 on CPUs) made every efficiency at N >= 2 that much lower.
  device[0] = 1.0;
  return device;
}

}  // namespace dtsim::sim
