#include "tuner/study_session.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "store/store_layout.h"
#include "store/store_reader.h"

namespace tunepar {

Status StudySession::Refresh() {
  Result<store::StoreView> view = writer->ReadMerged(study.id);
  if (!view.ok()) return view.status();
  for (const std::string& w : view->warnings) spdlog::warn("{}", w);
  trials = std::move(view->trials);
  return Status::Ok();
}

Result<StudySession> OpenStudySession(const GlobalOptions& global, SessionRequest r) {
  StudySession s;
  Result<Problem> problem = LoadProblem(r.model, r.hardware, r.space);
  if (!problem.ok()) return problem.status();
  s.problem = std::move(*problem);
  if (r.core_knobs_only) {
    s.problem.space.seq_parallel = {false};
    s.problem.space.virtual_stages = {1};
    s.problem.space.flash_attention = {false};
  }
  TUNEPAR_RETURN_IF_ERROR(CheckWorld(r.world, s.problem.hardware));
  s.world = static_cast<int>(r.world);
  const search::SpaceQuery query = MakeSpaceQuery(s.problem, s.world);
  Result<search::SpaceEnumeration> space = search::EnumerateSpace(query);
  if (!space.ok()) return space.status();
  if (space->legal.empty()) return Status(StatusCode::kNoLegalLayout, search::ExplainEmpty(query, *space));
  s.space = std::move(*space);
  // The preceding checks touch nothing on disk: bad input leaves the store alone.
  if (r.resume_only) {
    Result<store::StoreView> existing = store::ReadStore(global.store, {"-", ""});
    if (!existing.ok()) return existing.status();
    if (!existing->exists) {
      return NotFound(fmt::format(
          "no study to resume: store '{}' does not exist (drop --resume-only to start one)", global.store));
    }
  }

  const std::string node_id = r.node_id.empty() ? store::DefaultNodeId() : r.node_id;
  Result<std::unique_ptr<store::ShardWriter>> writer =
      store::ShardWriter::Open({global.store, node_id, r.work_dir});
  if (!writer.ok()) return writer.status();
  s.writer = std::move(*writer);
  Result<store::StoreView> all = s.writer->ReadMerged("-");  // studies only
  if (!all.ok()) return all.status();
  for (const std::string& w : all->warnings) spdlog::warn("{}", w);

  r.settings.world = s.world;
  auto find_id = [&](const std::string& id) -> const store::StudyRecord* {
    for (const store::StudyRecord& st : all->studies) {
      if (st.id == id) return &st;
    }
    return nullptr;
  };
  auto find_name = [&](const std::string& name) -> const store::StudyRecord* {
    for (const store::StudyRecord& st : all->studies) {
      if (st.name == name) return &st;
    }
    return nullptr;
  };
  if (r.new_study) {
    for (int salt = 2; find_id(StudyId(s.problem, r.settings)) != nullptr; ++salt)
      r.settings.salt = std::to_string(salt);
  }
  s.settings = r.settings;
  const std::string id = StudyId(s.problem, s.settings);
  std::string name = r.study.empty() ? DefaultStudyName(s.problem, s.settings, id) : r.study;
  if (const store::StudyRecord* existing = find_id(id)) {
    if (r.new_study) return InternalError("--new produced an existing study id");
    s.resumed = true;
    s.study = *existing;
    if (!r.study.empty() && r.study != existing->name) {
      spdlog::info("these inputs are study '{}'; resuming it (not '{}')", existing->name, r.study);
    }
  } else {
    if (const store::StudyRecord* clash = find_name(name)) {
      if (!r.study.empty() || r.new_study) {
        return InvalidArgument(
            fmt::format("study '{}' already exists with a different model, hardware, space, world or search "
                        "settings; choose "
                        "another --study name",
                        clash->name));
      }
    }
    if (r.resume_only) {
      return NotFound(fmt::format("no study '{}' to resume in store '{}' (drop --resume-only to start it)",
                                  name, global.store));
    }
    s.study = MakeStudyRecord(s.problem, s.settings, id, name, node_id);
  }
  TUNEPAR_RETURN_IF_ERROR(s.writer->PutStudy(s.study));
  // Published at once: the node is part of the study from now on (readers see its shard even
  // when the other nodes leave it nothing to run).
  TUNEPAR_RETURN_IF_ERROR(s.writer->Publish());
  TUNEPAR_RETURN_IF_ERROR(s.Refresh());
  return s;
}

}  // namespace tunepar
