#include "tuner/study/study_session.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "base/crash_point.h"
#include "base/names.h"
#include "base/presets.h"
#include "store/store_layout.h"
#include "store/store_reader.h"

namespace tunepar {

namespace {

// The study these inputs make (not yet stored), and its context: every check on the inputs,
// before anything touches the disk, so that bad input leaves the store alone.
struct Proposed {
  Problem problem;
  StudySettings settings;
  store::StudyRecord study;
  // Why the backend cannot say what its program runs (a knob it never receives, with no value
  // to fix it at): refuses a new study; a stored one resumes with what it recorded.
  Status support;
};

Result<Proposed> ProposeStudy(const SessionRequest& r) {
  Proposed p;
  Result<Problem> problem = LoadProblem(r.model, r.hardware, r.space, r.knobs);
  if (!problem.ok()) return problem.status();
  p.problem = std::move(*problem);
  TUNEPAR_RETURN_IF_ERROR(CheckWorld(r.world, p.problem.hardware));
  TUNEPAR_RETURN_IF_ERROR(CheckHardwareRunsPrecisions(p.problem, static_cast<int>(r.world)));
  p.settings = r.settings;
  p.settings.world = static_cast<int>(r.world);
  if (r.backend != nullptr) {
    TUNEPAR_RETURN_IF_ERROR(r.backend->SupportsModel(p.problem.model));
    Result<KnobSupport> support = r.backend->SupportedKnobs(p.problem.space, p.settings.world);
    if (support.ok()) p.settings.pinned_knobs = PinnedKnobs(*support);
    p.support = support.status();
  }
  const std::string id = StudyId(p.problem, p.settings);
  const std::string name = r.study.empty() ? DefaultStudyName(p.problem, p.settings, id) : r.study;
  p.study = MakeStudyRecord(p.problem, p.settings, id, name, "");
  Result<StudyContext> context = MakeStudyContext(p.study, r.ranks_per_node);
  if (!context.ok()) return context.status();
  return p;
}

Status CheckResumable(const GlobalOptions& global, const SessionRequest& r) {
  if (!r.resume_only) return Status::Ok();
  Result<store::StoreView> existing = store::ReadStore(global.store, {"-", ""});
  if (!existing.ok()) return existing.status();
  if (!existing->exists) {
    return NotFound(fmt::format("no study to resume: store '{}' does not exist (drop --resume-only to start one)",
                                global.store));
  }
  return Status::Ok();
}

const store::StudyRecord* FindById(const std::vector<store::StudyRecord>& studies, const std::string& id) {
  auto it = std::find_if(studies.begin(), studies.end(), [&](const store::StudyRecord& s) { return s.id == id; });
  return it == studies.end() ? nullptr : &*it;
}

const store::StudyRecord* FindByName(const std::vector<store::StudyRecord>& studies, const std::string& name) {
  auto it =
      std::find_if(studies.begin(), studies.end(), [&](const store::StudyRecord& s) { return s.name == name; });
  return it == studies.end() ? nullptr : &*it;
}

// The names a new study turns into paths and commands (trial folders, the calibration's folder,
// job names, the hints it prints) follow base/names.h: the configs' names (exit 3) and the study's
// (exit 2 for --study). A stored study is resumed whatever its names: its trial folders are named
// by its id when its name is not a valid one (BayesianSearch::TrialDir).
Status CheckNewStudyNames(const Problem& problem, const std::string& study_name, bool from_flag) {
  TUNEPAR_RETURN_IF_ERROR(CheckConfigNames(problem));
  return CheckName(from_flag ? "--study" : "study name", study_name,
                   from_flag ? StatusCode::kInvalidArgument : StatusCode::kConfig);
}

// The presets of a stored study's model, hardware and space that say something else now than
// when it was made, when nothing else these inputs say differs from the study's: "model preset
// 'tiny'", ... Empty when they are another study's inputs: a config given as a file, or named
// otherwise, that differs; --fix values the stored space does not hold; another world, objective,
// backend or settings.
std::vector<std::string> ChangedPresets(const store::StudyRecord& stored, const SessionRequest& r,
                                        const store::StudyRecord& made) {
  const std::optional<std::vector<StudyInput>> differ = ConfigsThatDiffer(stored, made);
  if (!differ) return {};
  std::vector<std::string> changed;
  for (StudyInput input : *differ) {
    const auto [kind, argument, stored_name, made_name] =
        input == StudyInput::kModel      ? std::tuple("models", &r.model, &stored.model_name, &made.model_name)
        : input == StudyInput::kHardware ? std::tuple("hardware", &r.hardware, &stored.hardware_name, &made.hardware_name)
                                         : std::tuple("spaces", &r.space, &stored.space_name, &made.space_name);
    const std::vector<std::string> presets = PresetNames(kind);
    if (std::find(presets.begin(), presets.end(), *argument) == presets.end() || *stored_name != *made_name) return {};
    if (input == StudyInput::kSpace) {  // the --fix values must be the stored space's own
      Result<ConfigText> declared = WithDeclaredKnobs({stored.space_name, "study space", stored.space_toml}, r.knobs);
      if (!declared.ok() || CanonicalToml(declared->text, input) != CanonicalToml(stored.space_toml, input)) return {};
    }
    const std::string noun = input == StudyInput::kModel ? "model" : input == StudyInput::kHardware ? "hardware" : "space";
    changed.push_back(fmt::format("{} preset '{}'", noun, OneLine(*argument)));
  }
  return changed;
}

// "a", "a and b", "a, b and c": the presets ChangedPresets names, in a sentence.
std::string JoinedPresets(const std::vector<std::string>& changed) {
  if (changed.size() <= 1) return changed.empty() ? "" : changed.front();
  return fmt::format("{} and {}", fmt::join(changed.begin(), changed.end() - 1, ", "), changed.back());
}

// The configs those presets are of: "model and space".
std::string ConfigNouns(const std::vector<std::string>& changed) {
  std::vector<std::string> nouns;
  for (const std::string& c : changed) nouns.push_back(c.substr(0, c.find(' ')));
  return JoinedPresets(nouns);
}

// The stored study these inputs are (resumed), or the new one to store; `resumed` says which.
Result<store::StudyRecord> ChooseStudy(const GlobalOptions& global, const SessionRequest& r, Proposed p,
                                       const std::vector<store::StudyRecord>& studies,
                                       const std::string& node_id, bool* resumed) {
  if (r.new_study) {
    for (int salt = 2; FindById(studies, StudyId(p.problem, p.settings)) != nullptr; ++salt)
      p.settings.salt = std::to_string(salt);
  }
  const std::string id = StudyId(p.problem, p.settings);
  const std::string name = r.study.empty() ? DefaultStudyName(p.problem, p.settings, id) : r.study;
  // --study NAME of a study these inputs made on a build that fixed other knobs: resumed as it was
  // made (its stored pinned knobs rule its proposals), under its id.
  if (const store::StudyRecord* named = FindByName(studies, r.study);
      named != nullptr && !r.new_study && SameInputsOtherBuild(*named, MakeStudyRecord(p.problem, p.settings, id, name, node_id))) {
    spdlog::warn("--study {}: resuming it as it was made, with {} fixed (this build would fix {})", OneLine(r.study),
                 named->pinned_knobs.empty() ? "no knob" : named->pinned_knobs,
                 p.settings.pinned_knobs.empty() ? "none" : p.settings.pinned_knobs);
    *resumed = true;
    return *named;
  }
  if (const store::StudyRecord* existing = FindById(studies, id)) {
    if (r.new_study) return InternalError("--new produced an existing study id");
    if (!r.study.empty() && r.study != existing->name)
      spdlog::warn("--study {}: these inputs are study '{}' already; resuming it under its name", OneLine(r.study),
                   OneLine(existing->name));
    *resumed = true;
    return *existing;
  }
  const store::StudyRecord* clash = FindByName(studies, name);
  // --study NAME of a study made when a preset it names said something else: resumed from the
  // inputs stored with it, under its id.
  if (clash != nullptr && !r.study.empty() && !r.new_study) {
    const std::vector<std::string> changed =
        ChangedPresets(*clash, r, MakeStudyRecord(p.problem, p.settings, id, name, node_id));
    if (!changed.empty()) {
      spdlog::warn("study {}: {} changed since the study was made; resuming with the {} stored with the study",
                   OneLine(clash->name), JoinedPresets(changed), ConfigNouns(changed));
      *resumed = true;
      return *clash;
    }
  }
  if (clash != nullptr && (!r.study.empty() || r.new_study)) {
    return InvalidArgument(fmt::format(
        "study '{}' already exists with a different model, hardware, space, world or search settings; choose "
        "another --study name",
        clash->name));
  }
  if (!p.support.ok()) return p.support;
  TUNEPAR_RETURN_IF_ERROR(CheckNewStudyNames(p.problem, name, !r.study.empty()));
  if (r.resume_only) {
    return NotFound(
        fmt::format("no study '{}' to resume in store '{}' (drop --resume-only to start it)", name, global.store));
  }
  *resumed = false;
  store::StudyRecord made = MakeStudyRecord(p.problem, p.settings, id, name, node_id);
  if (const store::StudyRecord* old = SameInputsOtherBuild(studies, made)) {
    spdlog::warn("these inputs were searched as study '{}' (id {}) by a build of {} that ran with {} fixed; this one "
                 "fixes {}: a new study, '{}'. The old study keeps its trials and its id (tunepar show {}).",
                 OneLine(old->name), old->id, old->backend, old->pinned_knobs.empty() ? "no knob" : old->pinned_knobs,
                 made.pinned_knobs.empty() ? "none" : made.pinned_knobs, OneLine(made.name), OneLine(old->name));
    return made;
  }
  for (const store::StudyRecord& old : studies) {
    const std::vector<std::string> changed = ChangedPresets(old, r, made);
    if (changed.empty()) continue;
    spdlog::warn("these inputs were searched as study '{}' (id {}) before {} changed: a new study, '{}'. The old "
                 "study keeps its trials and its id (--study {} resumes it with the inputs stored with it).",
                 OneLine(old.name), old.id, JoinedPresets(changed), OneLine(made.name), OneLine(old.name));
    break;
  }
  return made;
}

}  // namespace

void Upsert(std::vector<store::TrialRecord>& trials, const store::TrialRecord& r) {
  auto it = std::find_if(trials.begin(), trials.end(), [&](const store::TrialRecord& t) {
    return t.node_id == r.node_id && t.number == r.number;
  });
  if (it != trials.end()) {
    *it = r;
    return;
  }
  trials.insert(std::upper_bound(trials.begin(), trials.end(), r,
                                 [](const store::TrialRecord& a, const store::TrialRecord& b) {
                                   return std::tie(a.node_id, a.number) < std::tie(b.node_id, b.number);
                                 }),
                r);
}

Status StudySession::Refresh() {
  Result<store::StoreView> view = writer->ReadMerged();
  if (!view.ok()) return view.status();
  for (const std::string& w : view->warnings)
    if (warned.insert(w).second) spdlog::warn("{}", w);
  trials = std::move(view->trials);
  forgotten = std::move(view->forgotten);
  return Status::Ok();
}

NodePresence::~NodePresence() {
  heartbeat.Stop();
  ownership.Release();
}

Status StudySession::Beat() {
  TUNEPAR_RETURN_IF_ERROR(presence->ownership.Check());
  return presence->heartbeat.Beat();
}

Status StudySession::Record(const std::vector<store::TrialRecord>& records, std::string_view crash_point) {
  if (records.empty()) return Status::Ok();
  TUNEPAR_RETURN_IF_ERROR(presence->ownership.Check());
  TUNEPAR_RETURN_IF_ERROR(writer->PutTrials(records));
  if (!crash_point.empty()) CrashPoint(crash_point);
  TUNEPAR_RETURN_IF_ERROR(writer->Publish());
  if (std::any_of(records.begin(), records.end(), [](const store::TrialRecord& r) { return r.role == TrialRole::kForgotten; })) {
    for (const store::TrialRecord& r : records) {
      const auto same = [&](const store::TrialRecord& t) { return t.node_id == r.node_id && t.number == r.number; };
      std::erase_if(trials, same);
      std::erase_if(forgotten, same);
      Upsert(r.role == TrialRole::kForgotten ? forgotten : trials, r);
    }
    return Status::Ok();
  }
  if (records.size() < 16) {
    for (const store::TrialRecord& r : records) Upsert(trials, r);
    return Status::Ok();
  }
  // Many at once (a whole space predicted): replace by key, append the rest, sort once.
  std::map<std::pair<std::string, int64_t>, size_t> at;
  for (size_t i = 0; i < trials.size(); ++i) at[{trials[i].node_id, trials[i].number}] = i;
  for (const store::TrialRecord& r : records) {
    auto it = at.find({r.node_id, r.number});
    if (it != at.end()) {
      trials[it->second] = r;
    } else {
      at[{r.node_id, r.number}] = trials.size();
      trials.push_back(r);
    }
  }
  std::stable_sort(trials.begin(), trials.end(), [](const store::TrialRecord& a, const store::TrialRecord& b) {
    return std::tie(a.node_id, a.number) < std::tie(b.node_id, b.number);
  });
  return Status::Ok();
}

namespace {

// The directories a refused first run made in a store that did not exist before it: removed when
// empty (rmdir never removes anything another process put there meanwhile), so that a refusal
// leaves no trace.
void RemoveEmptyStoreDirectories(const std::string& store_dir) {
  for (const char* dir : {"claims/beats", "claims", "nodes", "shards", "work", "trials", ""}) {
    std::error_code ec;
    const std::filesystem::path path = std::filesystem::path(store_dir) / dir;
    if (std::filesystem::is_directory(path, ec) && std::filesystem::is_empty(path, ec)) std::filesystem::remove(path, ec);
  }
}

// Joins the store as `node_id` (its heartbeat and its node id held), opens this node's shard of
// `study` and publishes it.
Status JoinStudy(const GlobalOptions& global, const SessionRequest& r, const std::string& node_id,
                 const store::StudyRecord& study, StudySession& s) {
  s.presence = std::make_unique<NodePresence>(global.store, node_id, r.lease_s);
  TUNEPAR_RETURN_IF_ERROR(s.presence->heartbeat.Beat());
  Result<store::NodeOwnership> ownership = store::NodeOwnership::Acquire(global.store, study.id, r.work_dir, s.presence->watch);
  if (!ownership.ok()) return ownership.status();
  s.presence->ownership = std::move(*ownership);
  Result<std::unique_ptr<store::ShardWriter>> writer =
      store::ShardWriter::Open({global.store, node_id, study.id, r.work_dir});
  if (!writer.ok()) return writer.status();
  s.writer = std::move(*writer);
  TUNEPAR_RETURN_IF_ERROR(s.writer->PutStudy(study));
  // Published at once: the node is part of the study from now on (readers see its shard even
  // when the other nodes leave it nothing to run).
  return s.writer->Publish();
}

}  // namespace

Result<StudySession> OpenStudySession(const GlobalOptions& global, SessionRequest r) {
  Result<Proposed> proposed = ProposeStudy(r);
  if (!proposed.ok()) return proposed.status();
  TUNEPAR_RETURN_IF_ERROR(CheckResumable(global, r));

  StudySession s;
  const std::string node_id = r.node_id.empty() ? store::DefaultNodeId() : r.node_id;
  TUNEPAR_RETURN_IF_ERROR(store::ValidateNodeId(node_id));
  TUNEPAR_RETURN_IF_ERROR(store::CheckShardVersions(global.store, node_id));
  // Every check on the inputs before anything is written: a refused run leaves the store alone.
  Result<store::StoreView> all = store::ReadStore(global.store, {"-", ""});  // studies only
  if (!all.ok()) return all.status();
  for (const std::string& w : all->warnings)
    if (s.warned.insert(w).second) spdlog::warn("{}", w);
  Result<store::StudyRecord> study =
      ChooseStudy(global, r, std::move(*proposed), all->studies, node_id, &s.resumed);
  if (!study.ok()) return study.status();
  Result<StudyContext> context = MakeStudyContext(*study, r.ranks_per_node);
  if (!context.ok()) return context.status();
  if (r.check_inputs) TUNEPAR_RETURN_IF_ERROR(r.check_inputs(*context));
  if (Status joined = JoinStudy(global, r, node_id, *study, s); !joined.ok()) {
    s.writer.reset();
    s.presence.reset();
    if (!all->exists) RemoveEmptyStoreDirectories(global.store);
    return joined;
  }
  s.context = std::move(*context);
  TUNEPAR_RETURN_IF_ERROR(s.Refresh());
  return s;
}

Result<StudySession> OpenStoredStudySession(const GlobalOptions& global, const store::StudyRecord& study,
                                            const std::string& node_id, const std::string& work_dir) {
  TUNEPAR_RETURN_IF_ERROR(store::ValidateNodeId(node_id));
  TUNEPAR_RETURN_IF_ERROR(store::CheckShardVersions(global.store, node_id));
  SessionRequest r;
  r.node_id = node_id;
  r.work_dir = work_dir;
  StudySession s;
  s.resumed = true;
  TUNEPAR_RETURN_IF_ERROR(JoinStudy(global, r, node_id, study, s));
  s.context.study = study;  // its rows only: the problem is not rebuilt (a study of any age can be changed)
  TUNEPAR_RETURN_IF_ERROR(s.Refresh());
  return s;
}

}  // namespace tunepar
