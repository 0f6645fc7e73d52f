#include "store/rows.h"

#include <fmt/format.h>

namespace tunepar::store {

namespace {

constexpr std::string_view kStudyColumns =
    "study_id, name, world, model_name, hardware_name, space_name, model_toml, hardware_toml, "
    "space_toml, objective, backend, backend_settings, created_at, created_by";

constexpr std::string_view kTrialColumns =
    "study_id, node_id, number, layout_key, tp, pp, dp, micro_batch, num_micro_batches, "
    "precision, zero, recompute, seq_parallel, virtual_stages, flash_attention, status, attempt, "
    "step_time_s, tokens_per_s, tflops_per_gpu, peak_memory_bytes, objective, predicted_step_time_s, "
    "predicted_tokens_per_s, predicted_memory_bytes, details, message, log_path, backend, hosts, "
    "tunepar_version, git_revision, host, pid, started_at, finished_at, heartbeat_at, "
    "lease_expires_at";
constexpr int kTrialColumnCount = 38;

std::string Placeholders(int n) {
  std::string p;
  for (int i = 1; i <= n; ++i) p += fmt::format("{}?{}", i == 1 ? "" : ", ", i);
  return p;
}

}  // namespace

Status InsertStudy(Database& db, const StudyRecord& s) {
  Result<Statement> st = db.Prepare(
      fmt::format("INSERT OR IGNORE INTO studies ({}) VALUES ({})", kStudyColumns, Placeholders(14)));
  if (!st.ok()) return st.status();
  st->Bind(1, s.id)
      .Bind(2, s.name)
      .Bind(3, s.world)
      .Bind(4, s.model_name)
      .Bind(5, s.hardware_name)
      .Bind(6, s.space_name)
      .Bind(7, s.model_toml)
      .Bind(8, s.hardware_toml)
      .Bind(9, s.space_toml)
      .Bind(10, s.objective)
      .Bind(11, s.backend)
      .Bind(12, s.backend_settings)
      .Bind(13, s.created_at)
      .Bind(14, s.created_by);
  return st->Run();
}

Status UpsertTrials(Database& db, const std::vector<TrialRecord>& trials) {
  TUNEPAR_RETURN_IF_ERROR(db.Exec("BEGIN IMMEDIATE"));
  Result<Statement> st = db.Prepare(fmt::format("INSERT OR REPLACE INTO trials ({}) VALUES ({})",
                                                kTrialColumns, Placeholders(kTrialColumnCount)));
  if (!st.ok()) {
    (void)db.Exec("ROLLBACK");
    return st.status();
  }
  for (const TrialRecord& t : trials) {
    const search::Layout& l = t.layout;
    st->Bind(1, t.study_id)
        .Bind(2, t.node_id)
        .Bind(3, t.number)
        .Bind(4, search::LayoutKey(l))
        .Bind(5, l.tp)
        .Bind(6, l.pp)
        .Bind(7, l.dp)
        .Bind(8, l.micro_batch)
        .Bind(9, l.num_micro_batches)
        .Bind(10, search::ToString(l.precision))
        .Bind(11, l.zero)
        .Bind(12, search::ToString(l.recompute))
        .Bind(13, l.seq_parallel ? 1 : 0)
        .Bind(14, l.virtual_stages)
        .Bind(15, l.flash_attention ? 1 : 0)
        .Bind(16, search::ToString(t.status))
        .Bind(17, t.attempt)
        .Bind(18, t.step_time_s)
        .Bind(19, t.tokens_per_s)
        .Bind(20, t.tflops_per_gpu)
        .Bind(21, t.peak_memory_bytes)
        .Bind(22, t.objective)
        .Bind(23, t.predicted_step_time_s)
        .Bind(24, t.predicted_tokens_per_s)
        .Bind(25, t.predicted_memory_bytes)
        .Bind(26, t.details)
        .Bind(27, t.message)
        .Bind(28, t.log_path)
        .Bind(29, t.backend)
        .Bind(30, t.hosts)
        .Bind(31, t.tunepar_version)
        .Bind(32, t.git_revision)
        .Bind(33, t.host)
        .Bind(34, t.pid)
        .Bind(35, t.started_at)
        .Bind(36, t.finished_at)
        .Bind(37, t.heartbeat_at)
        .Bind(38, t.lease_expires_at);
    if (Status s = st->Run(); !s.ok()) {
      (void)db.Exec("ROLLBACK");
      return s;
    }
  }
  return db.Exec("COMMIT");
}

Result<std::vector<StudyRecord>> SelectStudies(Database& db) {
  Result<Statement> st =
      db.Prepare(fmt::format("SELECT {} FROM studies ORDER BY created_at, study_id", kStudyColumns));
  if (!st.ok()) return st.status();
  std::vector<StudyRecord> out;
  for (Result<bool> row = st->Step();; row = st->Step()) {
    if (!row.ok()) return row.status();
    if (!*row) break;
    StudyRecord s;
    s.id = st->Text(0);
    s.name = st->Text(1);
    s.world = static_cast<int>(st->Int(2));
    s.model_name = st->Text(3);
    s.hardware_name = st->Text(4);
    s.space_name = st->Text(5);
    s.model_toml = st->Text(6);
    s.hardware_toml = st->Text(7);
    s.space_toml = st->Text(8);
    s.objective = st->Text(9);
    s.backend = st->Text(10);
    s.backend_settings = st->Text(11);
    s.created_at = st->Text(12);
    s.created_by = st->Text(13);
    out.push_back(std::move(s));
  }
  return out;
}

Result<std::vector<TrialRecord>> SelectTrials(Database& db, const std::string& study_id) {
  std::string sql = fmt::format("SELECT {} FROM trials{} ORDER BY node_id, number", kTrialColumns,
                                study_id.empty() ? "" : " WHERE study_id = ?1");
  Result<Statement> st = db.Prepare(sql);
  if (!st.ok()) return st.status();
  if (!study_id.empty()) st->Bind(1, study_id);
  std::vector<TrialRecord> out;
  for (Result<bool> row = st->Step();; row = st->Step()) {
    if (!row.ok()) return row.status();
    if (!*row) break;
    TrialRecord t;
    t.study_id = st->Text(0);
    t.node_id = st->Text(1);
    t.number = st->Int(2);
    search::Layout& l = t.layout;
    l.tp = static_cast<int>(st->Int(4));
    l.pp = static_cast<int>(st->Int(5));
    l.dp = static_cast<int>(st->Int(6));
    l.micro_batch = static_cast<int>(st->Int(7));
    l.num_micro_batches = static_cast<int>(st->Int(8));
    Result<search::Precision> precision = search::ParsePrecision(st->Text(9));
    Result<search::Recompute> recompute = search::ParseRecompute(st->Text(11));
    Result<search::TrialStatus> status = search::ParseTrialStatus(st->Text(15));
    if (!precision.ok() || !recompute.ok() || !status.ok())
      return StoreError(
          fmt::format("{}: trial {}/{} has an unreadable field", db.label(), t.node_id, t.number));
    l.precision = *precision;
    l.zero = static_cast<int>(st->Int(10));
    l.recompute = *recompute;
    l.seq_parallel = st->Int(12) != 0;
    l.virtual_stages = static_cast<int>(st->Int(13));
    l.flash_attention = st->Int(14) != 0;
    t.status = *status;
    t.attempt = static_cast<int>(st->Int(16));
    t.step_time_s = st->OptionalDouble(17);
    t.tokens_per_s = st->OptionalDouble(18);
    t.tflops_per_gpu = st->OptionalDouble(19);
    t.peak_memory_bytes = st->OptionalDouble(20);
    t.objective = st->OptionalDouble(21);
    t.predicted_step_time_s = st->OptionalDouble(22);
    t.predicted_tokens_per_s = st->OptionalDouble(23);
    t.predicted_memory_bytes = st->OptionalDouble(24);
    t.details = st->Text(25);
    t.message = st->Text(26);
    t.log_path = st->Text(27);
    t.backend = st->Text(28);
    t.hosts = st->Text(29);
    t.tunepar_version = st->Text(30);
    t.git_revision = st->Text(31);
    t.host = st->Text(32);
    t.pid = st->Int(33);
    t.started_at = st->Text(34);
    t.finished_at = st->Text(35);
    t.heartbeat_at = st->Text(36);
    t.lease_expires_at = st->Text(37);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace tunepar::store
