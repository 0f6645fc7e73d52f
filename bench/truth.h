// Hidden machines for the benchmarks: what a trial would measure on a machine the search and
// the reports never see, and against which they are scored.
//
// Every model-derived truth starts from a hidden machine (Perturb: the nominal profile with every
// efficiency and bandwidth scaled by an independent log-uniform factor in [0.5, 2]) and then,
// except for kModel, changes the *structure* of its time or memory: a term the performance model
// does not have, composed from the hidden machine's own prediction breakdown. A search that
// merely refits the model's parameters cannot absorb such a truth; it has to learn it from the
// trials. Each structure is one physical effect a real machine has and roofline-v1 lacks:
//
//   model         the hidden machine's performance model itself (time and memory).
//   mem-act       activations take 1.6x what the model says (allocator rounding, saved tensors
//                 the model does not count, e.g. dropout masks and GeLU inputs kept in fp32).
//   mem-overhead  a fixed per-device overhead of 12% of device memory on top of the profile's
//                 (a framework's CUDA/HIP graphs, NCCL/RCCL channel buffers, a memory pool
//                 reserved before the first step).
//   mem-random    each memory component (weights, gradients, optimizer states, activations,
//                 communication buffers, runtime overhead) scaled by its own factor drawn
//                 log-uniformly in [1/1.6, 1.6] per hidden machine.
//   time-dp       data-parallel communication never overlaps the backward pass, and its ring
//                 slows with the group: the whole reduction is exposed, times 1 + 0.25 log2 dp
//                 (hierarchical collectives over many nodes, which a ring model does not have).
//   time-gemm     a GEMM efficiency curve of another shape: a knee in the per-GPU matrix area
//                 (M N, with M = micro_batch x seq, N = MLP width / tp) at 2^21 elements, and
//                 wave quantisation over 110 compute units with 256 x 128 tiles, in place of the
//                 model's smooth 1 / (1 + d0/M + d0/N + d0/K).
//   time-bubble   the pipeline bubble is 1.5 (p - 1) / sqrt(v) slots instead of (p - 1) / v
//                 (interleaving hides less than the model says), and every micro-batch waits for
//                 the slowest of p stages: a straggler delay of 5% x sqrt(2 ln p) of a slot
//                 (the expected maximum of p stage times with 5% jitter).
//
// Every truth above needs about as much memory as the model predicts, or more (only mem-random
// lowers a component at times). Real machines also need less (issue 31: an A100 cluster whose
// fastest layouts needed 30-40% less than the model said), and a search that never tries a
// layout predicted above device memory cannot find those. The lower-memory structures
// (LowerMemoryStructures()):
//
//   mem-gradshard  with ZeRO on, gradients are sharded over the data-parallel group as well as
//                  the optimizer states (ZeRO-2: DeepSpeed stage 2, FSDP's SHARD_GRAD_OP): each
//                  device keeps gradients / dp, where the model keeps them whole (ZeRO-1).
//   mem-actlow     activations take 0.6x what the model says (a framework that frees or
//                  recomputes more than the model assumes: e.g. attention and GeLU outputs
//                  recomputed in backward, inputs of the next layer not saved twice).
//   mem-margin     the run needs 10% of device memory less than the profile reserves (the
//                  profile's overhead and fragmentation came from another framework or
//                  allocator setting): true memory = the model's total - 0.1 x device memory,
//                  never below the weights.
//
// A memory structure keeps the hidden machine's time; a time structure keeps its memory. The
// measured truth (measured_truth.h) is tunepar-core run on this machine.
#pragma once

#include <array>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "base/layout.h"
#include "runner/performance_model.h"

namespace tunepar::bench {

// A hidden machine: the nominal profile with every efficiency and bandwidth scaled.
inline runner::HardwareProfile Perturb(const runner::HardwareProfile& nominal, uint64_t seed) {
  runner::HardwareProfile hw = nominal;
  std::mt19937_64 rng(seed * 7919 + 17);
  std::uniform_real_distribution<double> log_factor(std::log(0.5), std::log(2.0));
  auto scale = [&](double& v) { v *= std::exp(log_factor(rng)); };
  for (const auto& p : runner::EfficiencyParameters()) {
    double& v = hw.efficiency.at(std::string(p.name)).value;
    scale(v);
    if (p.key == runner::EfficiencyKey::kDpOverlap) v = std::min(v, 1.0);
  }
  scale(hw.memory_bandwidth_gbs.value);
  scale(hw.intra_node_bandwidth_gbs.value);
  scale(hw.package_bandwidth_gbs.value);
  scale(hw.nic_bandwidth_gbs.value);
  return hw;
}

struct Truth {
  std::vector<double> step;    // noise-free true step time per legal layout, s
  std::vector<double> memory;  // true peak memory per device, bytes (for an OOM: as far as it got)
  std::vector<char> fits;      // runs in the device's memory
  bool peaks = true;           // the training program prints its peak memory (many print none)
  double noise_sd = 0.02;      // multiplicative noise of a measured step time (standard deviation)
  int best = -1;               // index of the optimum: the fastest layout that fits
};

// Finds the optimum once step and fits are set.
inline void FindOptimum(Truth& t) {
  t.best = -1;
  for (size_t i = 0; i < t.step.size(); ++i) {
    if (t.fits[i] && (t.best < 0 || t.step[i] < t.step[t.best])) t.best = static_cast<int>(i);
  }
}

enum class Structure {
  kModel,
  kActivations,
  kOverhead,
  kComponents,
  kSerialDp,
  kGemmShape,
  kBubble,
  kGradientsSharded,  // lower memory than the model's, from here on
  kActivationsLow,
  kMargin
};

struct StructureName {
  Structure structure;
  const char* name;  // no '_' (benchmark file names are split on it)
};
inline const std::vector<StructureName>& Structures() {
  static const std::vector<StructureName> all = {
      {Structure::kModel, "model"},           {Structure::kActivations, "mem-act"},
      {Structure::kOverhead, "mem-overhead"}, {Structure::kComponents, "mem-random"},
      {Structure::kSerialDp, "time-dp"},      {Structure::kGemmShape, "time-gemm"},
      {Structure::kBubble, "time-bubble"}};
  return all;
}
// The truths whose memory is lower than the model's (header comment).
inline const std::vector<StructureName>& LowerMemoryStructures() {
  static const std::vector<StructureName> all = {{Structure::kGradientsSharded, "mem-gradshard"},
                                                 {Structure::kActivationsLow, "mem-actlow"},
                                                 {Structure::kMargin, "mem-margin"}};
  return all;
}

namespace internal {

// Relative efficiency of the per-GPU MLP GEMM (M = tokens per micro-batch, N = MLP width / tp,
// K = hidden) under the model's curve and under the truth's (header comment), each 1 for
// large matrices.
inline double ModelGemmShare(double m, double n, double k, double d0) {
  return 1.0 / (1.0 + d0 / m + d0 / n + d0 / k);
}
inline double TrueGemmShare(double m, double n) {
  constexpr double kKneeArea = 2097152;  // 2^21 elements: 1024 x 2048
  constexpr double kUnits = 110, kTileM = 256, kTileN = 128;
  const double tiles = std::ceil(m / kTileM) * std::ceil(n / kTileN);
  const double waves = std::ceil(tiles / kUnits);
  return (tiles / (waves * kUnits)) / (1.0 + kKneeArea / (m * n));
}

// The true step time of structure `s` from the hidden machine's prediction `p` (and, for
// kSerialDp, the same machine's prediction with no overlap of the data-parallel reduction).
inline double StructuredStep(Structure s, const ModelShape& model, const Layout& l,
                             const runner::Prediction& p, const runner::Prediction& no_overlap,
                             double gemm_half_size) {
  const runner::TimeBreakdown& t = p.time;
  const double busy = t.compute + t.tp_comm + t.pp_p2p;  // m slots of the slowest stage
  switch (s) {
    case Structure::kSerialDp:
      return p.step_time_s - t.dp_comm_exposed +
             no_overlap.time.dp_comm_exposed * (1.0 + 0.25 * std::log2(static_cast<double>(l.dp)));
    case Structure::kGemmShape: {
      const double m = static_cast<double>(l.micro_batch) * model.seq_len;
      const double n = static_cast<double>(model.MlpWidth()) / l.tp;
      const double ratio = ModelGemmShare(m, n, model.hidden, gemm_half_size) /
                           TrueGemmShare(m, n);  // true / model compute time
      // Compute is slower by `ratio`, in the m slots and in the bubble's share of compute.
      const double bubble_compute = busy > 0 ? t.bubble * t.compute / busy : 0.0;
      return p.step_time_s + (ratio - 1.0) * (t.compute + bubble_compute);
    }
    case Structure::kBubble: {
      if (l.pp == 1) return p.step_time_s;
      const double pp = l.pp, slot = busy / l.num_micro_batches;
      const double bubble = 1.5 * (pp - 1) / std::sqrt(static_cast<double>(l.virtual_stages)) * slot;
      const double stragglers = l.num_micro_batches * slot * 0.05 * std::sqrt(2.0 * std::log(pp));
      return p.step_time_s - t.bubble + bubble + stragglers;
    }
    default: return p.step_time_s;
  }
}

// The true peak memory of structure `s` of layout `l` from the hidden machine's breakdown;
// `factor` holds kComponents' per-component multipliers.
inline double StructuredMemory(Structure s, const Layout& l, const runner::MemoryBreakdown& m,
                               double device_memory, const std::array<double, 6>& factor) {
  switch (s) {
    case Structure::kActivations: return m.Total() + 0.6 * m.activations;
    case Structure::kOverhead: return m.Total() + 0.12 * device_memory;
    case Structure::kGradientsSharded:
      return l.zero == 1 ? m.Total() - m.gradients * (1.0 - 1.0 / l.dp) : m.Total();
    case Structure::kActivationsLow: return m.Total() - 0.4 * m.activations;
    case Structure::kMargin: return std::max(m.weights, m.Total() - 0.1 * device_memory);
    case Structure::kComponents:
      return factor[0] * m.weights + factor[1] * m.gradients + factor[2] * m.optimizer_states +
             factor[3] * m.activations + factor[4] * m.comm_buffers + factor[5] * m.runtime_overhead;
    default: return m.Total();
  }
}

}  // namespace internal

// The truth of hidden machine `seed` (Perturb of `nominal`) with structure `s`, on `legal`.
// A layout fits when its true memory is at most the nominal device memory.
inline Truth MakeTruth(const ModelShape& model, const runner::HardwareProfile& nominal, Structure s,
                       uint64_t seed, const std::vector<Layout>& legal) {
  const runner::HardwareProfile hidden = Perturb(nominal, seed);
  runner::HardwareProfile serial = hidden;
  serial.efficiency.at("dp_overlap").value = 0;
  const runner::PerformanceModel pm(model, hidden, runner::Efficiency::FromProfile(hidden).value());
  const runner::PerformanceModel pm_serial(model, serial, runner::Efficiency::FromProfile(serial).value());
  const double d0 = hidden.efficiency.at("gemm_half_size").value;
  std::array<double, 6> factor{1, 1, 1, 1, 1, 1};
  std::mt19937_64 rng(seed * 104729 + 3);  // a stream of its own: Perturb's factors stay as they were
  std::uniform_real_distribution<double> log_factor(-std::log(1.6), std::log(1.6));
  for (double& f : factor) f = std::exp(log_factor(rng));
  const double capacity = nominal.MemoryBytes();
  Truth t;
  t.step.resize(legal.size());
  t.memory.resize(legal.size());
  t.fits.resize(legal.size());
  for (size_t i = 0; i < legal.size(); ++i) {
    const runner::Prediction p = pm.Predict(legal[i]);
    const runner::Prediction q = s == Structure::kSerialDp ? pm_serial.Predict(legal[i]) : p;
    t.step[i] = internal::StructuredStep(s, model, legal[i], p, q, d0);
    t.memory[i] = internal::StructuredMemory(s, legal[i], p.memory, capacity, factor);
    t.fits[i] = t.memory[i] <= capacity;
  }
  FindOptimum(t);
  return t;
}

// The perturbed model on an already perturbed profile (as shap_bench uses it): time and memory
// of `hidden`'s performance model, fits against `hidden`'s device memory.
inline Truth MakeTruth(const ModelShape& model, const runner::HardwareProfile& hidden,
                       const std::vector<Layout>& legal) {
  const runner::PerformanceModel pm(model, hidden, runner::Efficiency::FromProfile(hidden).value());
  Truth t;
  t.step.resize(legal.size());
  t.memory.resize(legal.size());
  t.fits.resize(legal.size());
  for (size_t i = 0; i < legal.size(); ++i) {
    const runner::Prediction p = pm.Predict(legal[i]);
    t.step[i] = p.step_time_s;
    t.memory[i] = p.memory_bytes;
    t.fits[i] = p.fits;
  }
  FindOptimum(t);
  return t;
}

}  // namespace tunepar::bench
