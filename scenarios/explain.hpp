// Plain-words explanation of one predicted point (--explain, the sweep's bottleneck column), written
// from the measured quantities the simulation reports: the presentation of a result, not part of it.
#pragma once
#include <string>

#include "sim/training.hpp"

namespace dtsim::scenarios {

struct ExplainContext {
  bool parameter_servers = false;  // the strategy uses parameter servers
  double batch_input_bytes = 0;    // bytes read per batch (real data)
  std::string network;             // the platform's network technology
  std::string device;              // the worker device
};

// One sentence naming what limits the point: input I/O, a PS shard's NIC, the gradient exchange, or compute.
std::string explain_point(const sim::PointResult& r, const ExplainContext& context);

}  // namespace dtsim::scenarios
