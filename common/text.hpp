// Text helpers for user-facing messages: every error is one line, so values echoed from input
// (names, keys, scalars) pass through `printable` first.
#pragma once
#include <string>
#include <string_view>

namespace dtsim {

// `text` with newlines, tabs and other control characters written as escapes (\n, \t, \xNN),
// cut to `max_chars` characters with "..." appended when longer; safe inside a one-line message.
std::string printable(std::string_view text, std::size_t max_chars = 120);

}  // namespace dtsim
