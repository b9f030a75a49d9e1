// User models in YAML (schema in docs/model-schema.md): strict parsing with file:line errors that
// name the layer and field, and an exporter whose output reloads to identical layers.
#include "models/yaml_io.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "common/errors.hpp"
#include "common/text.hpp"
#include "common/yaml_util.hpp"
#include "models/op_rows.hpp"

namespace dtsim::models {

namespace {

using dtsim::yaml::Origin;

// Fields each op accepts besides name, op and inputs.
const std::vector<std::string>& op_fields(OpKind op) {
  static const std::map<OpKind, std::vector<std::string>> fields = {
      {OpKind::CONV2D, {"out_channels", "kernel", "stride", "padding", "dilation", "groups", "bias"}},
      {OpKind::FULLY_CONNECTED, {"out_channels", "bias"}},
      {OpKind::BATCH_NORM, {"epsilon"}},
      {OpKind::LRN, {"size", "alpha", "beta", "k"}},
      {OpKind::MAX_POOL, {"kernel", "stride", "padding", "dilation", "ceil_mode"}},
      {OpKind::AVG_POOL, {"kernel", "stride", "padding", "ceil_mode", "count_include_pad"}},
      {OpKind::DROPOUT, {"ratio"}},
  };
  static const std::vector<std::string> none;
  const auto it = fields.find(op);
  return it == fields.end() ? none : it->second;
}

struct Pair {
  int h, w;
};

// `key: 3` or `key: [3, 1]` (height, width).
Pair read_pair(const YAML::Node& layer, const std::string& key, Pair fallback, const Origin& origin,
               const std::string& context) {
  const YAML::Node v = layer[key];
  if (!v) return fallback;
  auto as_int = [&](const YAML::Node& n) {
    try {
      return n.as<int>();
    } catch (const YAML::Exception&) {
      dtsim::yaml::fail(n, origin, context,
                        fmt::format("field '{}' must be an integer or a list [height, width] of integers", key));
    }
  };
  if (v.IsScalar()) {
    const int x = as_int(v);
    return {x, x};
  }
  if (v.IsSequence() && v.size() == 2) return {as_int(v[0]), as_int(v[1])};
  dtsim::yaml::fail(v, origin, context,
                    fmt::format("field '{}' must be an integer or a list [height, width] of integers", key));
}

int read_dimension(const YAML::Node& input, const std::string& key, int override_value, const Origin& origin) {
  const int v = dtsim::yaml::required<int>(input, key, origin, "input");
  if (override_value > 0) return override_value;
  if (v < 1) dtsim::yaml::fail(input[key], origin, "input", fmt::format("field '{}' must be >= 1, got {}", key, v));
  return v;
}


std::vector<std::string> read_inputs(const YAML::Node& l, const std::string& previous, const Origin& origin,
                                     const std::string& context) {
  std::vector<std::string> inputs;
  if (const YAML::Node in = l["inputs"]) {
    if (!in.IsSequence()) dtsim::yaml::fail(in, origin, context, "field 'inputs' must be a list of layer names");
    for (const auto& item : in) {
      if (!item.IsScalar()) dtsim::yaml::fail(item, origin, context, "field 'inputs' must be a list of layer names");
      inputs.push_back(item.Scalar());
    }
  } else {
    inputs.push_back(previous);  // default: the layer before
  }
  return inputs;
}

// A layer of a row op: its keys are the row's fields (models/op_rows.hpp).
void add_row_layer(Model& model, const OpRow& row, const YAML::Node& l, const std::string& layer_name,
                   const std::string& previous, const Origin& origin, const std::string& context) {
  std::vector<std::string> allowed = {"name", "op", "inputs"};
  for (const auto& f : row.fields) allowed.emplace_back(f.name);
  dtsim::yaml::check_keys(l, allowed, origin, context);
  LayerParams p;
  for (const auto& f : row.fields) {
    const std::string key(f.name);
    if (f.required && !l[key]) dtsim::yaml::fail(l, origin, context, fmt::format("missing required field '{}'", key));
    switch (f.type) {
      case RowField::Type::INT: p.seq.*f.int_field = dtsim::yaml::optional<std::int64_t>(l, key, p.seq.*f.int_field, origin, context); break;
      case RowField::Type::BOOL: p.seq.*f.bool_field = dtsim::yaml::optional<bool>(l, key, p.seq.*f.bool_field, origin, context); break;
      case RowField::Type::RATIO: p.seq.*f.double_field = dtsim::yaml::optional<double>(l, key, p.seq.*f.double_field, origin, context); break;
    }
  }
  try {
    model.add_row(layer_name, row.name, p, read_inputs(l, previous, origin, context));
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", origin.where(l), e.what()));
  }
}

}  // namespace

Model parse_model_yaml(const std::string& text, const std::string& label, const ModelOptions& options) {
  const Origin origin{label};
  const YAML::Node root = dtsim::yaml::load_string(text, label);
  if (!root || root.IsNull()) throw InputError(fmt::format("{}: empty model file", label));
  dtsim::yaml::check_keys(root, {"name", "input", "classes", "layers"}, origin, "model");
  const auto name = dtsim::yaml::required<std::string>(root, "name", origin, "model");
  if (name.empty()) dtsim::yaml::fail(root["name"], origin, "model", "field 'name' must not be empty");
  const YAML::Node input = root["input"];
  if (!input) dtsim::yaml::fail(root, origin, "model", "missing required field 'input'");
  dtsim::yaml::check_keys(input, {"channels", "height", "width"}, origin, "input");
  const int channels = read_dimension(input, "channels", options.channels, origin);
  const int height = read_dimension(input, "height", options.input_h, origin);
  const int width = read_dimension(input, "width", options.input_w, origin);
  int classes = dtsim::yaml::optional<int>(root, "classes", 0, origin, "model");
  if (root["classes"] && classes < 1)
    dtsim::yaml::fail(root["classes"], origin, "model", fmt::format("field 'classes' must be >= 1, got {}", classes));
  if (options.classes > 0) classes = options.classes;
  if (options.batch < 1) throw InputError(fmt::format("{}: batch must be >= 1, got {}", label, options.batch));

  Model model(name, Shape{options.batch, channels, height, width});
  const YAML::Node layers = root["layers"];
  if (!layers) dtsim::yaml::fail(root, origin, "model", "missing required field 'layers'");
  if (!layers.IsSequence() || layers.size() == 0)
    dtsim::yaml::fail(layers, origin, "model", "field 'layers' must be a non-empty list of layers");

  std::string previous = "data";
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const YAML::Node l = layers[i];
    const std::string index_context = fmt::format("layer {}", i + 1);
    if (!l.IsMap()) dtsim::yaml::fail(l, origin, index_context, "expected a map with name, op and fields");
    const auto layer_name = dtsim::yaml::required<std::string>(l, "name", origin, index_context);
    const std::string context = fmt::format("layer '{}'", layer_name);
    const auto op_name = dtsim::yaml::required<std::string>(l, "op", origin, context);
    if (const OpRow* row = op_row_by_name_or_null(op_name)) {
      add_row_layer(model, *row, l, layer_name, previous, origin, context);
      previous = layer_name;
      continue;
    }
    const auto op = op_kind_by_name_or_null(op_name);
    if (!op || *op == OpKind::INPUT) {
      std::string known;
      for (const auto& n : op_kind_names())
        if (n != "input" && n != "row") known += (known.empty() ? "" : ", ") + n;
      for (const auto& r : op_rows()) known += ", " + std::string(r.name);
      dtsim::yaml::fail(l["op"], origin, context, fmt::format("field 'op': unknown op '{}' (known: {})", op_name, known));
    }
    std::vector<std::string> allowed = {"name", "op", "inputs"};
    for (const auto& f : op_fields(*op)) allowed.push_back(f);
    dtsim::yaml::check_keys(l, allowed, origin, context);

    std::vector<std::string> inputs = read_inputs(l, previous, origin, context);

    LayerParams p;
    if (const YAML::Node oc = l["out_channels"]) {
      if (oc.IsScalar() && oc.Scalar() == "classes") {
        if (classes < 1)
          dtsim::yaml::fail(oc, origin, context, "field 'out_channels' is 'classes' but the model sets no 'classes'");
        p.out_channels = classes;
      } else {
        p.out_channels = dtsim::yaml::required<std::int64_t>(l, "out_channels", origin, context);
      }
    } else if (*op == OpKind::CONV2D || *op == OpKind::FULLY_CONNECTED) {
      dtsim::yaml::fail(l, origin, context, "missing required field 'out_channels'");
    }
    if (*op == OpKind::CONV2D || *op == OpKind::MAX_POOL || *op == OpKind::AVG_POOL) {
      if (!l["kernel"]) dtsim::yaml::fail(l, origin, context, "missing required field 'kernel'");
      const Pair k = read_pair(l, "kernel", {1, 1}, origin, context);
      // Pools default to a stride equal to the kernel (PyTorch), convolutions to 1.
      const Pair s = read_pair(l, "stride", *op == OpKind::CONV2D ? Pair{1, 1} : k, origin, context);
      const Pair pad = read_pair(l, "padding", {0, 0}, origin, context);
      const Pair d = read_pair(l, "dilation", {1, 1}, origin, context);
      p.kernel_h = k.h, p.kernel_w = k.w, p.stride_h = s.h, p.stride_w = s.w;
      p.pad_h = pad.h, p.pad_w = pad.w, p.dilation_h = d.h, p.dilation_w = d.w;
    }
    p.groups = dtsim::yaml::optional<int>(l, "groups", p.groups, origin, context);
    p.bias = dtsim::yaml::optional<bool>(l, "bias", p.bias, origin, context);
    p.ceil_mode = dtsim::yaml::optional<bool>(l, "ceil_mode", p.ceil_mode, origin, context);
    p.count_include_pad = dtsim::yaml::optional<bool>(l, "count_include_pad", p.count_include_pad, origin, context);
    p.lrn_size = dtsim::yaml::optional<int>(l, "size", p.lrn_size, origin, context);
    p.lrn_alpha = dtsim::yaml::optional<double>(l, "alpha", p.lrn_alpha, origin, context);
    p.lrn_beta = dtsim::yaml::optional<double>(l, "beta", p.lrn_beta, origin, context);
    p.lrn_k = dtsim::yaml::optional<double>(l, "k", p.lrn_k, origin, context);
    p.dropout_ratio = dtsim::yaml::optional<double>(l, "ratio", p.dropout_ratio, origin, context);
    p.bn_epsilon = dtsim::yaml::optional<double>(l, "epsilon", p.bn_epsilon, origin, context);

    try {
      model.add(layer_name, *op, p, std::move(inputs));
    } catch (const InputError& e) {
      // Model::add names the model and layer; add the file and line.
      throw InputError(fmt::format("{}: {}", origin.where(l), e.what()));
    }
    previous = layer_name;
  }
  return model;
}

Model load_model_yaml(const std::string& path, const ModelOptions& options) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw InputError(fmt::format("{}: no such model file", dtsim::printable(path)));
  std::ifstream in(path);
  if (!in) throw InputError(fmt::format("{}: cannot be read", path));
  std::stringstream text;
  text << in.rdbuf();
  return parse_model_yaml(text.str(), path, options);
}

namespace {

std::string pair_text(int h, int w) { return h == w ? fmt::format("{}", h) : fmt::format("[{}, {}]", h, w); }

std::string quoted(const std::string& s) {
  YAML::Emitter e;
  e << YAML::DoubleQuoted << s;
  return e.c_str();
}

}  // namespace

std::string model_to_yaml(const Model& model) {
  const LayerParams defaults;
  const auto& layers = model.layers();
  // The classifier: a fully connected layer feeding the loss; written as `out_channels: classes`.
  std::string classifier;
  std::int64_t classes = 0;
  for (const auto& l : layers)
    if (l.op == OpKind::SOFTMAX_LOSS && l.inputs.size() == 1) {
      const Layer& src = model.by_name(l.inputs[0]);
      if (src.op == OpKind::FULLY_CONNECTED) {
        classifier = src.name;
        classes = src.params.out_channels;
      }
    }
  std::string out = "# dtsim model (schema: docs/model-schema.md)\n";
  out += fmt::format("name: {}\n", quoted(model.name()));
  const Shape& in = model.input_shape();
  out += fmt::format("input: {{channels: {}, height: {}, width: {}}}\n", in.c, in.h, in.w);
  if (classes > 0) out += fmt::format("classes: {}\n", classes);
  out += "layers:\n";
  for (std::size_t i = 1; i < layers.size(); ++i) {
    const Layer& l = layers[i];
    const LayerParams& p = l.params;
    std::string line = fmt::format("  - {{name: {}, op: {}, inputs: [", quoted(l.name), op_name(l));
    for (std::size_t j = 0; j < l.inputs.size(); ++j) line += (j ? ", " : "") + quoted(l.inputs[j]);
    line += "]";
    if (l.row) {
      for (const auto& f : l.row->fields) {
        switch (f.type) {
          case RowField::Type::INT: line += fmt::format(", {}: {}", f.name, l.params.seq.*f.int_field); break;
          case RowField::Type::BOOL: line += fmt::format(", {}: {}", f.name, l.params.seq.*f.bool_field); break;
          case RowField::Type::RATIO: line += fmt::format(", {}: {}", f.name, l.params.seq.*f.double_field); break;
        }
      }
      out += line + "}\n";
      continue;
    }
    const bool windowed = l.op == OpKind::CONV2D || l.op == OpKind::MAX_POOL || l.op == OpKind::AVG_POOL;
    if (l.op == OpKind::CONV2D || l.op == OpKind::FULLY_CONNECTED) {
      if (l.name == classifier)
        line += ", out_channels: classes";
      else
        line += fmt::format(", out_channels: {}", p.out_channels);
    }
    if (windowed) {
      line += fmt::format(", kernel: {}, stride: {}", pair_text(p.kernel_h, p.kernel_w), pair_text(p.stride_h, p.stride_w));
      if (p.pad_h || p.pad_w) line += fmt::format(", padding: {}", pair_text(p.pad_h, p.pad_w));
      if (l.op != OpKind::AVG_POOL && (p.dilation_h != 1 || p.dilation_w != 1))
        line += fmt::format(", dilation: {}", pair_text(p.dilation_h, p.dilation_w));
    }
    if (l.op == OpKind::CONV2D && p.groups != 1) line += fmt::format(", groups: {}", p.groups);
    if (l.op == OpKind::CONV2D || l.op == OpKind::FULLY_CONNECTED) line += fmt::format(", bias: {}", p.bias);
    if ((l.op == OpKind::MAX_POOL || l.op == OpKind::AVG_POOL) && p.ceil_mode) line += ", ceil_mode: true";
    if (l.op == OpKind::AVG_POOL && !p.count_include_pad) line += ", count_include_pad: false";
    if (l.op == OpKind::BATCH_NORM && p.bn_epsilon != defaults.bn_epsilon)
      line += fmt::format(", epsilon: {}", p.bn_epsilon);
    if (l.op == OpKind::DROPOUT) line += fmt::format(", ratio: {}", p.dropout_ratio);
    if (l.op == OpKind::LRN)
      line += fmt::format(", size: {}, alpha: {}, beta: {}, k: {}", p.lrn_size, p.lrn_alpha, p.lrn_beta, p.lrn_k);
    out += line + "}\n";
  }
  return out;
}

}  // namespace dtsim::models
