// One oneDNN op driver per layer kind: the forward, backward-data and backward-weights primitives of a
// layer built in one place, with the tensors they read and write named by role. Both the calibrator
// (calibrate/src/onednn_runner.cpp) and the validation trainer (validate/src/net.cpp) bind memory to
// these roles and execute the same primitives. Only calibrate/ and validate/ include this header.
#pragma once
#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "models/model.hpp"

namespace dtsim::ops {

// Activation layout between layers: BLOCKED is what oneDNN's convolutions prefer on this ISA (the
// calibrator, as a oneDNN-backed framework keeps it); NHWC is plain channels-last (the trainer).
enum class Layout { BLOCKED, NHWC };

// What a tensor is to the layer. SRC/DIFF_SRC carry the input index; TARGET is the one-hot labels.
enum class Role {
  SRC, DST, DIFF_SRC, DIFF_DST,
  WEIGHTS, BIAS, DIFF_WEIGHTS, DIFF_BIAS,
  SCALE, SHIFT, DIFF_SCALE, DIFF_SHIFT,
  MEAN, VARIANCE, RUNNING_MEAN, RUNNING_VARIANCE,
  WORKSPACE, MASK, TARGET,
  ATTN_MASK,  // attention's additive causal mask [1, 1, s, s]: 0 on and below the diagonal, large negative above
};

struct Tensor {
  Role role = Role::SRC;
  int index = 0;                 // input index of SRC / DIFF_SRC, else 0
  dnnl::memory::desc desc;
  int view_of = -1;              // >= 0: no memory of its own, a view of tensors[view_of]...
  std::size_t view_offset_B = 0; // ...starting this many bytes into it
};

enum class Stage { FWD, FWD_INFERENCE, BWD_DATA, BWD_WEIGHTS };

struct Step {
  dnnl::primitive primitive;
  std::vector<std::pair<int, std::size_t>> args;  // DNNL_ARG_* -> index into OpPlan::tensors
  std::string impl;                               // oneDNN implementation, e.g. "jit:avx512_core"
};

// The primitives of one layer, by stage, and every tensor they touch (each built once, shared by role).
struct OpPlan {
  std::vector<Tensor> tensors;
  std::map<Stage, std::vector<Step>> stages;
  // Trainable parameters in the plain layout a trainer stores them, in storage order (weights then
  // bias, scale then shift); a WEIGHTS/BIAS/SCALE/SHIFT tensor with another desc is a reorder of one.
  std::vector<Tensor> params;
};

struct Problem {
  const models::Layer* layer = nullptr;
  Layout layout = Layout::BLOCKED;
  bool bwd_data = true;    // build BWD_DATA (false when no upstream layer needs the gradient)
  bool inference = false;  // also build FWD_INFERENCE where it differs from FWD (batch_norm)
};

// Builds the plan of `problem.layer`. Throws InputError for a kind without a driver and dnnl::error
// when oneDNN cannot create a primitive.
OpPlan build_op(const dnnl::engine& engine, const Problem& problem);
// True when `op` has a driver (every kind with a training pass except flatten and input; ROW: see below).
bool has_driver(models::OpKind op);
// True when `layer` has a driver: its kind's, or for a row op the row's (linear, lm_head, layer_norm,
// attention (multi-head), gelu, swiglu, residual_add, hidden_dropout).
bool has_driver(const models::Layer& layer);
// The op names that have a driver, in table order (row ops after the kinds).
std::vector<std::string> driver_names();
// Fills an ATTN_MASK tensor of `plan` (its memory in `memories`, from bind()) with the causal mask.
void fill_causal_mask(const OpPlan& plan, std::vector<dnnl::memory>& memories);

// Memory for every tensor of `plan`: views alias their base tensor; every other tensor gets make(tensor).
// Keep the returned vector alive while the steps run: a base seen only through its views (the concat
// split's gradients) is owned by nothing else.
std::vector<dnnl::memory> bind(const dnnl::engine& engine, const OpPlan& plan,
                               const std::function<dnnl::memory(const Tensor&)>& make);
// The argument map of one step over memories from bind().
std::unordered_map<int, dnnl::memory> args_of(const Step& step, const std::vector<dnnl::memory>& memories);
// Index of the first tensor with `role` and `index`, or -1.
int find(const OpPlan& plan, Role role, int index = 0);
// The parameter role a gradient role belongs to (DIFF_WEIGHTS -> WEIGHTS, ...); `role` itself otherwise.
Role param_role_of(Role role);

}  // namespace dtsim::ops
