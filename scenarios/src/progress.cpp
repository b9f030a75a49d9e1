// The progress line shared by sweeps and the server-count search (scenarios/src/progress.hpp).
#include "scenarios/src/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <utility>

namespace dtsim::scenarios {

Progress::Progress(bool enabled, std::size_t total, std::size_t already, std::string label, std::string unit,
                   std::string prefix)
    : enabled_(enabled), total_(total), done_(already), label_(std::move(label)), unit_(std::move(unit)),
      prefix_(std::move(prefix)), tty_(::isatty(STDERR_FILENO) != 0), start_(std::chrono::steady_clock::now()) {}

void Progress::finished(bool failed) {
  ++done_;
  ++ran_;
  failed_ += failed ? 1 : 0;
  show();
}

void Progress::show() const {
  if (!enabled_) return;
  const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = (ran_ > 0 && elapsed_s > 0) ? static_cast<double>(ran_) / elapsed_s : 0.0;
  const std::size_t left = total_ - std::min(total_, done_);
  const std::string eta = rate > 0 ? fmt::format("ETA {:.0f} s", static_cast<double>(left) / rate) : "ETA ?";
  const std::string line = fmt::format("{}{}: {}/{} {} done ({} failed this run), {:.2f} {}/s, {}", prefix_, label_,
                                       done_, total_, unit_, failed_, rate, unit_, eta);
  if (tty_)
    std::cerr << '\r' << line << "\x1b[K" << (left == 0 ? "\n" : "") << std::flush;
  else
    std::cerr << line << '\n' << std::flush;
}

void Progress::end() const {
  if (enabled_ && tty_ && done_ < total_) std::cerr << '\n' << std::flush;
}

}  // namespace dtsim::scenarios
