// Private to calibrate/: the database entry of one timed pass, shared by the oneDNN loop
// (calibrate.cpp) and the cuDNN module (cudnn_backend.cpp) so both record the same fields.
#pragma once
#include <cstdint>
#include <string>

#include "calibrate/database.hpp"
#include "calibrate/op_signature.hpp"
#include "common/clean_timer.hpp"
#include "models/model.hpp"

namespace dtsim::calibrate {

// Entry for `pass` of `layer` (null: the optimizer update over `params` parameters) timed as `r` by
// the implementation `impl`: MEASURED when a block was clean, else DISTURBED (time kept for reference).
inline PassEntry timed_entry(const TimingResult& r, const models::Layer* layer, Pass pass, std::int64_t params,
                             std::string impl) {
  PassEntry entry;
  entry.status = r.clean() ? EntryStatus::MEASURED : EntryStatus::DISTURBED;
  entry.time_s = r.median_s;
  entry.spread = r.spread;
  entry.blocks_kept = r.blocks_kept;
  entry.blocks_rejected = r.blocks_rejected;
  const PassWork work = layer ? pass_work(*layer, pass) : update_work(params);
  entry.flops = work.flops;
  entry.bytes = work.bytes;
  entry.impl = std::move(impl);
  entry.op = layer ? std::string(models::op_name(*layer)) : "sgd_momentum";
  return entry;
}

}  // namespace dtsim::calibrate
