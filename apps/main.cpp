// dtsim entry point: builds the CLI from the registered subcommands and maps errors to exit codes
// (0 ok, 1 failure, 2 bad input). Errors are caught here and nowhere else.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <vector>

#include "apps/command.hpp"
#include "common/build_id.hpp"
#include "common/errors.hpp"
#include "common/paths.hpp"
#include "common/text.hpp"

namespace dtsim::apps {
namespace {
struct Entry {
  std::string name;
  int order;
  CommandSetup setup;
};
std::vector<Entry>& registry() {
  static std::vector<Entry> entries;
  return entries;
}
}  // namespace

CommandRegistrar::CommandRegistrar(std::string name, int order, CommandSetup setup) {
  registry().push_back({std::move(name), order, std::move(setup)});
}

void setup_all(CLI::App& root) {
  auto entries = registry();
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.order < b.order; });
  for (const auto& e : entries) e.setup(root);
}

}  // namespace dtsim::apps

namespace {
// Every error is one line: a value echoed from the input cannot add lines (or control characters).
constexpr std::size_t MAX_MESSAGE_CHARS = 4000;
std::string one_line(const char* message) { return dtsim::printable(message, MAX_MESSAGE_CHARS); }
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dtsim: simulate and predict distributed deep-learning training", "dtsim"};
  app.require_subcommand(1);
  app.set_version_flag("--version", fmt::format("dtsim {}", dtsim::build_id()));
  app.footer(fmt::format("Data (platforms, devices, calibration, scenarios): {}\n"
                         "  found as $DTSIM_DATA_DIR if set, else <prefix>/share/dtsim beside an installed dtsim, "
                         "else the source tree it was built from.",
                         dtsim::data_dir().string()));
  try {
    dtsim::apps::setup_all(app);
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "dtsim: " << one_line(e.what()) << " (see --help)\n";
    return 2;
  } catch (const dtsim::InputError& e) {
    std::cerr << "dtsim: error: " << one_line(e.what()) << '\n';
    return 2;
  } catch (const dtsim::Failure& e) {
    std::cerr << "dtsim: failed: " << one_line(e.what()) << '\n';
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "dtsim: failed: " << one_line(e.what()) << '\n';
    return 1;
  }
  return 0;
}
