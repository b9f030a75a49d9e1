// Strict YAML helpers: file/line-aware errors for every dtsim schema.
#include "common/yaml_util.hpp"

#include <fmt/format.h>

#include <filesystem>

#include "common/errors.hpp"

namespace dtsim::yaml {

std::string Origin::where(const YAML::Node& node) const {
  const YAML::Mark mark = node.Mark();
  if (mark.line < 0) return file;
  return fmt::format("{}:{}", file, mark.line + 1);
}

YAML::Node load_string(const std::string& text, const std::string& label) {
  try {
    return YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw InputError(fmt::format("{}:{}: malformed YAML: {}", label, e.mark.line + 1, e.msg));
  }
}

YAML::Node load_file(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) throw InputError(fmt::format("{}: no such file", path));
  try {
    return YAML::LoadFile(path);
  } catch (const YAML::ParserException& e) {
    throw InputError(fmt::format("{}:{}: malformed YAML: {}", path, e.mark.line + 1, e.msg));
  } catch (const YAML::BadFile&) {
    throw InputError(fmt::format("{}: cannot be read", path));
  }
}

namespace {
template <class Keys>
void check_keys_impl(const YAML::Node& node, const Keys& allowed, const Origin& origin,
                     std::string_view context) {
  if (!node.IsMap()) fail(node, origin, context, "expected a map of fields");
  for (const auto& item : node) {
    const std::string key = item.first.Scalar();
    bool ok = false;
    for (const auto& a : allowed) ok = ok || key == a;
    if (!ok) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      fail(item.first, origin, context, fmt::format("unknown key '{}' (allowed: {})", key, list));
    }
  }
}
}  // namespace

void check_keys(const YAML::Node& node, std::initializer_list<std::string_view> allowed, const Origin& origin,
                std::string_view context) {
  check_keys_impl(node, allowed, origin, context);
}

void check_keys(const YAML::Node& node, const std::vector<std::string>& allowed, const Origin& origin,
                std::string_view context) {
  check_keys_impl(node, allowed, origin, context);
}

double require_positive(double value, const YAML::Node& at, std::string_view key, const Origin& origin,
                        std::string_view context) {
  if (!(value > 0)) fail(at, origin, context, fmt::format("field '{}' must be > 0, got {}", key, value));
  return value;
}

double require_non_negative(double value, const YAML::Node& at, std::string_view key, const Origin& origin,
                            std::string_view context) {
  if (!(value >= 0)) fail(at, origin, context, fmt::format("field '{}' must be >= 0, got {}", key, value));
  return value;
}

void fail(const YAML::Node& at, const Origin& origin, std::string_view context, std::string_view message) {
  if (context.empty()) throw InputError(fmt::format("{}: {}", origin.where(at), message));
  throw InputError(fmt::format("{}: {}: {}", origin.where(at), context, message));
}

}  // namespace dtsim::yaml
