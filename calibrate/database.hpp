// The calibration database: one JSON file of measured kernel times, keyed by host (CPU model, ISA
// oneDNN dispatched, threads, library version, backend) and op signature + pass. Schema and rules
// (atomic saves, corrupt file never overwritten, "disturbed" entries re-tried): docs/calibration.md.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace dtsim::calibrate {

// The machine and library a set of timings belongs to, with the figures the device model needs.
struct HostInfo {
  std::string backend = "onednn";   // "onednn", "libtorch" or "cudnn"
  std::string device_model;         // CPU model name or GPU name
  std::string isa;                  // ISA oneDNN dispatched ("avx512_core_amx"), or "sm_80" for GPUs
  std::string library_version;      // "oneDNN 2.6.3" / "cuDNN 9.19.0"
  int threads = 0;                  // CPU threads the primitives were created with (0 for GPUs)
  // Copies of the work that ran at once, each with `threads` threads (co-run calibration): 1 = alone.
  // With 2+ instances the timings say how much busy neighbour cores slow a process (device_model).
  int instances = 1;
  // Cache state before each timed repeat: "private caches evicted" (oneDNN: L1d+L2 of each core),
  // "L2 flushed" (cuDNN). Recorded for the reader; docs/calibration.md says why.
  std::string cache_state;
  // Figures of the host at calibration time (copied from the "host" device), for the roofline.
  double core_peak_flops = 0;       // FP32 peak of one core (clock x SIMD lanes x FMA units x 2)
  double mem_bandwidth_Bps = 0;     // memory bandwidth available to the process
  // The heap regime the passes were timed in (calibrate/allocator.hpp) for backends whose passes allocate
  // inside the timed region (libtorch); "" for oneDNN and cuDNN, whose buffers are allocated beforehand.
  std::string allocator;
  // The database key: "onednn|<model>|<isa>|<version>|threads=<n>", plus "|instances=<k>" when k > 1 and
  // "|allocator=<regime>" when the allocator is set.
  std::string key() const;
};

enum class EntryStatus { MEASURED, DISTURBED };

// One timed pass of one op signature.
struct PassEntry {
  EntryStatus status = EntryStatus::MEASURED;
  double time_s = 0;          // median of the clean blocks (0 when DISTURBED)
  double spread = 0;          // (max - min) / median over clean blocks
  int blocks_kept = 0;
  int blocks_rejected = 0;
  double flops = 0;           // work of the pass (for efficiency)
  double bytes = 0;
  std::string impl;           // oneDNN implementation name, e.g. "jit:avx512_core"
  std::string op;             // op kind name ("conv2d", ..., "sgd_momentum")
};

class CalibrationDb {
 public:
  // Reads `path`; a missing file gives an empty database. A file that is not a valid database is an
  // InputError naming the file and what is wrong (the file is left untouched).
  static CalibrationDb load(const std::string& path);
  // Writes the database to `path` atomically (temporary file + rename) under an exclusive lock on
  // "<path>.lock", merged with what is on disk then (entries saved by another process are kept,
  // this object's win on a tie), with a content checksum. Failure on I/O errors.
  void save(const std::string& path) const;

  // The entry for (host, signature, pass), or null. DISTURBED entries are returned too.
  const PassEntry* find(const std::string& host_key, const std::string& signature, const std::string& pass) const;
  // Inserts or replaces one entry (and records the host).
  void put(const HostInfo& host, const std::string& signature, const std::string& pass, const PassEntry& entry);

  std::vector<HostInfo> hosts() const;
  const HostInfo* host_or_null(const std::string& host_key) const;
  // Every entry of one host: signature -> pass -> entry.
  const std::map<std::string, std::map<std::string, PassEntry>>& entries(const std::string& host_key) const;
  std::size_t size() const;  // entries over all hosts

 private:
  struct HostData {
    HostInfo info;
    std::map<std::string, std::map<std::string, PassEntry>> entries;
  };
  std::map<std::string, HostData> hosts_;
  void write_locked(const std::string& path) const;  // the file write of save(), lock held
};

// $DTSIM_CALIBRATION_DB if set, else <data_dir>/calibrate/data/calibration.json.
std::string default_db_path();

}  // namespace dtsim::calibrate
