// User models in YAML: parse (strict, errors name file, line, layer and field) and export.
#pragma once
#include <string>

#include "models/model.hpp"
#include "models/zoo.hpp"

namespace dtsim::models {

// Reads a model file; options.batch (and input/classes when non-zero) override the file's values.
Model load_model_yaml(const std::string& path, const ModelOptions& options);
// Parses YAML text; `label` is used as the file name in error messages.
Model parse_model_yaml(const std::string& text, const std::string& label, const ModelOptions& options);
// Serialises a model to the same schema; load(export(m)) reproduces m's layers exactly.
std::string model_to_yaml(const Model& model);

}  // namespace dtsim::models
