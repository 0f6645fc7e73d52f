#include "tuner/study/stored_study.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "store/store_reader.h"
#include "tuner/study/study_lookup.h"

namespace tunepar {


Result<StoredStudy> ReadStoredStudy(const std::string& store_dir, const std::string& name, const std::string& hint) {
  Result<store::StoreView> view = ReadStudyView(store_dir, name);
  if (!view.ok()) return view.status();
  Result<store::StudyRecord> study = FindStudyOrOnly(*view, store_dir, name, hint);
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
