// The op-driver table (one row per layer kind with primitives) and what every driver shares: the plan
// builder, layouts, and binding memory to a plan.
#include <fmt/format.h>

#include <algorithm>

#include "calibrate/ops/driver_util.hpp"
#include "common/errors.hpp"
#include "models/op_rows.hpp"

namespace dtsim::ops {
namespace detail {
namespace {

using models::OpKind;

struct Driver {
  OpKind op;
  void (*build)(PlanBuilder&);
};

// Adding an op: its file under calibrate/ops/, one row here, one test in tests/calibrate/test_ops.cpp.
constexpr Driver DRIVERS[] = {
    {OpKind::CONV2D, build_conv},
    {OpKind::FULLY_CONNECTED, build_inner_product},
    {OpKind::BATCH_NORM, build_batch_norm},
    {OpKind::RELU, build_eltwise},
    {OpKind::TANH, build_eltwise},
    {OpKind::MAX_POOL, build_pooling},
    {OpKind::AVG_POOL, build_pooling},
    {OpKind::GLOBAL_AVG_POOL, build_pooling},
    {OpKind::LRN, build_lrn},
    {OpKind::SOFTMAX_LOSS, build_softmax_loss},
    {OpKind::ADD, build_add},
    {OpKind::CONCAT, build_concat},
    {OpKind::DROPOUT, build_dropout},
};

// Row ops by row name (models/op_rows.hpp); `supports` narrows a row to the layers its driver builds.
struct RowDriver {
  std::string_view row;
  void (*build)(PlanBuilder&);
  bool (*supports)(const models::Layer&);
};

bool always(const models::Layer&) { return true; }

const RowDriver ROW_DRIVERS[] = {
    {"linear", build_linear, always},
    {"lm_head", build_lm_head, always},
    {"layer_norm", build_layer_norm, always},
    {"attention", build_attention, supports_attention},
    {"gelu", build_gelu, always},
    {"swiglu", build_swiglu, always},
    {"residual_add", build_residual_add, always},
    {"hidden_dropout", build_hidden_dropout, always},
};

const RowDriver* row_driver_or_null(const models::Layer& layer) {
  if (!layer.row) return nullptr;
  for (const auto& d : ROW_DRIVERS)
    if (d.row == layer.row->name) return &d;
  return nullptr;
}

const Driver* driver_or_null(OpKind op) {
  const auto* it = std::find_if(std::begin(DRIVERS), std::end(DRIVERS), [op](const Driver& d) { return d.op == op; });
  return it == std::end(DRIVERS) ? nullptr : it;
}

}  // namespace

std::size_t PlanBuilder::tensor(Role role, const memory::desc& desc, int index) {
  auto& ts = plan_.tensors;
  for (std::size_t i = 0; i < ts.size(); ++i)
    if (ts[i].view_of < 0 && ts[i].role == role && ts[i].index == index && ts[i].desc == desc) return i;
  ts.push_back(Tensor{role, index, desc, -1, 0});
  return ts.size() - 1;
}

std::size_t PlanBuilder::view(std::size_t base, const memory::desc& desc, std::size_t offset_B, Role role, int index) {
  plan_.tensors.push_back(Tensor{role, index, desc, static_cast<int>(base), offset_B});
  return plan_.tensors.size() - 1;
}

void PlanBuilder::step(Stage stage, dnnl::primitive primitive, Args args, std::string impl) {
  plan_.stages[stage].push_back(Step{std::move(primitive), std::move(args), std::move(impl)});
}

memory::dims dims4(const models::Shape& s) { return {s.n, s.c, s.h, s.w}; }

memory::desc tokens_md(const models::Shape& s) {
  return memory::desc({s.n * s.h, s.c}, memory::data_type::f32, memory::format_tag::ab);
}

memory::dim channel_block() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx512_core:
    case dnnl::cpu_isa::avx512_core_vnni:
    case dnnl::cpu_isa::avx512_core_bf16:
    case dnnl::cpu_isa::avx512_core_amx: return 16;
    default: return 8;
  }
}

memory::desc act_md(const models::Shape& s, Layout layout) {
  using tag = memory::format_tag;
  if (layout == Layout::NHWC) return memory::desc(dims4(s), memory::data_type::f32, tag::nhwc);
  const memory::dim block = channel_block();
  const tag t = s.c % block != 0 ? tag::nchw : block == 16 ? tag::nChw16c : tag::nChw8c;
  return memory::desc(dims4(s), memory::data_type::f32, t);
}

memory::dim pad_r(memory::dim in, memory::dim out, memory::dim kernel, memory::dim stride, memory::dim dilation,
                  memory::dim pad_l) {
  return (out - 1) * stride + (kernel - 1) * dilation + 1 - in - pad_l;
}

void share_workspace(PlanBuilder& b, const memory::desc& workspace, Args& fwd, Args& bwd) {
  if (workspace.get_size() == 0) return;
  const std::size_t ws = b.tensor(Role::WORKSPACE, workspace);
  fwd.emplace_back(DNNL_ARG_WORKSPACE, ws);
  bwd.emplace_back(DNNL_ARG_WORKSPACE, ws);
}

}  // namespace detail

OpPlan build_op(const dnnl::engine& engine, const Problem& problem) {
  if (problem.layer->row) {
    const auto* row = detail::row_driver_or_null(*problem.layer);
    if (row == nullptr)
      throw InputError(fmt::format("layer '{}': row op '{}' has no oneDNN driver (drivers: {})", problem.layer->name,
                                   models::op_name(*problem.layer), fmt::join(driver_names(), ", ")));
    detail::PlanBuilder b(engine, problem);
    row->build(b);
    return b.take();
  }
  const auto* driver = detail::driver_or_null(problem.layer->op);
  if (driver == nullptr)
    throw InputError(fmt::format("layer '{}': op '{}' has no oneDNN driver (drivers: {})", problem.layer->name,
                                 models::to_string(problem.layer->op), fmt::join(driver_names(), ", ")));
  detail::PlanBuilder b(engine, problem);
  driver->build(b);
  return b.take();
}

bool has_driver(models::OpKind op) { return detail::driver_or_null(op) != nullptr; }

bool has_driver(const models::Layer& layer) {
  if (!layer.row) return has_driver(layer.op);
  const auto* row = detail::row_driver_or_null(layer);
  return row != nullptr && row->supports(layer);
}

std::vector<std::string> driver_names() {
  std::vector<std::string> out;
  for (const auto& d : detail::DRIVERS) out.emplace_back(models::to_string(d.op));
  for (const auto& d : detail::ROW_DRIVERS) out.emplace_back(d.row);
  return out;
}

void fill_causal_mask(const OpPlan& plan, std::vector<dnnl::memory>& memories) {
  // Large and finite: exp() of it is 0 and no inf - inf arises (a fully masked row cannot occur).
  constexpr float MASKED = -1e9f;
  const int i = find(plan, Role::ATTN_MASK);
  if (i < 0) return;
  auto& m = memories[static_cast<std::size_t>(i)];
  const auto dims = m.get_desc().dims();
  const auto s = dims.back();
  auto* p = static_cast<float*>(m.get_data_handle());
  for (dnnl::memory::dim r = 0; r < s; ++r)
    for (dnnl::memory::dim c = 0; c < s; ++c) p[r * s + c] = c <= r ? 0.f : MASKED;
}

std::vector<dnnl::memory> bind(const dnnl::engine& engine, const OpPlan& plan,
                               const std::function<dnnl::memory(const Tensor&)>& make) {
  std::vector<dnnl::memory> out(plan.tensors.size());
  for (std::size_t i = 0; i < plan.tensors.size(); ++i)
    if (plan.tensors[i].view_of < 0) out[i] = make(plan.tensors[i]);
  for (std::size_t i = 0; i < plan.tensors.size(); ++i) {
    const Tensor& t = plan.tensors[i];
    if (t.view_of < 0) continue;
    auto* base = static_cast<char*>(out[static_cast<std::size_t>(t.view_of)].get_data_handle());
    out[i] = dnnl::memory(t.desc, engine, base + t.view_offset_B);
  }
  return out;
}

std::unordered_map<int, dnnl::memory> args_of(const Step& step, const std::vector<dnnl::memory>& memories) {
  std::unordered_map<int, dnnl::memory> args;
  for (const auto& [arg, tensor] : step.args) args[arg] = memories[tensor];
  return args;
}

int find(const OpPlan& plan, Role role, int index) {
  for (std::size_t i = 0; i < plan.tensors.size(); ++i)
    if (plan.tensors[i].role == role && plan.tensors[i].index == index) return static_cast<int>(i);
  return -1;
}

Role param_role_of(Role role) {
  switch (role) {
    case Role::DIFF_WEIGHTS: return Role::WEIGHTS;
    case Role::DIFF_BIAS: return Role::BIAS;
    case Role::DIFF_SCALE: return Role::SCALE;
    case Role::DIFF_SHIFT: return Role::SHIFT;
    default: return role;
  }
}

}  // namespace dtsim::ops
