// Sanity bounds of platform and device figures, chosen by the field's unit suffix: a value outside
// them is a typo or a unit slip, and some (an efficiency of 1e-300) would turn into absurd times.
#pragma once
#include <optional>
#include <string_view>

namespace dtsim::platforms::detail {

struct PhysicalBounds {
  double lo;
  double hi;
};

// The accepted range of a figure named `key`, or nothing for fields without a physical unit.
// Bounds are far outside any built hardware, not estimates of it:
//   *_Bps          1 kB/s .. 10 PB/s  (slowest serial link .. above any HBM stack or switch)
//   *_s            0 .. 10 s          (latencies and per-message overheads; a 10 s hop is a typo)
//   *efficiency    0.001 .. 1         (fractions of a peak; below 0.1% the figure is meaningless)
//   *_per_s        1 .. 1e12          (operation rates, e.g. metadata ops/s)
//   *_flops        1 MFLOP/s .. 1 EFLOP/s
//   *_hz           1 MHz .. 100 GHz
//   *_B            0 .. 1e18 B        (capacities)
inline std::optional<PhysicalBounds> physical_bounds(std::string_view key) {
  if (key.ends_with("_Bps")) return PhysicalBounds{1e3, 1e16};
  if (key.ends_with("efficiency")) return PhysicalBounds{1e-3, 1.0};
  if (key.ends_with("_per_s")) return PhysicalBounds{1.0, 1e12};
  if (key.ends_with("_s")) return PhysicalBounds{0.0, 10.0};
  if (key.ends_with("flops")) return PhysicalBounds{1e6, 1e18};
  if (key.ends_with("_hz")) return PhysicalBounds{1e6, 1e11};
  if (key.ends_with("_B")) return PhysicalBounds{0.0, 1e18};
  return std::nullopt;
}

}  // namespace dtsim::platforms::detail
