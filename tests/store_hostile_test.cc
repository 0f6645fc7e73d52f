// A store as a hostile or careless user meets it (issue 27, items 1-4 and 9): names that would
// reach the filesystem or a shell, store paths with every character a shell misreads, hints a
// user pastes, links planted inside the store, refused runs that must leave nothing behind, and
// messages that say what is wrong. Measured with the fake trainer through the command backend.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <map>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runner/launch_environment.h"
#include "store/store_layout.h"
#include "store/store_reader.h"
#include "tests/test_support.h"
#include "tuner/cli/exit_codes.h"

namespace tunepar {
namespace {

namespace fs = std::filesystem;

using testing::CliRun;
using testing::kTestCpu;
using testing::TempDir;

std::string Q(const std::string& word) {
  return runner::ShellQuote(word);
}

// `tunepar <args>` run from `cwd` (where anything that escaped its quoting would land).
CliRun RunIn(const std::string& cwd, const std::string& args) {
  return testing::RunCommand("cd " + Q(cwd) + " && " + testing::TuneparBinary() + " " + args);
}

constexpr const char* kTrainer =
    TUNEPAR_FAKE_TRAINER " --tp {tp} --pp {pp} --mbs {mbs} --precision {precision} --recompute {recompute} --vpp {vpp}";

// A command search of tiny at world 2 (node n0 unless `extra` names one): `command` is the template.
std::string Search(const std::string& store, const std::string& command, int budget, const std::string& extra = "") {
  return fmt::format(
      "--store {} search --world 2 --model tiny --hardware {} --backend command --command {} --metric-regex {} "
      "--confirm 0 --time-budget 60 --budget {} {} {}",
      Q(store), Q(kTestCpu), Q(command), Q("step_time: ([^ ]+)"), budget,
      extra.find("--node-id") == std::string::npos ? "--node-id n0" : "", extra);
}

struct StoredTrial {
  int64_t number;
  std::string layout, status, message;
};

std::vector<StoredTrial> TrialsOf(const std::string& store, const std::string& study) {
  const CliRun show = testing::RunCommand(testing::TuneparBinary() + " --store " + Q(store) + " --json show " + Q(study) +
                                          " --all --allow-damaged");
  std::vector<StoredTrial> out;
  const nlohmann::json j = nlohmann::json::parse(show.out, nullptr, false);
  if (!j.is_object()) return out;
  for (const auto& t : j["trials"])
    out.push_back({t["number"].get<int64_t>(), t["layout"], t["status"], t.value("message", "")});
  return out;
}

int CountLines(const std::string& s) {
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

void ExpectOneLineError(const CliRun& run, int exit_code, const std::string& fragment) {
  EXPECT_EQ(run.exit_code, exit_code) << run.err;
  EXPECT_EQ(CountLines(run.err), 1) << run.err;
  EXPECT_NE(run.err.find(fragment), std::string::npos) << run.err;
}

// Every path below `dir` (files, folders and links), to prove a refused run created nothing.
std::vector<std::string> PathsBelow(const std::string& dir) {
  std::vector<std::string> paths;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    paths.push_back(it->path().string());
  std::sort(paths.begin(), paths.end());
  return paths;
}

// The words a POSIX shell makes of `line` (quotes and backslashes as sh reads them; no
// expansion is performed: a `$(...)` left unquoted stays in a word, where the test sees it).
std::vector<std::string> ShellWords(const std::string& line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == ' ' || c == '\t') {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\\' && i + 1 < line.size()) {
      word += line[++i];
    } else if (c == '\'') {
      const size_t close = line.find('\'', i + 1);
      word += line.substr(i + 1, close - i - 1);
      i = close;
    } else if (c == '"') {
      for (++i; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] == '\\' && i + 1 < line.size() && std::string("\\\"$`").find(line[i + 1]) != std::string::npos) ++i;
        word += line[i];
      }
    } else {
      word += c;
    }
  }
  if (in_word) words.push_back(word);
  return words;
}

// The command after `label` in the output ("Inspect: tunepar ... show X"), up to `end` outside
// quotes (default: two spaces or a line's end, as "Inspect: ...    Report: ..." prints them).
std::string HintAfter(const std::string& out, const std::string& label, const std::string& end = "") {
  const size_t at = out.find(label);
  if (at == std::string::npos) return "";
  const size_t start = at + label.size();
  char quote = 0;
  for (size_t i = start; i < out.size(); ++i) {
    const char c = out[i];
    if (quote != 0) {
      if (c == quote) quote = 0;
      else if (c == '\\' && quote == '"') ++i;
      continue;
    }
    const bool ends = end.empty() ? c == '\n' || out.compare(i, 2, "  ") == 0 : out.compare(i, end.size(), end) == 0;
    if (ends) return out.substr(start, i - start);
    if (c == '\'' || c == '"') quote = c;
    else if (c == '\\') ++i;
  }
  return out.substr(start);
}

std::string StudyIdOf(const std::string& store) {
  const CliRun list = testing::RunCommand(testing::TuneparBinary() + " --store " + Q(store) + " --json list");
  const nlohmann::json j = nlohmann::json::parse(list.out, nullptr, false);
  return j.is_array() && j.size() == 1 ? j[0]["study_id"].get<std::string>() : "";
}

// ---- Item 1: names that would escape the store or run as commands.

TEST(HostileNames, AStudyNameThatWouldRunOrEscapeIsRefusedAndLeavesNothing) {
  for (const std::string name : {"$(touch F)", "`touch F`", "../../outside", "..", "a'b", "a\"b", "a\nb", "a b",
                                 "a;rm -rf $HOME`id`", "-rf", ".hidden", "ü"}) {
    TempDir dir;
    fs::create_directories(dir / "cwd/x/y");
    const CliRun run = RunIn(dir / "cwd/x/y", Search(dir / "cwd/x/y/store", kTrainer, 2, "--study " + Q(name)));
    EXPECT_EQ(run.exit_code, kExitUsage) << name << ": " << run.err;
    EXPECT_EQ(CountLines(run.err), 1) << run.err;
    EXPECT_NE(run.err.find("--study"), std::string::npos) << run.err;
    EXPECT_NE(run.err.find("is not a valid name"), std::string::npos) << run.err;
    EXPECT_EQ(PathsBelow(dir.path()), (std::vector<std::string>{dir / "cwd", dir / "cwd/x", dir / "cwd/x/y"}))
        << "for --study " << name;
  }
}

TEST(HostileNames, ACommandSubstitutionInAModelFilesNameIsRefused) {
  TempDir dir;
  fs::create_directories(dir / "cwd");
  std::string model = testing::PresetText("models", "tiny");
  model.replace(model.find("name = \"tiny\""), std::string("name = \"tiny\"").size(), "name = \"$(touch F)\"");
  testing::WriteFile(dir / "evil.toml", model);
  std::string args = Search(dir / "cwd/store", kTrainer, 2);
  args.replace(args.find("--model tiny"), std::string("--model tiny").size(), "--model " + Q(dir / "evil.toml"));
  const CliRun run = RunIn(dir / "cwd", args);
  ExpectOneLineError(run, kExitConfig, dir / "evil.toml");
  EXPECT_NE(run.err.find("name '$(touch F)' is not a valid name"), std::string::npos) << run.err;
  EXPECT_EQ(PathsBelow(dir / "cwd"), std::vector<std::string>{});
  EXPECT_FALSE(fs::exists(dir / "F"));
}

// A store path may hold anything; every trial of a healthy program is ok, its files land in its
// own folder, and nothing in the path ever runs: through a redirect into {trial_dir}, the
// DeepSpeed config's path, and --x={trial_dir}.
TEST(HostileNames, AStorePathWithSpacesQuotesNewlinesAndUnicodeRunsHealthyTrials) {
  TempDir dir;
  fs::create_directories(dir / "cwd");
  const std::string store = dir / "cwd/my store 'q' \"d\" ü\n$(touch F) `touch G` ;x";
  const std::string command = std::string(kTrainer) +
                              " > {trial_dir}/x.txt && test -s {deepspeed_config} && test -d \"{trial_dir}\" && "
                              "[ --x={trial_dir} = \"--x={trial_dir}\" ] && cat {trial_dir}/x.txt";
  const CliRun run = RunIn(dir / "cwd", Search(store, command, 3, "--study plain"));
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  const std::vector<StoredTrial> trials = TrialsOf(store, "plain");
  ASSERT_EQ(trials.size(), 3u);
  for (const StoredTrial& t : trials) {
    EXPECT_EQ(t.status, "ok") << t.message;
    const std::string folder = store::TrialDirPath(store, "plain", "n0", t.number);
    EXPECT_TRUE(fs::exists(folder + "/x.txt")) << folder;
    EXPECT_TRUE(fs::exists(folder + "/deepspeed_config.json")) << folder;
  }
  for (const std::string& stray : {dir / "F", dir / "G", dir / "cwd/F", dir / "cwd/G", dir / "cwd/my"})
    EXPECT_FALSE(fs::exists(stray)) << stray;
  EXPECT_EQ(PathsBelow(dir / "cwd").front(), store);  // the store, and nothing else, in the folder
}

// A study stored under a name the rule now refuses (a tunepar before it accepted any) stays
// usable: show, report and resume; its new trial folders are named by its id, and every hint
// quotes its name.
TEST(HostileNames, AStoredStudyWithANameTheRuleRefusesStaysUsable) {
  TempDir dir;
  fs::create_directories(dir / "cwd");
  const std::string store = dir / "cwd/store";
  ASSERT_EQ(RunIn(dir / "cwd", Search(store, kTrainer, 2, "--study plain")).exit_code, 0);
  const std::string id = StudyIdOf(store);
  ASSERT_FALSE(id.empty());
  const std::string old_name = "old name $(touch F) `touch G`";
  testing::RenameStoredStudy(store, "n0", id, old_name);

  EXPECT_EQ(RunIn(dir / "cwd", "--store " + Q(store) + " show " + Q(old_name)).exit_code, 0);
  EXPECT_EQ(RunIn(dir / "cwd", "--store " + Q(store) + " report " + Q(old_name)).exit_code, 0);
  const CliRun resumed = RunIn(dir / "cwd", Search(store, kTrainer, 4, "--study " + Q(old_name)));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("(resumed;"), std::string::npos) << resumed.out;
  EXPECT_EQ(TrialsOf(store, id).size(), 4u);
  EXPECT_TRUE(fs::is_directory(store::TrialDirPath(store, id, "n0", 3)));
  EXPECT_TRUE(fs::is_directory(store::TrialDirPath(store, id, "n0", 4)));
  EXPECT_FALSE(fs::exists(dir / "cwd/F"));
  EXPECT_FALSE(fs::exists(dir / "cwd/G"));
  EXPECT_EQ(ShellWords(HintAfter(resumed.out, "Inspect: ")),
            (std::vector<std::string>{"tunepar", "--store", store, "show", old_name}));
  EXPECT_EQ(ShellWords(HintAfter(resumed.out, "Report: ")),
            (std::vector<std::string>{"tunepar", "--store", store, "report", old_name, "--shap"}));
}

// ---- Item 2: every command printed for a user to paste is quoted word by word.

TEST(HostileNames, EveryPrintedHintPastesAsTheWordsMeant) {
  TempDir dir;
  fs::create_directories(dir / "cwd");
  const std::string store = dir / "cwd/st ore 'q' $(touch F) `id` ü";
  // A metric read as milliseconds that the program prints in seconds: the model is ~1000x off,
  // so the search also prints its calibrate hint. The study is stored under a name a tunepar
  // before the name rule accepted.
  const std::string search = Search(store, kTrainer, 1, "--study plain --metric step_time_ms");
  ASSERT_EQ(RunIn(dir / "cwd", search).exit_code, 0);
  const std::string name = "a;rm -rf $HOME`id` 'x'";
  testing::RenameStoredStudy(store, "n0", StudyIdOf(store), name);
  const CliRun run = RunIn(dir / "cwd", Search(store, kTrainer, 3, "--study " + Q(name) + " --metric step_time_ms"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(ShellWords(HintAfter(run.out, "Inspect: ")),
            (std::vector<std::string>{"tunepar", "--store", store, "show", name}));
  EXPECT_EQ(ShellWords(HintAfter(run.out, "Report: ")),
            (std::vector<std::string>{"tunepar", "--store", store, "report", name, "--shap"}));
  EXPECT_EQ(ShellWords(HintAfter(run.out, "the measured throughput (median of 3 trials): ", " fits the profile")),
            (std::vector<std::string>{"tunepar", "--store", store, "calibrate", "--from", name, "--hardware",
                                      "test-cpu", "-o", "fitted.toml"}))
      << run.out;
  // A dry run's hints too.
  const CliRun dry =
      RunIn(dir / "cwd", "--store " + Q(store) + " search --world 8 --model tiny --hardware local-cpu --study dry");
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_EQ(ShellWords(HintAfter(dry.out, "Inspect: ")),
            (std::vector<std::string>{"tunepar", "--store", store, "show", "dry"}))
      << dry.out;
  EXPECT_EQ(ShellWords(HintAfter(dry.out, "Export: ")),
            (std::vector<std::string>{"tunepar", "--store", store, "export", "dry", "--csv"}))
      << dry.out;
  // And each pasted hint works.
  const CliRun pasted = testing::RunCommand("cd " + Q(dir / "cwd") + " && " + testing::TuneparBinary() + " " +
                                            HintAfter(run.out, "Inspect: ").substr(std::string("tunepar ").size()));
  EXPECT_EQ(pasted.exit_code, 0) << pasted.err;
  EXPECT_FALSE(fs::exists(dir / "cwd/F"));
}

// ---- Item 3: links planted inside the store are never followed.

// A first search of `plain` (budget 1) whose next trial, n0-2, finds `plant` done to its folder
// (given the folder and a victim folder outside the store).
void ExpectRefusedAt(const std::string& what,
                     const std::function<void(const std::string& folder, const std::string& victim)>& plant) {
  TempDir dir;
  fs::create_directories(dir / "cwd");
  const std::string store = dir / "cwd/store";
  ASSERT_EQ(RunIn(dir / "cwd", Search(store, kTrainer, 1, "--study plain")).exit_code, 0);
  fs::create_directories(dir / "victim");
  testing::WriteFile(dir / "victim/command.txt", "the victim's\n");
  testing::WriteFile(dir / "victim/output.log", "the victim's\n");
  testing::WriteFile(dir / "victim/processes.txt", "the victim's\n");
  const std::string folder = store::TrialDirPath(store, "plain", "n0", 2);
  plant(folder, dir / "victim");
  const CliRun run = RunIn(dir / "cwd", Search(store, kTrainer, 2, "--study plain"));
  EXPECT_EQ(run.exit_code, kExitStore) << what << ": " << run.err;
  EXPECT_NE(run.err.find("is a symbolic link"), std::string::npos) << what << ": " << run.err;
  for (const char* file : {"command.txt", "output.log", "processes.txt"})
    EXPECT_EQ(testing::ReadFile(dir / "victim/" + file), "the victim's\n") << what << ": " << file;
  // The layout is not counted against the program: no trial was recorded for it.
  EXPECT_EQ(TrialsOf(store, "plain").size(), 1u) << what;
}

TEST(HostileLinks, ATrialFolderThatIsALinkIsRefused) {
  ExpectRefusedAt("trial folder", [](const std::string& folder, const std::string& victim) {
    fs::create_symlink(victim, folder);
  });
}

TEST(HostileLinks, LinksAtTheTrialsLogCommandAndProcessRecordAreNeverWrittenThrough) {
  for (const std::string file : {"output.log", "command.txt", "processes.txt"}) {
    ExpectRefusedAt(file, [file](const std::string& folder, const std::string& victim) {
      fs::create_directories(folder);
      fs::create_symlink(victim + "/" + file, folder + "/" + file);
    });
  }
}

TEST(HostileLinks, AFolderAboveTheTrialThatIsALinkIsRefused) {
  ExpectRefusedAt("trials/plain", [](const std::string& folder, const std::string& victim) {
    const fs::path study_folder = fs::path(folder).parent_path();
    fs::remove_all(study_folder);
    fs::create_symlink(victim, study_folder);
  });
}

// ---- Item 4: a refused run leaves nothing behind.

TEST(RefusedRuns, AnEmptyStorePathIsRefusedAndWritesNothing) {
  TempDir dir;
  const CliRun run = RunIn(dir.path(), "--store '' search --world 8 --model tiny --hardware local-cpu");
  ExpectOneLineError(run, kExitUsage, "--store");
  EXPECT_NE(run.err.find("must not be empty"), std::string::npos) << run.err;
  EXPECT_EQ(PathsBelow(dir.path()), std::vector<std::string>{});
  ExpectOneLineError(RunIn(dir.path(), "--store '' list"), kExitUsage, "--store");
  EXPECT_EQ(PathsBelow(dir.path()), std::vector<std::string>{});
}

TEST(RefusedRuns, ARefusedStudyOnANewStoreLeavesNoStore) {
  TempDir dir;
  // The template never passes the micro-batch size, and the space allows several: refused (exit 2).
  const CliRun run =
      RunIn(dir.path(), Search(dir / "store", TUNEPAR_FAKE_TRAINER " --tp {tp} --pp {pp}", 2));
  ExpectOneLineError(run, kExitUsage, "micro_batch");
  EXPECT_EQ(PathsBelow(dir.path()), std::vector<std::string>{});
  // A refused name, too.
  ExpectOneLineError(RunIn(dir.path(), Search(dir / "store", kTrainer, 2, "--node-id ..")), kExitUsage, "node id");
  EXPECT_EQ(PathsBelow(dir.path()), std::vector<std::string>{});
}

// ---- Item 9: messages that say what is wrong.

TEST(Messages, AMetricThatMatchedButIsNoPositiveFiniteNumberIsNamed) {
  for (const std::string value : {"nan", "inf", "-inf", "1e-320", "0", "-3"}) {
    TempDir dir;
    const CliRun run =
        RunIn(dir.path(), Search(dir / "store", std::string(kTrainer) + " --quiet && echo step_time: " + value, 3,
                                 "--study plain"));
    const std::vector<StoredTrial> trials = TrialsOf(dir / "store", "plain");
    ASSERT_FALSE(trials.empty()) << value << run.err;
    EXPECT_EQ(trials[0].status, "invalid") << value;
    EXPECT_NE(trials[0].message.find("metric '" + value + "' is not a finite positive number"), std::string::npos)
        << trials[0].message;
    EXPECT_EQ(run.out.find("-0 tok/s"), std::string::npos) << run.out;
  }
}

TEST(Messages, APublishedShardReplacedByADirectoryIsNamedSetAsideAndRepublished) {
  TempDir dir;
  const std::string store = dir / "store";
  ASSERT_EQ(RunIn(dir.path(), Search(store, kTrainer, 2, "--study plain")).exit_code, 0);
  const std::string published = testing::NodeShard(store, "n0");
  ASSERT_FALSE(published.empty());
  fs::remove(published);
  fs::create_directories(published + "/inside");
  const CliRun list = RunIn(dir.path(), "--store " + Q(store) + " list");
  EXPECT_EQ(list.exit_code, kExitDamaged) << list.err;
  EXPECT_NE(list.err.find(published + ": a directory, not a shard file"), std::string::npos) << list.err;
  // The node resumes: the directory is kept aside, the sound live shard published in its place.
  const CliRun resumed = RunIn(dir.path(), Search(store, kTrainer, 3, "--study plain"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("a directory, not a shard file"), std::string::npos) << resumed.err;
  EXPECT_TRUE(fs::is_regular_file(published));
  EXPECT_EQ(TrialsOf(store, "plain").size(), 3u);
  bool kept = false;
  for (const auto& entry : fs::directory_iterator(fs::path(published).parent_path()))
    kept = kept || (entry.path().string().rfind(published + ".damaged-", 0) == 0 && fs::is_directory(entry.path() / "inside"));
  EXPECT_TRUE(kept);
}

TEST(Messages, ALiveShardReplacedByADirectoryIsSetAsideAndRestored) {
  TempDir dir;
  const std::string store = dir / "store";
  ASSERT_EQ(RunIn(dir.path(), Search(store, kTrainer, 2, "--study plain")).exit_code, 0);
  const std::string live = store::WorkPath(store, "n0", StudyIdOf(store), "");
  ASSERT_TRUE(fs::is_regular_file(live));
  fs::remove(live);
  fs::create_directories(live);
  const CliRun resumed = RunIn(dir.path(), Search(store, kTrainer, 3, "--study plain"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("live shard " + live + " is damaged (a directory, not a shard file); kept it as"),
            std::string::npos)
      << resumed.err;
  EXPECT_EQ(TrialsOf(store, "plain").size(), 3u);
  // With no published copy to restore from, the refusal names it.
  fs::remove(testing::NodeShard(store, "n0"));
  fs::remove(live);
  fs::create_directories(live);
  const CliRun refused = RunIn(dir.path(), Search(store, kTrainer, 4, "--study plain"));
  ExpectOneLineError(refused, kExitStore, live + " is damaged (a directory, not a shard file)");
}

}  // namespace
}  // namespace tunepar
