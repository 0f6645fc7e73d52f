#include "runner/launch_script.h"

#include <fmt/format.h>

#include "runner/launch_environment.h"

namespace tunepar::runner {

std::string LaunchScript(const LaunchScriptRequest& r) {
  const HardwareProfile& hw = r.hardware;
  const int world = r.layout.World();
  const int per_node = std::min(world, hw.gpus_per_node);
  const int nodes = (world + hw.gpus_per_node - 1) / hw.gpus_per_node;
  std::string s = "#!/usr/bin/env bash\n";
  s += r.header;
  s += fmt::format("#SBATCH --job-name={}\n", r.job_name);
  s += fmt::format("#SBATCH --nodes={}\n", nodes);
  s += fmt::format("#SBATCH --ntasks-per-node={}\n", per_node);
  s += fmt::format("#SBATCH --cpus-per-task={}\n", hw.launch.cpus_per_task);
  if (!hw.launch.visible_devices_env.empty())
    s += fmt::format("#SBATCH --gpus-per-node={}\n", hw.gpus_per_node);
  s += fmt::format("#SBATCH --time={}\n", r.time);
  if (!r.partition.empty()) s += fmt::format("#SBATCH --partition={}\n", r.partition);
  if (!r.account.empty()) s += fmt::format("#SBATCH --account={}\n", r.account);
  s += "#SBATCH --output=%x-%j.out\n";
  s += "set -euo pipefail\n\n";

  s += fmt::format("# ---- Communication and runtime settings (hardware profile {})\n", hw.name);
  for (const auto& [k, v] : ProfileEnvironment(hw)) s += fmt::format("export {}={}\n", k, ShellQuote(v));
  s += "\n# ---- Rendezvous on the first node of the allocation\n";
  s += "MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\n";
  s += "export MASTER_ADDR\nexport MASTER_PORT=${MASTER_PORT:-29500}\n";

  s += "\n# ---- Every rank: rank variables from Slurm, its device by local rank, kernel caches on\n";
  s += "# node-local disk. Written next to the job (shared filesystem) and run before the program.\n";
  s += "job_dir=${SLURM_SUBMIT_DIR:-$PWD}\n";
  s += "rank_setup=\"$job_dir/tunepar-rank-$SLURM_JOB_ID.sh\"\n";
  s += "cat >\"$rank_setup\" <<'RANK_SETUP'\n#!/usr/bin/env bash\nset -e\n" + RankSetup(hw) + "exec \"$@\"\n";
  s += "RANK_SETUP\n";
  if (!r.model_toml.empty()) {
    s += "export TUNEPAR_MODEL=\"$job_dir/tunepar-model-$SLURM_JOB_ID.toml\"\n";
    s += "cat >\"$TUNEPAR_MODEL\" <<'MODEL'\n" + r.model_toml + "MODEL\n";
  }

  std::string srun = "srun";
  for (const std::string& o : SrunOptions(hw, nodes, world)) srun += " " + ShellQuote(o);

  s += "\n# ---- Smoke test: local rank 0 of each node\n";
  s += "srun --nodes=\"$SLURM_JOB_NUM_NODES\" --ntasks-per-node=1 bash -c "
       "'echo \"smoke: $(hostname): $(nproc) CPUs visible\"; "
       "(rocm-smi --showproductname 2>/dev/null || nvidia-smi -L 2>/dev/null || echo \"no GPU tool\") | head "
       "-n 20'\n";

  s += "\n# ---- Affinity report: every rank's CPUs and device, with the binding the training uses\n";
  s += srun + " bash \"$rank_setup\" bash -c " +
       ShellQuote(fmt::format(
           "echo \"rank $RANK (local $LOCAL_RANK) on $(hostname): CPUs $(taskset -cp $$ | sed "
           "'s/.*: //'), device ${{{}:-none}}\"",
           hw.launch.visible_devices_env.empty() ? "CUDA_VISIBLE_DEVICES" : hw.launch.visible_devices_env)) +
       "\n";

  s += fmt::format("\n# ---- Training: {} on {} ranks ({} node{} x {})\n", LayoutKey(r.layout), world,
                   nodes, nodes == 1 ? "" : "s", per_node);
  s += srun + " bash \"$rank_setup\" " + r.training_command + "\n";
  return s;
}

}  // namespace tunepar::runner
