// Text helpers for user-facing messages: every error is one line, so values echoed from input
// (names, keys, scalars) pass through `printable` first.
#pragma once
#include <string>
#include <string_view>

namespace dtsim {

// `text` with newlines, tabs and other control characters written as escapes (\n, \t, \xNN),
// cut to `max_chars` characters with "..." appended when longer; safe inside a one-line message.
std::string printable(std::string_view text, std::size_t max_chars = 120);

// Sizes and times for tables people read (CSV and JSON keep the raw numbers), 3 significant digits:
// human_bytes(2.5e7) == "25.0 MB" (SI units, as --bytes reads them), human_seconds(0.0019) == "1.90 ms".
std::string human_bytes(double bytes);
std::string human_seconds(double seconds);
// "1 worker", "2 workers": `count` and `noun`, with an 's' unless count is 1.
std::string plural(long long count, std::string_view noun);

// 64-bit FNV-1a of `text` as 16 hex digits: a stable content id (not a cryptographic hash) for sweep
// points, their inputs and the calibration database's checksum.
std::string fnv1a64_hex(std::string_view text);

}  // namespace dtsim
