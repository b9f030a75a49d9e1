// Tests of the device catalog: every shipped device loads with sources, CPU peaks follow the formula,
// host resolution from /proc text, and bad catalog input gives one-line errors naming file and field.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/errors.hpp"
#include "platforms/device.hpp"

using dtsim::platforms::Device;
using dtsim::platforms::DeviceCatalog;
using dtsim::platforms::DeviceKind;

namespace {
std::string write_temp(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / ("dtsim_test_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(path) << text;
  return path.string();
}

std::string replace_first(std::string text, const std::string& from, const std::string& to) {
  return text.replace(text.find(from), from.size(), to);
}

std::string error_of(const std::string& path) {
  try {
    (void)DeviceCatalog::load(path);
  } catch (const dtsim::InputError& e) {
    return e.what();
  }
  return "";
}

const char* GOOD_CPU =
    "devices:\n"
    "  - name: cpu-a\n"
    "    kind: cpu\n"
    "    description: test\n"
    "    cores: 4\n"
    "    clock_hz: 2.0e9\n"
    "    simd_width_fp32: 8\n"
    "    fma_units: 2\n"
    "    threads_per_core: 2\n"
    "    mem_bandwidth_Bps: 50e9\n"
    "    mem_capacity_B: 64e9\n"
    "    source: test\n";

// A GPU entry with only the required fields (its name: gpu-a).
const char* GOOD_GPU =
    "devices:\n"
    "  - name: gpu-a\n"
    "    kind: gpu\n"
    "    description: test\n"
    "    peak_flops: 10e12\n"
    "    mem_bandwidth_Bps: 700e9\n"
    "    mem_capacity_B: 16e9\n"
    "    source: test\n";
}  // namespace

TEST_CASE("platforms::DeviceCatalog: every device of SYSTEMS.md is in the shipped catalog", "[platforms]") {
  const auto& catalog = DeviceCatalog::builtin();
  for (const char* name : {"k80-gk210", "p100-sxm2", "p100-pcie", "v100-sxm2-32gb", "v100-pcie-16gb", "gtx-1080ti",
                           "xeon-e5-2690-v3", "xeon-e5-2686-v4", "xeon-e5-2680-v4", "xeon-gold-6132",
                           "xeon-gold-6148", "xeon-gold-6154", "xeon-platinum-8160", "epyc-7551",
                           "xeon-bronze-3106", "ntua-vm-4vcpu", "host"}) {
    INFO(name);
    const Device* d = catalog.by_name_or_null(name);
    REQUIRE(d != nullptr);
    CHECK(d->peak_flops > 0);
    CHECK(d->mem_bandwidth_Bps > 0);
    CHECK(d->mem_capacity_B > 0);
    CHECK_FALSE(d->source.empty());
  }
}

TEST_CASE("platforms::DeviceCatalog: CPU peak equals cores x clock x simd x fma x 2", "[platforms]") {
  for (const auto& d : DeviceCatalog::builtin().devices()) {
    if (d.kind != DeviceKind::CPU) continue;
    INFO(d.name);
    CHECK(d.peak_flops == Approx(double(d.cores) * d.clock_hz * d.simd_width_fp32 * d.fma_units * 2));
    CHECK(d.cores > 0);
    CHECK(d.threads_per_core >= 1);
  }
  const auto& cat = DeviceCatalog::builtin();
  // Closed forms from vendor figures: 24 x 1.4 GHz x 16 x 2 x 2 and 32 x 2.0 GHz x 8 x 1 x 2.
  CHECK(cat.by_name("xeon-platinum-8160").peak_flops == Approx(2.1504e12));
  CHECK(cat.by_name("epyc-7551").peak_flops == Approx(1.024e12));
  // GPU peaks are the datasheet figures of SYSTEMS.md.
  CHECK(cat.by_name("p100-sxm2").peak_flops == Approx(10.6e12));
  CHECK(cat.by_name("v100-sxm2-32gb").mem_bandwidth_Bps == Approx(900e9));
  CHECK(cat.by_name("xeon-gold-6148").source_of("clock_hz").find("336065") != std::string::npos);
}

TEST_CASE("platforms::DeviceCatalog: unknown device name lists the known ones", "[platforms]") {
  try {
    (void)DeviceCatalog::builtin().by_name("tpu-v9");
    FAIL("expected InputError");
  } catch (const dtsim::InputError& e) {
    CHECK(std::string(e.what()).find("tpu-v9") != std::string::npos);
    CHECK(std::string(e.what()).find("p100-sxm2") != std::string::npos);
  }
}

TEST_CASE("platforms::DeviceCatalog: host facts come from /proc text", "[platforms]") {
  const std::string cpuinfo =
      "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz\ncpu MHz\t\t: 1000.000\n"
      "siblings\t: 40\ncpu cores\t: 20\nflags\t\t: fpu sse2 avx fma avx2 avx512f\n";
  const auto h = dtsim::platforms::parse_host_facts(cpuinfo, "MemTotal:       1024 kB\n", 3);
  CHECK(h.clock_hz == Approx(2.4e9));
  CHECK(h.simd_width_fp32 == 16);
  CHECK(h.threads_per_core == 2);
  CHECK(h.cores_available == 3);
  CHECK(h.has_fma);
  CHECK(h.mem_capacity_B == Approx(1024.0 * 1024));
  const auto h2 = dtsim::platforms::parse_host_facts(
      "model name\t: Some CPU\ncpu MHz\t\t: 2300.000\nflags\t\t: sse2 avx avx2\n", "", 2);
  CHECK(h2.clock_hz == Approx(2.3e9));
  CHECK(h2.simd_width_fp32 == 8);
  CHECK_THROWS_AS(dtsim::platforms::parse_host_facts("flags: avx\n", "", 1), dtsim::Failure);
  // Garbage numbers in /proc text read as unknown (0), never as an exception from std::stod.
  const auto h3 = dtsim::platforms::parse_host_facts("model name: X\ncpu MHz: fast\nsiblings: many\ncpu cores: 0\n",
                                                     "MemTotal: lots\n", 1);
  CHECK(h3.clock_hz == 0);
  CHECK(h3.threads_per_core == 1);
  CHECK(h3.mem_capacity_B == 0);

  const std::string file = write_temp("host.yaml",
                                      "devices:\n  - name: host\n    kind: cpu\n    description: this\n    resolve: host\n"
                                      "    fma_units: 2\n    mem_bandwidth_Bps: 30e9\n    source: proc\n");
  const auto cat = DeviceCatalog::load(file, h);
  const Device& d = cat.by_name("host");
  CHECK(d.cores == 3);
  CHECK(d.peak_flops == Approx(3 * 2.4e9 * 16 * 2 * 2));
  CHECK(d.isa == "avx512");
  // Facts that cannot describe the machine drop only `host`, with the reason, not the whole catalog.
  dtsim::platforms::HostFacts unknown;
  unknown.cpu_model = "mystery";
  const auto partial = DeviceCatalog::load(file, unknown);
  CHECK(partial.by_name_or_null("host") == nullptr);
  CHECK_THROWS_AS(partial.by_name("host"), dtsim::Failure);
  std::filesystem::remove(file);
}

TEST_CASE("platforms::DeviceCatalog: bad catalog input names file, line and field", "[platforms]") {
  SECTION("unknown key") {
    const auto f = write_temp("d1.yaml", std::string(GOOD_CPU) + "    turbo_hz: 3e9\n");
    const auto msg = error_of(f);
    CHECK(msg.find("d1.yaml:13") != std::string::npos);
    CHECK(msg.find("turbo_hz") != std::string::npos);
  }
  SECTION("negative bandwidth") {
    std::string text = GOOD_CPU;
    text.replace(text.find("50e9"), 4, "-5e9");
    const auto f = write_temp("d2.yaml", text);
    const auto msg = error_of(f);
    CHECK(msg.find("d2.yaml:10") != std::string::npos);
    CHECK(msg.find("mem_bandwidth_Bps") != std::string::npos);
  }
  SECTION("alias that is another device's name") {
    std::string second = GOOD_CPU;
    second.erase(0, std::string("devices:\n").size());
    second.replace(second.find("cpu-a"), 5, "cpu-b");
    second.replace(second.find("    kind"), 0, "    aliases: [cpu-a]\n");
    const auto f = write_temp("d_alias.yaml", std::string(GOOD_CPU) + second);
    const auto msg = error_of(f);
    CHECK(msg.find("d_alias.yaml") != std::string::npos);
    CHECK(msg.find("alias 'cpu-a'") != std::string::npos);
  }
  SECTION("CPU peak stated instead of derived") {
    const auto f = write_temp("d3.yaml", std::string(GOOD_CPU) + "    peak_flops: 1e12\n");
    CHECK(error_of(f).find("peak_flops") != std::string::npos);
  }
  SECTION("fractional core count") {
    std::string text = GOOD_CPU;
    text.replace(text.find("cores: 4"), 8, "cores: 4.5");
    const auto f = write_temp("d4.yaml", text);
    CHECK(error_of(f).find("cores") != std::string::npos);
  }
  SECTION("duplicate name") {
    std::string text = GOOD_CPU;
    text += std::string(GOOD_CPU).substr(std::string("devices:\n").size());
    const auto f = write_temp("d5.yaml", text);
    CHECK(error_of(f).find("duplicate") != std::string::npos);
  }
  SECTION("SGEMM efficiency: a GPU fraction of peak in (0, 1], not a CPU field") {
    const std::string gpu = GOOD_GPU;
    CHECK(DeviceCatalog::load(write_temp("d7.yaml", gpu + "    sgemm_efficiency: 0.5\n")).by_name("gpu-a").sgemm_efficiency ==
          0.5);
    CHECK(DeviceCatalog::load(write_temp("d8.yaml", gpu)).by_name("gpu-a").sgemm_efficiency == 0);
    const auto over = error_of(write_temp("d9.yaml", gpu + "    sgemm_efficiency: 1.5\n"));
    CHECK(over.find("d9.yaml:9") != std::string::npos);
    CHECK(over.find("between 0.001 and 1") != std::string::npos);  // the physical bound of every efficiency
    CHECK(error_of(write_temp("d10.yaml", std::string(GOOD_CPU) + "    sgemm_efficiency: 0.5\n"))
              .find("only for GPUs") != std::string::npos);
  }
  SECTION("microarchitecture: a CPU field from the known list") {
    const auto cpu = std::string(GOOD_CPU);
    const auto cat = DeviceCatalog::load(write_temp("d11.yaml", cpu + "    microarchitecture: broadwell\n"));
    CHECK(cat.by_name("cpu-a").microarchitecture == "broadwell");
    CHECK(cat.by_name("cpu-a").intel_before_skylake_sp());
    const auto bad = error_of(write_temp("d12.yaml", cpu + "    microarchitecture: netburst\n"));
    CHECK(bad.find("d12.yaml:") != std::string::npos);
    CHECK(bad.find("field 'microarchitecture' must be one of sandy-bridge, ") != std::string::npos);
    CHECK(bad.find("got 'netburst'") != std::string::npos);
  }
  SECTION("microarchitecture: a GPU's architecture, what NCCL's protocol rules key on, never its name") {
    // Named like an H100, but the name decides nothing.
    std::string gpu = GOOD_GPU;
    gpu.replace(gpu.find("gpu-a"), 5, "h100-lookalike");
    const auto named = DeviceCatalog::load(write_temp("d13.yaml", gpu)).by_name("h100-lookalike");
    CHECK_FALSE(named.nvlink_sharp());  // not stated: no architecture-gated protocol, whatever the name says
    CHECK_FALSE(named.nccl_ll128_by_default());
    const auto ampere = DeviceCatalog::load(write_temp("d14.yaml", gpu + "    microarchitecture: ampere\n")).by_name("h100-lookalike");
    CHECK(ampere.nccl_ll128_by_default());
    CHECK_FALSE(ampere.nvlink_sharp());
    const auto bad = error_of(write_temp("d15.yaml", gpu + "    microarchitecture: broadwell\n"));
    CHECK(bad.find("d15.yaml:") != std::string::npos);
    CHECK(bad.find("of a GPU must be one of kepler, ") != std::string::npos);
    // Every shipped GPU states it.
    for (const auto& d : DeviceCatalog::builtin().devices())
      if (!d.is_cpu()) CHECK_FALSE(d.microarchitecture.empty());
    CHECK(DeviceCatalog::builtin().by_name("h200-sxm").nvlink_sharp());
    CHECK(DeviceCatalog::builtin().by_name("v100-sxm2-16gb").nccl_ll128_by_default());
    CHECK_FALSE(DeviceCatalog::builtin().by_name("h100-sxm5").nccl_ll128_by_default());
  }
  SECTION("figure with its own source must have a value") {
    std::string text = GOOD_CPU;
    text.replace(text.find("clock_hz: 2.0e9"), 15, "clock_hz: {source: x}");
    const auto f = write_temp("d6.yaml", text);
    CHECK(error_of(f).find("value") != std::string::npos);
  }
}

TEST_CASE("platforms::DeviceCatalog: short aliases find their device, the full name still wins", "[platforms]") {
  const auto& cat = DeviceCatalog::builtin();
  CHECK(cat.by_name("p100").name == "p100-pcie");
  CHECK(cat.by_name("k80").name == "k80-gk210");
  CHECK(cat.by_name("v100").name == "v100-sxm2-32gb");
  CHECK(cat.by_name("1080ti").name == "gtx-1080ti");
  CHECK(cat.by_name_or_null("p100-sxm2")->name == "p100-sxm2");
  CHECK(cat.by_name_or_null("p1") == nullptr);
}

TEST_CASE("platforms::DeviceCatalog: figures outside physical bounds name the file and line", "[platforms]") {
  std::string text = GOOD_CPU;
  text.replace(text.find("50e9"), 4, "1e-300");
  const auto msg = error_of(write_temp("bounds_bw.yaml", text));
  CHECK(msg.find("bounds_bw.yaml:10") != std::string::npos);
  CHECK(msg.find("between 1000 and 1e+16") != std::string::npos);
  const std::string gpu =
      "devices:\n  - name: gpu-a\n    kind: gpu\n    description: test\n    peak_flops: 10e12\n"
      "    mem_bandwidth_Bps: 700e9\n    mem_capacity_B: 16e9\n    source: test\n";
  const auto eff = error_of(write_temp("bounds_eff.yaml", gpu + "    sgemm_efficiency: 1e-320\n"));
  CHECK(eff.find("bounds_eff.yaml:9") != std::string::npos);
  CHECK(eff.find("sgemm_efficiency") != std::string::npos);
  CHECK(error_of(write_temp("bounds_ok.yaml", gpu + "    sgemm_efficiency: 0.6\n")).empty());
  CHECK(error_of(write_temp("bounds_flops.yaml", replace_first(gpu, "10e12", "1e300"))).find("bounds_flops.yaml:5") !=
        std::string::npos);
}

TEST_CASE("platforms::DeviceCatalog: a device name too long for a file name is an unknown name", "[platforms]") {
  const auto& catalog = DeviceCatalog::builtin();
  try {
    (void)catalog.by_name(std::string(300, 'd'));
    FAIL("expected InputError");
  } catch (const dtsim::InputError& e) {
    CHECK(std::string(e.what()).find("unknown device") != std::string::npos);
  }
}
