// batch_norm: forward training (batch statistics), forward inference (running statistics, when asked)
// and one backward primitive giving the data gradient and the scale/shift gradients (stage BWD_DATA).
#include "calibrate/ops/driver_util.hpp"

namespace dtsim::ops::detail {

void build_batch_norm(PlanBuilder& b) {
  using BF = dnnl::batch_normalization_forward;
  using BB = dnnl::batch_normalization_backward;
  const auto& l = b.layer();
  const auto& s = l.src_shapes.front();
  const memory::desc data = act_md(s, b.problem().layout);
  const memory::desc cvec({s.c}, memory::data_type::f32, memory::format_tag::a);
  const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  const auto eps = static_cast<float>(l.params.bn_epsilon);
  b.param(Role::SCALE, cvec);
  b.param(Role::SHIFT, cvec);

  const BF::primitive_desc fwd(BF::desc(dnnl::prop_kind::forward_training, data, eps, flags), b.engine());
  const std::size_t src = b.tensor(Role::SRC, data), dst = b.tensor(Role::DST, data);
  const std::size_t scale = b.tensor(Role::SCALE, cvec), shift = b.tensor(Role::SHIFT, cvec);
  const std::size_t mean = b.tensor(Role::MEAN, fwd.mean_desc()), var = b.tensor(Role::VARIANCE, fwd.variance_desc());
  b.step(Stage::FWD, BF(fwd),
         {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCALE, scale}, {DNNL_ARG_SHIFT, shift},
          {DNNL_ARG_MEAN, mean}, {DNNL_ARG_VARIANCE, var}},
         fwd.impl_info_str());
  if (b.problem().inference) {
    const BF::primitive_desc inf(
        BF::desc(dnnl::prop_kind::forward_inference, data, eps, flags | dnnl::normalization_flags::use_global_stats),
        b.engine());
    b.step(Stage::FWD_INFERENCE, BF(inf),
           {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCALE, scale}, {DNNL_ARG_SHIFT, shift},
            {DNNL_ARG_MEAN, b.tensor(Role::RUNNING_MEAN, cvec)}, {DNNL_ARG_VARIANCE, b.tensor(Role::RUNNING_VARIANCE, cvec)}},
           inf.impl_info_str());
  }
  // The scale/shift gradients need the backward primitive even when no layer upstream needs diff_src.
  const BB::primitive_desc bwd(BB::desc(dnnl::prop_kind::backward, data, data, eps, flags), b.engine(), fwd);
  b.step(Stage::BWD_DATA, BB(bwd),
         {{DNNL_ARG_SRC, src}, {DNNL_ARG_MEAN, mean}, {DNNL_ARG_VARIANCE, var},
          {DNNL_ARG_DIFF_DST, b.tensor(Role::DIFF_DST, data)}, {DNNL_ARG_SCALE, scale}, {DNNL_ARG_SHIFT, shift},
          {DNNL_ARG_DIFF_SRC, b.tensor(Role::DIFF_SRC, data)}, {DNNL_ARG_DIFF_SCALE, b.tensor(Role::DIFF_SCALE, cvec)},
          {DNNL_ARG_DIFF_SHIFT, b.tensor(Role::DIFF_SHIFT, cvec)}},
         bwd.impl_info_str());
}

}  // namespace dtsim::ops::detail
