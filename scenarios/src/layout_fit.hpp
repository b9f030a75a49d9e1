// The checks and memory estimate `dtsim predict` runs on a transformer layout before simulating it,
// without simulating: what `dtsim plan` filters its candidates with. Private to scenarios/src.
#pragma once
#include "scenarios/scenario.hpp"

namespace dtsim::scenarios {

struct LayoutFit {
  double memory_B = 0;    // the fullest rank's estimate (weights, gradients, optimizer, activations)
  double capacity_B = 0;  // the GPU's memory; 0 when predict does not check it (CPU devices, oversubscribe)
};

// The scenario's first workers entry on its layout: InputError as predict gives for a layout it cannot
// run (tp not dividing heads, batches, stages ...); otherwise the fullest rank's memory and the limit.
LayoutFit layout_fit(const Scenario& s);

}  // namespace dtsim::scenarios
