#include "tuner/stored_study.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "store/store_reader.h"
#include "tuner/study_lookup.h"

namespace tunepar {

namespace {

Result<store::StudyRecord> OnlyStudy(const store::StoreView& view, const std::string& store_dir,
                                     const std::string& hint) {
  if (view.studies.size() == 1) return view.studies.front();
  if (view.studies.empty()) {
    return InvalidArgument(
        fmt::format("store '{}' has no study{}", store_dir, hint.empty() ? "" : fmt::format(": {}", hint)));
  }
  std::vector<std::string> names;
  for (const store::StudyRecord& s : view.studies) names.push_back(s.name);
  return InvalidArgument(
      fmt::format("store '{}' has {} studies; name one: {}", store_dir, names.size(), fmt::join(names, ", ")));
}

}  // namespace

Result<StoredStudy> ReadStoredStudy(const std::string& store_dir, const std::string& name, const std::string& hint) {
  Result<store::StoreView> view = ReadStudyView(store_dir, name);
  if (!view.ok()) return view.status();
  Result<store::StudyRecord> study = name.empty() ? OnlyStudy(*view, store_dir, hint) : FindStudy(*view, store_dir, name);
  if (!study.ok()) return study.status();
  StoredStudy s;
  for (store::TrialRecord& t : view->trials) {
    if (t.study_id == study->id) s.trials.push_back(std::move(t));
  }
  // The placement is the allocation's, not the study's: as the trials recorded it.
  Result<StudyContext> context = MakeStudyContext(*study, PlacementOfTrials(s.trials));
  if (!context.ok()) return context.status();
  s.context = std::move(*context);
  return s;
}

}  // namespace tunepar
