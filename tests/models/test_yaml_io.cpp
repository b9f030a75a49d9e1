// Tests of models/yaml_io.hpp: the zoo round-trips through YAML exactly, the shipped example loads, and
// malformed files, unknown ops/keys and shape mismatches give one-line errors naming file, line and layer.
#include <catch2/catch.hpp>

#include "common/errors.hpp"
#include "models/yaml_io.hpp"

using namespace dtsim::models;

namespace {
std::string error_of(const std::string& text) {
  try {
    parse_model_yaml(text, "m.yaml", ModelOptions{});
  } catch (const dtsim::InputError& e) {
    return e.what();
  }
  return "";
}
const std::string HEADER = "name: t\ninput: {channels: 3, height: 8, width: 8}\nlayers:\n";
}  // namespace

TEST_CASE("models::YamlIo: every zoo model round-trips layer for layer", "[models]") {
  for (const auto& name : zoo_names()) {
    INFO(name);
    ModelOptions o;
    o.batch = 3;
    const Model m = build_zoo_model(name, o);
    const std::string text = model_to_yaml(m);
    const Model back = parse_model_yaml(text, name + ".yaml", o);
    REQUIRE(back.layers().size() == m.layers().size());
    CHECK(back.name() == m.name());
    for (std::size_t i = 0; i < m.layers().size(); ++i) {
      const Layer& a = m.layers()[i];
      const Layer& b = back.layers()[i];
      INFO(a.name);
      CHECK(a.name == b.name);
      CHECK(a.op == b.op);
      CHECK(a.inputs == b.inputs);
      CHECK(a.params == b.params);
      CHECK(a.dst_shape == b.dst_shape);
      CHECK(a.costs.params == b.costs.params);
      CHECK(a.costs.fwd_flops == b.costs.fwd_flops);
    }
    // Exporting again gives the same text.
    CHECK(model_to_yaml(back) == text);
  }
}

TEST_CASE("models::YamlIo: every op and non-default field round-trips", "[models]") {
  Model m("all ops", Shape{2, 4, 17, 15});
  LayerParams conv;
  conv.out_channels = 8, conv.kernel_h = 3, conv.kernel_w = 1, conv.stride_h = 2, conv.pad_w = 1;
  conv.dilation_h = 2, conv.groups = 2, conv.bias = false;
  m.add("conv", OpKind::CONV2D, conv, {"data"});
  LayerParams bn;
  bn.bn_epsilon = 0.001;
  m.add("bn", OpKind::BATCH_NORM, bn, {"conv"});
  LayerParams lrn;
  lrn.lrn_size = 3, lrn.lrn_alpha = 2e-5, lrn.lrn_beta = 0.7, lrn.lrn_k = 2;
  m.add("lrn", OpKind::LRN, lrn, {"bn"});
  m.add("tanh", OpKind::TANH, {}, {"lrn"});
  LayerParams mp;
  mp.kernel_h = mp.kernel_w = 3, mp.stride_h = mp.stride_w = 2, mp.ceil_mode = true, mp.dilation_w = 2;
  m.add("maxp", OpKind::MAX_POOL, mp, {"tanh"});
  LayerParams ap;
  ap.kernel_h = ap.kernel_w = 3, ap.pad_h = ap.pad_w = 1, ap.count_include_pad = false;
  m.add("avgp", OpKind::AVG_POOL, ap, {"maxp"});
  m.add("cat", OpKind::CONCAT, {}, {"maxp", "avgp", "maxp"});
  m.add("sum", OpKind::ADD, {}, {"maxp", "avgp"});
  m.add("gap", OpKind::GLOBAL_AVG_POOL, {}, {"cat"});
  LayerParams drop;
  drop.dropout_ratio = 0.25;
  m.add("drop", OpKind::DROPOUT, drop, {"gap"});
  m.add("flat", OpKind::FLATTEN, {}, {"drop"});
  LayerParams fc;
  fc.out_channels = 5, fc.bias = false;
  m.add("fc", OpKind::FULLY_CONNECTED, fc, {"flat"});
  m.add("loss", OpKind::SOFTMAX_LOSS, {}, {"fc"});
  ModelOptions o;
  o.batch = 2;
  const Model back = parse_model_yaml(model_to_yaml(m), "all.yaml", o);
  REQUIRE(back.layers().size() == m.layers().size());
  for (std::size_t i = 0; i < m.layers().size(); ++i) {
    INFO(m.layers()[i].name);
    CHECK(back.layers()[i].params == m.layers()[i].params);
    CHECK(back.layers()[i].inputs == m.layers()[i].inputs);
    CHECK(back.layers()[i].dst_shape == m.layers()[i].dst_shape);
  }
  CHECK(back.name() == "all ops");
}

TEST_CASE("models::YamlIo: exported classifier follows --classes", "[models]") {
  const std::string text = model_to_yaml(build_zoo_model("resnet18", ModelOptions{}));
  CHECK(text.find("out_channels: classes") != std::string::npos);
  ModelOptions o;
  o.classes = 10;
  CHECK(parse_model_yaml(text, "r.yaml", o).totals().params == 11'689'512 - 990 * 513);
}

TEST_CASE("models::YamlIo: the shipped example model loads", "[models]") {
  ModelOptions o;
  o.batch = 64;
  const Model m = load_model(std::string(DTSIM_SOURCE_DIR) + "/models/examples/small_cnn.yaml", o);
  CHECK(m.name() == "small_cnn");
  CHECK(m.by_name("mixed").dst_shape == Shape{64, 64, 16, 16});
  CHECK(m.by_name("pool2").dst_shape == Shape{64, 64, 9, 9});  // ceil_mode keeps the partial window
  CHECK(m.layers().back().dst_shape == Shape{64, 10, 1, 1});
  // defaults: inputs = the layer before; pool stride = kernel
  CHECK(m.by_name("bn1").inputs == std::vector<std::string>{"conv1"});
  CHECK(m.by_name("pool1").params.stride_h == 2);
}

TEST_CASE("models::YamlIo: malformed YAML names the file and line", "[models]") {
  const auto msg = error_of("name: t\ninput: {channels: 3\nlayers: [\n");
  CHECK(msg.find("m.yaml:") == 0);
  CHECK(msg.find("malformed YAML") != std::string::npos);
}

TEST_CASE("models::YamlIo: unknown op names the line, layer and field", "[models]") {
  const auto msg = error_of(HEADER + "  - {name: c, op: conv3d, out_channels: 4, kernel: 3}\n");
  CHECK(msg.find("m.yaml:4") == 0);
  CHECK(msg.find("layer 'c'") != std::string::npos);
  CHECK(msg.find("unknown op 'conv3d'") != std::string::npos);
  CHECK(msg.find('\n') == std::string::npos);
}

TEST_CASE("models::YamlIo: unknown and misplaced keys are errors", "[models]") {
  const auto typo = error_of(HEADER + "  - {name: c, op: conv2d, out_channels: 4, kernal: 3}\n");
  CHECK(typo.find("m.yaml:4") == 0);
  CHECK(typo.find("layer 'c'") != std::string::npos);
  CHECK(typo.find("unknown key 'kernal'") != std::string::npos);
  // a field of another op
  CHECK(error_of(HEADER + "  - {name: r, op: relu, kernel: 3}\n").find("unknown key 'kernel'") != std::string::npos);
  CHECK(error_of("name: t\nsize: 3\ninput: {channels: 3, height: 8, width: 8}\nlayers: []\n")
            .find("unknown key 'size'") != std::string::npos);
}

TEST_CASE("models::YamlIo: shape mismatch in add names the file, line and layer", "[models]") {
  const auto msg = error_of(HEADER +
                            "  - {name: a, op: conv2d, inputs: [data], out_channels: 4, kernel: 3}\n"
                            "  - {name: b, op: conv2d, inputs: [data], out_channels: 4, kernel: 1}\n"
                            "  - {name: s, op: add, inputs: [a, b]}\n");
  CHECK(msg.find("m.yaml:6") == 0);
  CHECK(msg.find("layer 's'") != std::string::npos);
  CHECK(msg.find("add needs inputs of one shape") != std::string::npos);
}

TEST_CASE("models::YamlIo: bad values and missing fields are errors", "[models]") {
  CHECK(error_of(HEADER + "  - {name: c, op: conv2d, kernel: 3}\n").find("missing required field 'out_channels'") !=
        std::string::npos);
  CHECK(error_of(HEADER + "  - {name: c, op: conv2d, out_channels: four, kernel: 3}\n").find("out_channels") !=
        std::string::npos);
  CHECK(error_of(HEADER + "  - {name: c, op: conv2d, out_channels: 4, kernel: [1, 2, 3]}\n").find("'kernel'") !=
        std::string::npos);
  CHECK(error_of(HEADER + "  - {name: c, op: conv2d, out_channels: 4, kernel: 9}\n").find("too small") !=
        std::string::npos);
  CHECK(error_of(HEADER + "  - {name: c, op: relu, inputs: [x]}\n").find("unknown input 'x'") != std::string::npos);
  CHECK(error_of(HEADER + "  - {name: f, op: fully_connected, out_channels: classes}\n").find("no 'classes'") !=
        std::string::npos);
  CHECK(error_of("name: t\ninput: {channels: 0, height: 8, width: 8}\nlayers: []\n").find("'channels' must be >= 1") !=
        std::string::npos);
  CHECK(error_of("name: t\ninput: {channels: 3, height: 8, width: 8}\nlayers: []\n").find("non-empty") !=
        std::string::npos);
  CHECK(error_of("").find("empty model file") != std::string::npos);
  CHECK(error_of("- just\n- a list\n").find("expected a map") != std::string::npos);
}

TEST_CASE("models::YamlIo: an empty name and duplicate keys are errors with their line", "[models]") {
  CHECK(error_of("name: \"\"\ninput: {channels: 3, height: 8, width: 8}\nlayers:\n  - {name: r, op: relu}\n") ==
        "m.yaml:1: model: field 'name' must not be empty");
  CHECK(error_of(HEADER + "  - {name: r, op: relu}\n" + "name: t2\n") == "m.yaml:5: duplicate key 'name' (first at line 1)");
  CHECK(error_of(HEADER + "  - {name: r, op: relu, name: s}\n").find("m.yaml:4: duplicate key 'name'") == 0);
}
