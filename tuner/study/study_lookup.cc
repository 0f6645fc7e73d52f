#include "tuner/study/study_lookup.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "base/names.h"
#include "runner/launch_environment.h"
#include "tuner/study/trial_records.h"

namespace tunepar {

std::string TuneparCommand(const GlobalOptions& global, const std::vector<std::string>& words) {
  std::string line = "tunepar";
  if (global.store != GlobalOptions().store) line += " --store " + runner::ShellQuote(global.store);
  for (const std::string& word : words) line += " " + runner::ShellQuote(word);
  return line;
}

std::string ShortStudyId(const std::vector<store::StudyRecord>& studies, const std::string& id) {
  size_t length = kMinIdPrefix;
  for (const store::StudyRecord& s : studies) {
    if (s.id == id) continue;
    const size_t common = std::mismatch(id.begin(), id.end(), s.id.begin(), s.id.end()).first - id.begin();
    length = std::max(length, common + 1);
  }
  auto is_other_name = [&](const std::string& prefix) {
    return std::any_of(studies.begin(), studies.end(),
                       [&](const store::StudyRecord& s) { return s.name == prefix && s.id != id; });
  };
  while (length < id.size() && is_other_name(id.substr(0, length))) ++length;
  return id.substr(0, std::min(length, id.size()));
}

Result<store::StudyRecord> FindStudy(const store::StoreView& view, const std::string& store_dir,
                                     const std::string& arg) {
  for (const store::StudyRecord& s : view.studies) {
    if (s.name == arg || s.id == arg) return s;
  }
  std::vector<const store::StudyRecord*> matches;
  if (arg.size() >= kMinIdPrefix) {
    for (const store::StudyRecord& s : view.studies)
      if (s.id.rfind(arg, 0) == 0) matches.push_back(&s);
  }
  if (matches.size() > 1) {
    std::vector<std::string> which;
    for (const store::StudyRecord* s : matches)
      which.push_back(fmt::format("{} ({})", ShortStudyId(view.studies, s->id), OneLine(s->name)));
    return InvalidArgument(fmt::format("study id prefix '{}' is ambiguous: {} match it; type one of those",
                                       arg, fmt::join(which, ", ")));
  }
  if (matches.size() == 1) return *matches.front();
  if (!view.exists) return NotFound(fmt::format("no study '{}': store '{}' does not exist", arg, store_dir));
  return NotFound(
      fmt::format("no study '{}' in store '{}' (tunepar list shows the studies)", arg, store_dir));
}

Result<store::StudyRecord> FindStudyOrOnly(const store::StoreView& view, const std::string& store_dir,
                                           const std::string& name_or_id, const std::string& hint) {
  if (!name_or_id.empty()) return FindStudy(view, store_dir, name_or_id);
  if (view.studies.size() == 1) return view.studies.front();
  if (view.studies.empty()) {
    if (!view.exists) return NotFound(fmt::format("store '{}' does not exist", store_dir));
    return InvalidArgument(
        fmt::format("store '{}' has no study{}", store_dir, hint.empty() ? "" : fmt::format(": {}", hint)));
  }
  std::vector<std::string> names;
  for (const store::StudyRecord& s : view.studies) names.push_back(s.name);
  return InvalidArgument(
      fmt::format("store '{}' has {} studies; name one: {}", store_dir, names.size(), fmt::join(names, ", ")));
}

Result<store::StoreView> ReadStudyView(const std::string& store_dir, const std::string& name_or_id,
                                       bool announce) {
  Result<store::StoreView> studies = store::ReadStore(store_dir, {"-", ""});
  if (!studies.ok()) return studies.status();
  if (announce)
    for (const std::string& w : studies->warnings) spdlog::warn("{}", w);
  const store::StudyRecord* study = nullptr;
  if (name_or_id.empty()) {
    if (studies->studies.size() == 1) study = &studies->studies.front();
  } else if (Result<store::StudyRecord> found = FindStudy(*studies, store_dir, name_or_id); found.ok()) {
    for (const store::StudyRecord& s : studies->studies)
      if (s.id == found->id) study = &s;
  }
  if (study == nullptr) return studies;  // the caller's lookup says why
  Result<store::StoreView> trials = store::ReadStore(store_dir, {study->id, ""});
  if (!trials.ok()) return trials.status();
  for (const std::string& w : trials->warnings)
    if (announce && std::find(studies->warnings.begin(), studies->warnings.end(), w) == studies->warnings.end())
      spdlog::warn("{}", w);
  trials->studies = std::move(studies->studies);
  SettleTakenOverTrials(trials->trials);
  return trials;
}

Status WithDamagedShards(const store::StoreView& view, bool allow_damaged, Status status) {
  // Every warning is a skipped shard but those of shards read without their damaged rows.
  const size_t skipped = view.warnings.size() - std::min(view.warnings.size(), view.damaged_rows.size());
  int64_t rows = 0;
  for (const auto& [shard, count] : view.damaged_rows) rows += count;
  if ((skipped == 0 && rows == 0) || allow_damaged) return status;
  const std::string shards =
      skipped == 1 ? "1 damaged shard was skipped" : fmt::format("{} damaged shards were skipped", skipped);
  const std::string left_out = rows == 1 ? "1 damaged trial row was left out"
                                         : fmt::format("{} damaged trial rows were left out", rows);
  if (status.ok()) {
    std::string what;
    if (rows == 0) {
      what = fmt::format("{} (named above), so the output leaves out {} trials", shards,
                         skipped == 1 ? "its" : "their");
    } else if (skipped == 0) {
      what = fmt::format("{} (named above), so the output leaves out {}", left_out,
                         rows == 1 ? "that trial" : "those trials");
    } else {
      what = fmt::format("{} and {} (named above), so the output leaves out their trials", shards, left_out);
    }
    return {StatusCode::kDamaged, what + "; --allow-damaged accepts a partial result"};
  }
  if (status.code() == StatusCode::kNotFound && skipped > 0)  // a trial row holds no study
    return {StatusCode::kDamaged,
            fmt::format("{}; {} (named above) and may hold it", status.message(), shards)};
  return status;
}

}  // namespace tunepar
