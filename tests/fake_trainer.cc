// A stand-in for a training program, for the command backend's tests: prints a step time that
// is a deterministic function of the layout flags, and fails on request.
//   fake_trainer --tp T --pp P --mbs B [--precision X] [--recompute R] [--vpp V]
//                [--sleep S] [--oom-above M] [--crash] [--hang] [--child S] [--quiet]
// --oom-above M: prints PyTorch's CUDA out-of-memory error (M GiB total, M - 1 GiB already
//                allocated) when mbs x (4 / tp) x (none ? 2 : 1) > M
// --hang:        never finishes (a child process hangs with it)
// --child S:     leaves a child process that sleeps S seconds (it must not outlive the trial)
// --quiet:       prints no step time (the metric never matches)
// --print-memory: prints its peak memory, mbs x (4 / tp) x (none ? 2 : 1) GiB
// --hang-mbs N / --crash-mbs N: hang / crash only when the micro-batch size is N
// --refuse-fp16 / --refuse-tp: fail as a PyTorch program under torchrun does when it refuses
//                fp16 / tp > 1: its exception, then torchrun's report (a ChildFailedError and a
//                root-cause block between "=====" rules), exit 1
// --arena-oom:   fails with "MyAllocator: arena exhausted" (an OOM no default pattern knows), exit 1
// --warn-oom:    prints "... ran out of memory, continuing ..." before its step time (exit 0)
// $FAKE_TRAINER_SLEEP overrides --sleep (so a resumed study can run faster than the first run)
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

int FailUnderTorchrun(const std::string& error) {
  std::fprintf(stderr,
               "[rank0]: Traceback (most recent call last):\n[rank0]:   File \"train.py\", line 12, in <module>\n"
               "[rank0]: %s\n"
               "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
               "============================================================\n"
               "train.py FAILED\n"
               "------------------------------------------------------------\n"
               "Root Cause (first observed failure):\n[0]:\n"
               "  rank      : 0 (local_rank: 0)\n  exitcode  : 1 (pid: 4243)\n"
               "============================================================\n",
               error.c_str());
  return 1;
}

struct Options {
  int tp = 1, pp = 1, mbs = 1, vpp = 1;
  double sleep_s = 0, oom_above = 1e9, child_s = 0;
  std::string precision = "bf16", recompute = "none";
  bool crash = false, hang = false, quiet = false, print_memory = false;
  bool refuse_fp16 = false, refuse_tp = false, arena_oom = false, warn_oom = false;
  int hang_mbs = -1, crash_mbs = -1;
};

Options ParseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--tp") o.tp = std::atoi(next().c_str());
    else if (a == "--pp") o.pp = std::atoi(next().c_str());
    else if (a == "--mbs") o.mbs = std::atoi(next().c_str());
    else if (a == "--vpp") o.vpp = std::atoi(next().c_str());
    else if (a == "--precision") o.precision = next();
    else if (a == "--recompute") o.recompute = next();
    else if (a == "--sleep") o.sleep_s = std::atof(next().c_str());
    else if (a == "--oom-above") o.oom_above = std::atof(next().c_str());
    else if (a == "--child") o.child_s = std::atof(next().c_str());
    else if (a == "--crash") o.crash = true;
    else if (a == "--hang") o.hang = true;
    else if (a == "--quiet") o.quiet = true;
    else if (a == "--print-memory") o.print_memory = true;
    else if (a == "--refuse-fp16") o.refuse_fp16 = true;
    else if (a == "--refuse-tp") o.refuse_tp = true;
    else if (a == "--arena-oom") o.arena_oom = true;
    else if (a == "--warn-oom") o.warn_oom = true;
    else if (a == "--hang-mbs") o.hang_mbs = std::atoi(next().c_str());
    else if (a == "--crash-mbs") o.crash_mbs = std::atoi(next().c_str());
  }
  if (const char* env = std::getenv("FAKE_TRAINER_SLEEP")) o.sleep_s = std::atof(env);  // not part of the command
  o.hang = o.hang || o.mbs == o.hang_mbs;
  o.crash = o.crash || o.mbs == o.crash_mbs;
  return o;
}

// GiB a run of these flags needs: mbs x (4 / tp) x (none ? 2 : 1).
double Memory(const Options& o) { return o.mbs * (4.0 / o.tp) * (o.recompute == "none" ? 2.0 : 1.0); }

// The exit code of a run that fails as asked (-1: it does not fail).
int Failure(const Options& o) {
  if (Memory(o) > o.oom_above) {
    std::fprintf(stderr,
                 "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; %.2f GiB total capacity; "
                 "%.2f GiB already allocated; 0 bytes free)\n",
                 o.oom_above, o.oom_above - 1.0);
    return 1;
  }
  if (o.crash) {
    std::fprintf(stderr, "Segmentation fault in the fake trainer\n");
    return 3;
  }
  if (o.refuse_fp16 && o.precision == "fp16") return FailUnderTorchrun("ValueError: precision fp16 not supported");
  if (o.refuse_tp && o.tp > 1)
    return FailUnderTorchrun("AssertionError: tensor parallelism (tp=" + std::to_string(o.tp) + ") is not implemented");
  if (o.arena_oom) {
    std::fprintf(stderr, "MyAllocator: arena exhausted\n");
    return 1;
  }
  return -1;
}

// Best at mbs 4, tp 2, pp 1, bf16, no recompute, vpp 1.
double StepTime(const Options& o) {
  return 1.0 + 0.1 * std::pow(std::log2(o.mbs) - 2, 2) + 0.05 * std::pow(std::log2(o.tp) - 1, 2) +
         0.03 * (o.pp - 1) +
         (o.recompute == "full"        ? 0.2
          : o.recompute == "selective" ? 0.05
                                       : 0.0) +
         (o.precision == "fp32"   ? 0.5
          : o.precision == "fp16" ? 0.01
                                  : 0.0) +
         0.02 * (o.vpp - 1);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = ParseOptions(argc, argv);
  std::printf("fake trainer: tp %d pp %d mbs %d %s recompute %s vpp %d\n", o.tp, o.pp, o.mbs, o.precision.c_str(),
              o.recompute.c_str(), o.vpp);
  std::fflush(stdout);
  if (o.child_s > 0 || o.hang) {
    if (fork() == 0) {
      const std::string seconds = o.hang ? "100000" : std::to_string(o.child_s);
      execlp("sleep", "sleep", seconds.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  if (o.hang) {
    while (true) pause();
  }
  if (o.sleep_s > 0) usleep(static_cast<useconds_t>(o.sleep_s * 1e6));
  if (const int code = Failure(o); code >= 0) return code;
  if (o.warn_oom) std::printf("warning: rank 1 ran out of memory, continuing with a smaller bucket\n");
  for (int it = 1; it <= 3; ++it) std::printf("iteration %d | loss %.3f\n", it, 5.0 / it);
  if (!o.quiet) std::printf("step_time: %.6f\n", StepTime(o));
  if (o.print_memory) std::printf("max memory allocated: %.3f GiB\n", Memory(o));
  return 0;
}
