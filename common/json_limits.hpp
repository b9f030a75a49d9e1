// Bounded JSON reading: every JSON file dtsim reads from a user (calibration database, GPU kernel model,
// sweep results, validation reports) is parsed here, within a size and a nesting-depth bound.
#pragma once
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace dtsim {

// Deepest nesting of arrays and objects a JSON reader accepts: as for YAML (common/yaml_util.cpp).
// dtsim's own files nest at most 6 levels (a sweep record's rows and their resources); nlohmann's
// recursive dump and comparison overflow the stack near 100,000.
inline constexpr int JSON_MAX_DEPTH = 64;

struct JsonLimits {
  std::size_t max_bytes = 0;       // the text's size
  int max_depth = JSON_MAX_DEPTH;  // arrays/objects inside one another; the root is level 1
};

// The limits a reader actually applies. In a fuzz build (FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION) the
// size bound is lowered to JSON_FUZZ_MAX_BYTES so that libFuzzer's inputs (scripts/fuzz.sh max_len) reach it.
JsonLimits effective(const JsonLimits& limits);
inline constexpr std::size_t JSON_FUZZ_MAX_BYTES = 32 * 1024;  // above the shipped gpu_kernels.json (23 KB)

// Parses `text`, which `where` names in messages (a file, "file, line 3"). InputError, one line naming
// `where` and `what` the text is: larger than limits.max_bytes, nested deeper than limits.max_depth, not
// valid JSON (with the byte) or holding a number no double holds.
nlohmann::json parse_json(std::string_view text, const std::string& where, const std::string& what,
                          const JsonLimits& limits);

// Reads the file at `path` and parses it as parse_json does; its size is checked before it is read.
// InputError naming the file when it cannot be read.
nlohmann::json read_json_file(const std::string& path, const std::string& what, const JsonLimits& limits);

}  // namespace dtsim
