// Issue 28 item 11: what `list`, `show` and `report` print, as a user reads it: id prefixes that
// pick one study, a damaged row that hides only itself, columns aligned for unicode names, as
// many best layouts as the header says, and memory that a small program does not read as 0.0.
#include <cctype>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runner/launch_environment.h"
#include "store/rows.h"
#include "store/shard_writer.h"
#include "store/store_layout.h"
#include "store/store_reader.h"
#include "tests/test_support.h"
#include "tuner/cli/exit_codes.h"
#include "tuner/output/text_table.h"

namespace tunepar {
namespace {

namespace fs = std::filesystem;
using testing::CliRun;
using testing::kTestCpu;
using testing::RunTunepar;
using testing::TempDir;

std::string Q(const std::string& word) {
  return runner::ShellQuote(word);
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> Words(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream in(line);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// A dry run of tiny at world 2 on the fixed test CPU: a study in a second, no program run.
std::string DryRun(const std::string& store, const std::string& study, int world = 2) {
  return fmt::format("--store {} search --world {} --model tiny --hardware {} --study {} --node-id n0",
                     Q(store), world, Q(kTestCpu), study);
}

// A measured search of tiny at world 2: `command` is the program (its template words follow).
std::string MeasuredSearch(const std::string& store, const std::string& command, int budget,
                           const std::string& extra = "") {
  return fmt::format(
      "--store {} search --world 2 --model tiny --hardware {} --backend command --command {} --metric-regex "
      "{} "
      "--budget {} --node-id n0 {}",
      Q(store), Q(kTestCpu),
      Q(command +
        " --tp {tp} --pp {pp} --mbs {mbs} --precision {precision} --recompute {recompute} --vpp {vpp}"),
      Q("step_time: ([0-9.]+)"), budget, extra);
}

// The stored record of study `id` (node n0's published copy).
store::StudyRecord StoredStudy(const std::string& store, const std::string& id) {
  Result<store::Database> db = store::OpenShardForReading(store::SnapshotPath(store, "n0", id));
  EXPECT_TRUE(db.ok()) << db.status().message();
  if (!db.ok()) return {};
  std::vector<store::StudyRecord> studies = store::SelectStudies(*db).value();
  EXPECT_EQ(studies.size(), 1u);
  return studies.empty() ? store::StudyRecord{} : studies.front();
}

// Stores `study` (no trials) as node n0's shard of it.
void StoreStudy(const std::string& store, const store::StudyRecord& study) {
  auto writer = store::ShardWriter::Open({store, "n0", study.id, ""});
  ASSERT_TRUE(writer.ok()) << writer.status().message();
  ASSERT_TRUE((*writer)->PutStudy(study).ok());
  ASSERT_TRUE((*writer)->Publish().ok());
}

// ---- (a) Every id prefix `list` prints picks its study.

TEST(StudyIdPrefixes, ListPrintsAPrefixPerStudyThatShowResolvesEvenWhenIdsShareTheirFirstCharacters) {
  TempDir dir;
  const std::string store = dir / "store";
  ASSERT_EQ(RunTunepar(DryRun(store, "first")).exit_code, 0);
  const store::StudyRecord first = StoredStudy(store, testing::StudyId(store, "first"));
  ASSERT_EQ(first.id.size(), 16u);
  // Two more studies of the same store: one whose id shares its first 5 characters, as two
  // `--new` ids can, and one named as the first 6 characters of the first's id (a name is
  // matched before an id prefix), its own id unlike the others.
  store::StudyRecord twin = first, named = first;
  twin.id = first.id.substr(0, 5) + (first.id[5] == '0' ? "1" : "0") + first.id.substr(6);
  twin.name = "twin";
  named.id = (first.id[0] == 'f' ? "0" : "f") + first.id.substr(1);
  named.name = first.id.substr(0, 6);
  StoreStudy(store, twin);
  StoreStudy(store, named);

  const CliRun list = RunTunepar("--store " + Q(store) + " list");
  ASSERT_EQ(list.exit_code, 0) << list.err;
  std::map<std::string, std::string> printed;  // study id -> the id prefix in its row
  for (const std::string& line : Lines(list.out)) {
    const std::vector<std::string> words = Words(line);
    for (const store::StudyRecord* s : std::vector<const store::StudyRecord*>{&first, &twin, &named})
      if (words.size() > 1 && words[0] == s->name) printed[s->id] = words[1];
  }
  ASSERT_EQ(printed.size(), 3u) << list.out;
  std::set<std::string> distinct;
  for (const auto& [id, prefix] : printed) {
    EXPECT_GE(prefix.size(), 4u) << prefix;
    EXPECT_EQ(id.rfind(prefix, 0), 0u) << prefix << " is no prefix of " << id;
    distinct.insert(prefix);
    const CliRun show = RunTunepar("--store " + Q(store) + " --json show " + Q(prefix));
    ASSERT_EQ(show.exit_code, 0) << prefix << ": " << show.err;
    EXPECT_EQ(nlohmann::json::parse(show.out)["study_id"], id) << prefix;
  }
  EXPECT_EQ(distinct.size(), 3u) << list.out;
  EXPECT_EQ(printed[first.id].size(), 7u) << "6 characters would pick the study named so: " << list.out;
  // The prefix the first two share picks neither: the error names the prefix of each.
  const CliRun ambiguous = RunTunepar("--store " + Q(store) + " show " + first.id.substr(0, 4));
  EXPECT_EQ(ambiguous.exit_code, kExitUsage) << ambiguous.err;
  for (const std::string& id : {first.id, twin.id})
    EXPECT_NE(ambiguous.err.find(printed[id] + " ("), std::string::npos) << printed[id] << "\n"
                                                                         << ambiguous.err;
}

// ---- (b) A changed value hides its own row only, and names it.

TEST(DamagedRows, AChangedValueHidesOnlyItsTrialAndTheWarningNamesIt) {
  TempDir dir;
  const std::string store = dir / "store";
  ASSERT_EQ(RunTunepar("--store " + Q(store) + " search --world 64 --model gpt-22b --node-id n0").exit_code,
            0);
  const std::string study = testing::OnlyStudy(store);
  ASSERT_FALSE(study.empty());
  const std::string id = testing::StudyId(store, study);
  std::set<int64_t> before;
  for (const testing::Trial& t : testing::Trials(store, study)) before.insert(t.number);
  ASSERT_GT(before.size(), 100u);

  // A digit of one predicted OOM's memory in its message (only the trials table has it).
  const std::string shard = testing::NodeShard(store, "n0");
  std::string bytes = testing::ReadFile(shard);
  const std::string message = "predicted not to fit: ";
  const size_t at = bytes.find(message);
  ASSERT_NE(at, std::string::npos);
  char& digit = bytes[at + message.size()];
  digit = digit == '1' ? '2' : '1';
  testing::WriteFile(shard, bytes);

  const CliRun show =
      RunTunepar("--store " + Q(store) + " --json show " + Q(study) + " --all --allow-damaged");
  ASSERT_EQ(show.exit_code, 0) << show.err;
  std::set<int64_t> after;
  const nlohmann::json shown = nlohmann::json::parse(show.out);
  for (const auto& r : shown["trials"]) after.insert(r["number"].get<int64_t>());
  std::vector<int64_t> hidden;
  std::set_difference(before.begin(), before.end(), after.begin(), after.end(), std::back_inserter(hidden));
  ASSERT_EQ(hidden.size(), 1u) << after.size() << " of " << before.size() << " trials shown";
  EXPECT_EQ(after.size(), before.size() - 1);
  const std::string named =
      fmt::format("{}: bad checksum in trial {} of study {} (node n0)", shard, hidden[0], id);
  EXPECT_NE(show.err.find(named), std::string::npos) << named << "\n" << show.err;
  EXPECT_NE(show.err.find("skipping shard " + shard + "'s damaged row only: "), std::string::npos)
      << show.err;
  EXPECT_NE(show.err.find(fmt::format("its other {} trials are read", before.size() - 1)), std::string::npos)
      << show.err;

  // Every reader: the other rows counted, the partial result still exit 9 without --allow-damaged.
  const CliRun list = RunTunepar("--store " + Q(store) + " --json list");
  EXPECT_EQ(list.exit_code, kExitDamaged) << list.err;
  EXPECT_NE(list.err.find("1 damaged trial row was left out (named above)"), std::string::npos) << list.err;
  const nlohmann::json studies = nlohmann::json::parse(list.out);
  ASSERT_EQ(studies.size(), 1u) << list.out;
  EXPECT_EQ(studies[0]["trial_count"].get<size_t>(), before.size() - 1);
  const CliRun text = RunTunepar("--store " + Q(store) + " show " + Q(study));
  EXPECT_EQ(text.exit_code, kExitDamaged) << text.err;
  EXPECT_NE(text.out.find(fmt::format("trials {}:", WithCommas(static_cast<int64_t>(before.size() - 1)))),
            std::string::npos)
      << text.out;
  EXPECT_EQ(RunTunepar("--store " + Q(store) + " export " + Q(study) + " --csv --allow-damaged").exit_code,
            0);
}

// ---- (c) Columns aligned by the width a terminal shows.

// Columns a terminal gives the test's names: CJK ideographs (3 UTF-8 bytes from 0xE4) two, a
// combining accent (0xCC 0x81) none, every other code point one.
size_t ColumnsOf(const std::string& text) {
  size_t columns = 0;
  for (size_t i = 0; i < text.size();) {
    const unsigned char lead = static_cast<unsigned char>(text[i]);
    const size_t length = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    const bool combining = length == 2 && lead == 0xCC;
    columns += combining ? 0 : (length == 3 && lead >= 0xE4 && lead <= 0xE9) ? 2 : 1;
    i += length;
  }
  return columns;
}

TEST(UnicodeNames, ListAlignsItsColumnsByDisplayWidth) {
  TempDir dir;
  const std::string store = dir / "store";
  ASSERT_EQ(RunTunepar(DryRun(store, "plain")).exit_code, 0);
  ASSERT_EQ(RunTunepar(DryRun(store, "other", 4)).exit_code, 0);
  // Names a tunepar before the name rule stored (base/names.h): wide characters, an accent
  // written as a combining mark.
  testing::RenameStoredStudy(store, "n0", testing::StudyId(store, "plain"), "训练-模型");
  testing::RenameStoredStudy(store, "n0", testing::StudyId(store, "other"), "cafe\xCC\x81-étude");
  const CliRun list = RunTunepar("--store " + Q(store) + " list");
  ASSERT_EQ(list.exit_code, 0) << list.err;
  // Where the model column starts, in every line that has it: the header, and each row.
  std::set<size_t> model_column;
  int rows = 0;
  for (const std::string& line : Lines(list.out)) {
    const size_t at = line.find(line.rfind("study", 0) == 0 ? "  model" : "  tiny");
    if (at == std::string::npos) continue;
    model_column.insert(ColumnsOf(line.substr(0, at)));
    rows += line.rfind("study", 0) == 0 ? 0 : 1;
  }
  EXPECT_EQ(rows, 2) << list.out;
  EXPECT_EQ(model_column.size(), 1u) << list.out;
}

TEST(UnicodeNames, DisplayWidthCountsColumnsNotBytes) {
  EXPECT_EQ(DisplayWidth("plain"), 5u);
  EXPECT_EQ(DisplayWidth("训练"), 4u);              // CJK: two columns each
  EXPECT_EQ(DisplayWidth("étude"), 5u);             // a precomposed é
  EXPECT_EQ(DisplayWidth("cafe\xCC\x81"), 4u);      // e and a combining acute accent
  EXPECT_EQ(DisplayWidth("ｔｐ"), 4u);              // fullwidth forms
  EXPECT_EQ(DisplayWidth("\xF0\x9F\x9A\x80"), 2u);  // an emoji (U+1F680)
  EXPECT_EQ(DisplayWidth("a\xFF"
                         "b"),
            3u);  // a byte that is not UTF-8: one column
}

// ---- (d) As many best layouts as the header says, or why fewer.

// The rows of the table under report's "Best N layouts" header: the header, and each row's layout.
struct BestTable {
  std::string header;
  std::vector<std::string> layouts;
};

BestTable BestTableOf(const std::string& report) {
  BestTable table;
  const std::vector<std::string> lines = Lines(report);
  for (size_t i = 0; i < lines.size(); ++i) {
    const bool counted = lines[i].size() > 5 && std::isdigit(static_cast<unsigned char>(lines[i][5]));
    if (lines[i].rfind("Best ", 0) != 0 || !counted || lines[i].find(" layout") == std::string::npos)
      continue;
    table.header = lines[i];
    for (size_t r = i + 3; r < lines.size() && !lines[r].empty() && lines[r][0] != '('; ++r) {
      const std::vector<std::string> words = Words(lines[r]);
      if (words.size() > 2) table.layouts.push_back(words[2]);  // #, trial, layout, ...
    }
    break;
  }
  return table;
}

size_t CountInHeader(const std::string& header) {
  return std::stoul(header.substr(5));
}

TEST(BestLayouts, TheReportListsAsManyLayoutsAsItsHeaderSaysOncePerLayout) {
  TempDir dir;
  const std::string store = dir / "store";
  // Confirmations measure the leading layouts again: some layouts have several ok trials.
  const CliRun search = RunTunepar(MeasuredSearch(store, TUNEPAR_FAKE_TRAINER, 16, "--confirm 6"));
  ASSERT_EQ(search.exit_code, 0) << search.err;
  const std::vector<testing::Trial> trials = testing::Trials(store, testing::OnlyStudy(store));
  std::map<std::string, int> measured;  // ok trials per layout
  size_t ok = 0;
  for (const testing::Trial& t : trials)
    if (t.status == "ok") ++measured[t.layout], ++ok;
  ASSERT_LT(measured.size(), ok) << "no layout measured twice";

  for (const int top : {3, 10, 40}) {
    const CliRun report = RunTunepar("--store " + Q(store) + " report --top " + std::to_string(top));
    ASSERT_EQ(report.exit_code, 0) << report.err;
    const BestTable best = BestTableOf(report.out);
    ASSERT_FALSE(best.header.empty()) << report.out;
    const size_t expected = std::min<size_t>(top, measured.size());
    EXPECT_EQ(CountInHeader(best.header), expected) << best.header;
    EXPECT_EQ(best.layouts.size(), expected) << report.out;
    EXPECT_EQ(std::set<std::string>(best.layouts.begin(), best.layouts.end()).size(), best.layouts.size())
        << report.out;
    // Fewer rows than --top asked for: the header says why.
    EXPECT_EQ(best.header.find("fewer than --top") != std::string::npos, expected < static_cast<size_t>(top))
        << best.header;
  }
}

// ---- (e) Memory in units that show it.

TEST(MemoryUnits, ASmallProgramsPeakMemoryReadsInItsOwnUnitAndTheExportsStayInBytes) {
  TempDir dir;
  const std::string store = dir / "store", program = dir / "small.sh";
  testing::WriteFile(program, "#!/bin/sh\necho 'step_time: 0.25'\necho 'max memory allocated: 1.3 MB'\n");
  fs::permissions(program, fs::perms::owner_all);
  const CliRun search =
      RunTunepar(MeasuredSearch(store, program, 2, "--memory-regex " + Q("max memory allocated: (.*)")));
  ASSERT_EQ(search.exit_code, 0) << search.err;
  const std::string study = testing::OnlyStudy(store);

  const CliRun show = RunTunepar("--store " + Q(store) + " show " + Q(study));
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("  1.3 MB\n"), std::string::npos) << show.out;
  EXPECT_EQ(show.out.find("  0.0\n"), std::string::npos) << show.out;
  const CliRun report = RunTunepar("--store " + Q(store) + " report");
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(report.out.find("  1.3 MB\n"), std::string::npos) << report.out;

  const CliRun json = RunTunepar("--store " + Q(store) + " --json show " + Q(study) + " --all");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json rows = nlohmann::json::parse(json.out)["trials"];
  ASSERT_EQ(rows.size(), 2u) << json.out;
  for (const auto& r : rows) EXPECT_DOUBLE_EQ(r["peak_memory_bytes"].get<double>(), 1.3e6) << r.dump();
  const CliRun csv = RunTunepar("--store " + Q(store) + " export " + Q(study) + " --csv");
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_NE(csv.out.find(",1300000,"), std::string::npos) << csv.out;

  EXPECT_EQ(GigabytesText(62.9e9), "62.9");
  EXPECT_EQ(GigabytesText(1.3e6), "1.3 MB");
  EXPECT_EQ(GigabytesText(512e3), "512.0 kB");
  EXPECT_EQ(GigabytesText(900), "900 B");
}

}  // namespace
}  // namespace tunepar
