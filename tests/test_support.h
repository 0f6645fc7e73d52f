// Helpers shared by the tests: temporary directories, preset loading, running the CLI.
#pragma once

#include <string>
#include <vector>

#include "runner/hardware_profile.h"
#include "search/model_shape.h"
#include "search/space_spec.h"

namespace tunepar::testing {

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

search::ModelShape PresetModel(const std::string& name);
runner::HardwareProfile PresetHardware(const std::string& name);
search::SpaceSpec PresetSpace(const std::string& name);
std::string PresetText(const std::string& kind, const std::string& name);

void WriteFile(const std::string& path, const std::string& text);
std::string ReadFile(const std::string& path);

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};
// Runs `tunepar <args>` through the shell (args are shell words the test controls).
CliRun RunTunepar(const std::string& args);
// Runs a shell command line.
CliRun RunCommand(const std::string& command);
// "mpirun -np N" with the flags this machine needs (oversubscribed ranks; as root).
std::string MpiRun(int ranks);

// Every regular file under `dir` with its content, to prove a failed command changed nothing.
std::vector<std::pair<std::string, std::string>> SnapshotFiles(const std::string& dir);

}  // namespace tunepar::testing
