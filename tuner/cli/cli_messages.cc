#include "tuner/cli/cli_messages.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include <fmt/format.h>

#include "tuner/cli/exit_codes.h"

namespace tunepar {

namespace {

// The value as a whole number, or nullopt (not a number, a fraction, trailing text).
std::optional<long long> WholeNumber(const std::string& text) {
  long long value = 0;
  const char* end = text.data() + text.size();
  const auto [at, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || at != end || text.empty()) return std::nullopt;
  return value;
}

// Edits from one word to the other: inserting, deleting or changing a character, or swapping
// two neighbours ("logie" for "logei"), each counts one.
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

std::string DidYouMean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string closest = ClosestName(word, candidates);
  return closest.empty() ? "" : fmt::format(" (did you mean '{}'?)", closest);
}

// "tunepar search", as the user typed the command.
std::string CommandPath(const CLI::App& command) {
  std::string path = command.get_name();
  for (const CLI::App* p = command.get_parent(); p != nullptr; p = p->get_parent()) {
    if (!p->get_name().empty()) path = p->get_name() + " " + path;
  }
  return path;
}

// The deepest subcommand the command line named (the app itself when none).
const CLI::App& ParsedCommand(const CLI::App& app) {
  const CLI::App* command = &app;
  for (;;) {
    std::vector<const CLI::App*> parsed = command->get_subcommands([](const CLI::App* s) {
      return !s->get_name().empty() && s->count() > 0;
    });
    if (parsed.empty()) return *command;
    command = parsed.front();
  }
}

std::vector<std::string> SubcommandNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* s : app.get_subcommands([](const CLI::App* s) { return !s->get_name().empty(); }))
    names.push_back(s->get_name());
  return names;
}

// The option `name` ("--world" or "-w") of this command or one of its option groups.
const CLI::Option* FindOwnOption(const CLI::App& command, const std::string& name) {
  std::vector<const CLI::Option*> found =
      command.get_options([&](const CLI::Option* o) { return o->check_name(name); });
  if (!found.empty()) return found.front();
  for (const CLI::App* group : command.get_subcommands([](const CLI::App* s) { return s->get_name().empty(); })) {
    if (const CLI::Option* in_group = FindOwnOption(*group, name)) return in_group;
  }
  return nullptr;
}

// The option `name` as the command line means it: the command's own, else a parent's (--store).
const CLI::Option* FindOption(const CLI::App& command, const std::string& name) {
  for (const CLI::App* c = &command; c != nullptr; c = c->get_parent()) {
    if (const CLI::Option* found = FindOwnOption(*c, name)) return found;
  }
  return nullptr;
}

std::string ValueKind(const CLI::Option* option) {
  if (option == nullptr) return "a value";
  const std::string type = option->get_type_name();
  if (type.find("INT") != std::string::npos || type.find("UINT") != std::string::npos) return "a whole number";
  if (type.find("FLOAT") != std::string::npos) return "a number";
  return "a value";
}

// The text after "NAME: " or before " = ", as CLI11 puts the option's name in its messages.
std::string NameIn(const std::string& message, const std::string& before, const std::string& after) {
  const size_t start = message.find(before);
  if (start == std::string::npos) return "";
  const size_t from = start + before.size();
  const size_t end = after.empty() ? message.size() : message.find(after, from);
  return message.substr(from, end == std::string::npos ? std::string::npos : end - from);
}

std::string UnknownArgumentMessage(const CLI::App& command, const std::string& word) {
  const std::string where = CommandPath(command);
  if (word.rfind('-', 0) == 0) {
    const std::string name = word.substr(0, word.find('='));
    return fmt::format("unknown option '{}' for '{}'{}; '{} --help' lists its options", name, where,
                       DidYouMean(name, OptionNames(command)), where);
  }
  return fmt::format("unexpected argument '{}' for '{}'; '{} --help' says what it takes", word, where, where);
}

// An option given more than once that takes one value.
std::string RepeatedOptionMessage(const CLI::App& command, const std::string& name) {
  const CLI::Option* option = FindOption(command, name);
  if (option != nullptr && option->count() > 1) {
    const std::vector<std::string>& values = option->results();
    const std::string shown = option->get_expected_max() == 0 || values.empty()
                                  ? ""
                                  : fmt::format(" ({})", fmt::join(values, ", "));
    return fmt::format("{} is given {} times{}: give it once", name, option->count(), shown);
  }
  return fmt::format("{} takes one value: give it once", name);
}

std::string RequiredMessage(const CLI::App& command, const std::string& name) {
  if (name.find("subcommand") != std::string::npos || name.empty()) {
    return fmt::format("a subcommand is required: one of {} ('tunepar --help' says what each does)",
                       fmt::join(SubcommandNames(command), ", "));
  }
  const CLI::Option* option = FindOption(command, name);
  const std::string type = option != nullptr ? option->get_type_name() : "";
  return fmt::format("'{}' needs {}{}", CommandPath(command), name, type.empty() ? "" : " " + type);
}

std::string ConversionMessage(const CLI::App& command, const CLI::ParseError& error) {
  const std::string message = error.what();
  const std::string name = NameIn(message, "Could not convert: ", " = ");
  if (name.empty()) return message;
  const std::string value = NameIn(message, name + " = ", "");
  return fmt::format("{} takes {}, got '{}'", name, ValueKind(FindOption(command, name)), value);
}

}  // namespace

CLI::Validator AtLeast(long long min) {
  return CLI::Validator(
      [min](std::string& input) -> std::string {
        const std::optional<long long> value = WholeNumber(input);
        if (value && *value >= min) return "";
        return fmt::format("must be a whole number >= {}, got '{}'", min, input);
      },
      fmt::format("INT>={}", min));
}

CLI::Validator Between(long long lo, long long hi) {
  return CLI::Validator(
      [lo, hi](std::string& input) -> std::string {
        const std::optional<long long> value = WholeNumber(input);
        if (value && *value >= lo && *value <= hi) return "";
        return fmt::format("must be a whole number from {} to {}, got '{}'", lo, hi, input);
      },
      fmt::format("INT in [{}, {}]", lo, hi));
}

CLI::Validator Positive() {
  return CLI::Validator(
      [](std::string& input) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(input.c_str(), &end);
        if (!input.empty() && end == input.c_str() + input.size() && value > 0) return "";
        return fmt::format("must be a number > 0, got '{}'", input);
      },
      "NUMBER>0");
}

CLI::Validator OneOf(std::vector<std::string> allowed) {
  const std::string listed = fmt::format("{}", fmt::join(allowed, ", "));
  return CLI::Validator(
      [allowed, listed](std::string& input) -> std::string {
        if (std::find(allowed.begin(), allowed.end(), input) != allowed.end()) return "";
        return fmt::format("'{}' is not one of {}{}", input, listed, DidYouMean(input, allowed));
      },
      fmt::format("{{{}}}", fmt::join(allowed, ",")));
}

std::string ClosestName(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::string::npos;
  for (const std::string& c : candidates) {
    const size_t d = EditDistance(word, c);
    if (d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  // A typo changes a few characters: a third of the word, at least one and at most three.
  const size_t allowed = std::clamp<size_t>(word.size() / 3, 1, 3);
  return best_distance <= allowed ? best : "";
}

bool Given(const CLI::App& command, const std::string& name) {
  const CLI::Option* option = FindOwnOption(command, name);
  return option != nullptr && option->count() > 0;
}

std::vector<std::string> OptionNames(const CLI::App& command) {
  std::vector<std::string> names;
  for (const CLI::App* c = &command; c != nullptr; c = c->get_parent()) {
    for (const CLI::Option* o : c->get_options()) {
      for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
      for (const std::string& s : o->get_snames()) names.push_back("-" + s);
    }
    for (const CLI::App* group : c->get_subcommands([](const CLI::App* s) { return s->get_name().empty(); })) {
      for (const CLI::Option* o : group->get_options()) {
        for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
      }
    }
  }
  return names;
}

std::string SubcommandWord(const CLI::App& app, int argc, const char* const* argv, int* index) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") return "";
    if (arg.rfind('-', 0) == 0) {
      // A global option that takes a value ("--store DIR") consumes the next word.
      const CLI::Option* option = FindOption(app, arg);
      if (arg.find('=') == std::string::npos && option != nullptr && option->get_expected_max() > 0) ++i;
      continue;
    }
    if (index != nullptr) *index = i;
    return arg;
  }
  return "";
}

int HandleHelpAndUnknownSubcommand(const CLI::App& app, int argc, const char* const* argv) {
  int at = 0;
  const std::string word = SubcommandWord(app, argc, argv, &at);
  if (word.empty()) return -1;
  // Before the subcommand only the global options go ("--world 8 search" would otherwise read as
  // an unknown subcommand '8', or CLI11's "--world is required").
  for (int i = 1; i < at; ++i) {
    const std::string arg = argv[i];
    const std::string name = arg.substr(0, arg.find('='));
    if (arg.rfind('-', 0) == 0 && FindOption(app, name) == nullptr) {
      fmt::print(stderr,
                 "tunepar: error: unknown option '{}' before the subcommand (only --store, --json and --verbose go "
                 "there; a subcommand's options follow it)\n",
                 name);
      return kExitUsage;
    }
  }
  const std::vector<std::string> names = SubcommandNames(app);
  if (std::find(names.begin(), names.end(), word) != names.end()) return -1;
  if (word == "help") {
    const std::string topic = at + 1 < argc ? argv[at + 1] : "";
    if (topic.empty() || topic.rfind('-', 0) == 0) {
      fmt::print("{}", app.help());
      return kExitOk;
    }
    if (std::find(names.begin(), names.end(), topic) != names.end()) {
      fmt::print("{}", app.get_subcommand(topic)->help(app.get_name()));
      return kExitOk;
    }
    fmt::print(stderr, "tunepar: error: help: unknown subcommand '{}'{}; 'tunepar help' lists them\n", topic,
               DidYouMean(topic, names));
    return kExitUsage;
  }
  fmt::print(stderr, "tunepar: error: unknown subcommand '{}'{}; 'tunepar help' lists them\n", word,
             DidYouMean(word, names));
  return kExitUsage;
}

std::string ParseErrorMessage(const CLI::App& app, const CLI::ParseError& error) {
  const CLI::App& command = ParsedCommand(app);
  // An unknown word first: CLI11 checks required options before it reports the words it did not
  // take, and "--world is required" hides the typo in "--wrld 8".
  const std::vector<std::string> unknown = app.remaining(true);
  if (!unknown.empty()) return UnknownArgumentMessage(command, unknown.front());
  const std::string message = error.what();
  if (dynamic_cast<const CLI::RequiredError*>(&error) != nullptr)
    return RequiredMessage(command, NameIn(message, "", " is required"));
  if (dynamic_cast<const CLI::ConversionError*>(&error) != nullptr) return ConversionMessage(command, error);
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&error) != nullptr) {
    const std::string name = message.substr(0, message.find(':'));
    if (message.find("At Most") != std::string::npos) return RepeatedOptionMessage(command, name);
    const CLI::Option* option = FindOption(command, name);
    // "INT:INT>=1": the type, then its checks; the type says what to give.
    const std::string type = option != nullptr ? option->get_type_name().substr(0, option->get_type_name().find(':')) : "";
    return fmt::format("{} needs a value{}", name, type.empty() ? "" : " (" + type + ")");
  }
  if (dynamic_cast<const CLI::ExcludesError*>(&error) != nullptr) {
    const std::string first = NameIn(message, "", " excludes ");
    const std::string second = NameIn(message, " excludes ", "");
    return fmt::format("{} and {} exclude each other: give one of them", first, second);
  }
  return message;
}

}  // namespace tunepar
