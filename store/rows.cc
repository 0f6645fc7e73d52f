#include "store/rows.h"

#include <array>

#include <fmt/format.h>

#include "store/row_checksum.h"

namespace tunepar::store {

namespace {

// One column of a table: its name, how a record's field is bound into an INSERT, and how it is
// read back from a SELECT of the same column list. The lists below are the only statement of
// which field lives in which column.
template <typename Record>
struct Column {
  std::string_view name;
  void (*bind)(Statement& statement, int index, const Record& record);
  bool (*read)(const Statement& statement, int index, Record& record);  // false: unreadable value
};

void Bind(Statement& st, int i, const std::string& v) { st.Bind(i, v); }
void Bind(Statement& st, int i, int64_t v) { st.Bind(i, v); }
void Bind(Statement& st, int i, int v) { st.Bind(i, v); }
void Bind(Statement& st, int i, bool v) { st.Bind(i, v ? 1 : 0); }
void Bind(Statement& st, int i, const std::optional<double>& v) { st.Bind(i, v); }
void Bind(Statement& st, int i, const std::optional<int>& v) { st.Bind(i, v); }
void Bind(Statement& st, int i, Precision v) { st.Bind(i, ToString(v)); }
void Bind(Statement& st, int i, Recompute v) { st.Bind(i, ToString(v)); }
void Bind(Statement& st, int i, TrialStatus v) { st.Bind(i, ToString(v)); }
void Bind(Statement& st, int i, TrialRole v) { st.Bind(i, ToString(v)); }

bool Read(const Statement& st, int i, std::string& v) { return v = st.Text(i), true; }
bool Read(const Statement& st, int i, int64_t& v) { return v = st.Int(i), true; }
bool Read(const Statement& st, int i, int& v) { return v = static_cast<int>(st.Int(i)), true; }
bool Read(const Statement& st, int i, bool& v) { return v = st.Int(i) != 0, true; }
bool Read(const Statement& st, int i, std::optional<double>& v) { return v = st.OptionalDouble(i), true; }
bool Read(const Statement& st, int i, std::optional<int>& v) {
  const std::optional<int64_t> value = st.OptionalInt(i);
  v = value ? std::optional<int>(static_cast<int>(*value)) : std::nullopt;
  return true;
}
template <typename Enum>
bool ReadParsed(const Statement& st, int i, Enum& v, Result<Enum> (*parse)(std::string_view)) {
  Result<Enum> parsed = parse(st.Text(i));
  if (parsed.ok()) v = *parsed;
  return parsed.ok();
}
bool Read(const Statement& st, int i, Precision& v) { return ReadParsed(st, i, v, ParsePrecision); }
bool Read(const Statement& st, int i, Recompute& v) { return ReadParsed(st, i, v, ParseRecompute); }
bool Read(const Statement& st, int i, TrialStatus& v) { return ReadParsed(st, i, v, ParseTrialStatus); }
bool Read(const Statement& st, int i, TrialRole& v) { return ReadParsed(st, i, v, ParseTrialRole); }

// A column holding the field `Field` of the record.
template <typename Record, auto Field>
constexpr Column<Record> Of(std::string_view name) {
  return {name, [](Statement& st, int i, const Record& r) { Bind(st, i, r.*Field); },
          [](const Statement& st, int i, Record& r) { return Read(st, i, r.*Field); }};
}

// A trial column holding the layout's field `Field`.
template <auto Field>
constexpr Column<TrialRecord> OfLayout(std::string_view name) {
  return {name, [](Statement& st, int i, const TrialRecord& r) { Bind(st, i, r.layout.*Field); },
          [](const Statement& st, int i, TrialRecord& r) { return Read(st, i, r.layout.*Field); }};
}

// The canonical key of the layout: written for joins and lookups, not read (the fields are).
constexpr Column<TrialRecord> kLayoutKey = {
    "layout_key", [](Statement& st, int i, const TrialRecord& r) { st.Bind(i, LayoutKey(r.layout)); },
    [](const Statement&, int, TrialRecord&) { return true; }};

using S = StudyRecord;
constexpr std::array kStudyColumns = {
    Of<S, &S::id>("study_id"),
    Of<S, &S::name>("name"),
    Of<S, &S::world>("world"),
    Of<S, &S::model_name>("model_name"),
    Of<S, &S::hardware_name>("hardware_name"),
    Of<S, &S::space_name>("space_name"),
    Of<S, &S::model_toml>("model_toml"),
    Of<S, &S::hardware_toml>("hardware_toml"),
    Of<S, &S::space_toml>("space_toml"),
    Of<S, &S::objective>("objective"),
    Of<S, &S::backend>("backend"),
    Of<S, &S::backend_settings>("backend_settings"),
    Of<S, &S::created_at>("created_at"),
    Of<S, &S::created_by>("created_by"),
    Of<S, &S::seed>("seed"),
    Of<S, &S::acquisition>("acquisition"),
    Of<S, &S::pinned_knobs>("pinned_knobs"),
};

using T = TrialRecord;
constexpr std::array kTrialColumns = {
    Of<T, &T::study_id>("study_id"),
    Of<T, &T::node_id>("node_id"),
    Of<T, &T::number>("number"),
    kLayoutKey,
    OfLayout<&Layout::tp>("tp"),
    OfLayout<&Layout::pp>("pp"),
    OfLayout<&Layout::dp>("dp"),
    OfLayout<&Layout::micro_batch>("micro_batch"),
    OfLayout<&Layout::num_micro_batches>("num_micro_batches"),
    OfLayout<&Layout::precision>("precision"),
    OfLayout<&Layout::zero>("zero"),
    OfLayout<&Layout::recompute>("recompute"),
    OfLayout<&Layout::seq_parallel>("seq_parallel"),
    OfLayout<&Layout::virtual_stages>("virtual_stages"),
    OfLayout<&Layout::flash_attention>("flash_attention"),
    Of<T, &T::status>("status"),
    Of<T, &T::attempt>("attempt"),
    Of<T, &T::step_time_s>("step_time_s"),
    Of<T, &T::tokens_per_s>("tokens_per_s"),
    Of<T, &T::tflops_per_gpu>("tflops_per_gpu"),
    Of<T, &T::peak_memory_bytes>("peak_memory_bytes"),
    Of<T, &T::objective>("objective"),
    Of<T, &T::predicted_step_time_s>("predicted_step_time_s"),
    Of<T, &T::predicted_tokens_per_s>("predicted_tokens_per_s"),
    Of<T, &T::predicted_memory_bytes>("predicted_memory_bytes"),
    Of<T, &T::details>("details"),
    Of<T, &T::sliced>("sliced"),
    Of<T, &T::metric_kind>("metric_kind"),
    Of<T, &T::metric_value>("metric_value"),
    Of<T, &T::ranks_per_node>("ranks_per_node"),
    Of<T, &T::message>("message"),
    Of<T, &T::log_path>("log_path"),
    Of<T, &T::backend>("backend"),
    Of<T, &T::hosts>("hosts"),
    Of<T, &T::tunepar_version>("tunepar_version"),
    Of<T, &T::git_revision>("git_revision"),
    Of<T, &T::host>("host"),
    Of<T, &T::pid>("pid"),
    Of<T, &T::process_group>("process_group"),
    Of<T, &T::started_at>("started_at"),
    Of<T, &T::finished_at>("finished_at"),
    Of<T, &T::heartbeat_at>("heartbeat_at"),
    Of<T, &T::lease_expires_at>("lease_expires_at"),
    Of<T, &T::role>("role"),  // schema 5
    Of<T, &T::rerun_of>("rerun_of"),
};

template <typename Record, size_t N>
std::string Names(const std::array<Column<Record>, N>& columns) {
  std::string names;
  for (const Column<Record>& c : columns) names += fmt::format("{}{}", names.empty() ? "" : ", ", c.name);
  return names;
}

std::string Placeholders(size_t n) {
  std::string p;
  for (size_t i = 1; i <= n; ++i) p += fmt::format("{}?{}", i == 1 ? "" : ", ", i);
  return p;
}

// The checksum column is computed from the bound values by the same SQL function that
// verifies it on reading (row_checksum.h).
template <typename Record, size_t N>
std::string InsertSql(std::string_view verb, std::string_view table, const std::array<Column<Record>, N>& columns) {
  return fmt::format("{} INTO {} ({}, checksum) VALUES ({}, {}({}))", verb, table, Names(columns), Placeholders(N),
                     kRowChecksumFunction, Placeholders(N));
}

// Selects the columns, then the stored checksum (column N) and the one the values give now
// (column N + 1).
template <typename Record, size_t N>
std::string SelectSql(std::string_view table, const std::array<Column<Record>, N>& columns, std::string_view rest) {
  const std::string names = Names(columns);
  return fmt::format("SELECT {}, checksum, {}({}) FROM {}{}", names, kRowChecksumFunction, names, table, rest);
}

bool ChecksumMatches(const Statement& st, size_t column_count) {
  return st.Int(static_cast<int>(column_count)) == st.Int(static_cast<int>(column_count) + 1);
}

template <typename Record, size_t N>
void BindAll(Statement& st, const std::array<Column<Record>, N>& columns, const Record& record) {
  for (size_t i = 0; i < N; ++i) columns[i].bind(st, static_cast<int>(i) + 1, record);
}

template <typename Record, size_t N>
bool ReadAll(const Statement& st, const std::array<Column<Record>, N>& columns, Record& record) {
  bool ok = true;
  for (size_t i = 0; i < N; ++i) ok = columns[i].read(st, static_cast<int>(i), record) && ok;
  return ok;
}

// SQL that names the first row of `table` (by `key`) whose checksum is wrong: its `key` columns,
// then how many rows are wrong; no row when none is.
template <typename Record, size_t N>
std::string BadChecksumSql(std::string_view table, const std::array<Column<Record>, N>& columns,
                           std::string_view key) {
  return fmt::format("SELECT {}, COUNT(*) OVER () FROM {} WHERE checksum IS NOT {}({}) ORDER BY {} LIMIT 1", key,
                     table, kRowChecksumFunction, Names(columns), key);
}

std::string OtherRows(int64_t count) {
  return count <= 1 ? "" : fmt::format(" and {} other row{}", count - 1, count == 2 ? "" : "s");
}

}  // namespace

Status InsertStudy(Database& db, const StudyRecord& study) {
  Result<Statement> st = db.Prepare(InsertSql("INSERT OR IGNORE", "studies", kStudyColumns));
  if (!st.ok()) return st.status();
  BindAll(*st, kStudyColumns, study);
  return st->Run();
}

Status UpsertTrials(Database& db, const std::vector<TrialRecord>& trials) {
  TUNEPAR_RETURN_IF_ERROR(db.Exec("BEGIN IMMEDIATE"));
  Result<Statement> st = db.Prepare(InsertSql("INSERT OR REPLACE", "trials", kTrialColumns));
  if (!st.ok()) {
    (void)db.Exec("ROLLBACK");
    return st.status();
  }
  for (const TrialRecord& t : trials) {
    BindAll(*st, kTrialColumns, t);
    if (Status s = st->Run(); !s.ok()) {
      (void)db.Exec("ROLLBACK");
      return s;
    }
  }
  return db.Exec("COMMIT");
}

Result<std::vector<StudyRecord>> SelectStudies(Database& db) {
  Result<Statement> st = db.Prepare(SelectSql("studies", kStudyColumns, " ORDER BY created_at, study_id"));
  if (!st.ok()) return st.status();
  std::vector<StudyRecord> out;
  for (Result<bool> row = st->Step();; row = st->Step()) {
    if (!row.ok()) return row.status();
    if (!*row) break;
    StudyRecord s;
    ReadAll(*st, kStudyColumns, s);
    if (!ChecksumMatches(*st, kStudyColumns.size())) {
      return StoreError(fmt::format("{}: bad checksum in study {} ({}): the row changed after it was written",
                                    db.label(), s.id, s.name));
    }
    out.push_back(std::move(s));
  }
  return out;
}

Result<std::vector<TrialRecord>> SelectTrials(Database& db, const std::string& study_id,
                                              std::vector<TrialRecord>* damaged) {
  Result<Statement> st = db.Prepare(
      SelectSql("trials", kTrialColumns, study_id.empty() ? " ORDER BY node_id, number"
                                                          : " WHERE study_id = ?1 ORDER BY node_id, number"));
  if (!st.ok()) return st.status();
  if (!study_id.empty()) st->Bind(1, study_id);
  std::vector<TrialRecord> out;
  for (Result<bool> row = st->Step();; row = st->Step()) {
    if (!row.ok()) return row.status();
    if (!*row) break;
    TrialRecord t;
    const bool readable = ReadAll(*st, kTrialColumns, t);
    if (!ChecksumMatches(*st, kTrialColumns.size())) {
      if (damaged != nullptr) {
        damaged->push_back(std::move(t));
        continue;
      }
      return StoreError(fmt::format("{}: bad checksum in trial {} of study {} (node {}): the row changed after it "
                                    "was written",
                                    db.label(), t.number, t.study_id, t.node_id));
    }
    if (!readable)
      return StoreError(fmt::format("{}: trial {}/{} has an unreadable field", db.label(), t.node_id, t.number));
    out.push_back(std::move(t));
  }
  return out;
}

Result<std::string> FindBadChecksums(Database& db) {
  Result<Statement> studies = db.Prepare(BadChecksumSql("studies", kStudyColumns, "study_id, name"));
  if (!studies.ok()) return studies.status();
  Result<bool> row = studies->Step();
  if (!row.ok()) return row.status();
  if (*row) {
    return fmt::format("bad checksum in study {} ({}){}: the row changed after it was written", studies->Text(0),
                       studies->Text(1), OtherRows(studies->Int(2)));
  }
  Result<Statement> trials = db.Prepare(BadChecksumSql("trials", kTrialColumns, "node_id, number, study_id"));
  if (!trials.ok()) return trials.status();
  row = trials->Step();
  if (!row.ok()) return row.status();
  if (*row) {
    return fmt::format("bad checksum in trial {} of study {} (node {}){}: the row changed after it was written",
                       trials->Int(1), trials->Text(2), trials->Text(0), OtherRows(trials->Int(3)));
  }
  return std::string();
}

}  // namespace tunepar::store
