// The tunepar subcommands. Each Add*Command registers a CLI11 subcommand whose callback runs
// the command and leaves its Status in *result (the CLI maps it to an exit code).
#pragma once

#include <CLI/CLI.hpp>

#include "base/status.h"
#include "tuner/study/global_options.h"

namespace tunepar {

void AddConfigsCommand(CLI::App& app, const GlobalOptions& global, Status* result);
void AddKnobsCommand(CLI::App& app, const GlobalOptions& global, Status* result);
void AddSpaceCommand(CLI::App& app, const GlobalOptions& global, Status* result);
void AddSearchCommand(CLI::App& app, const GlobalOptions& global, Status* result);
void AddCalibrateCommand(CLI::App& app, const GlobalOptions& global, Status* result);
void AddPredictCommand(CLI::App& app, const GlobalOptions& global, Status* result);
void AddReportCommand(CLI::App& app, const GlobalOptions& global, Status* result);
void AddLaunchScriptCommand(CLI::App& app, const GlobalOptions& global, Status* result);
void AddStudyCommands(CLI::App& app, const GlobalOptions& global, Status* result);  // list, show, best, export
void AddForgetCommand(CLI::App& app, const GlobalOptions& global, Status* result);

}  // namespace tunepar
