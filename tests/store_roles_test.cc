// Schema 7 (issue 31 item 2): the trial role `probe`. A probe round-trips through the store with
// its role; a shard of schema 6 (its trials table as schema 6's migrations made it, with the CHECK
// that did not know `probe`) is read through a migrated copy, and migrated in place by its node,
// with every row and column as it was, every checksum that matched still matching and a damaged
// row still damaged; then it takes a probe.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "store/rows.h"
#include "store/schema.h"
#include "store/shard_writer.h"
#include "store/store_layout.h"
#include "store/store_reader.h"
#include "tests/test_support.h"

namespace tunepar::store {
namespace {

using testing::TempDir;

const std::string kStudy = "0123456789abcdef";

StudyRecord Study() {
  StudyRecord s;
  s.id = kStudy;
  s.name = "roles";
  s.world = 64;
  s.model_name = "gpt-22b";
  s.hardware_name = "frontier-mi250x";
  s.space_name = "default";
  s.objective = "max_tokens_per_s";
  s.backend = "command";
  s.backend_settings = "{}";
  s.created_at = "2026-11-28T00:00:00Z";
  s.created_by = "n0";
  return s;
}

TrialRecord Trial(int64_t number, TrialRole role) {
  TrialRecord t;
  t.study_id = kStudy;
  t.node_id = "n0";
  t.number = number;
  t.layout = {.tp = 2, .pp = 2, .dp = 16, .micro_batch = static_cast<int>(number), .num_micro_batches = 4};
  t.status = number % 2 == 0 ? TrialStatus::kOom : TrialStatus::kOk;
  if (t.status == TrialStatus::kOk) t.step_time_s = t.objective = 1.0 + 0.25 * static_cast<double>(number);
  t.peak_memory_bytes = 5e10 + static_cast<double>(number);
  t.predicted_memory_bytes = 4.5e10;
  t.role = role;
  if (role == TrialRole::kRerun) t.rerun_of = "n1";
  t.details = R"({"exit": "code 0"})";
  t.message = "msg";
  t.backend = "command";
  t.started_at = t.finished_at = t.heartbeat_at = t.lease_expires_at = "2026-11-28T00:00:01Z";
  return t;
}

// One trial of each role that schema 6 knows.
std::vector<TrialRecord> Schema6Trials() {
  return {Trial(1, TrialRole::kFirst), Trial(2, TrialRole::kConfirmation), Trial(3, TrialRole::kRerun),
          Trial(4, TrialRole::kReclassified), Trial(5, TrialRole::kForgotten)};
}

void Write(const std::string& store, const std::vector<TrialRecord>& trials) {
  Result<std::unique_ptr<ShardWriter>> w = ShardWriter::Open({store, "n0", kStudy, ""});
  ASSERT_TRUE(w.ok()) << w.status().message();
  ASSERT_TRUE((*w)->PutStudy(Study()).ok());
  const Status put = (*w)->PutTrials(trials);
  ASSERT_TRUE(put.ok()) << put.message();
  ASSERT_TRUE((*w)->Publish().ok());
}

void Exec(const std::string& path, const std::string& sql) {
  Result<Database> db = Database::Open(path, SQLITE_OPEN_READWRITE, path);
  ASSERT_TRUE(db.ok()) << db.status().message();
  const Status s = db->Exec(sql);
  ASSERT_TRUE(s.ok()) << s.message();
}

// Every trial row as text: each column of the table quoted (its type shows), in column order.
std::vector<std::string> Rows(Database& db) {
  std::string columns;
  for (const DeclaredColumn& c : DeclaredColumns(kSchemaVersion, "trials"))
    columns += fmt::format("{}quote({})", columns.empty() ? "" : " || '|' || ", c.name);
  std::vector<std::string> rows;
  Result<Statement> st = db.Prepare("SELECT " + columns + " FROM trials ORDER BY node_id, number");
  EXPECT_TRUE(st.ok()) << st.status().message();
  if (!st.ok()) return rows;
  for (Result<bool> row = st->Step(); row.ok() && *row; row = st->Step()) rows.push_back(st->Text(0));
  return rows;
}

std::vector<std::string> RowsOf(const std::string& path) {
  Result<Database> db = Database::Open(path, SQLITE_OPEN_READONLY, path);
  EXPECT_TRUE(db.ok()) << db.status().message();
  return db.ok() ? Rows(*db) : std::vector<std::string>{};
}

std::string Text(Database& db, const std::string& sql) {
  Result<Statement> st = db.Prepare(sql);
  if (!st.ok()) return st.status().message();
  Result<bool> row = st->Step();
  return row.ok() && *row ? st->Text(0) : "";
}

// `path` as schema 6 made it: its trials table made again from schema 6's own statement (the
// CHECK without `probe`), the rows copied, user_version 6.
void MakeSchema6(const std::string& path) {
  const std::string table = TableSql(6, "trials");
  ASSERT_NE(table.find("'forgotten'))"), std::string::npos) << table;
  ASSERT_EQ(table.find("probe"), std::string::npos) << table;
  Exec(path,
       "BEGIN; ALTER TABLE trials RENAME TO trials_v7; " + table +
           "; INSERT INTO trials SELECT * FROM trials_v7; DROP TABLE trials_v7; "
           "CREATE INDEX trials_by_layout ON trials (study_id, layout_key); PRAGMA user_version = 6; COMMIT");
  Result<Database> db = Database::Open(path, SQLITE_OPEN_READONLY, path);
  ASSERT_TRUE(db.ok());
  EXPECT_EQ(Text(*db, "SELECT sql FROM sqlite_master WHERE name = 'trials'"), table);
}

TEST(StoreRoles, AProbeTrialRoundTripsWithItsRole) {
  EXPECT_EQ(ToString(TrialRole::kProbe), "probe");
  Result<TrialRole> parsed = ParseTrialRole("probe");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, TrialRole::kProbe);
  TempDir dir;
  const std::string store = dir / "store";
  const std::vector<TrialRecord> trials = {Trial(1, TrialRole::kFirst), Trial(2, TrialRole::kProbe)};
  Write(store, trials);
  Result<StoreView> view = ReadStore(store);
  ASSERT_TRUE(view.ok()) << view.status().message();
  EXPECT_TRUE(view->warnings.empty());
  EXPECT_EQ(view->trials, trials);
  ASSERT_EQ(view->trials.size(), 2u);
  EXPECT_EQ(view->trials[1].role, TrialRole::kProbe);
  Result<Database> db = OpenShardForReading(SnapshotPath(store, "n0", kStudy));
  ASSERT_TRUE(db.ok()) << db.status().message();
  EXPECT_EQ(Text(*db, "SELECT role FROM trials WHERE number = 2"), "probe");
}

// Read through a migrated copy in memory: the rows as they were (a damaged one too, and still
// damaged), the file untouched.
TEST(StoreRoles, ASchema6ShardReadsWithEveryRowAsItWas) {
  TempDir dir;
  const std::string store = dir / "store";
  Write(store, Schema6Trials());
  const std::string published = SnapshotPath(store, "n0", kStudy);
  MakeSchema6(published);
  Exec(published, "UPDATE trials SET step_time_s = 99 WHERE number = 3");
  const std::vector<std::string> before = RowsOf(published);
  ASSERT_EQ(before.size(), 5u);
  const std::string bytes = testing::ReadFile(published);

  Result<StoreView> view = ReadStore(store);
  ASSERT_TRUE(view.ok()) << view.status().message();
  const std::vector<TrialRecord> all = Schema6Trials();
  EXPECT_EQ(view->trials, (std::vector<TrialRecord>{all[0], all[1], all[3]}));
  EXPECT_EQ(view->forgotten, std::vector<TrialRecord>{all[4]});
  EXPECT_EQ(view->damaged_rows, (std::map<std::string, int64_t>{{published, 1}}));
  EXPECT_EQ(testing::ReadFile(published), bytes);

  Result<Database> migrated = OpenShardForReading(published);
  ASSERT_TRUE(migrated.ok()) << migrated.status().message();
  EXPECT_EQ(*migrated->PragmaInt("user_version"), kSchemaVersion);
  EXPECT_NE(Text(*migrated, "SELECT sql FROM sqlite_master WHERE name = 'trials'").find("'probe'"),
            std::string::npos);
  EXPECT_EQ(Rows(*migrated), before);
  Result<std::string> bad = FindBadChecksums(*migrated);
  ASSERT_TRUE(bad.ok()) << bad.status().message();
  EXPECT_EQ(*bad, "bad checksum in trial 3 of study " + kStudy +
                      " (node n0): the row changed after it was written");
}

// Migrated in place when its node opens it: the rows as they were, every checksum sound, and a
// probe taken (the CHECK of schema 6 refuses one); what it publishes is schema 7.
TEST(StoreRoles, ANodesSchema6ShardMigratesInPlaceAndTakesAProbe) {
  TempDir dir;
  const std::string store = dir / "store";
  const std::vector<TrialRecord> trials = Schema6Trials();
  Write(store, trials);
  const std::string published = SnapshotPath(store, "n0", kStudy), work = WorkPath(store, "n0", kStudy, "");
  MakeSchema6(work);
  MakeSchema6(published);
  const std::vector<std::string> before = RowsOf(work);
  {  // schema 6's CHECK refuses the role
    Result<Database> db = Database::Open(work, SQLITE_OPEN_READWRITE, work);
    ASSERT_TRUE(db.ok());
    EXPECT_FALSE(db->Exec("UPDATE trials SET role = 'probe' WHERE number = 1").ok());
  }
  const TrialRecord probe = Trial(6, TrialRole::kProbe);
  {
    Result<std::unique_ptr<ShardWriter>> w = ShardWriter::Open({store, "n0", kStudy, ""});
    ASSERT_TRUE(w.ok()) << w.status().message();
    Result<std::vector<TrialRecord>> read = (*w)->Trials(kStudy);
    ASSERT_TRUE(read.ok()) << read.status().message();
    EXPECT_EQ(read->size(), 5u);
    const Status put = (*w)->PutTrials({probe});
    ASSERT_TRUE(put.ok()) << put.message();
    ASSERT_TRUE((*w)->Publish().ok());
  }
  for (const std::string& path : {work, published}) {
    Result<Database> db = Database::Open(path, SQLITE_OPEN_READONLY, path);
    ASSERT_TRUE(db.ok());
    EXPECT_EQ(*db->PragmaInt("user_version"), kSchemaVersion) << path;
    Result<std::string> bad = FindBadChecksums(*db);
    ASSERT_TRUE(bad.ok()) << bad.status().message();
    EXPECT_EQ(*bad, "") << path;
    std::vector<std::string> rows = Rows(*db);
    ASSERT_EQ(rows.size(), 6u) << path;
    rows.pop_back();
    EXPECT_EQ(rows, before) << path;
  }
  Result<StoreView> view = ReadStore(store);
  ASSERT_TRUE(view.ok()) << view.status().message();
  EXPECT_TRUE(view->warnings.empty()) << view->warnings.front();
  EXPECT_EQ(view->trials, (std::vector<TrialRecord>{trials[0], trials[1], trials[2], trials[3], probe}));
  EXPECT_EQ(view->forgotten, std::vector<TrialRecord>{trials[4]});
}

// The migration makes its table again with foreign keys off, and leaves them as it found them.
TEST(StoreRoles, MigratingLeavesForeignKeysAsTheyWere) {
  TempDir dir;
  const std::string store = dir / "store";
  Write(store, Schema6Trials());
  const std::string published = SnapshotPath(store, "n0", kStudy);
  MakeSchema6(published);
  for (const bool on : {true, false}) {
    const std::string copy = dir / (on ? "on.sqlite" : "off.sqlite");
    std::filesystem::copy_file(published, copy);
    Result<Database> db = Database::Open(copy, SQLITE_OPEN_READWRITE, copy);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(db->Exec(on ? "PRAGMA foreign_keys = ON" : "PRAGMA foreign_keys = OFF").ok());
    const Status migrated = Migrate(*db);
    ASSERT_TRUE(migrated.ok()) << migrated.message();
    EXPECT_EQ(*db->PragmaInt("user_version"), kSchemaVersion);
    EXPECT_EQ(*db->PragmaInt("foreign_keys"), on ? 1 : 0);
  }
}

}  // namespace
}  // namespace tunepar::store
