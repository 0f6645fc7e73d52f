// Helpers shared by the tests: temporary directories, preset loading, running the CLI.
#pragma once

#include <sys/types.h>

#include <initializer_list>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/hardware_profile.h"
#include "base/model_shape.h"
#include "base/space_spec.h"

namespace tunepar::testing {

// A hardware profile that stays fixed (tests/data/test-cpu.toml) for tests whose outcome
// depends on where the performance model sends the search.
inline const std::string kTestCpu = std::string(TUNEPAR_SOURCE_DIR) + "/tests/data/test-cpu.toml";

// A fresh directory under $TMPDIR, removed with its contents when the object goes away.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Knob values as the codes a space lists (base/knobs.h): enums by their value, switches 0 / 1.
template <typename T>
std::vector<int> Codes(std::initializer_list<T> values) {
  std::vector<int> codes;
  for (const T& v : values) codes.push_back(static_cast<int>(v));
  return codes;
}

ModelShape PresetModel(const std::string& name);
runner::HardwareProfile PresetHardware(const std::string& name);
SpaceSpec PresetSpace(const std::string& name);
// The default space of 2026-11, before issue 34 (ZeRO 0-1, no hybrid sharding): tests/data/space-2026-11.toml.
inline constexpr const char* kSpace2026_11 = TUNEPAR_SOURCE_DIR "/tests/data/space-2026-11.toml";
SpaceSpec Space2026_11();
std::string PresetText(const std::string& kind, const std::string& name);

void WriteFile(const std::string& path, const std::string& text);
std::string ReadFile(const std::string& path);

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};
// The tunepar binary the CLI tests run: the one built here, or $TUNEPAR_TEST_BINARY (another
// build, to watch a new test fail on an older tunepar).
std::string TuneparBinary();
// Runs `tunepar <args>` through the shell (args are shell words the test controls).
CliRun RunTunepar(const std::string& args);
// Runs a shell command line.
CliRun RunCommand(const std::string& command);
// "mpirun -np N" with the flags this machine needs (oversubscribed ranks; as root).
std::string MpiRun(int ranks);

// Starts `tunepar <args>` in the background (output to `out`); returns its pid.
pid_t Spawn(const std::string& args, const std::string& out);
// Waits for it: its exit code, or 128 + the signal that ended it.
int Wait(pid_t pid);

// A trial as `tunepar show --json --all` lists it.
struct Trial {
  int64_t number;
  std::string layout, status;
  int attempt;
  std::string message, backend;
  nlohmann::json details;
  std::string role;  // base/trial_role.h: "first", "confirmation", ...
};
std::string OnlyStudy(const std::string& store);  // the store's one study ("" if not exactly one)
std::vector<Trial> Trials(const std::string& store, const std::string& study);
std::string StudyId(const std::string& store, const std::string& name);
// The published copy of the one study that `node` has in `store`: <store>/shards/<node>/<study>.sqlite
// ("" unless there is exactly one).
std::string NodeShard(const std::string& store, const std::string& node);
// Waits (up to 30 s) until no process of any trial whose id starts with `study_prefix` is alive
// (the supervisor kills a trial's processes when tunepar dies; that takes a moment, seconds on a
// machine loaded by parallel tests).
bool NoTrialProcessesLeft(const std::string& study_prefix);

// Renames a stored study as a tunepar before the name rule (base/names.h) could have stored it:
// node `node`'s shard of study `id` written anew with `name` (its rows' checksums made by the store).
void RenameStoredStudy(const std::string& store, const std::string& node, const std::string& id,
                       const std::string& name);

// Every regular file under `dir` with its content, to prove a failed command changed nothing.
std::vector<std::pair<std::string, std::string>> SnapshotFiles(const std::string& dir);

// An install of tunepar with the tunepar-core builds named in `cores` beside it ("tunepar-core",
// "tunepar-core-cuda", "tunepar-core-hip"), in `dir`: each a copy of the CPU build here (it links
// the same MPI and runs without a GPU), so a test can see which build a command picks. Returns
// the installed tunepar.
std::string InstallTunepar(const std::string& dir, const std::vector<std::string>& cores);
// `tunepar <args>` as installed with all three builds (once per test process), $PATH as given.
CliRun RunTuneparWithEveryCoreBuild(const std::string& args);

}  // namespace tunepar::testing
