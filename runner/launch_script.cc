#include "runner/launch_script.h"

#include <algorithm>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "base/names.h"
#include "runner/launch_environment.h"

namespace tunepar::runner {

namespace {

// The job's shape: ranks per node as the script places them, nodes, and srun's options for the
// rank check and the training (the same options: the check sees the training's binding).
struct Placement {
  int world = 0;
  int nodes = 0;
  int tasks_per_node = 0;  // ranks per node, or 1 for a node-level launcher
  int cpus_per_task = 0;
  std::string srun;  // "srun --nodes=... --kill-on-bad-exit=1"
};

Placement PlacementOf(const LaunchScriptRequest& r) {
  const HardwareProfile& hw = r.hardware;
  Placement p;
  p.world = r.layout.World();
  p.nodes = (p.world + hw.gpus_per_node - 1) / hw.gpus_per_node;
  p.tasks_per_node = r.node_launcher ? 1 : std::min(p.world, hw.gpus_per_node);
  p.cpus_per_task = hw.launch.cpus_per_task * (r.node_launcher ? hw.gpus_per_node : 1);
  p.srun = "srun";
  const std::vector<std::string> options = r.node_launcher ? NodeLauncherSrunOptions(hw, p.nodes, r.mpi_plugin)
                                                           : SrunOptions(hw, p.nodes, p.world, r.mpi_plugin);
  for (const std::string& o : options) p.srun += " " + ShellQuote(o);
  return p;
}

std::string Resources(const LaunchScriptRequest& r, const Placement& p) {
  std::string s = "#!/usr/bin/env bash\n" + r.header;
  s += fmt::format("#SBATCH --job-name={}\n", r.job_name);
  s += fmt::format("#SBATCH --nodes={}\n", p.nodes);
  s += fmt::format("#SBATCH --ntasks-per-node={}\n", p.tasks_per_node);
  s += fmt::format("#SBATCH --cpus-per-task={}\n", p.cpus_per_task);
  const MemoryRequest& memory = r.hardware.launch.memory;
  const bool asks_devices = !r.hardware.launch.visible_devices_env.empty();
  if (asks_devices) s += fmt::format("#SBATCH --gpus-per-node={}\n", r.hardware.gpus_per_node);
  if (asks_devices && !memory.per_gpu.empty()) s += fmt::format("#SBATCH --mem-per-gpu={}\n", memory.per_gpu);
  s += "#SBATCH --exclusive\n";
  s += fmt::format("#SBATCH --time={}\n", r.time);
  if (!r.partition.empty()) s += fmt::format("#SBATCH --partition={}\n", r.partition);
  if (!r.account.empty()) s += fmt::format("#SBATCH --account={}\n", r.account);
  s += "#SBATCH --output=%x-%j.out\n";
  s += "# --exclusive: the CPU masks below name every L3 region and device of a node; a shared node\n";
  s += "# would hand some of them to another job.\n";
  if (asks_devices && !memory.per_gpu.empty())
    s += fmt::format("# --mem-per-gpu (launch.mem_per_gpu): {}\n", OneLine(memory.source));
  s += "set -euo pipefail\n";
  return s;
}

std::string Modules(const LaunchScriptRequest& r) {
  std::string s = "\n# ---- Software environment: `module load` lines (the profile's launch.modules, then --module).\n";
  if (r.modules.empty()) {
    s += "# None given: load your site's modules here (e.g. the RCCL network plugin, when not in a container).\n";
  }
  for (const std::string& m : r.modules) s += "module load " + ShellQuote(m) + "\n";
  return s;
}

std::string RequiredEnvironment(const LaunchScriptRequest& r) {
  if (r.required_env.empty()) return "";
  std::string names;
  for (const std::string& n : r.required_env) names += " " + n;
  return "\n# ---- Required environment, checked here before any step starts on any node: the training\n"
         "# command reads these (and srun passes this environment to every node).\n"
         "for name in" + names + "; do\n"
         "  if [ -z \"${!name:-}\" ]; then\n"
         "    echo \"tunepar: $name is not set: the training command needs it; export it before sbatch "
         "(sbatch passes your environment to the job)\" >&2\n"
         "    exit 2\n"
         "  fi\n"
         "done\n";
}

std::string Environment(const LaunchScriptRequest& r, const Placement& p) {
  const HardwareProfile& hw = r.hardware;
  std::string s = fmt::format("\n# ---- Communication and runtime settings (hardware profile {}), each with its source\n",
                              hw.name);
  for (const EnvSetting& e : hw.launch.env) {
    s += fmt::format("export {}={}", e.name, ShellQuote(e.value));
    s += e.source.empty() ? "  # (the profile gives no source)\n" : "  # " + e.source + "\n";
  }
  for (const auto& [name, value] : r.program_env)
    s += fmt::format("export {}={}  # the program reads it, as in its study's trials\n", name, ShellQuote(value));
  s += fmt::format("export OMP_NUM_THREADS={}  # one thread per CPU of a {}'s binding (launch.cpus_per_task{})\n",
                   p.cpus_per_task, r.node_launcher ? "node task" : "rank",
                   r.node_launcher ? " x devices per node" : "");
  if (!hw.launch.net_plugin.name.empty()) {
    s += fmt::format("# RCCL/NCCL log their start-up: with the {} plugin the log says \"NET/OFI Using {}\" (seed 000)\n",
                     hw.launch.net_plugin.name, hw.launch.net_plugin.name);
    s += "export NCCL_DEBUG=INFO\nexport NCCL_DEBUG_SUBSYS=INIT\n";
  }
  if (!r.mpi_plugin.empty()) s += fmt::format("# srun --mpi={}: {}\n", r.mpi_plugin, r.mpi_reason);
  return s;
}

std::string Rendezvous(const LaunchScriptRequest& r) {
  std::string s = "\n# ---- Rendezvous on the first node of the allocation, computed here";
  s += r.container ? " (there are no Slurm tools inside\n# the container; srun passes MASTER_ADDR/PORT to every rank)\n"
                   : "; srun passes it to every rank\n";
  s += "MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\n";
  s += "export MASTER_ADDR\nexport MASTER_PORT=${MASTER_PORT:-29500}\n";
  return s;
}

// The container's environment activation (e.g. the LUMI images' $WITH_CONDA), run inside it.
std::string Hook(const LaunchScriptRequest& r) {
  if (!r.container || r.container->hook.empty()) return "";
  return "# Environment activation inside the image (the container hook)\n" + r.container->hook + "\n";
}

std::string RankSetupFile(const LaunchScriptRequest& r) {
  const HardwareProfile& hw = r.hardware;
  std::string s = "\n# ---- Written next to the job (shared filesystem), run by every ";
  s += r.node_launcher ? "node task before the launcher: kernel caches on\n# node-local disk (the launcher's workers set their own rank variables and pick their device\n# by LOCAL_RANK).\n"
                       : "rank before the program: rank variables from\n# Slurm, its device by local rank, kernel caches on node-local disk.\n";
  s += "job_dir=${SLURM_SUBMIT_DIR:-$PWD}\n";
  s += "rank_setup=\"$job_dir/tunepar-rank-$SLURM_JOB_ID.sh\"\n";
  s += "cat >\"$rank_setup\" <<'RANK_SETUP'\n#!/usr/bin/env bash\nset -e\n" + Hook(r);
  if (r.node_launcher) {
    s += KernelCacheSetup(hw);
  } else {
    if (!hw.launch.visible_devices_env.empty()) {
      s += fmt::format("export TUNEPAR_SLURM_DEVICES=${{{}:-}}  # the devices Slurm gave the task, for the rank check\n",
                       hw.launch.visible_devices_env);
    }
    s += RankSetup(hw);
  }
  s += "exec \"$@\"\nRANK_SETUP\n";
  if (!r.model_toml.empty()) {
    s += "export TUNEPAR_MODEL=\"$job_dir/tunepar-model-$SLURM_JOB_ID.toml\"\n";
    s += "cat >\"$TUNEPAR_MODEL\" <<'MODEL'\n" + r.model_toml + "MODEL\n";
  }
  for (const auto& [path, content] : r.job_files) {
    s += fmt::format("cat >\"{}\" <<'JOB_FILE'\n{}{}JOB_FILE\n", path, content,
                     !content.empty() && content.back() == '\n' ? "" : "\n");
  }
  if (r.node_launcher) s += "export job_dir  # the launcher's command runs under bash -c in the task\n";
  return s;
}

// What the checks compare with: the profile's map, as bash variables.
std::string CheckSettings(const LaunchScriptRequest& r) {
  const HardwareProfile& hw = r.hardware;
  std::string masks;
  if (r.node_launcher) {
    masks = hw.launch.cpu_masks.empty() ? "" : NormalizedMask(UnionOfMasks(hw));
  } else {
    for (const std::string& m : hw.launch.cpu_masks) masks += (masks.empty() ? "" : " ") + NormalizedMask(m);
  }
  std::string libraries;
  for (const std::string& l : hw.launch.net_plugin.libraries) libraries += (libraries.empty() ? "" : " ") + ShellQuote(l);
  std::string s;
  s += fmt::format("profile={}\n", ShellQuote(hw.name));
  s += fmt::format("devices_per_node={}  # node.gpus_per_node\n",
                   hw.launch.visible_devices_env.empty() ? 0 : hw.gpus_per_node);
  s += fmt::format("device_files={}  # launch.device_files (\"\": count the list Slurm gives)\n",
                   ShellQuote(hw.launch.device_files));
  s += fmt::format("visible_env={}  # launch.visible_devices_env\n",
                   ShellQuote(hw.launch.visible_devices_env));
  s += fmt::format("device_per_rank={}  # 0: a node-level launcher's task holds every device of its node\n",
                   r.node_launcher ? 0 : 1);
  s += fmt::format("cpu_masks=({})  # launch.cpu_masks{}, as /proc shows them\n", masks,
                   r.node_launcher ? ", all of them: the node task's binding" : " by local rank");
  s += fmt::format("plugin={}  # launch.net_plugin ({})\n",
                   ShellQuote(hw.launch.net_plugin.name),
                   hw.launch.net_plugin.source.empty() ? "none: no check" : hw.launch.net_plugin.source);
  s += "plugin_libraries=(" + libraries + ")\n";
  return s;
}

constexpr const char* kCheckFunctions = R"CHECKS(
# The device files this process can open, in order (a device outside the job's cgroup fails).
openable_devices() {
  local f
  for f in $device_files; do
    if [ -e "$f" ] && { : <"$f"; } 2>/dev/null; then echo "$f"; fi
  done
}
# This process's CPU mask as /proc shows it, without commas and leading zeros.
cpu_mask() {
  local m
  m=$(sed -n 's/^Cpus_allowed:[[:space:]]*//p' "/proc/$$/status" | tr -d ',' | tr 'A-F' 'a-f' | sed 's/^0*//')
  echo "${m:-0}"
}

# Once per node before any rank starts: every device of the profile is there and opens, and the
# network plugin is on LD_LIBRARY_PATH (checked by file; the NCCL_DEBUG=INFO log confirms it).
check_node() {
  local n=0 found="" d lib
  if [ "$devices_per_node" -gt 0 ] && [ -n "$device_files" ]; then
    n=$(openable_devices | wc -l)
    [ "$n" -ge "$devices_per_node" ] ||
      fail "$n of the $devices_per_node devices of $profile can be opened ($device_files): a device is missing or not given to this job"
  elif [ "$devices_per_node" -gt 0 ]; then
    IFS=, read -ra given <<<"${!visible_env:-}"
    n=${#given[@]}
    [ "$n" -ge "$devices_per_node" ] ||
      fail "Slurm makes $n of the $devices_per_node devices of $profile visible ($visible_env=${!visible_env:-}): check --gpus-per-node"
  fi
  if [ -n "$plugin" ]; then
    IFS=: read -ra dirs <<<"${LD_LIBRARY_PATH:-}"
    for d in "${dirs[@]}"; do
      for lib in "${plugin_libraries[@]}"; do
        if [ -n "$d" ] && [ -e "$d/$lib" ]; then found=$d/$lib; break 2; fi
      done
    done
    [ -n "$found" ] ||
      fail "the $plugin plugin (${plugin_libraries[*]}) is not on LD_LIBRARY_PATH: RCCL would fall back to TCP sockets; load its module, or run in an image that carries it (--container)"
  fi
  local what=""
  [ "$devices_per_node" -gt 0 ] && what="$n devices"
  [ -n "$found" ] && what="${what:+$what, }$plugin at $found"
  echo "tunepar: node check ok on $host${what:+: $what}"
}

# In every rank, with the training's binding, after the rank setup: its CPU mask and its device
# are the ones the profile maps its local rank to.
check_rank() {
  local rank=${SLURM_PROCID:-0} local_rank=${SLURM_LOCALID:-0} want have device=none
  want=${cpu_masks[$local_rank]:-}
  have=$(cpu_mask)
  if [ -n "$want" ] && [ "$have" != "$want" ]; then
    fail "rank $rank (local rank $local_rank) runs on CPU mask 0x$have, but $profile maps local rank $local_rank to 0x$want: the CPU binding is not the profile's (srun --cpu-bind)"
  fi
  if [ "$devices_per_node" -gt 0 ] && [ "$device_per_rank" = 1 ]; then
    IFS=, read -ra given <<<"${TUNEPAR_SLURM_DEVICES:-}"
    if [ "${#given[@]}" -gt 0 ] && ! printf '%s\n' "${given[@]}" | grep -qx "$local_rank"; then
      fail "rank $rank (local rank $local_rank): Slurm gives it devices $TUNEPAR_SLURM_DEVICES, not device $local_rank that $profile maps local rank $local_rank to"
    fi
    [ "${!visible_env:-}" = "$local_rank" ] ||
      fail "rank $rank (local rank $local_rank) sees $visible_env=${!visible_env:-}, but $profile maps local rank $local_rank to device $local_rank"
    device=$local_rank
    if [ -n "$device_files" ]; then
      mapfile -t devices < <(openable_devices)
      [ -n "${devices[$local_rank]:-}" ] ||
        fail "rank $rank (local rank $local_rank): device $local_rank cannot be opened (${#devices[@]} of $device_files can)"
      device="$local_rank (${devices[$local_rank]})"
    fi
  fi
  echo "rank $rank (local $local_rank) on $host: CPUs $(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$$/status") (mask 0x$have), device $device: as $profile maps it"
}

case "${1:-}" in
  node) check_node ;;
  rank) check_rank ;;
  *) echo "usage: $0 node|rank" >&2; exit 2 ;;
esac
)CHECKS";

std::string ChecksFile(const LaunchScriptRequest& r) {
  std::string s = "checks=\"$job_dir/tunepar-checks-$SLURM_JOB_ID.sh\"\n";
  s += "cat >\"$checks\" <<'CHECKS'\n#!/usr/bin/env bash\n";
  s += "# tunepar's checks: `node` once per node before any rank starts, `rank` in every rank with the\n";
  s += "# training's binding. A failure is one line on stderr (\"tunepar: HOST: ...\") and exit 3, which\n";
  s += "# stops the job there (srun --kill-on-bad-exit=1, set -e).\n";
  s += "set -e\nhost=$(hostname)\nfail() { echo \"tunepar: $host: $*\" >&2; exit 3; }\n";
  s += Hook(r) + CheckSettings(r) + kCheckFunctions;
  return s + "CHECKS\n";
}

// "singularity exec --bind ... IMAGE " before each step's program, or "".
std::string ContainerPrefix(const LaunchScriptRequest& r) {
  if (!r.container) return "";
  std::string s = r.container->runtime + " exec --bind \"$job_dir\"";
  for (const std::string& b : r.container->binds) s += " --bind " + ShellQuote(b);
  return s + " " + ShellQuote(r.container->image) + " ";
}

// The smoke test's srun line; with a network plugin in the profile, its log is kept and searched
// for the line RCCL/NCCL print when they use the plugin ("NET/OFI Using aws-ofi-rccl", seed 001):
// a library file on LD_LIBRARY_PATH (the node check) does not prove the library loaded it.
std::string SmokeStep(const LaunchScriptRequest& r, const std::string& smoke) {
  const NetPlugin& plugin = r.hardware.launch.net_plugin;
  if (plugin.name.empty()) return smoke + "\n";
  const std::string evidence = "NET/OFI Using " + plugin.name;
  std::string s = "smoke_log=\"$job_dir/tunepar-smoke-$SLURM_JOB_ID.log\"\n";
  s += smoke + " 2>&1 | tee \"$smoke_log\"\n";
  s += "if ! grep -qF " + ShellQuote(evidence) + " \"$smoke_log\"; then\n";
  const std::string why = fmt::format(
      "line {}: the communication library did not load the {} plugin and would run every collective over TCP "
      "sockets (3-4x slower); load the plugin (its module, or a container that has it) and resubmit",
      evidence, plugin.name);
  s += "  echo \"tunepar: the smoke test's log ($smoke_log) has no \"" + ShellQuote(why) + " >&2\n";
  s += "  exit 3\nfi\n";
  return s;
}

std::string Steps(const LaunchScriptRequest& r, const Placement& p) {
  const HardwareProfile& hw = r.hardware;
  const std::string in = ContainerPrefix(r);
  std::string s;
  if (r.container) {
    s += fmt::format("\n# ---- Every step below runs inside {} ({} exec, the job directory and the binds\n",
                     r.container->image, r.container->runtime);
    s += "# mounted; the environment above passes into it). Binds and hook: " + r.container->source + "\n";
  }
  s += "\n# ---- Node check, on each node before any rank starts (see the checks above)\n";
  s += fmt::format("srun --nodes={} --ntasks={} --ntasks-per-node=1", p.nodes, p.nodes);
  if (!hw.launch.visible_devices_env.empty()) s += fmt::format(" --gpus-per-node={}", hw.gpus_per_node);
  s += " --kill-on-bad-exit=1 " + in + "bash \"$checks\" node\n";

  s += r.node_launcher ? "\n# ---- Task check: each node task's CPUs and devices, with the binding the launcher runs under\n"
                       : "\n# ---- Rank check: every rank's CPU mask and device, with the binding the training uses\n";
  s += p.srun + " " + in + "bash \"$rank_setup\" bash \"$checks\" rank\n";
  if (!r.smoke_command.empty()) {
    s += "\n# ---- Smoke test: one small all-reduce over every rank's device with the training's communication\n"
         "# library (NCCL/RCCL on a GPU build): a missing network plugin or a broken device stops the job here\n";
    s += SmokeStep(r, p.srun + " " + in + "bash \"$rank_setup\" " + r.smoke_command);
  }

  const std::string replaced =
      r.replaced.empty() ? "" : "# The script's srun and rendezvous replace the template's: " + OneLine(r.replaced) + "\n";
  if (r.node_launcher) {
    s += fmt::format("\n# ---- Training: {} on {} ranks: one launcher per node ({} node{}), {} workers each\n",
                     LayoutKey(r.layout), p.world, p.nodes, p.nodes == 1 ? "" : "s",
                     std::min(p.world, hw.gpus_per_node));
    s += replaced + p.srun + " " + in + "bash \"$rank_setup\" bash -c " + ShellQuote(r.training_command) + "\n";
  } else {
    s += fmt::format("\n# ---- Training: {} on {} ranks ({} node{} x {})\n", LayoutKey(r.layout), p.world, p.nodes,
                     p.nodes == 1 ? "" : "s", p.tasks_per_node);
    s += replaced + p.srun + " " + in + "bash \"$rank_setup\" " + r.training_command + "\n";
  }
  return s;
}

}  // namespace

std::string LaunchScript(const LaunchScriptRequest& r) {
  const Placement p = PlacementOf(r);
  return Resources(r, p) + Modules(r) + RequiredEnvironment(r) + Environment(r, p) + Rendezvous(r) +
         RankSetupFile(r) + ChecksFile(r) + Steps(r, p);
}

// ---- The training command, as the script runs it.

std::vector<std::string> ShellWords(const std::string& c) {
  std::vector<std::string> words;
  std::string w;
  int depth = 0;  // inside $( ... ) or $(( ... ))
  char quote = 0;
  const auto end_word = [&] {
    if (!w.empty()) words.push_back(w);
    w.clear();
  };
  for (size_t i = 0; i < c.size(); ++i) {
    const char ch = c[i];
    if (quote != 0) {
      w += ch;
      if (ch == quote) quote = 0;
      else if (ch == '\\' && quote == '"' && i + 1 < c.size()) w += c[++i];
      continue;
    }
    if (ch == '\\' && i + 1 < c.size()) {
      if (c[i + 1] == '\n') {
        ++i;
        if (depth == 0) end_word();
        continue;
      }
      w += ch;
      w += c[++i];
      continue;
    }
    if (ch == '\'' || ch == '"') {
      quote = ch;
    } else if (ch == '$' && i + 1 < c.size() && c[i + 1] == '(') {
      ++depth;
      w += "$(";
      ++i;
      continue;
    } else if (ch == '(' && depth > 0) {
      ++depth;
    } else if (ch == ')' && depth > 0) {
      --depth;
    } else if (depth == 0 && (ch == ' ' || ch == '\t' || ch == '\n')) {
      end_word();
      continue;
    }
    w += ch;
  }
  end_word();
  return words;
}

namespace {

std::string Joined(const std::vector<std::string>& words, size_t from, size_t to) {
  std::string s;
  for (size_t i = from; i < std::min(to, words.size()); ++i) s += (s.empty() ? "" : " ") + words[i];
  return s;
}

// "--rdzv_endpoint=x" -> "--rdzv-endpoint"
std::string OptionName(const std::string& word) {
  std::string name = word.substr(0, word.find('='));
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

// Where the program starts after a srun/mpirun at `at`: the first word that is not one of the
// launcher's options (an option without '=' takes the next word as its value, unless it is one
// of the launchers' flags).
size_t ProgramAfterLauncher(const std::vector<std::string>& w, size_t at) {
  static const std::set<std::string> kFlags = {
      "--exclusive", "--overlap", "--kill-on-bad-exit", "-l", "--label", "-u", "--unbuffered", "--exact",
      "--pty", "--allow-run-as-root", "--oversubscribe", "--tag-output", "-v", "--verbose", "-Q", "--quiet"};
  size_t i = at + 1;
  while (i < w.size() && w[i].size() > 1 && w[i][0] == '-') {
    const bool has_value = w[i].find('=') == std::string::npos && kFlags.count(w[i]) == 0;
    i += has_value ? 2 : 1;
  }
  return i;
}

// torchrun's options that the allocation decides; the rest of its options are kept.
bool AllocationOption(const std::string& name) {
  static const std::set<std::string> kNames = {
      "--nnodes", "--nproc-per-node", "--node-rank", "--rdzv-backend", "--rdzv-endpoint", "--rdzv-id",
      "--rdzv-conf", "--master-addr", "--master-port", "--standalone"};
  return kNames.count(name) > 0;
}

LaunchProgram TorchrunProgram(const std::vector<std::string>& w, size_t launcher, size_t launcher_words, int nodes,
                              int per_node) {
  LaunchProgram p;
  p.node_launcher = true;
  p.dropped = Joined(w, 0, launcher);
  std::string kept;
  size_t i = launcher + launcher_words;
  while (i < w.size() && w[i].size() > 1 && w[i][0] == '-') {
    const std::string name = OptionName(w[i]);
    if (name == "-m" || name == "--module" || name == "--no-python" || name == "--run-path") {
      kept += " " + w[i++];
      if (name == "-m" || name == "--module") break;  // the module name follows: the program
      continue;
    }
    const bool inline_value = w[i].find('=') != std::string::npos || name == "--standalone";
    const size_t width = inline_value ? 1 : 2;
    if (AllocationOption(name)) {
      p.dropped += (p.dropped.empty() ? "" : " ") + Joined(w, i, i + width);
    } else {
      kept += " " + Joined(w, i, i + width);
    }
    i += width;
  }
  p.command = Joined(w, launcher, launcher + launcher_words) +
              fmt::format(" --nnodes={} --nproc-per-node={} --node-rank=\"$SLURM_NODEID\" --rdzv-backend=static "
                          "--rdzv-endpoint=\"$MASTER_ADDR:$MASTER_PORT\"",
                          nodes, per_node) +
              kept + (i < w.size() ? " " + Joined(w, i, w.size()) : "");
  return p;
}

}  // namespace

Result<LaunchProgram> LaunchProgramOf(const std::string& command, int nodes, int per_node) {
  const std::vector<std::string> w = ShellWords(command);
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] == "deepspeed" || (w[i] == "accelerate" && i + 1 < w.size() && w[i + 1] == "launch")) {
      return InvalidArgument(fmt::format(
          "the command starts the {} launcher, which starts the ranks of every node itself: give "
          "--training-command with the program each rank runs (e.g. python train.py ...), which the script "
          "starts under srun, one rank per device",
          w[i]));
    }
  }
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] == "torchrun") return TorchrunProgram(w, i, 1, nodes, per_node);
    if ((w[i] == "python" || w[i] == "python3") && i + 2 < w.size() && w[i + 1] == "-m" &&
        w[i + 2] == "torch.distributed.run")
      return TorchrunProgram(w, i, 3, nodes, per_node);
  }
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] != "srun" && w[i] != "mpirun" && w[i] != "mpiexec") continue;
    const size_t program = ProgramAfterLauncher(w, i);
    if (program >= w.size()) {
      return InvalidArgument(fmt::format(
          "the command starts its own {} and no program after it; give --training-command with the program every "
          "rank runs",
          w[i]));
    }
    return LaunchProgram{Joined(w, program, w.size()), false, Joined(w, 0, program)};
  }
  return LaunchProgram{command, false, ""};
}

Result<std::string> WithTrainingLength(const std::string& command, int steps) {
  static const std::regex kLength(R"((^|\s)(--train-iters|--train_iters|--training\.steps|--max-steps|--max_steps)(=|\s+)([0-9]+))");
  static const std::regex kExit(R"((^|\s)--exit[-_]interval(=|\s+)[0-9]+)");
  std::smatch m;
  if (!std::regex_search(command, m, kLength)) return command;
  if (steps <= 0) {
    return InvalidArgument(fmt::format(
        "the command runs a trial's length ({} {}): give --steps N for the training's length (it replaces {}; "
        "--exit-interval goes), or --training-command",
        m[2].str(), m[4].str(), m[2].str()));
  }
  std::string out;
  auto from = command.cbegin();
  for (std::sregex_iterator it(command.begin(), command.end(), kLength), end; it != end; ++it) {
    const std::smatch& length = *it;
    out.append(from, length[4].first).append(std::to_string(steps));
    from = length[4].second;
  }
  out.append(from, command.cend());
  return std::regex_replace(out, kExit, "");
}

std::vector<std::string> VariablesTheCommandNeeds(const std::string& command,
                                                  const std::vector<std::string>& set_by_script) {
  // Text in single quotes is not expanded by the shell.
  static const std::regex kSingleQuoted("'[^']*'");
  const std::string text = std::regex_replace(command, kSingleQuoted, "");
  static const std::regex kVariable(R"(\$\{([A-Za-z_][A-Za-z0-9_]*)([^}]*)\}|\$([A-Za-z_][A-Za-z0-9_]*))");
  std::vector<std::string> names;
  for (std::sregex_iterator it(text.begin(), text.end(), kVariable), end; it != end; ++it) {
    const std::smatch& m = *it;
    const std::string name = m[1].matched ? m[1].str() : m[3].str();
    const std::string rest = m[2].str();
    if (!rest.empty() && (rest[0] == '-' || rest[0] == '=' || rest[0] == '+' || rest.rfind(":-", 0) == 0 ||
                          rest.rfind(":=", 0) == 0 || rest.rfind(":+", 0) == 0))
      continue;  // a default or an alternative: not required
    if (name.rfind("SLURM", 0) == 0) continue;
    if (std::find(set_by_script.begin(), set_by_script.end(), name) != set_by_script.end()) continue;
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names;
}

namespace {

// A word as the shell passes it when it is one plain or wholly quoted string ("" when it holds a
// variable, a substitution or a quote inside).
std::string PlainWord(const std::string& word) {
  std::string w = word;
  if (w.size() >= 2 && (w.front() == '\'' || w.front() == '"') && w.back() == w.front()) w = w.substr(1, w.size() - 2);
  if (w.find_first_of("$`'\"\\") != std::string::npos) return "";
  return w;
}

// The first two components of an absolute path ("/scratch/project_1/data" -> "/scratch/project_1").
std::string TopDirectories(const std::string& path) {
  std::string out;
  int components = 0;
  for (size_t i = 0; i < path.size() && components < 2;) {
    const size_t start = path.find_first_not_of('/', i);
    if (start == std::string::npos) break;
    const size_t end = std::min(path.find('/', start), path.size());
    const std::string part = path.substr(start, end - start);
    if (part == "." || part == "..") return "";
    out += "/" + part;
    ++components;
    i = end;
  }
  return out;
}

bool Within(const std::string& path, const std::string& dir) {
  return !dir.empty() && (path == dir || path.rfind(dir + "/", 0) == 0);
}

}  // namespace

std::vector<std::string> DirectoriesTheCommandNames(const std::string& command, const std::string& home) {
  static const std::set<std::string> kImageOrDefault = {"/bin", "/boot", "/dev", "/etc",  "/lib", "/lib32",
                                                        "/lib64", "/libx32", "/opt", "/proc", "/root", "/run",
                                                        "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var"};
  std::vector<std::string> dirs;
  for (const std::string& word : ShellWords(command)) {
    std::string w = PlainWord(word);
    if (w.rfind("-", 0) == 0 && w.find('=') != std::string::npos) w = w.substr(w.find('=') + 1);
    if (w.size() < 2 || w[0] != '/') continue;
    const std::string dir = TopDirectories(w);
    if (dir.empty() || kImageOrDefault.count(dir.substr(0, dir.find('/', 1))) > 0) continue;
    if (!home.empty() && Within(w, home)) continue;
    if (std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) dirs.push_back(dir);
  }
  return dirs;
}

std::string PythonProgramOf(const std::string& command) {
  static const std::regex kAssignment("[A-Za-z_][A-Za-z0-9_]*=.*");
  static const std::regex kPython("(python[0-9.]*|torchrun|.*\\.py)");
  if (command.find("mpi4py") != std::string::npos || command.find("--deepspeed_mpi") != std::string::npos) return "";
  for (const std::string& word : ShellWords(command)) {
    const std::string w = PlainWord(word);
    if (w == "env" || std::regex_match(w, kAssignment)) continue;
    const std::string program = w.substr(w.rfind('/') + 1);
    return std::regex_match(program, kPython) ? program : "";
  }
  return "";
}

Status CheckSlurmTime(const std::string& time) {
  static const std::regex kDays(R"(([0-9]+)-([0-9]+)(?::([0-9]+)(?::([0-9]+))?)?)");
  static const std::regex kClock(R"(([0-9]+)(?::([0-9]+)(?::([0-9]+))?)?)");
  const auto bad = [&](const std::string& why) {
    return InvalidArgument(fmt::format(
        "--time '{}': {} (Slurm's forms: minutes, M:S, H:M:S, D-H, D-H:M, D-H:M:S, e.g. 2-00:00:00)", time, why));
  };
  std::smatch m;
  long total = 0;
  const auto part = [&](int i) { return m[i].matched ? std::stol(m[i].str()) : 0L; };
  if (time.size() > 12) return bad("not a Slurm time");
  if (std::regex_match(time, m, kDays)) {
    if (part(2) >= 24 || part(3) >= 60 || part(4) >= 60) return bad("hours must be below 24, minutes and seconds below 60");
    total = ((part(1) * 24 + part(2)) * 60 + part(3)) * 60 + part(4);
  } else if (std::regex_match(time, m, kClock)) {
    if (m[3].matched) {  // H:M:S
      if (part(2) >= 60 || part(3) >= 60) return bad("minutes and seconds must be below 60");
      total = (part(1) * 60 + part(2)) * 60 + part(3);
    } else if (m[2].matched) {  // M:S
      if (part(2) >= 60) return bad("seconds must be below 60");
      total = part(1) * 60 + part(2);
    } else {
      total = part(1) * 60;
    }
  } else {
    return bad("not a Slurm time");
  }
  if (total <= 0) return bad("the job would have no time");
  return Status::Ok();
}

}  // namespace tunepar::runner
