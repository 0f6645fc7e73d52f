#include "store/rows.h"

#include <functional>
#include <string_view>

#include <fmt/format.h>

#include "base/knobs.h"
#include "base/names.h"
#include "store/row_checksum.h"
#include "store/schema.h"

namespace tunepar::store {

namespace {

// One column of a table: its name, how a record's field is bound into an INSERT, and how it is
// read back from a SELECT of the same column list. The lists below are the only statement of
// which field lives in which column.
template <typename Record>
struct Column {
  std::string name;
  std::function<void(Statement& statement, int index, const Record& record)> bind;
  std::function<bool(const Statement& statement, int index, Record& record)> read;  // false: unreadable value
  int64_t since = 1;  // the schema that added it: an older shard's checksums do not cover it
};

void Bind(Statement& st, int i, const std::string& v) { st.Bind(i, v); }
void Bind(Statement& st, int i, int64_t v) { st.Bind(i, v); }
void Bind(Statement& st, int i, int v) { st.Bind(i, v); }
void Bind(Statement& st, int i, bool v) { st.Bind(i, v ? 1 : 0); }
void Bind(Statement& st, int i, const std::optional<double>& v) { st.Bind(i, v); }
void Bind(Statement& st, int i, const std::optional<int>& v) { st.Bind(i, v); }
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
bool Read(const Statement& st, int i, TrialStatus& v) { return ReadParsed(st, i, v, ParseTrialStatus); }
bool Read(const Statement& st, int i, TrialRole& v) { return ReadParsed(st, i, v, ParseTrialRole); }

// A column holding the field `Field` of the record.
template <typename Record, auto Field>
Column<Record> Of(std::string name, int64_t since = 1) {
  return {std::move(name), [](Statement& st, int i, const Record& r) { Bind(st, i, r.*Field); },
          [](const Statement& st, int i, Record& r) { return Read(st, i, r.*Field); }, since};
}

// A column written from the record and never read back.
template <typename Record>
Column<Record> WrittenOnly(std::string name, std::function<void(Statement&, int, const Record&)> bind,
                           int64_t since = 1) {
  return {std::move(name), std::move(bind), [](const Statement&, int, Record&) { return true; }, since};
}

using S = StudyRecord;
using T = TrialRecord;

// The canonical key of the layout: where a read takes the whole layout from, and what the
// (study_id, layout_key) index and the claim files are named by.
Column<T> LayoutKeyColumn() {
  return {"layout_key", [](Statement& st, int i, const T& r) { st.Bind(i, LayoutKey(r.layout)); },
          [](const Statement& st, int i, T& r) {
            Result<Layout> layout = ParseLayoutKey(st.Text(i));
            if (layout.ok()) r.layout = *layout;
            return layout.ok();
          }};
}

// The last schema whose tunepars read a trial's layout from one column per field.
constexpr int64_t kLastFieldColumnsSchema = 5;

// The layout's field columns as schema 5 declared them, in its table's order (the order the
// checksums follow): still written, being NOT NULL, and never read. Each is a knob's (named
// KnobName, holding its value as the column's declared type asks: the code, or for a TEXT column
// the text), or dp's or the micro-batch count's, which are no knobs. A knob added after schema 5
// has no column: it is in `knobs` and `layout_key`. (A knob renamed in base/knobs.h would leave
// its old column unwritten: every INSERT fails, NOT NULL, naming the column.)
std::vector<Column<T>> LayoutFieldColumns() {
  std::vector<Column<T>> columns;
  for (const DeclaredColumn& declared : DeclaredColumns(kLastFieldColumnsSchema, "trials")) {
    if (declared.name == "dp") {
      columns.push_back(
          WrittenOnly<T>(declared.name, [](Statement& st, int i, const T& r) { st.Bind(i, r.layout.dp); }));
    } else if (declared.name == "num_micro_batches") {
      columns.push_back(WrittenOnly<T>(
          declared.name, [](Statement& st, int i, const T& r) { st.Bind(i, r.layout.num_micro_batches); }));
    }
    for (Knob knob : Knobs()) {
      if (KnobName(knob) != declared.name) continue;
      const bool text = declared.type == "TEXT";
      columns.push_back(WrittenOnly<T>(declared.name, [knob, text](Statement& st, int i, const T& r) {
        if (text) {
          st.Bind(i, KnobValue(knob, r.layout));
        } else {
          st.Bind(i, KnobCode(knob, r.layout));
        }
      }));
    }
  }
  return columns;
}

// `text` as a JSON string: quoted, with quotes, backslashes and control characters escaped.
std::string JsonString(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<int>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Every knob of the layout by name, with its value as knobs.h prints it, in the knob list's
// order and as SQLite's json_object writes it (so a row that schema 6's migration filled holds
// what a new row would): {"tp":"4","pp":"2",...,"recompute":"full",...}. Written for people and
// SQL (json_extract), not read: a knob added later lands here with no migration.
Column<T> KnobsColumn() {
  return WrittenOnly<T>(
      "knobs",
      [](Statement& st, int i, const T& r) {
        std::string json;
        for (Knob knob : Knobs())
          json += fmt::format("{}{}:{}", json.empty() ? "{" : ",", JsonString(KnobName(knob)),
                              JsonString(KnobValue(knob, r.layout)));
        st.Bind(i, json.empty() ? std::string("{}") : json + "}");
      },
      /*since=*/6);
}

const std::vector<Column<S>>& StudyColumns() {
  static const std::vector<Column<S>> kColumns = {
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
  return kColumns;
}

const std::vector<Column<T>>& TrialColumns() {
  static const std::vector<Column<T>> kColumns = [] {
    std::vector<Column<T>> columns = {
        Of<T, &T::study_id>("study_id"),
        Of<T, &T::node_id>("node_id"),
        Of<T, &T::number>("number"),
        LayoutKeyColumn(),
    };
    for (Column<T>& field : LayoutFieldColumns()) columns.push_back(std::move(field));
    for (Column<T>& column : std::vector<Column<T>>{
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
             Of<T, &T::role>("role", /*since=*/5),
             Of<T, &T::rerun_of>("rerun_of", /*since=*/5),
             KnobsColumn(),
         })
      columns.push_back(std::move(column));
    return columns;
  }();
  return kColumns;
}

// The names of `columns` that a shard of `version` has (all of them at this schema).
template <typename Record>
std::string Names(const std::vector<Column<Record>>& columns, int64_t version = kSchemaVersion) {
  std::string names;
  for (const Column<Record>& c : columns) {
    if (c.since <= version) names += fmt::format("{}{}", names.empty() ? "" : ", ", c.name);
  }
  return names;
}

std::string Placeholders(size_t n) {
  std::string p;
  for (size_t i = 1; i <= n; ++i) p += fmt::format("{}?{}", i == 1 ? "" : ", ", i);
  return p;
}

// The checksum column is computed from the bound values by the same SQL function that
// verifies it on reading (row_checksum.h).
template <typename Record>
std::string InsertSql(std::string_view verb, std::string_view table,
                      const std::vector<Column<Record>>& columns) {
  return fmt::format("{} INTO {} ({}, checksum) VALUES ({}, {}({}))", verb, table, Names(columns),
                     Placeholders(columns.size()), kRowChecksumFunction, Placeholders(columns.size()));
}

// Selects the columns, then the stored checksum (column N) and the one the values give now
// (column N + 1).
template <typename Record>
std::string SelectSql(std::string_view table, const std::vector<Column<Record>>& columns,
                      std::string_view rest) {
  const std::string names = Names(columns);
  return fmt::format("SELECT {}, checksum, {}({}) FROM {}{}", names, kRowChecksumFunction, names, table, rest);
}

bool ChecksumMatches(const Statement& st, size_t column_count) {
  return st.Int(static_cast<int>(column_count)) == st.Int(static_cast<int>(column_count) + 1);
}

template <typename Record>
void BindAll(Statement& st, const std::vector<Column<Record>>& columns, const Record& record) {
  for (size_t i = 0; i < columns.size(); ++i) columns[i].bind(st, static_cast<int>(i) + 1, record);
}

// Reads every column it can; names the first that does not read, as "layout_key 'tp4-...'" (""
// when every one reads), its value on one line and cut short: the file may be anyone's.
template <typename Record>
std::string ReadAll(const Statement& st, const std::vector<Column<Record>>& columns, Record& record) {
  constexpr size_t kShown = 200;
  std::string unreadable;
  for (size_t i = 0; i < columns.size(); ++i) {
    if (columns[i].read(st, static_cast<int>(i), record) || !unreadable.empty()) continue;
    const std::string value = st.Text(static_cast<int>(i));
    unreadable = fmt::format("{} '{}'{}", columns[i].name, OneLine(std::string_view(value).substr(0, kShown)),
                             value.size() > kShown ? "..." : "");
  }
  return unreadable;
}

// SQL that names the first row of `table` (by `key`) whose checksum is wrong: its `key` columns,
// then how many rows are wrong; no row when none is. The checksums of a shard of `version` cover
// the columns it has.
template <typename Record>
std::string BadChecksumSql(std::string_view table, const std::vector<Column<Record>>& columns,
                           std::string_view key, int64_t version) {
  return fmt::format("SELECT {}, COUNT(*) OVER () FROM {} WHERE checksum IS NOT {}({}) ORDER BY {} LIMIT 1",
                     key, table, kRowChecksumFunction, Names(columns, version), key);
}

std::string OtherRows(int64_t count) {
  return count <= 1 ? "" : fmt::format(" and {} other row{}", count - 1, count == 2 ? "" : "s");
}

}  // namespace

Status InsertStudy(Database& db, const StudyRecord& study) {
  Result<Statement> st = db.Prepare(InsertSql("INSERT OR IGNORE", "studies", StudyColumns()));
  if (!st.ok()) return st.status();
  BindAll(*st, StudyColumns(), study);
  return st->Run();
}

Status UpsertTrials(Database& db, const std::vector<TrialRecord>& trials) {
  TUNEPAR_RETURN_IF_ERROR(db.Exec("BEGIN IMMEDIATE"));
  Result<Statement> st = db.Prepare(InsertSql("INSERT OR REPLACE", "trials", TrialColumns()));
  if (!st.ok()) {
    (void)db.Exec("ROLLBACK");
    return st.status();
  }
  for (const TrialRecord& t : trials) {
    BindAll(*st, TrialColumns(), t);
    if (Status s = st->Run(); !s.ok()) {
      (void)db.Exec("ROLLBACK");
      return s;
    }
  }
  return db.Exec("COMMIT");
}

Result<std::vector<StudyRecord>> SelectStudies(Database& db) {
  Result<Statement> st = db.Prepare(SelectSql("studies", StudyColumns(), " ORDER BY created_at, study_id"));
  if (!st.ok()) return st.status();
  std::vector<StudyRecord> out;
  for (Result<bool> row = st->Step();; row = st->Step()) {
    if (!row.ok()) return row.status();
    if (!*row) break;
    StudyRecord s;
    ReadAll(*st, StudyColumns(), s);
    if (!ChecksumMatches(*st, StudyColumns().size())) {
      return StoreError(fmt::format("{}: bad checksum in study {} ({}): the row changed after it was written",
                                    db.label(), s.id, s.name));
    }
    out.push_back(std::move(s));
  }
  return out;
}

Result<std::vector<TrialRecord>> SelectTrials(Database& db, const std::string& study_id,
                                              std::vector<DamagedTrial>* damaged) {
  Result<Statement> st = db.Prepare(SelectSql(
      "trials", TrialColumns(),
      study_id.empty() ? " ORDER BY node_id, number" : " WHERE study_id = ?1 ORDER BY node_id, number"));
  if (!st.ok()) return st.status();
  if (!study_id.empty()) st->Bind(1, study_id);
  std::vector<TrialRecord> out;
  for (Result<bool> row = st->Step();; row = st->Step()) {
    if (!row.ok()) return row.status();
    if (!*row) break;
    TrialRecord t;
    std::string unreadable = ReadAll(*st, TrialColumns(), t);
    const bool checksum_matches = ChecksumMatches(*st, TrialColumns().size());
    if (checksum_matches && unreadable.empty()) {
      out.push_back(std::move(t));
      continue;
    }
    if (!checksum_matches) unreadable.clear();  // the checksum says more: the row changed
    if (damaged != nullptr) {
      damaged->push_back({std::move(t), std::move(unreadable)});
      continue;
    }
    if (!checksum_matches) {
      return StoreError(fmt::format("{}: bad checksum in trial {} of study {} (node {}): the row changed after it "
                                    "was written",
                                    db.label(), t.number, t.study_id, t.node_id));
    }
    return StoreError(fmt::format("{}: trial {} of study {} (node {}) has an unreadable {}", db.label(),
                                  t.number, t.study_id, t.node_id, unreadable));
  }
  return out;
}

Result<std::string> FindBadChecksums(Database& db) {
  Result<int64_t> version = db.PragmaInt("user_version");
  if (!version.ok()) return version.status();
  Result<Statement> studies =
      db.Prepare(BadChecksumSql("studies", StudyColumns(), "study_id, name", *version));
  if (!studies.ok()) return studies.status();
  Result<bool> row = studies->Step();
  if (!row.ok()) return row.status();
  if (*row) {
    return fmt::format("bad checksum in study {} ({}){}: the row changed after it was written", studies->Text(0),
                       studies->Text(1), OtherRows(studies->Int(2)));
  }
  Result<Statement> trials =
      db.Prepare(BadChecksumSql("trials", TrialColumns(), "node_id, number, study_id", *version));
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
