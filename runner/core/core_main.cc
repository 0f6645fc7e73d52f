// tunepar-core: one rank of the built-in transformer training job. See runner/core/README.md
// for the flags, the JSON result and the exit codes.
#include <mpi.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include <fmt/format.h>

#include "base/flops.h"
#include "base/pipeline_split.h"
#include "runner/core/comm_smoke.h"
#include "runner/core/core_options.h"
#include "runner/core/core_result.h"
#include "runner/core/device_cpus.h"
#include "runner/core/gradient_check.h"
#include "runner/core/lifecycle.h"
#include "runner/core/ops.h"
#include "runner/core/reference_dump.h"
#include "runner/core/trainer.h"
#include "runner/core/waiting.h"

namespace tunepar::core {
namespace {

// Exit codes (README): 0 ok, 1 internal error, 2 bad input, 3 out of memory, 4 no device,
// 5 diverged (non-finite loss), 6 the result could not be written, 7 a device or communication
// failure (crash; --smoke: also a wrong sum).
constexpr int kExitOk = 0, kExitInternal = 1, kExitUsage = 2, kExitOom = 3, kExitNoDevice = 4,
              kExitDiverged = 5, kExitOutput = 6, kExitCrash = 7;

int ThreadsFor(const CoreOptions& o, const ProcessGrid& grid) {
  if (o.threads > 0) return o.threads;
  const int cpus = AffinityCount();
  // Unbound ranks see every CPU of the node: share them.
  const int online = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  return std::max(1, cpus >= online ? cpus / grid.local_size : cpus);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// What runs: the part of the result every status carries.
CoreResult Describe(const CoreOptions& o, int world) {
  const ModelShape& m = o.model;
  CoreResult r;
  r.model = {{"name", m.name},
             {"source", o.model_origin},
             {"layers", m.layers},
             {"hidden", m.hidden},
             {"heads", m.heads},
             {"seq_len", m.seq_len},
             {"vocab", m.vocab},
             {"ffn_hidden", m.MlpWidth()},
             {"tied_embeddings", m.tied_embeddings},
             {"kv_heads", m.KvHeads()},
             {"linear_biases", m.linear_biases},
             {"parameters", m.Parameters()}};
  for (const ShapeRow& row : ShapeRows())  // mlp, positions, norm: by name
    if (!row.choices.empty()) r.model[std::string(row.name)] = ShapeFieldText(row, m);
  r.layout = LayoutKey(o.layout);
  r.comm = std::string(ToString(o.comm));
  r.world = world;
  r.global_batch = o.layout.GlobalBatch();
  r.tokens_per_step = r.global_batch * m.seq_len;
  return r;
}

// What the measured steps gave, on this rank (step times are the slowest rank's).
struct Measurements {
  std::vector<double> losses, step_times, norms, scales;
  int skipped = 0;
  CoreStatus status = CoreStatus::kOk;  // or kDiverged
  std::array<double, kNumPhases> phase_sum{};
};

// Set once this rank has bound its device: only then has the teardown device work to finish (and
// a stage to say).
bool device_bound = false;

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  return cpus;
}

// Every local rank's list of the CPUs near its device (device_cpus.h), gathered over the node.
std::vector<std::vector<int>> GatherNearCpus(const ProcessGrid& grid, const std::vector<int>& mine) {
  const std::string text = CpuListText(mine);
  int length = static_cast<int>(text.size());
  std::vector<int> lengths(grid.local_size), offsets(grid.local_size);
  MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, grid.node_comm);
  int total = 0;
  for (int r = 0; r < grid.local_size; ++r) {
    offsets[r] = total;
    total += lengths[r];
  }
  std::string all(static_cast<size_t>(total), '\0');
  MPI_Allgatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, grid.node_comm);
  std::vector<std::vector<int>> near;
  for (int r = 0; r < grid.local_size; ++r) near.push_back(ParseCpuList(all.substr(offsets[r], lengths[r])));
  return near;
}

// Binds this rank to its share of the CPUs near its device (--cpu-bind; auto: unless the launcher
// bound it, i.e. it may run on fewer CPUs than the node has online), before any thread starts.
// Says what it did, for the placement. A collective over the node.
std::string BindNearDevice(const CoreOptions& o, const ProcessGrid& grid, int device_index, const std::string& device) {
  const std::vector<int> allowed = AllowedCpus();
  const bool launcher_bound = static_cast<long>(allowed.size()) < sysconf(_SC_NPROCESSORS_ONLN);
  const bool wanted = o.cpu_bind == "near-device" || (o.cpu_bind == "auto" && !launcher_bound);
  const std::string bus_id = DevicePciBusId(device_index);  // "": the host itself (the CPU build)
  const std::vector<int> near = CpusNearPciDevice("/sys", bus_id);
  const std::vector<std::vector<int>> node = GatherNearCpus(grid, wanted ? near : std::vector<int>{});
  if (!wanted || bus_id.empty()) return launcher_bound ? "as launched (the launcher bound the rank)" : "as launched";
  if (near.empty()) return fmt::format("as launched (the machine does not say which CPUs are near {})", device);
  const std::vector<int> share = ShareOfNearCpus(node, grid.local_rank, allowed);
  if (share.empty()) return fmt::format("as launched (the CPUs near {} are outside this rank's)", device);
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : share) CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) return "as launched (sched_setaffinity failed)";
  return fmt::format("near {}: CPUs {} of its {}", device, CpuListText(share), CpuListText(near));
}

// Binds this rank to its device, threads and way of waiting; where it runs, gathered on rank 0.
std::vector<RankPlacement> SetUpRank(const CoreOptions& o, const ProcessGrid& grid, int devices) {
  const int device_index = grid.local_rank % devices;
  const std::string device = UseDevice(device_index);
  device_bound = true;
  const std::string binding = BindNearDevice(o, grid, device_index, device);
  const int threads = ThreadsFor(o, grid);
  SetThreads(threads);
  SetWaitMode(o.wait == "spin"    ? WaitMode::kSpin
              : o.wait == "sleep" ? WaitMode::kSleep
                                  : AutomaticWaitMode(grid.local_size));
  return GatherPlacement(grid, device, threads, binding);
}

TrainingOptions TrainingOptionsOf(const CoreOptions& o) {
  const Layout& l = o.layout;
  TrainingOptions t;
  t.micro_batch = l.micro_batch;
  t.num_micro_batches = l.num_micro_batches;
  t.precision = l.precision == Precision::kFp32 ? 0 : l.precision == Precision::kFp16 ? 1 : 2;
  t.zero = l.zero;
  t.recompute = l.recompute == Recompute::kNone ? 0 : l.recompute == Recompute::kSelective ? 1 : 2;
  t.flash_attention = l.flash_attention;
  t.sequence_parallel = l.seq_parallel;
  t.stage_layers = SplitLayers(o.model, l.pp, l.uneven_stages).layers;
  t.lr = o.lr;
  t.seed = o.seed;
  return t;
}

// The test hooks: at --fault-step on --fault-rank, crash, hang, make the next allocation fail, or
// fail as a device runtime call does.
void InjectFault(const CoreOptions& o, const ProcessGrid& grid, int step, TrackingAllocator& allocator) {
  if (o.fault == Fault::kNone || o.fault == Fault::kTeardownHang || step != o.fault_step || grid.rank != o.fault_rank)
    return;  // (a teardown hang comes after the steps: EndRank)
  std::cerr << fmt::format("tunepar-core: rank {}: injected fault '{}' at step {}\n", grid.rank, ToString(o.fault),
                           step);
  if (o.fault == Fault::kCrash) std::abort();
  if (o.fault == Fault::kHang) {
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  if (o.fault == Fault::kDevice) throw DeviceError("injected device fault");
  allocator.set_cap(allocator.in_use());  // kOom: the next allocation fails
}

// The blocks each pipeline stage holds, as its trainers built them (at world rank 0). Collective.
std::vector<int> GatherStageLayers(const ProcessGrid& grid, const Trainer& trainer) {
  const int mine = static_cast<int>(trainer.parameters().blocks.size());
  std::vector<int> by_rank(static_cast<size_t>(grid.world_size));
  MPI_Gather(&mine, 1, MPI_INT, by_rank.data(), 1, MPI_INT, 0, grid.world);
  std::vector<int> by_stage(static_cast<size_t>(grid.pp));
  for (int rank = 0; rank < grid.world_size; ++rank) by_stage[grid.order.Coordinate(rank, GridDim::kPp)] = by_rank[rank];
  return by_stage;
}

// Warm-up and measured steps (a dump of what repeats the run, reference_dump.h, and a gradient
// check, when asked for).
Measurements Train(const CoreOptions& o, const ProcessGrid& grid, const TrainingOptions& t, TokenSource& data,
                   TrackingAllocator& allocator, StartupMarks& marks, CoreResult& result) {
  Measurements m;
  Trainer trainer(DimsOf(o.model), grid, t, data, allocator);
  result.stage_layers = GatherStageLayers(grid, trainer);
  if (!o.dump.empty()) {
    auto initial = trainer.GatherWeights();
    trainer.ComputeGradients(0);
    auto grads = trainer.GatherGradients();
    if (grid.rank == 0) {
      WriteDump(o.dump, "initial_weights.json", initial);
      WriteDump(o.dump, "gradients.json", grads);
      WriteDump(o.dump, "batches.json",
                StepBatches(data, o.warmup + o.steps, o.layout.GlobalBatch(), o.model.seq_len));
    }
  }
  if (o.gradient_check > 0) result.gradient_check = CheckGradients(trainer, o.gradient_check, o.seed);
  marks.first_step = SecondsSinceProcessStart();
  for (int step = 0; step < o.warmup + o.steps; ++step) {
    InjectFault(o, grid, step, allocator);
    StepStats s = trainer.Step(step);
    double seconds = s.seconds;
    Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, grid.world);
    m.losses.push_back(s.loss);
    m.norms.push_back(s.grad_norm);
    m.scales.push_back(s.loss_scale);
    m.skipped += s.skipped ? 1 : 0;
    if (step >= o.warmup) {
      m.step_times.push_back(seconds);
      for (int p = 0; p < kNumPhases; ++p) m.phase_sum[p] += s.phases.Get(static_cast<Phase>(p));
    }
    if (!std::isfinite(s.loss) && t.precision != 1) {
      m.status = CoreStatus::kDiverged;
      break;
    }
  }
  if (!o.dump.empty()) {
    auto weights = trainer.GatherWeights();
    if (grid.rank == 0) WriteDump(o.dump, "weights.json", weights);
  }
  return m;
}

// A rank ran out of its memory cap: it reports (other ranks may be waiting for it inside MPI)
// and ends the job.
int ReportOutOfMemory(const CoreOptions& o, const ProcessGrid& grid, const OutOfMemory& e,
                      const TrackingAllocator& allocator, CoreResult& result) {
  std::cerr << fmt::format("tunepar-core: rank {}: {}\n", grid.rank, e.what());
  if (ClaimResult(o.output)) {
    result.status = CoreStatus::kOom;
    result.error = fmt::format("rank {}: {}", grid.rank, e.what());
    result.memory = MemoryOf(allocator);
    result.memory->oom_rank = grid.rank;
    result.memory->oom_category = std::string(ToString(e.category()));
    result.versions = Versions();
    (void)WriteResult(o.output, result);
  }
  std::cerr.flush();
  if (grid.world_size > 1) MPI_Abort(grid.world, kExitOom);
  return kExitOom;
}

// A device runtime, library or NCCL call failed on this rank: the trial ends as a crash, reported
// by the first rank to fail (the others may be waiting for it inside a collective).
int ReportCrash(const CoreOptions& o, const ProcessGrid& grid, const DeviceError& e, CoreResult& result) {
  std::cerr << fmt::format("tunepar-core: rank {}: {}\n", grid.rank, e.what());
  if (ClaimResult(o.output)) {
    result.status = CoreStatus::kCrash;
    result.error = fmt::format("rank {}: {}", grid.rank, e.what());
    result.versions = Versions();
    (void)WriteResult(o.output, result);
  }
  std::cerr.flush();
  if (grid.world_size > 1) MPI_Abort(grid.world, kExitCrash);
  return kExitCrash;
}

// NCCL refuses two ranks on one device: with more ranks on a node than it has devices, --comm
// nccl is bad input (status invalid), on every rank. (On the CPU the "device" is the host, which
// every rank shares: the tests' NCCL stand-in, comm_nccl_over_mpi.cc, moves host memory.)
int CheckNcclPlacement(const CoreOptions& o, const ProcessGrid& grid, int devices, CoreResult& result) {
  if (o.comm != CommMode::kNccl || BackendName() == "cpu") return kExitOk;
  int mine[2] = {grid.local_size > devices ? grid.local_size : 0, grid.rank}, crowded[2];
  MPI_Allreduce(mine, crowded, 1, MPI_2INT, MPI_MAXLOC, grid.world);
  if (crowded[0] == 0) return kExitOk;
  int their_devices = devices;
  MPI_Bcast(&their_devices, 1, MPI_INT, crowded[1], grid.world);
  if (grid.rank == 0) {
    result.status = CoreStatus::kInvalid;
    result.error = fmt::format(
        "--comm nccl: rank {}'s node runs {} ranks on {} device(s), and NCCL refuses two ranks on one device "
        "(use --comm mpi-staged)",
        crowded[1], crowded[0], their_devices);
    std::cerr << "tunepar-core: " << result.error << "\n";
    if (!o.smoke) (void)WriteResult(o.output, result);
  }
  return kExitUsage;
}

// Phases: each rank's mean per measured step, then the maximum and mean over ranks (rank 0).
std::map<std::string, PhaseSummary> GatherPhases(const ProcessGrid& grid, const Measurements& m) {
  const int measured = static_cast<int>(m.step_times.size());
  std::array<double, kNumPhases> mine{}, max{}, sum{};
  for (int p = 0; p < kNumPhases; ++p) mine[p] = measured > 0 ? m.phase_sum[p] / measured : 0;
  MPI_Reduce(mine.data(), max.data(), kNumPhases, MPI_DOUBLE, MPI_MAX, 0, grid.world);
  MPI_Reduce(mine.data(), sum.data(), kNumPhases, MPI_DOUBLE, MPI_SUM, 0, grid.world);
  std::map<std::string, PhaseSummary> phases;
  for (int p = 0; p < kNumPhases; ++p)
    phases[std::string(ToString(static_cast<Phase>(p)))] = {max[p], sum[p] / grid.world_size};
  return phases;
}

// Rank 0's result: the median step time over the measured steps, throughput, losses, phases,
// memory and placement.
void Summarise(const CoreOptions& o, const ProcessGrid& grid, const TokenSource& data, const Measurements& m,
               CoreResult& result) {
  const double step_time = m.step_times.empty() ? 0 : Median(m.step_times);
  ModelShape shape = o.model;
  shape.global_batch = static_cast<int>(result.global_batch);
  result.status = m.status;
  result.steps = static_cast<int>(m.step_times.size());
  result.warmup = o.warmup;
  result.step_time_s = step_time;
  result.step_times_s = m.step_times;
  result.tokens_per_s = step_time > 0 ? static_cast<double>(result.tokens_per_step) / step_time : 0.0;
  result.model_flops_per_step = ModelFlopsPerStep(shape);
  result.tflops_per_gpu = step_time > 0 ? ModelTflopsPerGpu(shape, step_time, grid.world_size) : 0.0;
  result.loss = m.losses;
  result.loss_floor = data.EntropyRate();
  result.grad_norm = m.norms;
  if (TrainingOptionsOf(o).precision == 1) {
    result.loss_scale = m.scales;
    result.skipped_steps = m.skipped;
  }
  result.mpi_wait = std::string(ToString(CurrentWaitMode()));
  result.versions = Versions();
  result.data = o.data.empty() ? "synthetic" : o.data;
}

void PrintSummaryLine(const CoreOptions& o, const ProcessGrid& grid, const CoreResult& result) {
  const std::vector<double>& losses = result.loss;
  std::cerr << fmt::format(
      "tunepar-core: {} {} on {} rank(s): {:.4f} s/step, {:.0f} tokens/s, {:.3f} TFLOP/s/GPU, loss {:.3f} -> {:.3f}, "
      "peak {:.1f} MB/rank\n",
      o.model.name, LayoutKey(o.layout), grid.world_size, result.step_time_s.value_or(0), result.tokens_per_s,
      result.tflops_per_gpu, losses.empty() ? 0.0 : losses.front(), losses.empty() ? 0.0 : losses.back(),
      result.memory ? result.memory->peak_bytes / 1e6 : 0.0);
}

int RunSmoke(const CoreOptions& o, const ProcessGrid& grid, int devices) {
  const SmokeOutcome outcome = RunSmokeTest(o.comm, grid, devices);
  if (outcome == SmokeOutcome::kDeviceFailed && grid.world_size > 1) MPI_Abort(grid.world, kExitCrash);
  return outcome == SmokeOutcome::kOk ? kExitOk : kExitCrash;
}

// The ranks of this node placed on this rank's device (local rank modulo the devices, as
// SetUpRank binds them).
int RanksOnMyDevice(const ProcessGrid& grid, int devices) {
  const int mine = grid.local_rank % devices;
  return grid.local_size / devices + (mine < grid.local_size % devices ? 1 : 0);
}

// The trial on this rank's device: bind it, set up the comm layer, train, report.
int RunOnDevice(const CoreOptions& o, const ProcessGrid& grid, int devices, TrackingAllocator& allocator,
                StartupMarks marks, CoreResult& result) {
  const std::vector<RankPlacement> placement = SetUpRank(o, grid, devices);
  SetUpComm(o.comm, grid, grid.pp > 1);
  marks.device_ready = SecondsSinceProcessStart();
  const TrainingOptions t = TrainingOptionsOf(o);
  TokenSource data = TokenSource::Synthetic(o.model.vocab, o.seed + 1);
  if (!o.data.empty()) {
    Result<TokenSource> text = TokenSource::TextFile(o.data, o.model.vocab, o.seed + 1);
    if (!text.ok()) {
      if (grid.rank == 0) std::cerr << "tunepar-core: " << text.status().message() << "\n";
      return kExitUsage;
    }
    data = std::move(*text);
  }
  Measurements m;
  try {
    m = Train(o, grid, t, data, allocator, marks, result);
  } catch (const OutOfMemory& e) {
    return ReportOutOfMemory(o, grid, e, allocator, result);
  }
  const std::map<std::string, PhaseSummary> phases = GatherPhases(grid, m);
  const MemoryPeaks memory = GatherMemory(grid, allocator);
  const StartupTimes startup = GatherStartup(marks, grid.world, grid.rank);
  if (grid.rank != 0) return m.status == CoreStatus::kOk ? kExitOk : kExitDiverged;
  Summarise(o, grid, data, m, result);
  result.phases = phases;
  result.memory = memory;
  result.placement = placement;
  result.startup = startup;
  if (!o.quiet) PrintSummaryLine(o, grid, result);
  if (Status written = WriteResult(o.output, result); !written.ok()) {
    std::cerr << "tunepar-core: " << written.message() << "\n";
    return kExitOutput;
  }
  return m.status == CoreStatus::kOk ? kExitOk : kExitDiverged;
}

// --comm not given and a node with more ranks than devices: mpi-staged instead of NCCL (which
// refuses two ranks on one device), said once on stderr; every rank agrees on the most crowded node.
CoreOptions WithPlacedComm(CoreOptions o, const ProcessGrid& grid, int devices) {
  int crowded = grid.local_size;
  MPI_Allreduce(MPI_IN_PLACE, &crowded, 1, MPI_INT, MPI_MAX, grid.world);
  const CommMode chosen = CommForPlacement(o.comm, o.comm_given, BackendName(), crowded, devices);
  if (chosen != o.comm && grid.rank == 0) {
    std::cerr << fmt::format("tunepar-core: a node runs {} ranks on {} device(s): --comm {} (NCCL refuses two ranks "
                             "on one device; --comm chooses)\n",
                             crowded, devices, ToString(chosen));
  }
  o.comm = chosen;
  return o;
}

int Run(const CoreOptions& given, const ProcessGrid& grid, const StartupMarks& marks) {
  const int devices = DeviceCount();
  const CoreOptions o = WithPlacedComm(given, grid, devices);  // every rank: a collective
  CoreResult result = Describe(o, grid.world_size);
  result.devices_per_node = devices;  // as rank 0's node shows them (the runner holds them against the profile)
  if (grid.rank == 0 && !o.output.empty()) std::filesystem::remove(o.output + ".lock");
  if (devices == 0) {
    if (grid.rank == 0) {
      result.status = CoreStatus::kNoDevice;
      result.error = fmt::format("no {} device visible to this process", BackendName());
      std::cerr << "tunepar-core: " << result.error << "\n";
      if (!o.smoke) (void)WriteResult(o.output, result);
    }
    return kExitNoDevice;
  }
  if (const int code = CheckNcclPlacement(o, grid, devices, result); code != kExitOk) return code;
  if (o.smoke) return RunSmoke(o, grid, devices);
  const DeviceShare share = ShareOfDevice(o.memory_cap_bytes, MemoryOfDevice(grid.local_rank % devices),
                                         RanksOnMyDevice(grid, devices),
                                         fmt::format("{}:{}", BackendName(), grid.local_rank % devices));
  TrackingAllocator allocator(share.cap_bytes, share.why);
  try {
    return RunOnDevice(o, grid, devices, allocator, marks, result);
  } catch (const DeviceError& e) {
    return ReportCrash(o, grid, e, result);
  }
}

// After the run: the teardown's stages (lifecycle.h: each said on stderr with
// TUNEPAR_CORE_TEARDOWN=1 once a device was bound, a stalled one always), the device's queued
// work finished and the communicators destroyed before MPI ends; then the process ends without
// running static destructors (quick_exit), whose order against the device runtime's and NCCL's
// own exit handlers is not ours to choose.
[[noreturn]] void EndRank(int code, int rank, bool quiet, bool hang, ProcessGrid* grid) {
  const char* asked = std::getenv("TUNEPAR_CORE_TEARDOWN");
  TeardownLog teardown(rank, !quiet && device_bound && asked != nullptr && std::string_view(asked) == "1");
  teardown.Stage(fmt::format("run ended (exit {})", code));
  if (device_bound) {
    try {
      Synchronize();
      teardown.Stage("device idle");
    } catch (const DeviceError& e) {
      teardown.Stage(std::string("device not idle: ") + e.what());
    }
  }
  if (hang) {  // the test hook: a teardown that never ends (the watchdog names it)
    teardown.Stage("injected teardown hang");
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  TearDownComm();
  teardown.Stage("communicators destroyed");
  if (grid != nullptr) FreeProcessGrid(*grid);
  MPI_Finalize();
  teardown.Stage("MPI finalized; exiting");
  std::fflush(stdout);
  std::quick_exit(code);
}

}  // namespace
}  // namespace tunepar::core

int main(int argc, char** argv) {
  using namespace tunepar::core;
  StartupMarks marks;
  marks.main = SecondsSinceProcessStart();
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a killed run keeps what it printed
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  marks.mpi_ready = SecondsSinceProcessStart();
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  SayWhenEveryRankJoined(MPI_COMM_WORLD, rank);
  std::string help;
  tunepar::Result<CoreOptions> options = ParseCoreOptions(argc, argv, size, &help);
  int code = kExitOk;
  if (!options.ok()) {
    const bool is_help = !help.empty();
    if (rank == 0) {
      if (is_help)
        std::cout << help;
      else
        std::cerr << "tunepar-core: " << options.status().message() << "\n";
    }
    MPI_Finalize();
    return is_help ? kExitOk : kExitUsage;
  }
  tunepar::Result<ProcessGrid> grid =
      CreateProcessGrid(MPI_COMM_WORLD, options->layout.tp, options->layout.pp, options->layout.dp,
                        options->layout.dp_replicate, options->layout.cp);
  if (!grid.ok()) {
    if (rank == 0) std::cerr << "tunepar-core: " << grid.status().message() << "\n";
    MPI_Finalize();
    return kExitUsage;
  }
  try {
    code = Run(*options, *grid, marks);
  } catch (const std::exception& e) {
    std::cerr << "tunepar-core: rank " << rank << ": internal error: " << e.what() << "\n";
    MPI_Abort(MPI_COMM_WORLD, kExitInternal);
  }
  EndRank(code, rank, options->quiet, options->fault == Fault::kTeardownHang && rank == options->fault_rank, &*grid);
}
