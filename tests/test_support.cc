#include "tests/test_support.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "base/presets.h"
#include "runner/process_group.h"
#include "store/rows.h"
#include "store/shard_writer.h"
#include "store/store_layout.h"
#include "store/store_reader.h"

namespace tunepar::testing {

namespace fs = std::filesystem;

TempDir::TempDir() {
  std::string pattern = (fs::temp_directory_path() / "tunepar-test-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
  fs::remove_all(path_, ec);
}

std::string PresetText(const std::string& kind, const std::string& name) {
  Result<ConfigText> text = ResolveConfig(kind, name);
  if (!text.ok()) throw std::runtime_error(text.status().message());
  return text->text;
}

ModelShape PresetModel(const std::string& name) {
  Result<ModelShape> m = ParseModelShape(PresetText("models", name), name);
  if (!m.ok()) throw std::runtime_error(m.status().message());
  return *m;
}

runner::HardwareProfile PresetHardware(const std::string& name) {
  Result<runner::HardwareProfile> h = runner::ParseHardwareProfile(PresetText("hardware", name), name);
  if (!h.ok()) throw std::runtime_error(h.status().message());
  return *h;
}

SpaceSpec PresetSpace(const std::string& name) {
  Result<SpaceSpec> s = ParseSpaceSpec(PresetText("spaces", name), name);
  if (!s.ok()) throw std::runtime_error(s.status().message());
  return *s;
}

SpaceSpec Space2026_11() {
  Result<SpaceSpec> s = ParseSpaceSpec(ReadFile(kSpace2026_11), "space-2026-11");
  if (!s.ok()) throw std::runtime_error(s.status().message());
  return *s;
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

CliRun RunTunepar(const std::string& args) {
  return RunCommand(TuneparBinary() + " " + args);
}

std::string MpiRun(int ranks) {
  return std::string("mpirun --oversubscribe --bind-to none") +
         (geteuid() == 0 ? " --allow-run-as-root" : "") + " -np " + std::to_string(ranks);
}

std::string TuneparBinary() {
  const char* other = std::getenv("TUNEPAR_TEST_BINARY");
  return other != nullptr && *other != '\0' ? other : TUNEPAR_BINARY;
}

CliRun RunCommand(const std::string& command_line) {
  TempDir io;
  const std::string out = io / "out", err = io / "err";
  const std::string command = command_line + " >" + out + " 2>" + err;
  int status = std::system(command.c_str());
  CliRun run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = ReadFile(out);
  run.err = ReadFile(err);
  return run;
}

pid_t Spawn(const std::string& args, const std::string& out) {
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string command = "exec " + TuneparBinary() + " " + args + " >" + out + " 2>&1";
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

int Wait(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string OnlyStudy(const std::string& store) {
  const CliRun list = RunTunepar("--store " + store + " --json list");
  const nlohmann::json j = nlohmann::json::parse(list.out, nullptr, false);
  return j.is_array() && j.size() == 1 ? j[0]["study"].get<std::string>() : "";
}

std::vector<Trial> Trials(const std::string& store, const std::string& study) {
  const CliRun show = RunTunepar("--store " + store + " --json show " + study + " --all");
  std::vector<Trial> out;
  const nlohmann::json j = nlohmann::json::parse(show.out);
  for (const auto& r : j["trials"]) {
    Trial t{
        r["number"].get<int64_t>(), r["layout"], r["status"], r["attempt"].get<int>(), r.value("message", ""),
        r.value("backend", ""),     nullptr, r.value("role", "")};
    if (r.contains("details") && r["details"].is_string()) {
      t.details = nlohmann::json::parse(r["details"].get<std::string>(), nullptr, false);
    } else if (r.contains("details")) {
      t.details = r["details"];
    }
    out.push_back(std::move(t));
  }
  return out;
}

std::string StudyId(const std::string& store, const std::string& name) {
  const CliRun show = RunTunepar("--store " + store + " --json show " + name);
  return nlohmann::json::parse(show.out)["study_id"];
}

std::string NodeShard(const std::string& store, const std::string& node) {
  std::vector<std::string> found;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(store + "/shards/" + node, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (it->path().extension() == ".sqlite" && name.front() != '.') found.push_back(it->path().string());
  }
  return found.size() == 1 ? found.front() : "";
}

bool NoTrialProcessesLeft(const std::string& study_prefix) {
  for (int i = 0; i < 600; ++i) {
    if (runner::ProcessesWithMarkerPrefix(study_prefix).empty()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

void RenameStoredStudy(const std::string& store, const std::string& node, const std::string& id,
                       const std::string& name) {
  std::vector<store::StudyRecord> studies;
  std::vector<store::TrialRecord> trials;
  {
    Result<store::Database> db = store::OpenShardForReading(store::SnapshotPath(store, node, id));
    ASSERT_TRUE(db.ok()) << db.status().message();
    studies = store::SelectStudies(*db).value();
    trials = store::SelectTrials(*db, id).value();
  }
  ASSERT_EQ(studies.size(), 1u);
  studies[0].name = name;
  fs::remove(store::SnapshotPath(store, node, id));
  fs::remove(store::WorkPath(store, node, id, ""));
  auto writer = store::ShardWriter::Open({store, node, id, ""});
  ASSERT_TRUE(writer.ok()) << writer.status().message();
  ASSERT_TRUE((*writer)->PutStudy(studies[0]).ok());
  ASSERT_TRUE((*writer)->PutTrials(trials).ok());
  ASSERT_TRUE((*writer)->Publish().ok());
}

std::vector<std::pair<std::string, std::string>> SnapshotFiles(const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> files;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file()) files.emplace_back(it->path().string(), ReadFile(it->path().string()));
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string InstallTunepar(const std::string& dir, const std::vector<std::string>& cores) {
  const fs::path built = fs::path(TUNEPAR_BINARY).parent_path();
  fs::copy_file(TuneparBinary(), fs::path(dir) / "tunepar", fs::copy_options::overwrite_existing);
  for (const std::string& core : cores)
    fs::copy_file(built / "tunepar-core", fs::path(dir) / core, fs::copy_options::overwrite_existing);
  return dir + "/tunepar";
}

CliRun RunTuneparWithEveryCoreBuild(const std::string& args) {
  static const TempDir dir;
  static const std::string tunepar =
      InstallTunepar(dir.path(), {"tunepar-core", "tunepar-core-cuda", "tunepar-core-hip"});
  return RunCommand(tunepar + " " + args);
}

}  // namespace tunepar::testing
