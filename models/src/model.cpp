// Model graph: layers as vertices of a Boost.Graph DAG, with shape inference and the per-op cost
// formulas documented in models/README.md (multiply-add = 2 FLOPs, FP32 bytes, whole batch).
#include "models/model.hpp"

#include <fmt/format.h>

#include <array>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/topological_sort.hpp>
#include <cmath>
#include <iterator>
#include <unordered_map>

#include "common/errors.hpp"
#include "models/op_rows.hpp"

namespace dtsim::models {

namespace {

constexpr double BYTES_PER_ELEMENT = 4.0;  // FP32
// Largest tensor (elements) or parameter count accepted; far beyond any real network, small
// enough that every product below stays exact in int64 and double.
constexpr std::int64_t MAX_ELEMENTS = std::int64_t{1} << 46;

// FLOPs per element of the elementwise ops (derivations in models/README.md).
constexpr double RELU_FWD_FLOPS = 1, RELU_BWD_FLOPS = 1;  // max(x,0); dy masked by x>0
constexpr double TANH_FWD_FLOPS = 1, TANH_BWD_FLOPS = 3;  // one tanh; dy*(1-y*y)
constexpr double BN_FWD_FLOPS = 5;          // sum x, sum x^2 (FMA), y = a*x+b (FMA)
constexpr double BN_BWD_DATA_FLOPS = 5;     // dx = a*(dy - mean(dy) - xhat*mean(dy*xhat)), xhat recomputed
constexpr double BN_BWD_WEIGHTS_FLOPS = 3;  // dbeta = sum dy, dgamma = sum dy*xhat (FMA)
constexpr double DROPOUT_FWD_FLOPS = 2, DROPOUT_BWD_FLOPS = 1;  // compare with a random draw, scale
constexpr double SOFTMAX_FWD_FLOPS = 5;     // max, subtract, exp, sum, divide
constexpr double SOFTMAX_BWD_FLOPS = 2;     // (p - onehot) / n

using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS>;

std::int64_t checked_mul(std::int64_t a, std::int64_t b, const std::string& where) {
  if (a < 0 || b < 0) throw InputError(fmt::format("{}: negative size", where));
  if (a != 0 && b > MAX_ELEMENTS / a)
    throw InputError(fmt::format("{}: tensor or parameter count too large (limit {} elements)", where, MAX_ELEMENTS));
  return a * b;
}

std::int64_t checked_elements(const Shape& s, const std::string& where) {
  return checked_mul(checked_mul(checked_mul(s.n, s.c, where), s.h, where), s.w, where);
}

// Output extent of a sliding window (conv or pool), PyTorch's rule including ceil_mode.
std::int64_t window_out(std::int64_t in, int kernel, int stride, int pad, int dilation, bool ceil_mode) {
  const std::int64_t span = in + 2 * std::int64_t{pad} - std::int64_t{dilation} * (kernel - 1) - 1;
  if (span < 0) return 0;
  std::int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  // The last window must start inside the input or the left padding.
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

struct Context {
  const std::string& model;
  std::string layer;  // a copy: the caller moves its name into the new layer
  std::string where() const { return fmt::format("model '{}': layer '{}'", model, layer); }
  [[noreturn]] void fail(const std::string& message) const {
    throw InputError(fmt::format("{}: {}", where(), message));
  }
};

void check_window_params(const LayerParams& p, const Context& ctx) {
  if (p.kernel_h < 1 || p.kernel_w < 1) ctx.fail(fmt::format("kernel must be >= 1, got {}x{}", p.kernel_h, p.kernel_w));
  if (p.stride_h < 1 || p.stride_w < 1) ctx.fail(fmt::format("stride must be >= 1, got {}x{}", p.stride_h, p.stride_w));
  if (p.pad_h < 0 || p.pad_w < 0) ctx.fail(fmt::format("padding must be >= 0, got {}x{}", p.pad_h, p.pad_w));
  if (p.dilation_h < 1 || p.dilation_w < 1)
    ctx.fail(fmt::format("dilation must be >= 1, got {}x{}", p.dilation_h, p.dilation_w));
  constexpr int MAX_WINDOW = 1 << 16;  // keeps window arithmetic far from int overflow
  if (p.kernel_h > MAX_WINDOW || p.kernel_w > MAX_WINDOW || p.stride_h > MAX_WINDOW || p.stride_w > MAX_WINDOW ||
      p.pad_h > MAX_WINDOW || p.pad_w > MAX_WINDOW || p.dilation_h > MAX_WINDOW || p.dilation_w > MAX_WINDOW)
    ctx.fail(fmt::format("kernel, stride, padding and dilation must be <= {}", MAX_WINDOW));
}

Shape window_shape(const Shape& src, std::int64_t channels, const LayerParams& p, bool ceil_mode, const Context& ctx) {
  check_window_params(p, ctx);
  const std::int64_t ho = window_out(src.h, p.kernel_h, p.stride_h, p.pad_h, p.dilation_h, ceil_mode);
  const std::int64_t wo = window_out(src.w, p.kernel_w, p.stride_w, p.pad_w, p.dilation_w, ceil_mode);
  if (ho < 1 || wo < 1)
    ctx.fail(fmt::format("input {}x{} is too small for a {}x{} window (dilation {}x{}, padding {}x{}); use a larger "
                         "input",
                         src.h, src.w, p.kernel_h, p.kernel_w, p.dilation_h, p.dilation_w, p.pad_h, p.pad_w));
  return Shape{src.n, channels, ho, wo};
}

std::size_t expected_arity(OpKind op) {
  switch (op) {
    case OpKind::ADD:
    case OpKind::CONCAT:
      return 0;  // two or more
    default:
      return 1;
  }
}

// Shape inference and costs of one layer; fills layer.dst_shape and layer.costs.
void infer(Layer& layer, const Context& ctx) {
  const bool no_data_grad = !layer.needs_data_grad;
  const LayerParams& p = layer.params;
  const auto& srcs = layer.src_shapes;
  const Shape& src = srcs.front();
  const double src_el = static_cast<double>(src.elements());
  LayerCosts& c = layer.costs;
  Shape dst = src;
  // Traffic of the backward pass for a parameter-free elementwise-like op: read dy (and src or dst), write dx.
  double bwd_elementwise_bytes = 0;
  switch (layer.op) {
    case OpKind::INPUT:
      ctx.fail("an input layer can only be the model's first layer");
    case OpKind::ROW:
      // The row's own shape and cost rule sets everything (models/src/op_rows.cpp).
      layer.row->infer(layer, ctx.where());
      if (no_data_grad && layer.costs.params == 0) {
        // Nothing upstream is trainable: no gradient flows through this layer at all.
        layer.costs.bwd_data_flops = layer.costs.bwd_bytes = layer.row_bytes.bwd_data = 0;
      }
      return;
    case OpKind::CONV2D: {
      if (p.out_channels < 1) ctx.fail(fmt::format("out_channels must be >= 1, got {}", p.out_channels));
      if (p.groups < 1) ctx.fail(fmt::format("groups must be >= 1, got {}", p.groups));
      if (src.c % p.groups != 0 || p.out_channels % p.groups != 0)
        ctx.fail(fmt::format("groups {} must divide the input channels {} and out_channels {}", p.groups, src.c,
                             p.out_channels));
      dst = window_shape(src, p.out_channels, p, false, ctx);
      const std::int64_t per_out =
          checked_mul(checked_mul(src.c / p.groups, p.kernel_h, ctx.where()), p.kernel_w, ctx.where());
      c.params = checked_mul(p.out_channels, per_out, ctx.where()) + (p.bias ? p.out_channels : 0);
      const double dst_el = static_cast<double>(checked_elements(dst, ctx.where()));
      const double macs = dst_el * static_cast<double>(per_out);
      const double bias_flops = p.bias ? dst_el : 0.0;
      c.fwd_flops = 2 * macs + bias_flops;
      c.bwd_data_flops = no_data_grad ? 0.0 : 2 * macs;
      c.bwd_weights_flops = 2 * macs + bias_flops;
      break;
    }
    case OpKind::FULLY_CONNECTED: {
      if (p.out_channels < 1) ctx.fail(fmt::format("out_channels must be >= 1, got {}", p.out_channels));
      const std::int64_t in_features = src.per_sample();
      dst = Shape{src.n, p.out_channels, 1, 1};
      c.params = checked_mul(in_features, p.out_channels, ctx.where()) + (p.bias ? p.out_channels : 0);
      const double macs = static_cast<double>(src.n) * static_cast<double>(in_features) * p.out_channels;
      const double bias_flops = p.bias ? static_cast<double>(src.n) * p.out_channels : 0.0;
      c.fwd_flops = 2 * macs + bias_flops;
      c.bwd_data_flops = no_data_grad ? 0.0 : 2 * macs;
      c.bwd_weights_flops = 2 * macs + bias_flops;
      break;
    }
    case OpKind::BATCH_NORM:
      if (!(p.bn_epsilon > 0)) ctx.fail(fmt::format("bn_epsilon must be > 0, got {}", p.bn_epsilon));
      c.params = 2 * src.c;
      c.fwd_flops = BN_FWD_FLOPS * src_el;
      c.bwd_data_flops = no_data_grad ? 0.0 : BN_BWD_DATA_FLOPS * src_el;
      c.bwd_weights_flops = BN_BWD_WEIGHTS_FLOPS * src_el;
      break;
    case OpKind::RELU:
      c.fwd_flops = RELU_FWD_FLOPS * src_el;
      c.bwd_data_flops = RELU_BWD_FLOPS * src_el;
      bwd_elementwise_bytes = 3 * src_el;
      break;
    case OpKind::TANH:
      c.fwd_flops = TANH_FWD_FLOPS * src_el;
      c.bwd_data_flops = TANH_BWD_FLOPS * src_el;
      bwd_elementwise_bytes = 3 * src_el;
      break;
    case OpKind::DROPOUT:
      if (!(p.dropout_ratio >= 0 && p.dropout_ratio < 1))
        ctx.fail(fmt::format("dropout_ratio must be in [0, 1), got {}", p.dropout_ratio));
      c.fwd_flops = DROPOUT_FWD_FLOPS * src_el;
      c.bwd_data_flops = DROPOUT_BWD_FLOPS * src_el;
      bwd_elementwise_bytes = 3 * src_el;
      break;
    case OpKind::LRN: {
      if (p.lrn_size < 1) ctx.fail(fmt::format("lrn_size must be >= 1, got {}", p.lrn_size));
      if (!(p.lrn_k > 0) || !(p.lrn_alpha >= 0) || !(p.lrn_beta >= 0))
        ctx.fail("lrn_k must be > 0 and lrn_alpha, lrn_beta >= 0");
      // Across channels: sum of n squares (n FMAs), scale = (k + alpha/n*sum)^beta (FMA + pow), divide.
      const double n = p.lrn_size;
      c.fwd_flops = (2 * n + 4) * src_el;
      c.bwd_data_flops = (2 * n + 6) * src_el;
      bwd_elementwise_bytes = 4 * src_el;
      break;
    }
    case OpKind::MAX_POOL:
    case OpKind::AVG_POOL: {
      dst = window_shape(src, src.c, p, p.ceil_mode, ctx);
      const double dst_el = static_cast<double>(dst.elements());
      const double window = static_cast<double>(p.kernel_h) * p.kernel_w;
      c.fwd_flops = window * dst_el;  // one compare (max) or add (avg) per window element
      c.bwd_data_flops = layer.op == OpKind::MAX_POOL ? dst_el : window * dst_el;
      bwd_elementwise_bytes = 2 * src_el + dst_el;
      break;
    }
    case OpKind::GLOBAL_AVG_POOL:
      dst = Shape{src.n, src.c, 1, 1};
      c.fwd_flops = src_el;
      c.bwd_data_flops = src_el;
      bwd_elementwise_bytes = src_el + static_cast<double>(dst.elements());
      break;
    case OpKind::FLATTEN:
      dst = Shape{src.n, src.per_sample(), 1, 1};
      bwd_elementwise_bytes = 2 * src_el;
      break;
    case OpKind::SOFTMAX_LOSS:
      c.fwd_flops = SOFTMAX_FWD_FLOPS * src_el;
      c.bwd_data_flops = SOFTMAX_BWD_FLOPS * src_el;
      bwd_elementwise_bytes = 2 * src_el;
      break;
    case OpKind::ADD: {
      for (std::size_t i = 1; i < srcs.size(); ++i)
        if (!(srcs[i] == src))
          ctx.fail(fmt::format("add needs inputs of one shape, but input '{}' is {} and input '{}' is {}",
                               layer.inputs[0], to_string(src), layer.inputs[i], to_string(srcs[i])));
      c.fwd_flops = static_cast<double>(srcs.size() - 1) * src_el;
      // The gradient passes through unchanged to every input: no arithmetic.
      bwd_elementwise_bytes = static_cast<double>(srcs.size() + 1) * src_el;
      break;
    }
    case OpKind::CONCAT: {
      std::int64_t channels = 0;
      double total = 0;
      for (std::size_t i = 0; i < srcs.size(); ++i) {
        if (srcs[i].n != src.n || srcs[i].h != src.h || srcs[i].w != src.w)
          ctx.fail(fmt::format("concat (along channels) needs inputs of one batch, height and width, but input '{}' "
                               "is {} and input '{}' is {}",
                               layer.inputs[0], to_string(src), layer.inputs[i], to_string(srcs[i])));
        channels += srcs[i].c;
        if (channels > MAX_ELEMENTS) ctx.fail("too many channels");
        total += static_cast<double>(srcs[i].elements());
      }
      dst = Shape{src.n, channels, src.h, src.w};
      bwd_elementwise_bytes = 2 * total;
      break;
    }
  }
  checked_elements(dst, ctx.where());
  layer.dst_shape = dst;

  double src_total = 0;
  for (const auto& s : srcs) src_total += static_cast<double>(s.elements());
  const double dst_el = static_cast<double>(dst.elements());
  const double w = static_cast<double>(c.params);
  c.activation_bytes = BYTES_PER_ELEMENT * dst_el;
  c.weight_bytes = BYTES_PER_ELEMENT * w;
  c.fwd_bytes = BYTES_PER_ELEMENT * (src_total + w + dst_el);
  if (c.params > 0) {
    // bwd-data reads dy and weights, writes dx; bwd-weights reads src and dy, writes dw.
    const double data = no_data_grad ? 0.0 : dst_el + w + src_total;
    c.bwd_bytes = BYTES_PER_ELEMENT * (data + src_total + dst_el + w);
  } else {
    c.bwd_bytes = BYTES_PER_ELEMENT * bwd_elementwise_bytes;
  }
  if (no_data_grad && c.params == 0) {
    // Nothing upstream is trainable: no gradient flows through this layer at all.
    c.bwd_data_flops = 0;
    c.bwd_bytes = 0;
  }
}

}  // namespace

std::string_view to_string(OpKind op) {
  switch (op) {
    case OpKind::INPUT: return "input";
    case OpKind::CONV2D: return "conv2d";
    case OpKind::BATCH_NORM: return "batch_norm";
    case OpKind::RELU: return "relu";
    case OpKind::TANH: return "tanh";
    case OpKind::LRN: return "lrn";
    case OpKind::MAX_POOL: return "max_pool";
    case OpKind::AVG_POOL: return "avg_pool";
    case OpKind::GLOBAL_AVG_POOL: return "global_avg_pool";
    case OpKind::FULLY_CONNECTED: return "fully_connected";
    case OpKind::ADD: return "add";
    case OpKind::CONCAT: return "concat";
    case OpKind::DROPOUT: return "dropout";
    case OpKind::FLATTEN: return "flatten";
    case OpKind::SOFTMAX_LOSS: return "softmax_loss";
    case OpKind::ROW: return "row";
  }
  return "unknown";
}

namespace {
constexpr std::array ALL_OPS = {OpKind::INPUT,    OpKind::CONV2D,   OpKind::BATCH_NORM,      OpKind::RELU,
                                OpKind::TANH,     OpKind::LRN,      OpKind::MAX_POOL,        OpKind::AVG_POOL,
                                OpKind::GLOBAL_AVG_POOL, OpKind::FULLY_CONNECTED, OpKind::ADD, OpKind::CONCAT,
                                OpKind::DROPOUT,  OpKind::FLATTEN,  OpKind::SOFTMAX_LOSS};
}  // namespace

std::optional<OpKind> op_kind_by_name_or_null(std::string_view name) {
  for (OpKind op : ALL_OPS)
    if (to_string(op) == name) return op;
  return std::nullopt;
}

std::vector<std::string> op_kind_names() {
  std::vector<std::string> names;
  for (OpKind op : ALL_OPS) names.emplace_back(to_string(op));
  return names;
}

std::string_view op_name(const Layer& layer) { return layer.row ? layer.row->name : to_string(layer.op); }

std::string to_string(const Shape& s) { return fmt::format("{}x{}x{}x{}", s.n, s.c, s.h, s.w); }

LayerCosts& LayerCosts::operator+=(const LayerCosts& o) {
  params += o.params;
  fwd_flops += o.fwd_flops;
  bwd_data_flops += o.bwd_data_flops;
  bwd_weights_flops += o.bwd_weights_flops;
  fwd_bytes += o.fwd_bytes;
  bwd_bytes += o.bwd_bytes;
  activation_bytes += o.activation_bytes;
  weight_bytes += o.weight_bytes;
  return *this;
}

struct Model::Impl {
  std::string name;
  Shape input;
  std::vector<Layer> layers;
  std::unordered_map<std::string, std::size_t> index;
  Graph graph;  // vertex i = layers[i]; edge producer -> consumer
};

Model::Model(std::string name, Shape input) : impl_(std::make_unique<Impl>()) {
  if (name.empty()) throw InputError("model name must not be empty");
  if (input.n < 1 || input.c < 1 || input.h < 1 || input.w < 1)
    throw InputError(fmt::format("model '{}': batch, channels, height and width must all be >= 1, got {}", name,
                                 to_string(input)));
  checked_elements(input, fmt::format("model '{}': input", name));
  impl_->name = std::move(name);
  impl_->input = input;
  Layer data;
  data.name = "data";
  data.op = OpKind::INPUT;
  data.dst_shape = input;
  data.costs.activation_bytes = BYTES_PER_ELEMENT * static_cast<double>(input.elements());
  impl_->layers.push_back(std::move(data));
  impl_->index.emplace("data", 0);
  boost::add_vertex(impl_->graph);
}

Model::~Model() = default;
Model::Model(const Model& o) : impl_(std::make_unique<Impl>(*o.impl_)) {}
Model& Model::operator=(const Model& o) {
  if (this != &o) impl_ = std::make_unique<Impl>(*o.impl_);
  return *this;
}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;

const Layer& Model::add(std::string name, OpKind op, const LayerParams& params, std::vector<std::string> inputs) {
  if (op == OpKind::ROW)
    throw InputError(fmt::format("model '{}': layer '{}': a row op is added by its row name", impl_->name, name));
  return add_layer(std::move(name), op, nullptr, params, std::move(inputs));
}

const Layer& Model::add_row(std::string name, std::string_view row_name, const LayerParams& params,
                            std::vector<std::string> inputs) {
  const OpRow* row = op_row_by_name_or_null(row_name);
  if (!row) throw InputError(fmt::format("model '{}': layer '{}': unknown op '{}'", impl_->name, name, row_name));
  return add_layer(std::move(name), OpKind::ROW, row, params, std::move(inputs));
}

bool Model::has_rows() const {
  for (const auto& l : impl_->layers)
    if (l.row) return true;
  return false;
}

const Layer& Model::add_layer(std::string name, OpKind op, const OpRow* row, const LayerParams& params,
                              std::vector<std::string> inputs) {
  const Context ctx{impl_->name, name};
  if (name.empty()) throw InputError(fmt::format("model '{}': a layer has an empty name", impl_->name));
  if (impl_->index.count(name)) ctx.fail("duplicate layer name");
  const std::string_view op_text = row ? row->name : to_string(op);
  if (inputs.empty()) ctx.fail(fmt::format("{} needs at least one input", op_text));
  if (row) {
    if (inputs.size() < row->min_inputs || inputs.size() > row->max_inputs)
      ctx.fail(row->min_inputs == row->max_inputs
                   ? fmt::format("{} takes exactly {} input(s), got {}", op_text, row->min_inputs, inputs.size())
                   : fmt::format("{} takes {} to {} inputs, got {}", op_text, row->min_inputs, row->max_inputs,
                                 inputs.size()));
  } else {
    const std::size_t arity = expected_arity(op);
    if (arity == 1 && inputs.size() != 1)
      ctx.fail(fmt::format("{} takes exactly one input, got {}", op_text, inputs.size()));
    if (arity == 0 && inputs.size() < 2)
      ctx.fail(fmt::format("{} takes two or more inputs, got {}", op_text, inputs.size()));
  }

  Layer layer;
  layer.name = std::move(name);
  layer.op = op;
  layer.row = row;
  layer.params = params;
  std::vector<std::size_t> producers;
  bool upstream_trainable = false;
  for (const auto& in : inputs) {
    const auto it = impl_->index.find(in);
    if (it == impl_->index.end()) ctx.fail(fmt::format("unknown input '{}' (inputs must be defined earlier)", in));
    producers.push_back(it->second);
    const Layer& producer = impl_->layers[it->second];
    layer.src_shapes.push_back(producer.dst_shape);
    upstream_trainable = upstream_trainable || producer.costs.params > 0 || producer.needs_data_grad;
  }
  layer.inputs = std::move(inputs);
  layer.needs_data_grad = upstream_trainable;
  infer(layer, ctx);

  const std::size_t index = impl_->layers.size();
  const auto vertex = boost::add_vertex(impl_->graph);
  for (std::size_t p : producers) boost::add_edge(p, vertex, impl_->graph);
  impl_->index.emplace(layer.name, index);
  impl_->layers.push_back(std::move(layer));
  return impl_->layers.back();
}

const std::string& Model::name() const { return impl_->name; }
std::int64_t Model::batch() const { return impl_->input.n; }
const Shape& Model::input_shape() const { return impl_->input; }
const std::vector<Layer>& Model::layers() const { return impl_->layers; }

const Layer* Model::by_name_or_null(std::string_view name) const {
  const auto it = impl_->index.find(std::string(name));
  return it == impl_->index.end() ? nullptr : &impl_->layers[it->second];
}

const Layer& Model::by_name(std::string_view name) const {
  const Layer* layer = by_name_or_null(name);
  if (!layer) throw InputError(fmt::format("model '{}' has no layer '{}'", impl_->name, name));
  return *layer;
}

std::vector<std::size_t> Model::predecessors(std::size_t index) const {
  if (index >= impl_->layers.size()) throw Failure(fmt::format("layer index {} out of range", index));
  std::vector<std::size_t> out;
  for (auto [it, end] = boost::in_edges(index, impl_->graph); it != end; ++it)
    out.push_back(boost::source(*it, impl_->graph));
  return out;
}

std::vector<std::size_t> Model::successors(std::size_t index) const {
  if (index >= impl_->layers.size()) throw Failure(fmt::format("layer index {} out of range", index));
  std::vector<std::size_t> out;
  for (auto [it, end] = boost::out_edges(index, impl_->graph); it != end; ++it)
    out.push_back(boost::target(*it, impl_->graph));
  return out;
}

std::vector<std::size_t> Model::topological_order() const {
  std::vector<std::size_t> reversed;
  boost::topological_sort(impl_->graph, std::back_inserter(reversed));
  return {reversed.rbegin(), reversed.rend()};
}

LayerCosts Model::totals() const {
  LayerCosts sum;
  for (const auto& l : impl_->layers)
    if (l.op != OpKind::INPUT) sum += l.costs;
  return sum;
}

}  // namespace dtsim::models
