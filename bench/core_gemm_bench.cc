// The core's GEMMs (runner/core ops: Eigen, the layouts the transformer uses) against a plain
// GEMM library call of the same shapes: OpenBLAS's sgemm (Debian's libopenblas0-pthread, loaded
// at run time as libblas.so.3, with the same thread count). Prints GFLOP/s per shape and the
// ratio; the goal is >= 70% overall.
//   core_gemm_bench [--threads N] [--tokens N] [--hidden C] [--vocab V]   (defaults: the small model)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <dlfcn.h>

#include "runner/core/ops.h"

namespace {

using tunepar::core::real;
using Sgemm = void (*)(const char*, const char*, const int*, const int*, const int*, const float*,
                       const float*, const int*, const float*, const int*, const float*, float*, const int*);

double Seconds(const std::chrono::steady_clock::time_point& start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Median seconds of `fn` over enough repetitions to take ~0.3 s.
template <typename F>
double Time(F fn) {
  fn();
  std::vector<double> t;
  const auto begin = std::chrono::steady_clock::now();
  while (t.size() < 5 || (Seconds(begin) < 0.3 && t.size() < 200)) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    t.push_back(Seconds(start));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, N = 1024, C = 256, V = 1024;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (flag == "--threads")
      threads = value;
    else if (flag == "--tokens")
      N = value;
    else if (flag == "--hidden")
      C = value;
    else if (flag == "--vocab")
      V = value;
  }
  void* blas = dlopen("libblas.so.3", RTLD_NOW);
  if (blas == nullptr) {
    std::fprintf(stderr, "core_gemm_bench: cannot load libblas.so.3 (install libopenblas0-pthread)\n");
    return 1;
  }
  auto sgemm = reinterpret_cast<Sgemm>(dlsym(blas, "sgemm_"));
  if (auto set_threads = reinterpret_cast<void (*)(int)>(dlsym(blas, "openblas_set_num_threads"))) {
    set_threads(threads);
  } else {
    std::fprintf(stderr,
                 "core_gemm_bench: libblas.so.3 is not OpenBLAS; the comparison is against it anyway\n");
  }
  tunepar::core::SetThreads(threads);

  struct Shape {
    const char* name;
    int in, out;
  };
  const Shape shapes[] = {
      {"qkv", C, 3 * C}, {"attproj", C, C}, {"fc", C, 4 * C}, {"fcproj", 4 * C, C}, {"lm_head", C, V}};
  std::printf("GEMMs of a training step, %d tokens, %d threads: core (Eigen) vs OpenBLAS sgemm\n", N,
              threads);
  std::printf("%-9s %-26s %10s %10s %7s\n", "layer", "pass (M x N x K)", "core GF/s", "BLAS GF/s", "ratio");
  double core_total = 0, blas_total = 0;
  for (const Shape& s : shapes) {
    std::vector<real> inp(static_cast<size_t>(N) * s.in, 0.5f), w(static_cast<size_t>(s.out) * s.in, 0.25f);
    std::vector<real> out(static_cast<size_t>(N) * s.out), dout(out.size(), 0.125f), dinp(inp.size()),
        dw(w.size());
    const float one = 1, zero = 0;
    // Row-major (N, in) x (out, in)^T = (N, out): column-major out^T = w x inp^T.
    struct Pass {
      const char* name;
      int m, n, k;
      double core, blas;
    };
    std::vector<Pass> passes;
    {
      const int m = s.out, n = N, k = s.in;
      const double core = Time(
          [&] { tunepar::core::MatmulForward(out.data(), inp.data(), w.data(), nullptr, N, s.in, s.out); });
      const double blas = Time(
          [&] { sgemm("T", "N", &m, &n, &k, &one, w.data(), &k, inp.data(), &k, &zero, out.data(), &m); });
      passes.push_back({"forward", N, s.out, s.in, core, blas});
    }
    {
      // dinp (N, in) += dout (N, out) w (out, in): column-major dinp^T = w^T dout^T.
      const int m = s.in, n = N, k = s.out;
      const double core = Time([&] {
        tunepar::core::MatmulBackward(dinp.data(), dw.data(), nullptr, dout.data(), inp.data(), w.data(), N,
                                      s.in, s.out);
      });
      const double blas_dinp = Time(
          [&] { sgemm("N", "N", &m, &n, &k, &one, w.data(), &m, dout.data(), &k, &one, dinp.data(), &m); });
      // dw (out, in) += dout^T inp: column-major dw^T = inp^T dout.
      const int m2 = s.in, n2 = s.out, k2 = N;
      const double blas_dw = Time([&] {
        sgemm("N", "T", &m2, &n2, &k2, &one, inp.data(), &m2, dout.data(), &n2, &one, dw.data(), &m2);
      });
      passes.push_back({"backward (dx + dW)", N, s.out, 2 * s.in, core, blas_dinp + blas_dw});
    }
    for (const Pass& p : passes) {
      const double flops = 2.0 * p.m * p.n * p.k;
      char dims[64];
      std::snprintf(dims, sizeof(dims), "%s %dx%dx%d", p.name, p.m, p.n, p.k);
      std::printf("%-9s %-26s %10.1f %10.1f %6.0f%%\n", s.name, dims, flops / p.core / 1e9,
                  flops / p.blas / 1e9, 100 * p.blas / p.core);
      core_total += p.core;
      blas_total += p.blas;
    }
  }
  std::printf("all GEMMs of the step: core %.2f ms, OpenBLAS %.2f ms: the core reaches %.0f%% of OpenBLAS\n",
              core_total * 1e3, blas_total * 1e3, 100 * blas_total / core_total);
  return 0;
}
