#include "tuner/study_lookup.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "runner/launch_environment.h"
#include "tuner/trial_records.h"

namespace tunepar {

std::string TuneparCommand(const GlobalOptions& global, const std::vector<std::string>& words) {
  std::string line = "tunepar";
  if (global.store != GlobalOptions().store) line += " --store " + runner::ShellQuote(global.store);
  for (const std::string& word : words) line += " " + runner::ShellQuote(word);
  return line;
}

Result<store::StudyRecord> FindStudy(const store::StoreView& view, const std::string& store_dir,
                                     const std::string& arg) {
  for (const store::StudyRecord& s : view.studies) {
    if (s.name == arg || s.id == arg) return s;
  }
  const store::StudyRecord* match = nullptr;
  if (arg.size() >= 4) {
    for (const store::StudyRecord& s : view.studies) {
      if (s.id.rfind(arg, 0) == 0) {
        if (match != nullptr) return InvalidArgument(fmt::format("study id prefix '{}' is ambiguous", arg));
        match = &s;
      }
    }
  }
  if (match != nullptr) return *match;
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
  const size_t skipped = view.warnings.size();
  if (skipped == 0 || allow_damaged) return status;
  const std::string shards =
      skipped == 1 ? "1 damaged shard was skipped" : fmt::format("{} damaged shards were skipped", skipped);
  if (status.ok()) {
    return {
        StatusCode::kDamaged,
        fmt::format("{} (named above), so the output leaves out {} trials; --allow-damaged accepts a partial "
                    "result",
                    shards, skipped == 1 ? "its" : "their")};
  }
  if (status.code() == StatusCode::kNotFound)
    return {StatusCode::kDamaged,
            fmt::format("{}; {} (named above) and may hold it", status.message(), shards)};
  return status;
}

}  // namespace tunepar
