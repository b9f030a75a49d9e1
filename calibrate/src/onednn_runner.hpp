// Private to calibrate/: the oneDNN primitives of one layer (every pass of its training step), built
// with format_tag::any where oneDNN allows it, tensors allocated and filled at construction so that
// reorders and allocation stay outside the timed region.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "calibrate/op_signature.hpp"
#include "models/model.hpp"

namespace dtsim::calibrate {

// Name of the ISA oneDNN dispatches on this machine ("avx512_core_amx", "avx2", ...).
std::string onednn_isa_name();
// "oneDNN 2.6.3".
std::string onednn_version_string();

class OpRunner {
 public:
  // Creates the primitives of every pass of `layer` (threads must already be set: oneDNN fixes them
  // at creation). Throws InputError when the tensors would exceed `max_bytes`, Failure on oneDNN errors.
  OpRunner(const dnnl::engine& engine, const models::Layer& layer, std::int64_t max_bytes);
  // The SGD-momentum step over `params` FP32 parameters (v = mu*v + g; w = w - lr*v).
  OpRunner(const dnnl::engine& engine, std::int64_t params, std::int64_t max_bytes);

  bool has(Pass pass) const { return steps_.count(pass) > 0; }
  // Executes the primitives of one pass and waits for them.
  void run(Pass pass, dnnl::stream& stream);
  // Writes back and drops every tensor of `pass` from all cache levels (clflush), so the next run
  // reads them from memory, as a layer does inside a training step whose data outgrow the caches.
  void flush(Pass pass);
  // oneDNN implementation names of a pass, e.g. "jit:avx512_core".
  std::string impl(Pass pass) const;
  std::int64_t bytes() const { return bytes_; }

 private:
  struct Step {
    dnnl::primitive primitive;
    std::unordered_map<int, dnnl::memory> args;
    int repeat = 1;
  };
  dnnl::memory make(const dnnl::memory::desc& desc);
  void add(Pass pass, dnnl::primitive primitive, std::unordered_map<int, dnnl::memory> args, const std::string& impl,
           int repeat = 1);
  void check_budget(std::int64_t more);

  dnnl::engine engine_;
  std::int64_t max_bytes_ = 0;
  std::int64_t bytes_ = 0;
  std::map<Pass, std::vector<Step>> steps_;
  std::vector<dnnl::memory> tensors_;  // every tensor of the layer's op plan (views' bases included)
  std::map<Pass, std::string> impl_;
};

}  // namespace dtsim::calibrate
