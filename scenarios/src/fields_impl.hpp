// Template bodies of scenarios/fields.hpp.
#pragma once
#include <string>

#include "common/errors.hpp"
#include "common/text.hpp"

namespace dtsim::scenarios {

template <class T>
T FieldInput::as() const {
  const std::string type(yaml::detail::type_name<T>());
  if (!value_.IsScalar()) fail("must be " + type);
  try {
    return value_.as<T>();
  } catch (const YAML::Exception&) {
    fail("must be " + type + ", got '" + printable(value_.Scalar()) + "'");
  }
}

template <class F>
auto FieldInput::choose(const F& parse) const -> decltype(parse(std::string())) {
  const auto text = as<std::string>();
  try {
    return parse(text);
  } catch (const InputError& e) {
    const std::string message = named_choice_error(e.what());
    throw InputError(origin_ == nullptr ? message : origin_->where(value_) + ": " + message);
  }
}

}  // namespace dtsim::scenarios
