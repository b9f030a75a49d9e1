// Escaping of echoed input so that every message stays on one line.
#include "common/text.hpp"

#include <fmt/format.h>

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

}  // namespace dtsim
