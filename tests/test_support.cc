#include "tests/test_support.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "base/presets.h"

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

search::ModelShape PresetModel(const std::string& name) {
  Result<search::ModelShape> m = search::ParseModelShape(PresetText("models", name), name);
  if (!m.ok()) throw std::runtime_error(m.status().message());
  return *m;
}

runner::HardwareProfile PresetHardware(const std::string& name) {
  Result<runner::HardwareProfile> h = runner::ParseHardwareProfile(PresetText("hardware", name), name);
  if (!h.ok()) throw std::runtime_error(h.status().message());
  return *h;
}

search::SpaceSpec PresetSpace(const std::string& name) {
  Result<search::SpaceSpec> s = search::ParseSpaceSpec(PresetText("spaces", name), name);
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
  return RunCommand(std::string(TUNEPAR_BINARY) + " " + args);
}

std::string MpiRun(int ranks) {
  return std::string("mpirun --oversubscribe --bind-to none") +
         (geteuid() == 0 ? " --allow-run-as-root" : "") + " -np " + std::to_string(ranks);
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

std::vector<std::pair<std::string, std::string>> SnapshotFiles(const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> files;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file()) files.emplace_back(it->path().string(), ReadFile(it->path().string()));
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace tunepar::testing
