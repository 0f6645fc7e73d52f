// The sbatch script for a chosen layout, in sections that say why:
//   resources (#SBATCH, --exclusive: the CPU masks assume whole nodes), modules, the required
//   environment checked before any step starts, the profile's communication environment (each
//   variable with its source), OMP_NUM_THREADS, srun's MPI plugin (the MPI the program links),
//   MASTER_ADDR/PORT from the first node (outside any container), the per-rank setup and the
//   checks written next to the job, a node check (devices, the network plugin) and a rank check
//   (CPU mask and device against the profile's map) that stop the job with one line, for
//   tunepar-core a smoke test (one collective over every rank's device with its communication
//   library), and the training step under srun with the profile's CPU masks
//   (launch_environment.h: the same launch the slurm backend measures with); optionally every
//   step inside a container image.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/layout.h"
#include "base/model_shape.h"
#include "runner/hardware_profile.h"

namespace tunepar::runner {

// Every step inside an image (`singularity exec` / `apptainer exec`), as LUMI users run them.
struct ContainerLaunch {
  std::string image;
  std::string runtime = "singularity";
  std::vector<std::string> binds;  // SRC[:DST]; the job directory is always bound
  std::string hook;                // run inside the image before the checks and the program
  std::string source;              // where the binds and hook come from (profile or options)
};

struct LaunchScriptRequest {
  ModelShape model;
  HardwareProfile hardware;
  Layout layout;
  std::string training_command;  // run by every rank (node_launcher: by one task per node)
  // Run by every rank after the rank check, before training ("": none): one small collective
  // over every node's devices with the training's own library (`tunepar-core --smoke`), so a
  // missing network plugin or a broken device stops the job before training starts.
  std::string smoke_command;
  // The command is a node-level launcher (torchrun) that starts the node's workers itself: one
  // task per node with the node's CPUs and devices; the command reads $SLURM_NODEID,
  // $MASTER_ADDR, $MASTER_PORT in the task (it runs under bash -c there).
  bool node_launcher = false;
  std::string replaced;  // what of the template the script's srun and rendezvous replace ("": nothing)
  std::string model_toml;  // non-empty: written next to the job as $TUNEPAR_MODEL (tunepar-core)
  // Files the command reads, written next to the job before any step: (path, as the command
  // names it, e.g. "$job_dir/deepspeed_config.json"; content).
  std::vector<std::pair<std::string, std::string>> job_files;
  std::string job_name = "tunepar";
  std::string time = "01:00:00";  // #SBATCH --time (checked by the caller)
  std::string partition;          // "" = the site's default
  std::string account;            // "" = the user's default
  std::string header;             // comment lines: where the layout comes from
  std::vector<std::string> modules;       // `module load` lines, in order
  std::vector<std::string> required_env;  // variables the command needs, checked before any step
  // Variables the program reads that the script sets (TUNEPAR_LAYOUT for a program that read its
  // layout there in its study's trials), exported for every step.
  std::vector<std::pair<std::string, std::string>> program_env;
  std::string mpi_plugin;                 // srun --mpi=...
  std::string mpi_reason;                 // why that plugin, said in the script
  std::optional<ContainerLaunch> container;
};

std::string LaunchScript(const LaunchScriptRequest& request);

// ---- The training command, as the script runs it.

// The shell words of a command: whitespace splits them except inside quotes and $(...);
// backslash-newline is whitespace. Each word keeps its text.
std::vector<std::string> ShellWords(const std::string& command);

struct LaunchProgram {
  std::string command;         // what the script runs (per rank, or per node when node_launcher)
  bool node_launcher = false;  // torchrun: one task per node, with its rendezvous
  std::string dropped;         // what of the command the script's srun replaces ("" when nothing)
};
// The program of a (rendered) command template: a srun/mpirun launcher of its own and what
// comes before it are dropped (the script's srun places the ranks); torchrun (or python -m
// torch.distributed.run) is a node-level launcher: its node count, workers per node, node rank
// and rendezvous are replaced by the allocation's (`nodes`, `per_node`, $SLURM_NODEID, a static
// rendezvous at $MASTER_ADDR:$MASTER_PORT). deepspeed and accelerate launchers are refused
// (kInvalidArgument, one line): they start the ranks of every node themselves.
Result<LaunchProgram> LaunchProgramOf(const std::string& command, int nodes, int per_node);

// A trial's length in the command (--train-iters N, --training.steps N, --max-steps N) becomes
// `steps`, and --exit-interval N goes; with steps 0 such a length is refused (kInvalidArgument:
// a launch runs training, not a trial).
Result<std::string> WithTrainingLength(const std::string& command, int steps);

// The environment variables the command reads ($NAME, ${NAME}; not ${NAME:-default}), less
// those the script or Slurm sets (`set_by_script`, SLURM_*), in order of first use.
std::vector<std::string> VariablesTheCommandNeeds(const std::string& command,
                                                  const std::vector<std::string>& set_by_script);

// The host directories a command names by absolute path (a word, or the value of a
// --flag=VALUE word; quoted words unquoted, words with a variable skipped), as a container must
// have them bound: each path cut to its first two components (/scratch/project_465000123, where
// LUMI's project, scratch and flash directories are), in order of first use. Not the image's own
// system directories (/usr, /opt, /etc, ...) nor what singularity and apptainer bind by default
// (/tmp, /proc, /sys, /dev, `home`).
std::vector<std::string> DirectoriesTheCommandNames(const std::string& command, const std::string& home);

// The program word of a command when it is a Python program (python, python3.11, torchrun, a
// .py script, after any NAME=VALUE assignments and `env`), "" otherwise: a program that links no
// MPI unless the command names an MPI user (mpi4py, DeepSpeed's --deepspeed_mpi), which also gives "".
std::string PythonProgramOf(const std::string& command);

// Slurm's --time forms: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S (minutes and seconds below 60,
// hours below 24 after days; not zero). kInvalidArgument with the forms otherwise.
Status CheckSlurmTime(const std::string& time);

}  // namespace tunepar::runner
