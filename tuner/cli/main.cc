// tunepar: finds the fastest parallel layout for training a transformer on many GPUs.
#include <cstdio>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "base/provenance.h"
#include "tuner/cli/cli_messages.h"
#include "tuner/cli/commands.h"
#include "tuner/cli/exit_codes.h"
#include "tuner/loops/stop_signals.h"

namespace {

void Fail(const std::string& message) {
  fmt::print(stderr, "tunepar: error: {}\n", message);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tunepar;
  auto logger = spdlog::stderr_color_st("tunepar");
  logger->set_pattern("tunepar: %^%l%$: %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::warn);

  CLI::App app{
      "tunepar: finds the fastest parallel layout (TP, PP, DP, micro-batch, precision, ZeRO-1,\n"
      "recomputation) for training a transformer on many GPUs, and explains why.",
      "tunepar"};
  app.set_version_flag("--version", fmt::format("tunepar {} ({})", Version(), GitRevision()));
  GlobalOptions global;
  app.add_option("--store", global.store, "Store directory (per-node SQLite shards)")
      ->envname("TUNEPAR_STORE")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](const std::string& dir) {
            return dir.empty() ? std::string("the store directory must not be empty (give a path, e.g. --store .)")
                               : std::string();
          },
          "DIR", "not empty"));
  app.add_flag("-v,--verbose", global.verbose, "Debug logging on stderr");
  app.add_flag("--json", global.json, "Machine-readable JSON on stdout");
  app.require_subcommand(1, 1);
  app.fallthrough();
  app.footer(
      "Exit codes: 0 ok, 1 internal error, 2 usage, 3 config, 4 no legal layout, 5 store,\n"
      "6 store from a newer tunepar, 7 study not found, 8 every trial failed the same way,\n"
      "9 a damaged shard was skipped (list, show, export, report; --allow-damaged: 0),\n"
      "10 calibration failed (nothing written; --force writes it), 130/143 stopped by SIGINT/SIGTERM.\n"
      "'tunepar help SUBCOMMAND' (or 'tunepar SUBCOMMAND --help') lists a subcommand's options. See README.md and docs/.");
  app.parse_complete_callback([&] {
    if (global.verbose) spdlog::set_level(spdlog::level::debug);
    // launch-script writes a shell script: there is nothing for --json to shape.
    if (global.json && app.got_subcommand("launch-script"))
      spdlog::warn("--json does nothing with launch-script (it writes a shell script)");
  });

  Status result;
  AddConfigsCommand(app, global, &result);
  AddSpaceCommand(app, global, &result);
  AddSearchCommand(app, global, &result);
  AddPredictCommand(app, global, &result);
  AddCalibrateCommand(app, global, &result);
  AddStudyCommands(app, global, &result);
  AddForgetCommand(app, global, &result);
  AddReportCommand(app, global, &result);
  AddLaunchScriptCommand(app, global, &result);
  AddKnobsCommand(app, global, &result);

  if (const int handled = HandleHelpAndUnknownSubcommand(app, argc, argv); handled >= 0) return handled;
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    Fail(ParseErrorMessage(app, e));
    return kExitUsage;
  } catch (const std::exception& e) {
    Fail(fmt::format("internal error: {}", e.what()));
    return kExitInternal;
  }
  std::fflush(stdout);
  if (!result.ok()) {
    Fail(result.message());
    // Stopped by a signal: the shell's convention, 128 + the signal.
    if (result.code() == StatusCode::kInterrupted && StopSignal() != 0) return 128 + StopSignal();
    return ExitCode(result.code());
  }
  return kExitOk;
}
