// Bounded JSON reading (common/json_limits.hpp): size checked before parsing, depth checked by the
// parser's callback as each array or object opens, so a hostile file never builds a deep tree.
#include "common/json_limits.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "common/errors.hpp"

namespace dtsim {
namespace {

// "1,048,577 bytes": exact, so that a file one byte over the bound reads as over it.
std::string size_text(std::uintmax_t bytes) {
  std::string digits = std::to_string(bytes), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out + " bytes";
}

[[noreturn]] void too_large(const std::string& where, const std::string& what, std::uintmax_t bytes,
                            std::size_t max_bytes) {
  throw InputError(fmt::format("{}: {} is {}; expected at most {}", where, what, size_text(bytes), size_text(max_bytes)));
}

// Thrown by the parser callback; carries nothing, the caller words the message.
struct TooDeep {};

}  // namespace

JsonLimits effective(const JsonLimits& limits) {
  JsonLimits out = limits;
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
  out.max_bytes = std::min(out.max_bytes, JSON_FUZZ_MAX_BYTES);
#endif
  return out;
}

nlohmann::json parse_json(std::string_view text, const std::string& where, const std::string& what,
                          const JsonLimits& limits) {
  const JsonLimits bound = effective(limits);
  if (text.size() > bound.max_bytes) too_large(where, what, text.size(), bound.max_bytes);
  // The callback sees each array or object as it opens, `depth` being the containers around it.
  const auto guard = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
    const bool opens =
        event == nlohmann::json::parse_event_t::object_start || event == nlohmann::json::parse_event_t::array_start;
    if (opens && depth >= bound.max_depth) throw TooDeep{};
    return true;
  };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), guard);
  } catch (const TooDeep&) {
    throw InputError(fmt::format("{}: {} nests arrays and objects deeper than {} levels; expected at most {}", where,
                                 what, bound.max_depth, bound.max_depth));
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(fmt::format("{}: {} is not valid JSON (byte {})", where, what, e.byte));
  } catch (const nlohmann::json::exception&) {
    // e.g. out_of_range.406: a number such as 1e309 that no double holds.
    throw InputError(fmt::format("{}: {} holds a number outside the range of a double", where, what));
  }
}

nlohmann::json read_json_file(const std::string& path, const std::string& what, const JsonLimits& limits) {
  const JsonLimits bound = effective(limits);
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > bound.max_bytes) too_large(path, what, size, bound.max_bytes);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot read the {}", path, what));
  // In chunks, stopping one chunk past the bound: a file that grew since file_size() (or a pipe) is
  // refused without being read whole.
  constexpr std::size_t CHUNK_BYTES = 1 << 16;
  std::string text;
  std::size_t got = 0;
  do {
    text.resize(got + CHUNK_BYTES);
    in.read(text.data() + got, static_cast<std::streamsize>(CHUNK_BYTES));
    got += static_cast<std::size_t>(in.gcount());
  } while (in && got <= bound.max_bytes);
  if (in.bad()) throw InputError(fmt::format("{}: cannot read the {}", path, what));
  text.resize(got);
  return parse_json(text, path, what, limits);
}

}  // namespace dtsim
