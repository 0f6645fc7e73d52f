#include "store/schema.h"

#include <array>
#include <vector>
#include <string_view>

#include <fmt/format.h>

#include "base/provenance.h"

namespace tunepar::store {

namespace {

// kMigrations[i] takes a shard from version i to i + 1. Append; never edit a released step.
constexpr std::array<std::string_view, kSchemaVersion> kMigrations = {
    R"sql(
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE studies (
  study_id         TEXT PRIMARY KEY,
  name             TEXT NOT NULL,
  world            INTEGER NOT NULL,
  model_name       TEXT NOT NULL,
  hardware_name    TEXT NOT NULL,
  space_name       TEXT NOT NULL,
  model_toml       TEXT NOT NULL,
  hardware_toml    TEXT NOT NULL,
  space_toml       TEXT NOT NULL,
  objective        TEXT NOT NULL,
  backend          TEXT NOT NULL,
  backend_settings TEXT NOT NULL,
  created_at       TEXT NOT NULL,
  created_by       TEXT NOT NULL
);
CREATE TABLE trials (
  study_id          TEXT NOT NULL REFERENCES studies(study_id),
  node_id           TEXT NOT NULL,
  number            INTEGER NOT NULL,
  layout_key        TEXT NOT NULL,
  tp                INTEGER NOT NULL,
  pp                INTEGER NOT NULL,
  dp                INTEGER NOT NULL,
  micro_batch       INTEGER NOT NULL,
  num_micro_batches INTEGER NOT NULL,
  precision         TEXT NOT NULL,
  zero              INTEGER NOT NULL,
  recompute         TEXT NOT NULL,
  seq_parallel      INTEGER NOT NULL,
  virtual_stages    INTEGER NOT NULL,
  flash_attention   INTEGER NOT NULL,
  status            TEXT NOT NULL CHECK (status IN ('queued', 'running', 'ok', 'oom', 'timeout',
                                                    'crash', 'invalid', 'interrupted')),
  attempt           INTEGER NOT NULL,
  step_time_s            REAL,
  tokens_per_s           REAL,
  tflops_per_gpu         REAL,
  peak_memory_bytes      REAL,
  objective              REAL,
  predicted_step_time_s  REAL,
  predicted_tokens_per_s REAL,
  predicted_memory_bytes REAL,
  details           TEXT NOT NULL,
  message           TEXT NOT NULL,
  log_path          TEXT NOT NULL,
  backend           TEXT NOT NULL,
  hosts             TEXT NOT NULL,
  tunepar_version   TEXT NOT NULL,
  git_revision      TEXT NOT NULL,
  host              TEXT NOT NULL,
  pid               INTEGER NOT NULL,
  started_at        TEXT NOT NULL,
  finished_at       TEXT NOT NULL,
  heartbeat_at      TEXT NOT NULL,
  lease_expires_at  TEXT NOT NULL,
  PRIMARY KEY (study_id, node_id, number)
);
CREATE INDEX trials_by_layout ON trials (study_id, layout_key);
-- One row per rank of a measured trial: where it ran and what it measured.
CREATE TABLE rank_measurements (
  study_id     TEXT NOT NULL,
  node_id      TEXT NOT NULL,
  trial_number INTEGER NOT NULL,
  rank         INTEGER NOT NULL,
  host         TEXT NOT NULL,
  local_rank   INTEGER NOT NULL,
  cpu_mask     TEXT NOT NULL,
  device       TEXT NOT NULL,
  metrics      TEXT NOT NULL,
  PRIMARY KEY (study_id, node_id, trial_number, rank)
);
-- Hardware profiles fitted from measurements (tunepar calibrate), with their fit error.
CREATE TABLE hardware_profiles (
  name         TEXT NOT NULL,
  fitted_at    TEXT NOT NULL,
  profile_toml TEXT NOT NULL,
  fit_error    TEXT NOT NULL,
  PRIMARY KEY (name, fitted_at)
);
)sql",
    // 1 -> 2: facts that travelled as JSON get columns of their own. The search settings a
    // study's proposals depend on (from backend_settings, which still holds them for the study
    // id); a trial's slice flag, custom metric and process group (from details); and the
    // placement its search priced it with: one rank per device (0) for every backend but local;
    // for local, all the world's ranks on one machine, or, in a study that measured slices (its
    // world beyond the machine), the largest slice measured: what the machine held at least
    // (the capacity itself was not recorded).
    R"sql(
ALTER TABLE studies ADD COLUMN seed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE studies ADD COLUMN acquisition TEXT NOT NULL DEFAULT 'logei';
ALTER TABLE studies ADD COLUMN pinned_knobs TEXT NOT NULL DEFAULT '';
UPDATE studies SET
  seed = COALESCE(json_extract(backend_settings, '$.seed'), 0),
  acquisition = COALESCE(json_extract(backend_settings, '$.acquisition'), 'logei'),
  pinned_knobs = COALESCE(json_extract(backend_settings, '$.core.knobs'), '')
  WHERE json_valid(backend_settings);
ALTER TABLE trials ADD COLUMN sliced INTEGER NOT NULL DEFAULT 0;
ALTER TABLE trials ADD COLUMN metric_kind TEXT NOT NULL DEFAULT '';
ALTER TABLE trials ADD COLUMN metric_value REAL;
ALTER TABLE trials ADD COLUMN ranks_per_node INTEGER;
ALTER TABLE trials ADD COLUMN process_group INTEGER NOT NULL DEFAULT 0;
UPDATE trials SET
  sliced = json_type(details, '$.slice') IS NOT NULL,
  metric_kind = COALESCE(json_extract(details, '$.metric.kind'), ''),
  metric_value = json_extract(details, '$.metric.value'),
  process_group = COALESCE(json_extract(details, '$.pgid'), 0),
  details = json_remove(details, '$.metric', '$.pgid')
  WHERE json_valid(details);
UPDATE trials SET ranks_per_node = 0 WHERE backend <> 'local';
UPDATE trials SET ranks_per_node = COALESCE(
    (SELECT MAX(json_extract(s.details, '$.slice.measured_world')) FROM trials s
      WHERE s.study_id = trials.study_id AND s.sliced = 1 AND json_valid(s.details)),
    (SELECT world FROM studies WHERE studies.study_id = trials.study_id))
  WHERE backend = 'local';
)sql",
    // 2 -> 3: every study and trial row gets a checksum of its other columns (row_checksum.h),
    // in the order of rows.cc's column lists; a later step that adds a column appends it there
    // and recomputes the checksums with the longer list.
    R"sql(
ALTER TABLE studies ADD COLUMN checksum INTEGER NOT NULL DEFAULT 0;
UPDATE studies SET checksum = tunepar_row_checksum(
  study_id, name, world, model_name, hardware_name, space_name, model_toml, hardware_toml,
  space_toml, objective, backend, backend_settings, created_at, created_by, seed, acquisition,
  pinned_knobs);
ALTER TABLE trials ADD COLUMN checksum INTEGER NOT NULL DEFAULT 0;
UPDATE trials SET checksum = tunepar_row_checksum(
  study_id, node_id, number, layout_key, tp, pp, dp, micro_batch, num_micro_batches, precision,
  zero, recompute, seq_parallel, virtual_stages, flash_attention, status, attempt, step_time_s,
  tokens_per_s, tflops_per_gpu, peak_memory_bytes, objective, predicted_step_time_s,
  predicted_tokens_per_s, predicted_memory_bytes, details, sliced, metric_kind, metric_value,
  ranks_per_node, message, log_path, backend, hosts, tunepar_version, git_revision, host, pid,
  process_group, started_at, finished_at, heartbeat_at, lease_expires_at);
)sql",
    // 3 -> 4: the tables stay as they were; the store keeps one shard per node and study
    // (store_layout.h) where it kept one per node. A store written so says so in
    // shards/store-format.sqlite, a shard with this version and no tables: a tunepar before
    // version 4, which would read such a store as empty and write the old layout into it, stops
    // there with "written by a newer tunepar".
    R"sql(
SELECT 1;
)sql",
    // 4 -> 5: a trial's role (base/trial_role.h) gets columns of its own, derived for the rows
    // before from what their messages began with (a confirmation, "re-run of a trial of node X
    // ...") and from their details (reclassified_from); readers no longer parse messages. The
    // checksums are recomputed with the longer column list where the old one matched (a damaged
    // row stays damaged).
    R"sql(
ALTER TABLE trials ADD COLUMN role TEXT NOT NULL DEFAULT 'first'
  CHECK (role IN ('first', 'confirmation', 'rerun', 'reclassified', 'forgotten'));
ALTER TABLE trials ADD COLUMN rerun_of TEXT NOT NULL DEFAULT '';
ALTER TABLE trials ADD COLUMN checksum_matched INTEGER NOT NULL DEFAULT 0;
UPDATE trials SET checksum_matched = (checksum = tunepar_row_checksum(
  study_id, node_id, number, layout_key, tp, pp, dp, micro_batch, num_micro_batches, precision,
  zero, recompute, seq_parallel, virtual_stages, flash_attention, status, attempt, step_time_s,
  tokens_per_s, tflops_per_gpu, peak_memory_bytes, objective, predicted_step_time_s,
  predicted_tokens_per_s, predicted_memory_bytes, details, sliced, metric_kind, metric_value,
  ranks_per_node, message, log_path, backend, hosts, tunepar_version, git_revision, host, pid,
  process_group, started_at, finished_at, heartbeat_at, lease_expires_at));
UPDATE trials SET role = 'confirmation' WHERE message LIKE 'confirmation:%';
UPDATE trials SET role = 'rerun',
  rerun_of = substr(substr(message, 27), 1, instr(substr(message, 27) || ' ', ' ') - 1)
  WHERE message LIKE 're-run of a trial of node %';
UPDATE trials SET role = 'reclassified'
  WHERE role = 'first' AND json_valid(details) AND json_type(details, '$.reclassified_from') IS NOT NULL;
UPDATE trials SET checksum = tunepar_row_checksum(
  study_id, node_id, number, layout_key, tp, pp, dp, micro_batch, num_micro_batches, precision,
  zero, recompute, seq_parallel, virtual_stages, flash_attention, status, attempt, step_time_s,
  tokens_per_s, tflops_per_gpu, peak_memory_bytes, objective, predicted_step_time_s,
  predicted_tokens_per_s, predicted_memory_bytes, details, sliced, metric_kind, metric_value,
  ranks_per_node, message, log_path, backend, hosts, tunepar_version, git_revision, host, pid,
  process_group, started_at, finished_at, heartbeat_at, lease_expires_at, role, rerun_of)
  WHERE checksum_matched = 1;
ALTER TABLE trials DROP COLUMN checksum_matched;
)sql",
    // 5 -> 6: every knob of a trial's layout in one JSON object by name, with its value as
    // base/knobs.h prints it ({"tp":"4", ..., "seq_parallel":"on", ...}), so a knob added later
    // needs no migration: it lands there and in `layout_key`, which readers take the layout from
    // (the field columns above stay, written, for what reads them with sqlite3). Filled for the
    // rows before from their field columns; the checksums are recomputed with the longer column
    // list where the old one matched (a damaged row stays damaged).
    R"sql(
ALTER TABLE trials ADD COLUMN knobs TEXT NOT NULL DEFAULT '{}';
ALTER TABLE trials ADD COLUMN checksum_matched INTEGER NOT NULL DEFAULT 0;
UPDATE trials SET checksum_matched = (checksum = tunepar_row_checksum(
  study_id, node_id, number, layout_key, tp, pp, dp, micro_batch, num_micro_batches, precision,
  zero, recompute, seq_parallel, virtual_stages, flash_attention, status, attempt, step_time_s,
  tokens_per_s, tflops_per_gpu, peak_memory_bytes, objective, predicted_step_time_s,
  predicted_tokens_per_s, predicted_memory_bytes, details, sliced, metric_kind, metric_value,
  ranks_per_node, message, log_path, backend, hosts, tunepar_version, git_revision, host, pid,
  process_group, started_at, finished_at, heartbeat_at, lease_expires_at, role, rerun_of));
UPDATE trials SET knobs = json_object(
  'tp', CAST(tp AS TEXT),
  'pp', CAST(pp AS TEXT),
  'micro_batch', CAST(micro_batch AS TEXT),
  'precision', precision,
  'zero', CAST(zero AS TEXT),
  'recompute', recompute,
  'seq_parallel', CASE WHEN seq_parallel = 0 THEN 'off' ELSE 'on' END,
  'virtual_stages', CAST(virtual_stages AS TEXT),
  'flash_attention', CASE WHEN flash_attention = 0 THEN 'off' ELSE 'on' END);
UPDATE trials SET checksum = tunepar_row_checksum(
  study_id, node_id, number, layout_key, tp, pp, dp, micro_batch, num_micro_batches, precision,
  zero, recompute, seq_parallel, virtual_stages, flash_attention, status, attempt, step_time_s,
  tokens_per_s, tflops_per_gpu, peak_memory_bytes, objective, predicted_step_time_s,
  predicted_tokens_per_s, predicted_memory_bytes, details, sliced, metric_kind, metric_value,
  ranks_per_node, message, log_path, backend, hosts, tunepar_version, git_revision, host, pid,
  process_group, started_at, finished_at, heartbeat_at, lease_expires_at, role, rerun_of, knobs)
  WHERE checksum_matched = 1;
ALTER TABLE trials DROP COLUMN checksum_matched;
)sql",
    // 6 -> 7: the role `probe` (base/trial_role.h: a first measurement proposed past the predicted
    // memory limit). SQLite cannot alter a CHECK, so the table is made again with the longer list
    // (its columns as schema 6 had them, in its order: the ones that ALTER TABLE appended after
    // lease_expires_at stay last) and every row copied as it was, value for value: the checksums,
    // which cover the values and not the table's text, stay valid, and a damaged row stays
    // damaged. MigrateTo runs a step with foreign keys off, as SQLite's recipe for remaking a
    // table asks (the copy is the same rows, referring to the same studies).
    R"sql(
CREATE TABLE trials_v7 (
  study_id          TEXT NOT NULL REFERENCES studies(study_id),
  node_id           TEXT NOT NULL,
  number            INTEGER NOT NULL,
  layout_key        TEXT NOT NULL,
  tp                INTEGER NOT NULL,
  pp                INTEGER NOT NULL,
  dp                INTEGER NOT NULL,
  micro_batch       INTEGER NOT NULL,
  num_micro_batches INTEGER NOT NULL,
  precision         TEXT NOT NULL,
  zero              INTEGER NOT NULL,
  recompute         TEXT NOT NULL,
  seq_parallel      INTEGER NOT NULL,
  virtual_stages    INTEGER NOT NULL,
  flash_attention   INTEGER NOT NULL,
  status            TEXT NOT NULL CHECK (status IN ('queued', 'running', 'ok', 'oom', 'timeout',
                                                    'crash', 'invalid', 'interrupted')),
  attempt           INTEGER NOT NULL,
  step_time_s            REAL,
  tokens_per_s           REAL,
  tflops_per_gpu         REAL,
  peak_memory_bytes      REAL,
  objective              REAL,
  predicted_step_time_s  REAL,
  predicted_tokens_per_s REAL,
  predicted_memory_bytes REAL,
  details           TEXT NOT NULL,
  message           TEXT NOT NULL,
  log_path          TEXT NOT NULL,
  backend           TEXT NOT NULL,
  hosts             TEXT NOT NULL,
  tunepar_version   TEXT NOT NULL,
  git_revision      TEXT NOT NULL,
  host              TEXT NOT NULL,
  pid               INTEGER NOT NULL,
  started_at        TEXT NOT NULL,
  finished_at       TEXT NOT NULL,
  heartbeat_at      TEXT NOT NULL,
  lease_expires_at  TEXT NOT NULL,
  sliced            INTEGER NOT NULL DEFAULT 0,
  metric_kind       TEXT NOT NULL DEFAULT '',
  metric_value      REAL,
  ranks_per_node    INTEGER,
  process_group     INTEGER NOT NULL DEFAULT 0,
  checksum          INTEGER NOT NULL DEFAULT 0,
  role              TEXT NOT NULL DEFAULT 'first'
    CHECK (role IN ('first', 'confirmation', 'rerun', 'reclassified', 'forgotten', 'probe')),
  rerun_of          TEXT NOT NULL DEFAULT '',
  knobs             TEXT NOT NULL DEFAULT '{}',
  PRIMARY KEY (study_id, node_id, number)
);
INSERT INTO trials_v7 SELECT * FROM trials;
DROP TABLE trials;
ALTER TABLE trials_v7 RENAME TO trials;
CREATE INDEX trials_by_layout ON trials (study_id, layout_key);
)sql",
};

}  // namespace

Status CheckVersionReadable(const Database& db, int64_t version) {
  if (version > kSchemaVersion) {
    return {StatusCode::kSchemaTooNew,
            fmt::format("{}: written by a newer tunepar (schema version {}; this tunepar {} reads "
                        "versions up to {}); upgrade tunepar to read it",
                        db.label(), version, Version(), kSchemaVersion)};
  }
  return Status::Ok();
}

namespace {

// The steps from `from` to `target`, each in a transaction of its own.
Status RunSteps(Database& db, int64_t from, int64_t target) {
  for (int64_t v = from; v < target; ++v) {
    TUNEPAR_RETURN_IF_ERROR(db.Exec("BEGIN IMMEDIATE"));
    Status s = db.Exec(kMigrations[v]);
    if (s.ok() && v == 0) s = db.Exec(fmt::format("PRAGMA application_id = {}", kApplicationId));
    if (s.ok()) s = db.Exec(fmt::format("PRAGMA user_version = {}", v + 1));
    if (!s.ok()) {
      (void)db.Exec("ROLLBACK");
      return s.WithContext(fmt::format("migrating schema {} -> {}", v, v + 1));
    }
    TUNEPAR_RETURN_IF_ERROR(db.Exec("COMMIT"));
  }
  return Status::Ok();
}

Status MigrateTo(Database& db, int64_t target) {
  Result<int64_t> version = db.PragmaInt("user_version");
  if (!version.ok()) return version.status();
  TUNEPAR_RETURN_IF_ERROR(CheckVersionReadable(db, *version));
  if (*version >= target) return Status::Ok();
  // A step that makes a table again (6 -> 7) runs with foreign keys off, as SQLite's recipe for
  // it asks; they are set back as they were (a writer turns them on before it migrates).
  Result<int64_t> foreign_keys = db.PragmaInt("foreign_keys");
  if (!foreign_keys.ok()) return foreign_keys.status();
  if (*foreign_keys != 0) TUNEPAR_RETURN_IF_ERROR(db.Exec("PRAGMA foreign_keys = OFF"));
  Status migrated = RunSteps(db, *version, target);
  if (*foreign_keys != 0) {
    Status restored = db.Exec("PRAGMA foreign_keys = ON");
    if (migrated.ok()) migrated = restored;
  }
  return migrated;
}

// An empty shard of `version`, in memory.
Result<Database> EmptyShardOf(int64_t version) {
  Result<Database> db = Database::Open(":memory:", SQLITE_OPEN_READWRITE, "schema");
  if (!db.ok()) return db;
  TUNEPAR_RETURN_IF_ERROR(MigrateTo(*db, version));
  return db;
}

std::set<std::string> ObjectsOf(int64_t version) {
  std::set<std::string> objects;
  Result<Database> db = EmptyShardOf(version);
  if (!db.ok()) return objects;  // unreachable: the migrations are ours
  Result<Statement> st = db->Prepare("SELECT type, name FROM sqlite_master");
  if (!st.ok()) return objects;
  for (Result<bool> row = st->Step(); row.ok() && *row; row = st->Step()) objects.insert(st->Text(0) + " " + st->Text(1));
  return objects;
}

}  // namespace

Status Migrate(Database& db) {
  return MigrateTo(db, kSchemaVersion);
}

const std::set<std::string>& SchemaObjects(int64_t version) {
  static const std::vector<std::set<std::string>> kObjects = [] {
    std::vector<std::set<std::string>> objects(kSchemaVersion + 1);
    for (int64_t v = 1; v <= kSchemaVersion; ++v) objects[v] = ObjectsOf(v);
    return objects;
  }();
  static const std::set<std::string> kNone;
  return version >= 1 && version <= kSchemaVersion ? kObjects[version] : kNone;
}

std::vector<DeclaredColumn> DeclaredColumns(int64_t version, std::string_view table) {
  std::vector<DeclaredColumn> columns;
  Result<Database> db = EmptyShardOf(version);
  if (!db.ok()) return columns;  // unreachable: the migrations are ours
  Result<Statement> st = db->Prepare("SELECT name, type FROM pragma_table_info(?1) ORDER BY cid");
  if (!st.ok()) return columns;
  st->Bind(1, table);
  for (Result<bool> row = st->Step(); row.ok() && *row; row = st->Step())
    columns.push_back({st->Text(0), st->Text(1)});
  return columns;
}

std::string TableSql(int64_t version, std::string_view table) {
  Result<Database> db = EmptyShardOf(version);
  if (!db.ok()) return "";  // unreachable: the migrations are ours
  Result<Statement> st = db->Prepare("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?1");
  if (!st.ok()) return "";
  st->Bind(1, table);
  Result<bool> row = st->Step();
  return row.ok() && *row ? st->Text(0) : "";
}

}  // namespace tunepar::store
