// Subcommand registry: each apps/cmd_*.cpp registers one subcommand; main() owns parsing and exit codes.
#pragma once
#include <CLI/CLI.hpp>

#include <functional>
#include <string>

namespace dtsim::apps {

// Adds a subcommand (and its options and callback) to the root app. Callbacks throw
// dtsim::InputError (exit 2) or dtsim::Failure (exit 1); returning normally means exit 0.
using CommandSetup = std::function<void(CLI::App& root)>;

// Registers `setup` under `name` (order of registration = order in --help, sorted by `order`).
struct CommandRegistrar {
  CommandRegistrar(std::string name, int order, CommandSetup setup);
};

// Builds the root app with every registered subcommand.
void setup_all(CLI::App& root);

}  // namespace dtsim::apps
