// The command line's own messages: option checks that name what is allowed, the unknown word
// with the closest known one, and CLI11's parse errors said in one readable line.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace tunepar {

// A whole number of at least `min`: "must be a whole number >= 1, got 0" (CLI11's
// PositiveNumber says "Value 0 not in range 0.000000 to 1797693134862315708..." instead).
CLI::Validator AtLeast(long long min);
// A whole number in [lo, hi]: "must be a whole number from 2 to 2000, got 1".
CLI::Validator Between(long long lo, long long hi);
// A number above zero (seconds, fractions): "must be a number > 0, got '0'".
CLI::Validator Positive();
// One of `allowed`: "'magic' is not one of auto, model, command".
CLI::Validator OneOf(std::vector<std::string> allowed);

// The candidate closest to `word` by edit distance, or "" when none is close enough to be a typo.
std::string ClosestName(const std::string& word, const std::vector<std::string>& candidates);

// Whether the option `name` ("--budget") of the command (or its option groups) was given.
bool Given(const CLI::App& command, const std::string& name);

// The long option names a (sub)command accepts, its option groups' and its parents' included.
std::vector<std::string> OptionNames(const CLI::App& command);

// The subcommand named on the command line (the first word that is not a global option), or ""
// when there is none. `app` knows which global options take a value.
std::string SubcommandWord(const CLI::App& app, int argc, const char* const* argv, int* index = nullptr);

// `tunepar help [SUBCOMMAND]` and an unknown subcommand, before CLI11 parses: the exit code when
// handled (help printed, or one error line), -1 to go on parsing.
int HandleHelpAndUnknownSubcommand(const CLI::App& app, int argc, const char* const* argv);

// One line for a parse error CLI11 raised, naming the option or word and what is allowed. An
// unknown option is named first: CLI11 would report a missing required option instead.
std::string ParseErrorMessage(const CLI::App& app, const CLI::ParseError& error);

}  // namespace tunepar
