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

}  // namespace

int main(int argc, char** argv) {
  int tp = 1, pp = 1, mbs = 1, vpp = 1;
  double sleep_s = 0, oom_above = 1e9, child_s = 0;
  std::string precision = "bf16", recompute = "none";
  bool crash = false, hang = false, quiet = false, print_memory = false;
  bool refuse_fp16 = false, refuse_tp = false, arena_oom = false, warn_oom = false;
  int hang_mbs = -1, crash_mbs = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--tp")
      tp = std::atoi(next().c_str());
    else if (a == "--pp")
      pp = std::atoi(next().c_str());
    else if (a == "--mbs")
      mbs = std::atoi(next().c_str());
    else if (a == "--vpp")
      vpp = std::atoi(next().c_str());
    else if (a == "--precision")
      precision = next();
    else if (a == "--recompute")
      recompute = next();
    else if (a == "--sleep")
      sleep_s = std::atof(next().c_str());
    else if (a == "--oom-above")
      oom_above = std::atof(next().c_str());
    else if (a == "--child")
      child_s = std::atof(next().c_str());
    else if (a == "--crash")
      crash = true;
    else if (a == "--hang")
      hang = true;
    else if (a == "--quiet")
      quiet = true;
    else if (a == "--print-memory")
      print_memory = true;
    else if (a == "--refuse-fp16")
      refuse_fp16 = true;
    else if (a == "--refuse-tp")
      refuse_tp = true;
    else if (a == "--arena-oom")
      arena_oom = true;
    else if (a == "--warn-oom")
      warn_oom = true;
    else if (a == "--hang-mbs")
      hang_mbs = std::atoi(next().c_str());
    else if (a == "--crash-mbs")
      crash_mbs = std::atoi(next().c_str());
  }
  if (const char* env = std::getenv("FAKE_TRAINER_SLEEP"))
    sleep_s = std::atof(env);  // not part of the command
  hang = hang || mbs == hang_mbs;
  crash = crash || mbs == crash_mbs;
  std::printf("fake trainer: tp %d pp %d mbs %d %s recompute %s vpp %d\n", tp, pp, mbs, precision.c_str(),
              recompute.c_str(), vpp);
  std::fflush(stdout);
  if (child_s > 0 || hang) {
    if (fork() == 0) {
      const std::string seconds = hang ? "100000" : std::to_string(child_s);
      execlp("sleep", "sleep", seconds.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  if (hang) {
    while (true) pause();
  }
  if (sleep_s > 0) usleep(static_cast<useconds_t>(sleep_s * 1e6));
  const double memory = mbs * (4.0 / tp) * (recompute == "none" ? 2.0 : 1.0);
  if (memory > oom_above) {
    std::fprintf(stderr,
                 "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; %.2f GiB total capacity; "
                 "%.2f GiB already allocated; 0 bytes free)\n",
                 oom_above, oom_above - 1.0);
    return 1;
  }
  if (crash) {
    std::fprintf(stderr, "Segmentation fault in the fake trainer\n");
    return 3;
  }
  if (refuse_fp16 && precision == "fp16") return FailUnderTorchrun("ValueError: precision fp16 not supported");
  if (refuse_tp && tp > 1)
    return FailUnderTorchrun("AssertionError: tensor parallelism (tp=" + std::to_string(tp) + ") is not implemented");
  if (arena_oom) {
    std::fprintf(stderr, "MyAllocator: arena exhausted\n");
    return 1;
  }
  if (warn_oom) std::printf("warning: rank 1 ran out of memory, continuing with a smaller bucket\n");
  // Best at mbs 4, tp 2, pp 1, bf16, no recompute, vpp 1.
  const double step = 1.0 + 0.1 * std::pow(std::log2(mbs) - 2, 2) + 0.05 * std::pow(std::log2(tp) - 1, 2) +
                      0.03 * (pp - 1) +
                      (recompute == "full"        ? 0.2
                       : recompute == "selective" ? 0.05
                                                  : 0.0) +
                      (precision == "fp32"   ? 0.5
                       : precision == "fp16" ? 0.01
                                             : 0.0) +
                      0.02 * (vpp - 1);
  for (int it = 1; it <= 3; ++it) std::printf("iteration %d | loss %.3f\n", it, 5.0 / it);
  if (!quiet) std::printf("step_time: %.6f\n", step);
  if (print_memory) std::printf("max memory allocated: %.3f GiB\n", memory);
  return 0;
}
