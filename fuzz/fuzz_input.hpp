// Shared by the libFuzzer targets: the input bytes as a scratch file for loaders that read a path, and
// the rule every target follows: an InputError (exit 2 in the CLI) is a normal outcome, anything else
// escaping a loader (another exception, a crash, a sanitizer report) is a finding.
#pragma once
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/errors.hpp"

namespace dtsim::fuzz {

// Points DTSIM_DATA_DIR at the source tree (the shipped devices.yaml that platforms resolve
// against) unless the caller set it.
inline void use_source_data_dir() { setenv("DTSIM_DATA_DIR", DTSIM_SOURCE_DIR, 0); }

// A file in a private temporary folder, rewritten with every input; removed at exit.
class ScratchFile {
 public:
  explicit ScratchFile(const std::string& name) {
    const char* tmp = std::getenv("TMPDIR");
    std::string dir_template = std::string(tmp && *tmp ? tmp : "/tmp") + "/dtsim-fuzz-XXXXXX";
    if (mkdtemp(dir_template.data()) == nullptr) {
      std::perror("dtsim fuzz: mkdtemp");
      std::abort();
    }
    dir_ = dir_template;
    path_ = dir_ + "/" + name;
  }
  ~ScratchFile() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  // Replaces the file's content with `data`; returns its path.
  const std::string& write(const std::uint8_t* data, std::size_t size) {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    out.close();
    if (!out) {
      std::perror("dtsim fuzz: writing the scratch file");
      std::abort();
    }
    return path_;
  }

 private:
  std::string dir_;
  std::string path_;
};

// Runs `load`; an InputError is the documented answer to bad input. Other exceptions propagate
// out of LLVMFuzzerTestOneInput, which libFuzzer reports as a crash.
template <class Load>
int run_loader(Load&& load) {
  try {
    load();
  } catch (const InputError&) {
  }
  return 0;
}

}  // namespace dtsim::fuzz
