// libFuzzer target: a calibration database (calibrate/database.hpp) read from a path, then every host
// and entry looked up as the device model does.
#include "calibrate/database.hpp"
#include "fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static dtsim::fuzz::ScratchFile file("calibration.json");
  const std::string& path = file.write(data, size);
  return dtsim::fuzz::run_loader([&] {
    const auto db = dtsim::calibrate::CalibrationDb::load(path);
    for (const auto& host : db.hosts())
      for (const auto& [signature, passes] : db.entries(host.key()))
        for (const auto& [pass, entry] : passes)
          if (db.find(host.key(), signature, pass) != &entry) __builtin_trap();  // a loaded entry must be found
  });
}
