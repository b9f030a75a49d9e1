// Template bodies of common/yaml_util.hpp.
#pragma once
#include <string>
#include <type_traits>

#include "common/text.hpp"

namespace dtsim::yaml {

namespace detail {
template <class T>
constexpr std::string_view type_name() {
  if constexpr (std::is_same_v<T, bool>) return "a boolean";
  else if constexpr (std::is_integral_v<T>) return "an integer";
  else if constexpr (std::is_floating_point_v<T>) return "a number";
  else if constexpr (std::is_same_v<T, std::string>) return "a string";
  else return "a value of the right type";
}
}  // namespace detail

template <class T>
T required(const YAML::Node& map, std::string_view key, const Origin& origin, std::string_view context) {
  const YAML::Node value = map[std::string(key)];
  if (!value) fail(map, origin, context, "missing required field '" + std::string(key) + "'");
  if (!value.IsScalar())
    fail(value, origin, context,
         "field '" + std::string(key) + "' must be " + std::string(detail::type_name<T>()));
  try {
    return value.as<T>();
  } catch (const YAML::Exception&) {
    fail(value, origin, context,
         "field '" + std::string(key) + "' must be " + std::string(detail::type_name<T>()) + ", got '" +
             printable(value.Scalar()) + "'");
  }
}

template <class T>
T optional(const YAML::Node& map, std::string_view key, T fallback, const Origin& origin,
           std::string_view context) {
  if (!map[std::string(key)]) return fallback;
  return required<T>(map, key, origin, context);
}

}  // namespace dtsim::yaml
