// Escaping of echoed input so that every message stays on one line.
#include "common/text.hpp"

#include <fmt/format.h>

#include <cstdint>

#include <array>
#include <cmath>

namespace dtsim {

std::string printable(std::string_view text, std::size_t max_chars) {
  std::string out;
  std::size_t taken = 0;
  for (const char c : text) {
    if (taken == max_chars) return out + "...";
    ++taken;
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (u < 0x20 || u == 0x7f)
      out += fmt::format("\\x{:02x}", u);
    else
      out += c;
  }
  return out;
}

namespace {

// `value` in the largest unit of `units` (each `step` times the previous) that keeps it >= 1, with
// 3 significant digits; a value that rounds up to `step` moves to the next unit.
template <std::size_t N>
std::string three_digits(double value, double step, const std::array<const char*, N>& units, std::size_t first) {
  if (!std::isfinite(value) || value < 0) return fmt::format("{}", value);
  std::size_t u = first;
  while (u + 1 < N && value >= step) {
    value /= step;
    ++u;
  }
  if (value == 0) return fmt::format("0 {}", units[first]);
  for (;;) {
    const int decimals = value < 9.995 ? 2 : value < 99.95 ? 1 : 0;
    if (u + 1 < N && std::round(value) >= step) {
      value /= step;
      ++u;
      continue;
    }
    return fmt::format("{:.{}f} {}", value, decimals, units[u]);
  }
}

}  // namespace

std::string human_bytes(double bytes) {
  static constexpr std::array<const char*, 6> UNITS{"B", "kB", "MB", "GB", "TB", "PB"};
  if (std::isfinite(bytes) && bytes >= 0 && bytes < 1000) return fmt::format("{:.0f} B", bytes);
  return three_digits(bytes, 1000.0, UNITS, 0);
}

std::string human_seconds(double seconds) {
  static constexpr std::array<const char*, 4> UNITS{"ns", "us", "ms", "s"};
  if (!std::isfinite(seconds) || seconds < 0) return fmt::format("{}", seconds);
  if (seconds == 0) return "0 s";
  // Start from nanoseconds so that every value lands in the largest unit that keeps it >= 1.
  return three_digits(seconds * 1e9, 1000.0, UNITS, 0);
}

std::string plural(long long count, std::string_view noun) {
  return fmt::format("{} {}{}", count, noun, count == 1 ? "" : "s");
}

std::string fnv1a64_hex(std::string_view text) {
  constexpr std::uint64_t FNV_OFFSET = 14695981039346656037ULL;
  constexpr std::uint64_t FNV_PRIME = 1099511628211ULL;
  std::uint64_t h = FNV_OFFSET;
  for (const char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= FNV_PRIME;
  }
  return fmt::format("{:016x}", h);
}

}  // namespace dtsim
