// The scenario field table: one row per value a user can write (key, flag, type, default, help, parser,
// writer, header text). Scenario files, --dump-config, the configuration header and predict's flags
// all come from it (scenario.cpp, config.cpp, apps/cmd_predict.cpp).
#include "scenarios/fields.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>

#include "calibrate/allocator.hpp"
#include "platforms/platform.hpp"
#include "platforms/transport.hpp"
#include "scenarios/scenario.hpp"

namespace dtsim::scenarios {
namespace {

constexpr double BYTES_PER_MIB = 1024.0 * 1024.0;  // fusion_mb follows Horovod's MiB threshold
constexpr double S_PER_MS = 1e-3;
constexpr double MS_PER_S = 1e3;
// Largest fusion buffer: 1e6 MiB (1 TB) is beyond any model's gradients; a larger number is a typo.
constexpr double MAX_FUSION_MB = 1e6;
// Largest input side and class count a scenario may ask for (the model builder's own bounds).
constexpr int MAX_INPUT_SIDE = 1 << 15;
constexpr int MAX_CLASSES = 1 << 24;

std::string join(const std::vector<int>& v) {
  std::string out;
  for (int x : v) out += (out.empty() ? "" : ",") + std::to_string(x);
  return out;
}

bool looks_like_path(const std::string& v) {
  return v.find('/') != std::string::npos || v.ends_with(".yaml") || v.ends_with(".yml");
}
std::string absolute_if_path(const std::string& v) {
  return looks_like_path(v) ? std::filesystem::absolute(v).lexically_normal().string() : v;
}

// A relative input path in a scenario is relative to the scenario's folder, so a scenario runs from any
// working directory (a flag's path stays relative to the working directory). Names (zoo models, shipped
// platforms) have no '/' and no .yaml suffix.
std::string resolve_path(const std::string& value, const std::string& file, bool names_allowed) {
  if (value.empty()) return value;
  const bool path = looks_like_path(value) || !names_allowed;
  const std::filesystem::path p(value);
  if (!path || p.is_absolute()) return value;
  const std::filesystem::path dir = std::filesystem::path(file).parent_path();
  return dir.empty() ? value : (dir / p).lexically_normal().string();
}

// Readers with the checks their fields share.
int int_at_least(const FieldInput& in, int min) {
  const int v = in.as<int>();
  if (v < min) in.fail(fmt::format("must be >= {}, got {}", min, v));
  return v;
}
int model_option(const FieldInput& in, int max_value) {  // 0 = the model's default
  const int v = in.as<int>();
  if (v < 0 || v > max_value)
    in.fail(fmt::format("must be in 0..{} (0 = the model's default), got {}", max_value, v));
  return v;
}
double non_negative(const FieldInput& in) {
  const double v = in.as<double>();
  if (!(v >= 0)) in.fail(fmt::format("must be >= 0, got {}", v));
  return v;
}
double in_range(const FieldInput& in, double lo, double hi) {
  const double v = in.as<double>();
  if (!(v >= lo && v <= hi)) in.fail(fmt::format("must be in [{}, {}], got {}", lo, hi, v));
  return v;
}
// One count ("4"), a text list ("1,2,4") or a YAML list of counts.
std::vector<int> count_list(const FieldInput& in) {
  const YAML::Node& node = in.node();
  if (node.IsScalar()) return parse_count_list(node.Scalar(), in.label());
  if (!node.IsSequence() || node.size() == 0) in.fail("must be a positive integer or a list of them");
  std::vector<int> out;
  for (const auto& item : node) {
    if (!item.IsScalar()) in.fail("must hold positive integers");
    const auto v = parse_count_list(item.Scalar(), in.label());
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// Writers.
template <class T>
FieldDump value(const T& v, std::string comment = {}) {
  return {YAML::Node(v), std::move(comment)};
}
FieldDump number(double v, std::string comment = {}) {
  return {YAML::Node(fmt::format("{}", v)), std::move(comment)};
}
FieldDump list(const std::vector<int>& v) {
  YAML::Node n(YAML::NodeType::Sequence);
  for (int x : v) n.push_back(x);
  n.SetStyle(YAML::EmitterStyle::Flow);
  return {n, ""};
}
FieldDump left_out(std::string comment = {}) { return {YAML::Node(), std::move(comment)}; }

std::string servers_only(const Scenario& s, std::string text) {
  return sim::uses_servers(s.point.strategy) ? text : "";
}

// Largest sequence a scenario may ask for (the transformer builder's own bound).
constexpr int MAX_SEQ_LEN = 1 << 20;

// "tp 8, pp 4 (vp 2), cp 2, ep 8, sequence parallel, ZeRO 1, recompute selective, gpipe"; "" for the defaults.
std::string layout_text(const Scenario& s) {
  const auto& l = s.point.layout;
  std::string out;
  const auto add = [&](const std::string& t) { out += (out.empty() ? "" : ", ") + t; };
  if (l.tp > 1) add(fmt::format("tp {}", l.tp));
  if (l.pp > 1) add(fmt::format("pp {}{}", l.pp, l.vp > 1 ? fmt::format(" (vp {})", l.vp) : ""));
  if (l.cp > 1) add(fmt::format("cp {}", l.cp));
  if (l.ep > 1) add(fmt::format("ep {}", l.ep));
  if (l.sequence_parallel) add("sequence parallel");
  if (l.replicated_vocab) add("replicated vocabulary");
  if (l.zero > 0) add(fmt::format("ZeRO {}", l.zero));
  if (l.recompute != "none") add("recompute " + l.recompute);
  if (l.schedule != "1f1b") add(l.schedule);
  if (l.order != "tp-cp-dp-pp") add("order " + l.order);
  return out;
}

std::string precision_help() {
  std::string out = calibrate::precision_names() + ":";
  for (const auto& r : calibrate::precision_rows()) out += fmt::format("\n  {}: {}", r.name, r.help);
  return out;
}

std::vector<ScenarioField> make_fields() {
  using K = FlagKind;
  return {
      // ---- job: what is trained, where, and from which calibration
      {.key = "name",
       .group = GROUP_JOB,
       .type = "string",
       .default_text = "file stem",
       .help = "Label",
       .example = "example",
       .parse = [](Scenario& s, const FieldInput& in) { s.name = in.as<std::string>(); },
       .write = [](const Scenario& s) { return value(s.name); }},
      {.key = "description",
       .group = GROUP_JOB,
       .type = "string",
       .default_text = "\"\"",
       .help = "Free text",
       .example = "an example",
       .parse = [](Scenario& s, const FieldInput& in) { s.description = in.as<std::string>(); },
       .write = [](const Scenario& s) { return s.description.empty() ? left_out() : value(s.description); }},
      {.key = "model",
       .group = GROUP_JOB,
       .type = "string",
       .default_text = "required",
       .help = "Zoo model name or model YAML file",
       .flag = "--model",
       .flag_kind = K::VALUE,
       .required = true,
       .example = "alexnet",
       .parse = [](Scenario& s,
                   const FieldInput& in) { s.model = resolve_path(in.as<std::string>(), in.file(), true); },
       .write = [](const Scenario& s) { return value(absolute_if_path(s.model)); },
       .header = [](const Scenario& s, const HeaderContext&) { return s.model; }},
      {.key = "platform",
       .group = GROUP_JOB,
       .type = "string",
       .default_text = "required",
       .help = "Platform name or platform YAML file",
       .flag = "--platform",
       .flag_kind = K::VALUE,
       .required = true,
       .example = "piz-daint",
       .parse =
           [](Scenario& s, const FieldInput& in) {
             s.platform = resolve_path(in.as<std::string>(), in.file(), true);
           },
       .write = [](const Scenario& s) { return value(absolute_if_path(s.platform)); },
       .header = [](const Scenario&, const HeaderContext& c) { return c.platform_label; }},
      // ---- parallel layout: how many workers, where, and how they exchange gradients
      {.key = "workers",
       .group = GROUP_LAYOUT,
       .type = "int, list, or \"1,2,4\"",
       .default_text = "[1]",
       .help = "Worker counts, e.g. 1,2,4,8 (one prediction each)",
       .flag = "--workers",
       .flag_kind = K::VALUE,
       .example = "1,3",
       .parse = [](Scenario& s, const FieldInput& in) { s.workers = count_list(in); },
       .write = [](const Scenario& s) { return list(s.workers); },
       .header = [](const Scenario& s, const HeaderContext&) { return join(s.workers); }},
      {.key = "batch",
       .group = GROUP_JOB,
       .type = "int >= 1",
       .default_text = "32",
       .help = "Samples per worker and iteration",
       .flag = "--batch",
       .flag_kind = K::VALUE,
       .example = "24",
       .parse = [](Scenario& s, const FieldInput& in) { s.batch = int_at_least(in, 1); },
       .write = [](const Scenario& s) { return value(s.batch); },
       .header = [](const Scenario& s,
                    const HeaderContext&) { return fmt::format("{} per worker", s.batch); }},
      {.key = "input_h",
       .group = GROUP_JOB,
       .type = "int >= 0",
       .default_text = "0 (model default)",
       .help = "Input height (0 = the model's)",
       .example = "64",
       .parse = [](Scenario& s, const FieldInput& in) { s.input_h = model_option(in, MAX_INPUT_SIDE); },
       .write = [](const Scenario& s) { return value(s.input_h, "0 = the model's default"); }},
      {.key = "input_w",
       .group = GROUP_JOB,
       .type = "int >= 0",
       .default_text = "0 (model default)",
       .help = "Input width (0 = the model's)",
       .example = "64",
       .parse = [](Scenario& s, const FieldInput& in) { s.input_w = model_option(in, MAX_INPUT_SIDE); },
       .write = [](const Scenario& s) { return value(s.input_w); }},
      {.key = "classes",
       .group = GROUP_JOB,
       .type = "int >= 0",
       .default_text = "0 (model default)",
       .help = "Output classes (0 = the model's)",
       .example = "100",
       .parse = [](Scenario& s, const FieldInput& in) { s.classes = model_option(in, MAX_CLASSES); },
       .write = [](const Scenario& s) { return value(s.classes); }},
      {.key = "workers_per_node",
       .group = GROUP_LAYOUT,
       .type = "int >= 0",
       .default_text = "0 = GPUs per node, or 1",
       .help = "Workers per node (default: GPUs per node, or 1 on CPU)",
       .flag = "--workers-per-node",
       .flag_kind = K::VALUE,
       .example = "2",
       .parse = [](Scenario& s, const FieldInput& in) { s.point.workers_per_node = int_at_least(in, 0); },
       .write = [](const Scenario& s) { return value(s.point.workers_per_node, "0 = the platform's"); }},
      {.key = "threads",
       .group = GROUP_LAYOUT,
       .type = "int >= 0",
       .default_text = "0 = cores / workers per node",
       .help = "CPU threads per worker process (CPU platforms)",
       .flag = "--threads",
       .flag_kind = K::VALUE,
       .example = "4",
       .parse = [](Scenario& s, const FieldInput& in) { s.threads = int_at_least(in, 0); },
       .write = [](const Scenario& s) { return value(s.threads, "0 = a socket's cores / workers"); }},
      {.key = "strategy",
       .group = GROUP_LAYOUT,
       .type = "strategy name",
       .default_text = "allreduce-auto",
       .help = "Gradient exchange, one of:\n" + sim::strategy_help(),
       .flag = "--strategy",
       .flag_kind = K::VALUE,
       .example = "ps",
       .parse =
           [](Scenario& s, const FieldInput& in) {
             s.point.strategy =
                 in.choose([&](const std::string& t) { return sim::strategy_by_name(t, in.what()); });
           },
       .write = [](const Scenario& s) { return value(sim::to_string(s.point.strategy)); },
       .header = [](const Scenario& s, const HeaderContext&) { return sim::to_string(s.point.strategy); }},
      {.key = "ps",
       .group = GROUP_PS,
       .type = "int, list (one per workers entry) or auto",
       .default_text = "1",
       .help = "Parameter servers: N, one per --workers entry (N1,N2,...), or auto",
       .flag = "--ps",
       .flag_kind = K::VALUE,
       .example = "3",
       .parse =
           [](Scenario& s, const FieldInput& in) {
             s.ps_auto = in.node().IsScalar() && in.node().Scalar() == "auto";
             s.ps = s.ps_auto ? std::vector<int>{} : count_list(in);
           },
       .write =
           [](const Scenario& s) {
             return s.ps_auto ? value(std::string("auto")) : s.ps.empty() ? left_out() : list(s.ps);
           },
       .header =
           [](const Scenario& s, const HeaderContext&) {
             return servers_only(s, s.ps_auto ? "auto" : s.ps.empty() ? "1" : join(s.ps));
           }},
      {.key = "ps_placement",
       .group = GROUP_PS,
       .type = "colocated / dedicated",
       .default_text = "colocated",
       .help = "colocated|dedicated",
       .flag = "--ps-placement",
       .flag_kind = K::VALUE,
       .example = "dedicated",
       .parse = [](Scenario& s,
                   const FieldInput& in) { s.point.ps.placement = in.choose(sim::ps_placement_by_name); },
       .write = [](const Scenario& s) { return value(sim::to_string(s.point.ps.placement)); },
       .header = [](const Scenario& s,
                    const HeaderContext&) { return servers_only(s, sim::to_string(s.point.ps.placement)); }},
      {.key = "ps_balance",
       .group = GROUP_PS,
       .type = "greedy / round-robin / mxnet",
       .default_text = "greedy",
       .help = "greedy|round-robin|mxnet (variable placement on servers: TensorFlow's greedy by bytes, in "
               "order, or "
               "MXNet ps-lite's: arrays of 1e6+ values split over all servers, the others by key hash)",
       .flag = "--ps-balance",
       .flag_kind = K::VALUE,
       .example = "round-robin",
       .parse = [](Scenario& s,
                   const FieldInput& in) { s.point.ps.balance = in.choose(sim::ps_balance_by_name); },
       .write = [](const Scenario& s) { return value(sim::to_string(s.point.ps.balance)); }},
      // ---- runtime: what the framework and its libraries add around the exchange
      {.key = "ps_transport",
       .group = GROUP_PS,
       .type = "grpc / grpc-2016 / zeromq",
       .default_text = "none",
       .help = "RPC layer of parameter-server traffic (docs/transports.md; default none), one of:\n" +
               platforms::transport_help(platforms::TransportScope::RPC),
       .flag = "--ps-transport",
       .flag_kind = K::VALUE,
       .example = "grpc",
       .parse =
           [](Scenario& s, const FieldInput& in) {
             s.point.ps.transport = in.choose([](const std::string& t) {
               return platforms::transport_by_name(t, platforms::TransportScope::RPC).name;
             });
           },
       .write =
           [](const Scenario& s) {
             return s.point.ps.transport.empty() ? left_out() : value(s.point.ps.transport);
           }},
      {.key = "framework",
       .group = GROUP_RUNTIME,
       .type = "framework name",
       .default_text = "none",
       .help = "Framework runtime profile (sets fusion and cycle defaults; docs/frameworks.md), one of:\n" +
               sim::framework_help(),
       .flag = "--framework",
       .flag_kind = K::VALUE,
       .example = "horovod",
       // The framework's defaults first: fusion_mb and cycle_ms, read after it, override them.
       .parse =
           [](Scenario& s, const FieldInput& in) {
             sim::apply_framework(s.point,
                                  in.choose([&](const std::string& t) -> const sim::FrameworkProfile& {
                                    return sim::framework_by_name(t, in.what());
                                  }));
           },
       .write = [](const Scenario& s) { return value(s.point.runtime.framework.name); },
       .header = [](const Scenario& s, const HeaderContext&) { return s.point.runtime.framework.name; }},
      // ---- allocator regime (issue 40): the heap of the user's process, for a libtorch calibration
      {.key = "allocator",
       .group = GROUP_RUNTIME,
       .type = "allocator name",
       .default_text = "glibc",
       .help = "Heap regime of the training process, which selects the libtorch calibration timed in it "
               "(frameworks calibrated with libtorch; docs/calibration.md), one of:\n" +
               calibrate::allocator_help(),
       .flag = "--allocator",
       .flag_kind = K::VALUE,
       .example = "glibc-held",
       .parse =
           [](Scenario& s, const FieldInput& in) {
             s.allocator = in.choose([&](const std::string& t) { return calibrate::allocator_by_name(t, in.what()).name; });
           },
       .write =
           [](const Scenario& s) {
             return s.allocator == calibrate::DEFAULT_ALLOCATOR ? left_out() : value(s.allocator);
           },
       .header =
           [](const Scenario& s, const HeaderContext&) {
             return s.allocator == calibrate::DEFAULT_ALLOCATOR ? std::string() : s.allocator;
           }},
      {.key = "collective_library",
       .group = GROUP_RUNTIME,
       .type = "library name",
       .default_text = "by precedence",
       .help = "Collective library picking each allreduce's algorithm (allreduce-auto) and protocol "
               "(docs/collective-libraries.md). Overrides the scenario; unset: the framework's (Horovod/DDP "
               "on GPUs: "
               "NCCL; DDP on CPUs: gloo), else the platform's collective_library, else NCCL on GPU nodes and "
               "Open MPI on CPU nodes. One of:\n" +
               sim::collective_library_help(),
       .flag = "--collective-library",
       .flag_kind = K::VALUE,
       .example = "gloo",
       .parse =
           [](Scenario& s, const FieldInput& in) {
             s.point.runtime.collective_library = in.choose([&](const std::string& t) {
               sim::check_collective_library(t, in.what());
               return t;
             });
           },
       .write =
           [](const Scenario& s) {
             return s.point.runtime.collective_library.empty() ? left_out("collective_library: by precedence")
                                                               : value(s.point.runtime.collective_library);
           },
       .header = [](const Scenario& s, const HeaderContext& c) -> std::string {
         if (c.platform == nullptr) return "";
         try {
           const auto lib = sim::resolve_collective_library(*c.platform, s.point);
           const std::string from = lib.source != "named"                        ? lib.source
                                    : s.field_origin.count("collective_library") ? "scenario"
                                                                                 : "--collective-library";
           return fmt::format("{} ({})", lib.name, from);
         } catch (const std::exception&) {
           return "";  // an unknown library in the platform file: the prediction reports it with its file and
                       // line
         }
       }},
      // ---- variability: how the workers' compute varies
      {.key = "variability.device_cv",
       .group = GROUP_VARIABILITY,
       .type = "by-class or number in [0, 1]",
       .default_text = "by-class",
       .help = "Persistent per-device speed factor's coefficient of variation",
       .example = "0.05",
       .parse =
           [](Scenario& s, const FieldInput& in) {
             if (in.node().IsScalar() && in.node().Scalar() == "by-class") {
               s.point.variability.device_cv = sim::DEVICE_CV_BY_CLASS;
               return;
             }
             const double v = in.as<double>();
             if (!(std::isfinite(v) && v >= 0 && v <= 1))
               in.fail(fmt::format("must be 'by-class' or a coefficient of variation in [0, 1], got {}",
                                   in.node().Scalar()));
             s.point.variability.device_cv = v;
           },
       .write =
           [](const Scenario& s) {
             const double cv = s.point.variability.device_cv;
             return cv == sim::DEVICE_CV_BY_CLASS ? value(std::string("by-class")) : number(cv);
           },
       // The header shows the whole variability block on one line, resolved against the platform.
       .header = [](const Scenario& s, const HeaderContext& c) -> std::string {
         if (c.platform == nullptr) return "";
         const auto& v = s.point.variability;
         const auto spread = sim::resolve_device_spread(*c.platform, s.point);
         std::string text = spread.cv > 0
                                ? fmt::format("device cv {:.2f}% ({})", spread.cv * 100, spread.source)
                                : std::string("device spread off");
         if (v.jitter_cv > 0) text += fmt::format(", jitter cv {:g}%", v.jitter_cv * 100);
         if (v.straggler_probability > 0)
           text +=
               fmt::format(", stragglers {:g}% x{:g}", v.straggler_probability * 100, v.straggler_slowdown);
         return text;
       }},
      {.key = "variability.jitter_cv",
       .group = GROUP_VARIABILITY,
       .type = "number >= 0",
       .default_text = "0",
       .help = "Coefficient of variation of each worker's compute per iteration",
       .example = "0.02",
       .parse = [](Scenario& s, const FieldInput& in) { s.point.variability.jitter_cv = non_negative(in); },
       .write = [](const Scenario& s) { return number(s.point.variability.jitter_cv); }},
      {.key = "variability.straggler_probability",
       .group = GROUP_VARIABILITY,
       .type = "number in [0, 1]",
       .default_text = "0",
       .help = "Probability that a worker straggles in an iteration",
       .example = "0.1",
       .parse = [](Scenario& s,
                   const FieldInput& in) { s.point.variability.straggler_probability = in_range(in, 0, 1); },
       .write = [](const Scenario& s) { return number(s.point.variability.straggler_probability); }},
      {.key = "variability.straggler_slowdown",
       .group = GROUP_VARIABILITY,
       .type = "number >= 1",
       .default_text = "1",
       .help = "Compute multiplier of a straggler",
       .example = "1.5",
       .parse =
           [](Scenario& s, const FieldInput& in) {
             const double v = in.as<double>();
             if (!(v >= 1)) in.fail(fmt::format("must be >= 1, got {}", v));
             s.point.variability.straggler_slowdown = v;
           },
       .write = [](const Scenario& s) { return number(s.point.variability.straggler_slowdown); }},
      {.key = "variability.seed",
       .group = GROUP_VARIABILITY,
       .type = "unsigned int",
       .default_text = "1",
       .help = "Seed of the variability's random draws",
       .example = "7",
       .parse = [](Scenario& s, const FieldInput& in) { s.point.variability.seed = in.as<std::uint64_t>(); },
       .write = [](const Scenario& s) { return value(s.point.variability.seed); }},
      // ---- runtime, continued: buckets and overlap
      {.key = "fusion_mb",
       .group = GROUP_RUNTIME,
       .type = "number in 0..1e6",
       .default_text = "64 (or the framework's)",
       .help = "Gradient fusion threshold in MiB (0 = one exchange per layer)",
       .flag = "--fusion-mb",
       .flag_kind = K::VALUE,
       .example = "8",
       .parse =
           [](Scenario& s, const FieldInput& in) {
             const double mb = in.as<double>();
             if (!(mb >= 0 && mb <= MAX_FUSION_MB))
               in.fail(fmt::format("must be in 0..{:.0f} MiB, got {}", MAX_FUSION_MB, mb));
             s.point.runtime.fusion_bytes = mb * BYTES_PER_MIB;
           },
       .write = [](const Scenario& s) { return number(s.point.runtime.fusion_bytes / BYTES_PER_MIB); },
       .header =
           [](const Scenario& s, const HeaderContext&) {
             return fmt::format("{:g} MiB", s.point.runtime.fusion_bytes / BYTES_PER_MIB);
           }},
      {.key = "cycle_ms",
       .group = GROUP_RUNTIME,
       .type = "number >= 0",
       .default_text = "0 (or the framework's)",
       .help = "Horovod cycle time in ms (0 = exchange as soon as ready)",
       .flag = "--cycle-ms",
       .flag_kind = K::VALUE,
       .example = "5",
       .parse = [](Scenario& s,
                   const FieldInput& in) { s.point.runtime.cycle_s = non_negative(in) * S_PER_MS; },
       .write = [](const Scenario& s) { return number(s.point.runtime.cycle_s * MS_PER_S); },
       .header =
           [](const Scenario& s, const HeaderContext&) {
             return s.point.runtime.cycle_s > 0 ? human_seconds(s.point.runtime.cycle_s) : std::string();
           }},
      {.key = "overlap",
       .group = GROUP_RUNTIME,
       .type = "bool",
       .default_text = "true",
       .help = "Start gradient exchange only after the whole backward pass",
       .flag = "--no-overlap",
       .flag_kind = K::SETS_FALSE,
       .example = "false",
       .parse = [](Scenario& s, const FieldInput& in) { s.point.runtime.overlap = in.as<bool>(); },
       .write = [](const Scenario& s) { return value(s.point.runtime.overlap); }},
      {.key = "interference",
       .group = GROUP_FIDELITY,
       .type = "bool",
       .default_text = "true",
       .help = "GPUs: compute overlapped with a collective runs at full speed (default: 1.189x slower; "
               "docs/simulation-training.md)",
       .flag = "--no-interference",
       .flag_kind = K::SETS_FALSE,
       .example = "false",
       .parse = [](Scenario& s, const FieldInput& in) { s.point.fidelity.interference = in.as<bool>(); },
       .write = [](const Scenario& s) { return value(s.point.fidelity.interference); }},
      {.key = "precision",
       .group = GROUP_JOB,
       .type = "fp32 / tf32 / fp16-mixed / bf16-mixed / fp8",
       .default_text = "fp32",
       .help = precision_help(),
       .flag = "--precision",
       .flag_kind = K::VALUE,
       .example = "fp16-mixed",
       .parse =
           [](Scenario& s, const FieldInput& in) {
             s.precision = in.choose([](const std::string& t) { return calibrate::precision_by_name(t); });
           },
       .write = [](const Scenario& s) { return value(std::string(calibrate::to_string(s.precision))); },
       .header = [](const Scenario& s,
                    const HeaderContext&) { return std::string(calibrate::to_string(s.precision)); }},
      // ---- transformers: sequence, batches and the parallel layout (docs/parallel-layouts.md)
      {.key = "seq_len",
       .group = GROUP_JOB,
       .type = "int >= 0",
       .default_text = "0 (the model's context)",
       .help = "Transformers: tokens per sequence (0 = the model's training context)",
       .flag = "--seq-len",
       .flag_kind = K::VALUE,
       .example = "2048",
       .parse = [](Scenario& s, const FieldInput& in) { s.seq_len = model_option(in, MAX_SEQ_LEN); },
       .write = [](const Scenario& s) { return value(s.seq_len, "0 = the model's context"); },
       .header =
           [](const Scenario& s, const HeaderContext&) {
             return s.seq_len ? fmt::format("{} tokens", s.seq_len) : std::string();
           }},
      {.key = "micro_batch",
       .group = GROUP_JOB,
       .type = "int >= 0",
       .default_text = "0 (= batch)",
       .help = "Transformers: sequences per micro-batch (0 = --batch)",
       .flag = "--micro-batch",
       .flag_kind = K::VALUE,
       .example = "2",
       .parse = [](Scenario& s, const FieldInput& in) { s.micro_batch = model_option(in, 1 << 20); },
       .write = [](const Scenario& s) { return value(s.micro_batch, "0 = batch"); },
       .header =
           [](const Scenario& s, const HeaderContext&) {
             return s.micro_batch ? std::to_string(s.micro_batch) : std::string();
           }},
      {.key = "global_batch",
       .group = GROUP_JOB,
       .type = "int >= 0",
       .default_text = "0 (one micro-batch per data-parallel replica)",
       .help = "Transformers: sequences per iteration over the whole job; a multiple of micro-batch x "
               "data-parallel "
               "size (gradient accumulation over the rest)",
       .flag = "--global-batch",
       .flag_kind = K::VALUE,
       .example = "512",
       .parse = [](Scenario& s, const FieldInput& in) { s.global_batch = model_option(in, 1 << 24); },
       .write =
           [](const Scenario& s) { return value(s.global_batch, "0 = micro-batch x data-parallel size"); },
       .header =
           [](const Scenario& s, const HeaderContext&) {
             return s.global_batch ? std::to_string(s.global_batch) : std::string();
           }},
      {.key = "flash_attention",
       .group = GROUP_JOB,
       .type = "bool",
       .default_text = "true",
       .help = "Transformers: dense attention kernels that keep the s x s scores (default: fused flash "
               "attention)",
       .flag = "--no-flash-attention",
       .flag_kind = K::SETS_FALSE,
       .example = "false",
       .parse = [](Scenario& s, const FieldInput& in) { s.flash_attention = in.as<bool>(); },
       .write = [](const Scenario& s) { return value(s.flash_attention); }},
      {.key = "mlm_predictions",
       .group = GROUP_JOB,
       .type = "int >= 0",
       .default_text = "0 (every position)",
       .help =
           "BERT pre-training: positions per sequence the masked-LM head runs over, gathered first (NVIDIA "
           "DeepLearningExamples' dense sequence output: its max_predictions_per_seq); 0 = every position",
       .flag = "--mlm-predictions",
       .flag_kind = K::VALUE,
       .example = "80",
       .parse = [](Scenario& s, const FieldInput& in) { s.mlm_predictions = model_option(in, MAX_SEQ_LEN); },
       .write = [](const Scenario& s) { return value(s.mlm_predictions, "0 = every position"); },
       .header =
           [](const Scenario& s, const HeaderContext&) {
             return s.mlm_predictions ? fmt::format("{} per sequence", s.mlm_predictions) : std::string();
           }},
      {.key = "tp",
       .group = GROUP_LAYOUT,
       .type = "int >= 1",
       .default_text = "1",
       .help =
           "Tensor-parallel size: each layer's heads, MLP and vocabulary split over this many GPUs of a node",
       .flag = "--tp",
       .flag_kind = K::VALUE,
       .example = "2",
       .parse = [](Scenario& s, const FieldInput& in) { s.point.layout.tp = int_at_least(in, 1); },
       .write = [](const Scenario& s) { return value(s.point.layout.tp); },
       .header = [](const Scenario& s, const HeaderContext&) { return layout_text(s); }},
      {.key = "pp",
       .group = GROUP_LAYOUT,
       .type = "int >= 1",
       .default_text = "1",
       .help = "Pipeline-parallel size: the layers split into this many stages",
       .flag = "--pp",
       .flag_kind = K::VALUE,
       .example = "2",
       .parse = [](Scenario& s, const FieldInput& in) { s.point.layout.pp = int_at_least(in, 1); },
       .write = [](const Scenario& s) { return value(s.point.layout.pp); }},
      {.key = "vp",
       .group = GROUP_LAYOUT,
       .type = "int >= 1",
       .default_text = "1",
       .help = "Virtual pipeline stages per pipeline rank (interleaved 1F1B)",
       .flag = "--vp",
       .flag_kind = K::VALUE,
       .example = "2",
       .parse = [](Scenario& s, const FieldInput& in) { s.point.layout.vp = int_at_least(in, 1); },
       .write = [](const Scenario& s) { return value(s.point.layout.vp); }},
      {.key = "cp",
       .group = GROUP_LAYOUT,
       .type = "int >= 1",
       .default_text = "1",
       .help = "Context-parallel size: each sequence split over this many GPUs (ring attention)",
       .flag = "--cp",
       .flag_kind = K::VALUE,
       .example = "2",
       .parse = [](Scenario& s, const FieldInput& in) { s.point.layout.cp = int_at_least(in, 1); },
       .write = [](const Scenario& s) { return value(s.point.layout.cp); }},
      {.key = "ep",
       .group = GROUP_LAYOUT,
       .type = "int >= 1",
       .default_text = "1",
       .help = "Expert-parallel size: a mixture of experts' experts split over this many data-parallel ranks",
       .flag = "--ep",
       .flag_kind = K::VALUE,
       .example = "2",
       .parse = [](Scenario& s, const FieldInput& in) { s.point.layout.ep = int_at_least(in, 1); },
       .write = [](const Scenario& s) { return value(s.point.layout.ep); }},
      {.key = "sequence_parallel",
       .group = GROUP_LAYOUT,
       .type = "bool",
       .default_text = "false",
       .help =
           "Megatron sequence parallelism: tensor-parallel allreduces become reduce-scatter + allgather and "
           "the norms' activations split over the sequence",
       .flag = "--sequence-parallel",
       .flag_kind = K::SETS_TRUE,
       .example = "true",
       .parse = [](Scenario& s, const FieldInput& in) { s.point.layout.sequence_parallel = in.as<bool>(); },
       .write = [](const Scenario& s) { return value(s.point.layout.sequence_parallel); }},
      {.key = "replicated_vocab",
       .group = GROUP_LAYOUT,
       .type = "bool",
       .default_text = "false",
       .help =
           "Tensor parallelism with the embedding and output layer whole on every rank (no vocab split, no "
           "collectives of their own), as a trainer that replicates them",
       .flag = "--replicated-vocab",
       .flag_kind = K::SETS_TRUE,
       .example = "true",
       .parse = [](Scenario& s, const FieldInput& in) { s.point.layout.replicated_vocab = in.as<bool>(); },
       .write = [](const Scenario& s) { return value(s.point.layout.replicated_vocab); }},
      {.key = "zero",
       .group = GROUP_LAYOUT,
       .type = "0..3",
       .default_text = "0",
       .help = "ZeRO stage over the data-parallel group: 0 DDP allreduce, 1 sharded optimizer, 2 + gradients "
               "(reduce-scatter), 3 + weights (FSDP full shard: gathered per block in forward and backward)",
       .flag = "--zero",
       .flag_kind = K::VALUE,
       .example = "1",
       .parse =
           [](Scenario& s, const FieldInput& in) {
             const int v = in.as<int>();
             if (v < 0 || v > 3) in.fail(fmt::format("must be 0, 1, 2 or 3, got {}", v));
             s.point.layout.zero = v;
           },
       .write = [](const Scenario& s) { return value(s.point.layout.zero); }},
      {.key = "recompute",
       .group = GROUP_LAYOUT,
       .type = "none / selective / full",
       .default_text = "none",
       .help = "Activation recomputation: none, selective (the attention core) or full (every block)",
       .flag = "--recompute",
       .flag_kind = K::VALUE,
       .example = "selective",
       .parse =
           [](Scenario& s, const FieldInput& in) {
             const auto v = in.as<std::string>();
             if (v != "none" && v != "selective" && v != "full")
               in.fail(fmt::format("unknown recompute '{}' (known: none, selective, full)", v));
             s.point.layout.recompute = v;
           },
       .write = [](const Scenario& s) { return value(s.point.layout.recompute); }},
      {.key = "schedule",
       .group = GROUP_LAYOUT,
       .type = "1f1b / gpipe",
       .default_text = "1f1b",
       .help = "Pipeline schedule: 1f1b (interleaved with --vp > 1) or gpipe",
       .flag = "--schedule",
       .flag_kind = K::VALUE,
       .example = "gpipe",
       .parse =
           [](Scenario& s, const FieldInput& in) {
             const auto v = in.as<std::string>();
             if (v != "1f1b" && v != "gpipe")
               in.fail(fmt::format("unknown schedule '{}' (known: 1f1b, gpipe)", v));
             s.point.layout.schedule = v;
           },
       .write = [](const Scenario& s) { return value(s.point.layout.schedule); }},
      {.key = "order",
       .group = GROUP_LAYOUT,
       .type = "string",
       .default_text = "tp-cp-dp-pp",
       .help = "Rank placement, fastest dimension first (Megatron-LM's tp-cp-dp-pp: tensor-parallel ranks "
               "inside a "
               "node, pipeline stages farthest apart)",
       .flag = "--order",
       .flag_kind = K::VALUE,
       .example = "tp-dp-cp-pp",
       .parse =
           [](Scenario& s, const FieldInput& in) {
             s.point.layout.order = in.as<std::string>();
             try {
               sim::ParallelLayout probe;
               probe.order = s.point.layout.order;
               sim::check_layout(probe, 1);
             } catch (const InputError& e) {
               in.fail(std::string(e.what()).substr(std::string(e.what()).find(':') + 2));
             }
           },
       .write = [](const Scenario& s) { return value(s.point.layout.order); }},
      {.key = "stage_layers",
       .group = GROUP_LAYOUT,
       .type = "list of int >= 1",
       .default_text = "even split",
       .help =
           "Layers per pipeline chunk, pp x vp entries in chunk order (default: an even split, the remainder "
           "spread after the first)",
       .flag = "--stage-layers",
       .flag_kind = K::VALUE,
       .example = "1,1",
       .parse = [](Scenario& s, const FieldInput& in) { s.point.layout.stage_layers = count_list(in); },
       .write =
           [](const Scenario& s) {
             return s.point.layout.stage_layers.empty() ? left_out("stage_layers: even split")
                                                        : list(s.point.layout.stage_layers);
           }},
      {.key = "layout_folds",
       .group = GROUP_FIDELITY,
       .type = "bool",
       .default_text = "true",
       .help = "Transformer layouts: simulate every tensor-parallel collective and every data-parallel "
               "replica (default: "
               "node-local collectives priced once, replicas folded onto one; docs/parallel-layouts.md)",
       .flag = "--no-layout-folds",
       .flag_kind = K::SETS_FALSE,
       .example = "false",
       .parse =
           [](Scenario& s, const FieldInput& in) {
             s.point.layout.fold_local_collectives = s.point.layout.fold_replicas = in.as<bool>();
           },
       .write = [](const Scenario& s) { return value(s.point.layout.fold_local_collectives); }},
      {.key = "comm_mode",
       .group = GROUP_FIDELITY,
       .type = "auto / coarse / fine",
       .default_text = "auto",
       .help = "Collective granularity (docs/simulation-comm.md)",
       .example = "fine",
       .parse = [](Scenario& s,
                   const FieldInput& in) { s.point.fidelity.comm_mode = in.choose(sim::comm_mode_by_name); },
       .write = [](const Scenario& s) { return value(sim::to_string(s.point.fidelity.comm_mode)); },
       .header = [](const Scenario& s,
                    const HeaderContext&) { return sim::to_string(s.point.fidelity.comm_mode); }},
      // ---- input: the data pipeline
      {.key = "data",
       .group = GROUP_INPUT,
       .type = "synthetic / real",
       .default_text = "synthetic",
       .help = "synthetic|real (real: read input from the platform's storage)",
       .flag = "--data",
       .flag_kind = K::VALUE,
       .example = "real",
       .parse = [](Scenario& s,
                   const FieldInput& in) { s.point.input.data = in.choose(sim::data_mode_by_name); },
       .write =
           [](const Scenario& s) {
             return value(std::string(s.point.input.data == sim::DataMode::REAL ? "real" : "synthetic"));
           },
       .header =
           [](const Scenario& s, const HeaderContext&) {
             return std::string(s.point.input.data == sim::DataMode::REAL ? "real" : "synthetic");
           }},
      {.key = "sample_bytes",
       .group = GROUP_INPUT,
       .type = "number >= 0",
       .default_text = "0 = ImageNet mean (~108 KB)",
       .help = "Bytes read per sample (real data)",
       .example = "100000",
       .parse = [](Scenario& s, const FieldInput& in) { s.point.input.sample_bytes = non_negative(in); },
       .write =
           [](const Scenario& s) {
             return number(s.point.input.sample_bytes,
                           s.point.input.sample_bytes > 0
                               ? ""
                               : fmt::format("0 = the ImageNet mean, {:.0f} B", IMAGENET_MEAN_SAMPLE_BYTES));
           }},
      {.key = "prefetch_depth",
       .group = GROUP_INPUT,
       .type = "int >= 1",
       .default_text = "2",
       .help = "Batches read ahead of compute",
       .example = "4",
       .parse = [](Scenario& s, const FieldInput& in) { s.point.input.prefetch_depth = int_at_least(in, 1); },
       .write = [](const Scenario& s) { return value(s.point.input.prefetch_depth); }},
      {.key = "metadata_ops_per_sample",
       .group = GROUP_INPUT,
       .type = "number >= 0",
       .default_text = "1",
       .help = "File opens per sample on a parallel file system",
       .example = "0.5",
       .parse = [](Scenario& s,
                   const FieldInput& in) { s.point.input.metadata_ops_per_sample = non_negative(in); },
       .write = [](const Scenario& s) { return number(s.point.input.metadata_ops_per_sample); }},
      {.key = "preprocess_ms_per_sample",
       .group = GROUP_INPUT,
       .type = "number >= 0",
       .default_text = "0",
       .help = "Host decode/augment time per sample, in the input pipeline",
       .example = "2.5",
       .parse =
           [](Scenario& s, const FieldInput& in) {
             s.point.input.preprocess_s_per_sample = non_negative(in) * S_PER_MS;
           },
       .write = [](const Scenario& s) { return number(s.point.input.preprocess_s_per_sample * MS_PER_S); }},
      // ---- fidelity knobs: how the simulation runs and what it assumes of the compute
      {.key = "iterations",
       .group = GROUP_FIDELITY,
       .type = "int >= 1",
       .default_text = "3 (ps-async: 6)",
       .help = "Simulated iterations, the first warm-up (default 3; 6 for ps-async, whose workers take "
               "several to settle)",
       .flag = "--iterations",
       .flag_kind = K::VALUE,
       .example = "5",
       .parse = [](Scenario& s, const FieldInput& in) { s.point.fidelity.iterations = int_at_least(in, 1); },
       .write =
           [](const Scenario& s) {
             // Left to each strategy when unset: a sweep over strategies may mix synchronous and asynchronous
             // ones.
             return s.point.fidelity.iterations > 0
                        ? value(s.point.fidelity.iterations)
                        : left_out(fmt::format("iterations: by strategy ({}; asynchronous {})",
                                               sim::SYNC_ITERATIONS, sim::ASYNC_ITERATIONS));
           }},
      {.key = "anchor",
       .group = GROUP_FIDELITY,
       .type = "number > 0",
       .default_text = "none",
       .help = "Measured single-worker throughput (samples/s) fixing the compute scale",
       .flag = "--anchor",
       .flag_kind = K::VALUE,
       .example = "138.5",
       .parse =
           [](Scenario& s, const FieldInput& in) {
             const double a = in.as<double>();
             if (!(a > 0)) in.fail(fmt::format("must be > 0, got {}", a));
             s.anchor_samples_per_s = a;
           },
       .write =
           [](const Scenario& s) {
             return s.anchor_samples_per_s ? number(*s.anchor_samples_per_s) : left_out();
           }},
      {.key = "calibration_db",
       .group = GROUP_JOB,
       .type = "string",
       .default_text = "default database",
       .help = "Calibration database path",
       .example = "/data/calibration.db",
       .parse =
           [](Scenario& s, const FieldInput& in) {
             s.db_path = resolve_path(in.as<std::string>(), in.file(), false);
           },
       .write =
           [](const Scenario& s) {
             return s.db_path.empty()
                        ? left_out()
                        : value(std::filesystem::absolute(s.db_path).lexically_normal().string());
           }},
      {.key = "trace",
       .group = GROUP_FIDELITY,
       .type = "string",
       .default_text = "none",
       .help = "Write a Chrome/Perfetto trace of the last point (worker, exchange and server tracks, link "
               "utilisation counters)",
       .flag = "--trace",
       .flag_kind = K::VALUE,
       .example = "trace.json",
       // An output: like --out, relative to the working directory.
       .parse = [](Scenario& s, const FieldInput& in) { s.point.fidelity.trace_path = in.as<std::string>(); },
       .write =
           [](const Scenario& s) {
             return s.point.fidelity.trace_path.empty() ? left_out() : value(s.point.fidelity.trace_path);
           }},
      {.key = "trace_iterations",
       .group = GROUP_FIDELITY,
       .type = "int >= 1",
       .default_text = "1",
       .help = "Iterations in the trace, the last N (default 1; raises --iterations to N+1 unless given)",
       .flag = "--trace-iterations",
       .flag_kind = K::VALUE,
       .example = "2",
       .parse =
           [](Scenario& s, const FieldInput& in) {
             const int n = int_at_least(in, 1);
             if (s.point.fidelity.trace_path.empty())
               in.fail("needs a trace file (trace: in the scenario or --trace FILE)");
             s.point.fidelity.trace_iterations = n;  // after the warm-up one unless iterations says otherwise
           },
       .write =
           [](const Scenario& s) {
             return s.point.fidelity.trace_path.empty() ? left_out()
                                                        : value(s.point.fidelity.trace_iterations);
           }},
      {.key = "allow_oversubscribe",
       .group = GROUP_FIDELITY,
       .type = "bool",
       .default_text = "false",
       .help = "Predict even when the memory estimate exceeds the GPU's memory (else exit 2)",
       .flag = "--allow-oversubscribe",
       .flag_kind = K::SETS_TRUE,
       .example = "true",
       .parse = [](Scenario& s, const FieldInput& in) { s.allow_oversubscribe = in.as<bool>(); },
       .write = [](const Scenario& s) { return value(s.allow_oversubscribe); }},
  };
}

}  // namespace

FieldInput::FieldInput(YAML::Node value, const yaml::Origin& origin, std::string context, std::string key)
    : value_(std::move(value)), origin_(&origin), context_(std::move(context)), key_(std::move(key)) {}

FieldInput::FieldInput(const std::string& text, std::string flag) : value_(text), flag_(std::move(flag)) {}

const std::string& FieldInput::file() const {
  static const std::string none;
  return origin_ == nullptr ? none : origin_->file;
}

std::string FieldInput::label() const {
  return origin_ == nullptr ? flag_ : fmt::format("{}: field '{}'", origin_->where(value_), key_);
}

void FieldInput::fail(std::string_view message) const {
  if (origin_ == nullptr) throw InputError(fmt::format("{}: {}", flag_, message));
  yaml::fail(value_, *origin_, context_, fmt::format("field '{}' {}", key_, message));
}

std::string FieldInput::named_choice_error(const std::string& message) const {
  // Name tables open with their own name for the value ("--data", "ps placement") or with "unknown".
  constexpr std::size_t MAX_NAME_CHARS = 40;
  const std::size_t unknown = message.find(": unknown ");
  if (unknown != std::string::npos && unknown < MAX_NAME_CHARS && message.find('\'') > unknown)
    return what() + message.substr(unknown);
  return message.starts_with("unknown ") ? what() + ": " + message : message;
}

const std::vector<ScenarioField>& scenario_fields() {
  static const std::vector<ScenarioField> fields = make_fields();
  return fields;
}

const ScenarioField* scenario_field_or_null(std::string_view key) {
  const auto& fields = scenario_fields();
  const auto it =
      std::find_if(fields.begin(), fields.end(), [&](const ScenarioField& f) { return f.key == key; });
  return it == fields.end() ? nullptr : &*it;
}

void apply_flag(Scenario& s, const ScenarioField& field, const std::string& text) {
  field.parse(s, FieldInput(text, field.flag));
}

}  // namespace dtsim::scenarios
