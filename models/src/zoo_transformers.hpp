// Private to models/: the transformer zoo's configurations, looked up by name.
#pragma once
#include <string>

#include "models/transformer.hpp"

namespace dtsim::models {

const TransformerConfig* transformer_zoo_config_or_null(const std::string& name);

}  // namespace dtsim::models
