#include "runner/performance_model.h"

#include <cmath>
#include <tuple>

#include <gtest/gtest.h>

#include "runner/calibration.h"
#include "runner/measured_runs.h"
#include "tests/test_support.h"

namespace tunepar::runner {
namespace {

struct Table1Row {
  double params_billion;
  int heads, hidden, layers, global_batch;
};

// Narayanan et al. 2021, Table 1 (reference/measured.md A): sequence 2048, vocabulary 51200.
const Table1Row kTable1[] = {{1.7, 24, 2304, 24, 512},       {3.6, 32, 3072, 30, 512},
                             {7.5, 32, 4096, 36, 512},       {18.4, 48, 6144, 40, 1024},
                             {39.1, 64, 8192, 48, 1536},     {76.1, 80, 10240, 60, 1792},
                             {145.6, 96, 12288, 80, 2304},   {310.1, 128, 16384, 96, 2160},
                             {529.6, 128, 20480, 105, 2520}, {1008.0, 160, 25600, 128, 3072}};

ModelShape Shape(const Table1Row& r) {
  ModelShape m;
  m.name = "row";
  m.layers = r.layers;
  m.hidden = r.hidden;
  m.heads = r.heads;
  m.seq_len = 2048;
  m.vocab = 51200;
  m.global_batch = r.global_batch;
  m.ffn_hidden = 4 * r.hidden;
  return m;
}

TEST(Formulas, ParametersMatchNarayananEq2) {
  for (const Table1Row& r : kTable1) {
    const ModelShape m = Shape(r);
    const double L = m.layers, h = m.hidden, V = m.vocab, s = m.seq_len;
    const double eq2 = 12 * L * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * L * h));
    EXPECT_NEAR(m.Parameters(), eq2 + 2 * h, 1e-6 * eq2);  // + the final layer norm
    // The paper's column is rounded; the formula lands within 3% of it.
    EXPECT_NEAR(m.Parameters() / 1e9, r.params_billion, 0.03 * r.params_billion) << r.params_billion;
  }
}

TEST(Formulas, FlopsMatchThePublishedEquations) {
  for (const Table1Row& r : kTable1) {
    const ModelShape m = Shape(r);
    const double B = m.global_batch, L = m.layers, h = m.hidden, V = m.vocab, s = m.seq_len;
    const double model = 72 * B * L * s * h * h * (1 + s / (6 * h) + V / (12 * h * L));  // Korthikanti eq. 7
    const double full = 96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h));   // Narayanan eq. 3
    // Selective recomputation runs the attention core's forward again: QK^T and the product
    // with V, 4 s^2 h per layer and sequence. (Korthikanti et al.'s eq. 8 counts 12 B L s^2 h,
    // three times that; we count the FLOPs that are executed.)
    const double selective = model + 4 * B * L * s * s * h;
    EXPECT_NEAR(ModelFlopsPerStep(m), model, 1e-9 * model);
    EXPECT_NEAR(HardwareFlopsPerStep(m, Recompute::kFull), full, 1e-9 * full);
    EXPECT_NEAR(HardwareFlopsPerStep(m, Recompute::kSelective), selective, 1e-9 * selective);
    EXPECT_DOUBLE_EQ(HardwareFlopsPerStep(m, Recompute::kNone), ModelFlopsPerStep(m));
    EXPECT_NEAR(RecomputeCountedFlops(m), full, 1e-9 * full);
    EXPECT_NEAR(ModelFormulaFlops(m), model, 1e-9 * model);
  }
}

class Physics : public ::testing::Test {
 protected:
  ModelShape model_ = testing::PresetModel("gpt-175b");  // 96 layers, h 12288, batch 1536
  HardwareProfile hw_ = testing::PresetHardware("frontier-mi250x");

  tunepar::Layout Layout(int tp, int pp, int dp, int mbs = 1) const {
    tunepar::Layout l;
    l.tp = tp;
    l.pp = pp;
    l.dp = dp;
    l.micro_batch = mbs;
    l.num_micro_batches = model_.global_batch / (mbs * dp);
    l.precision = Precision::kBf16;
    return l;
  }
  Prediction P(const tunepar::Layout& l) const { return P(l, hw_); }
  Prediction P(const tunepar::Layout& l, const HardwareProfile& hw) const {
    Result<PerformanceModel> m = PerformanceModel::Create(model_, hw);
    EXPECT_TRUE(m.ok()) << m.status().message();
    EXPECT_TRUE(m->CheckLayout(l).ok()) << m->CheckLayout(l).message();
    return m->Predict(l);
  }
};

TEST_F(Physics, PartsAddUpAndFiguresAgree) {
  const tunepar::Layout l = Layout(4, 16, 16);
  const Prediction p = P(l);
  const TimeBreakdown& t = p.time;
  EXPECT_NEAR(t.compute + t.tp_comm + t.pp_p2p + t.bubble + t.dp_comm_exposed + t.optimizer, p.step_time_s,
              1e-9 * p.step_time_s);
  for (double part : {t.compute, t.tp_comm, t.pp_p2p, t.bubble, t.dp_comm_exposed, t.optimizer})
    EXPECT_GT(part, 0);
  EXPECT_NEAR(p.tokens_per_s * p.step_time_s, static_cast<double>(model_.global_batch) * model_.seq_len,
              1e-6);
  EXPECT_NEAR(p.tflops_per_gpu, ModelFlopsPerStep(model_) / p.step_time_s / 1024 / 1e12, 1e-9);
  EXPECT_NEAR(p.mfu, p.tflops_per_gpu / 191.5, 1e-12);
  EXPECT_NEAR(p.memory_bytes, p.memory.Total(), 1.0);
  EXPECT_EQ(p.fits, p.memory_bytes <= 64e9);
  // Physical bounds: no faster than the dense peak.
  EXPECT_LT(p.mfu, 1.0);
}

TEST_F(Physics, MoreTensorParallelismLowersWeightMemory) {
  double previous = INFINITY;
  for (int tp : {1, 2, 4, 8}) {
    const double weights = P(Layout(tp, 16, 64 / tp)).memory.weights;
    EXPECT_LT(weights, previous) << "tp " << tp;
    previous = weights;
  }
}

TEST_F(Physics, MoreMicroBatchesShrinkTheBubbleShare) {
  // Same pipeline (pp 16, tp 4), fewer data-parallel replicas: more micro-batches each.
  double previous = INFINITY;
  for (int dp : {64, 16, 4}) {
    const Prediction p = P(Layout(4, 16, dp));
    const double share = p.time.bubble / p.step_time_s;
    EXPECT_LT(share, previous) << "dp " << dp;
    previous = share;
  }
  // And the bubble is (p - 1) / m of the time in micro-batch slots (up to the once-per-step
  // embedding synchronisation counted with the point-to-point time).
  const tunepar::Layout l = Layout(4, 16, 16);
  const Prediction p = P(l);
  const double slots = p.time.compute + p.time.tp_comm + p.time.pp_p2p;
  EXPECT_NEAR(p.time.bubble, 15.0 / l.num_micro_batches * slots, 0.02 * p.time.bubble);
}

TEST_F(Physics, DataParallelCommunicationGrowsWithTheGradientsPerGpu) {
  // Same tp (so the same members per node), half the pipeline depth: twice the gradients per GPU.
  const tunepar::Layout deep = Layout(4, 16, 16), shallow = Layout(4, 8, 32);
  EXPECT_GT(P(shallow).time.dp_comm_exposed, 1.5 * P(deep).time.dp_comm_exposed);
  EXPECT_EQ(P(Layout(8, 96, 1)).time.dp_comm_exposed, 0.0);
}

TEST_F(Physics, ZeroOneCutsOptimizerMemoryByDp) {
  tunepar::Layout a = Layout(4, 16, 16), b = a;
  b.zero = 1;
  const Prediction pa = P(a), pb = P(b);
  EXPECT_NEAR(pb.memory.optimizer_states * b.dp, pa.memory.optimizer_states,
              1e-6 * pa.memory.optimizer_states);
  EXPECT_EQ(pb.memory.weights, pa.memory.weights);
  EXPECT_LT(pb.time.optimizer, pa.time.optimizer);  // each replica updates 1/dp of the states
}

// The ZeRO paper's example (Rajbhandari et al. 2020, figure 1): Psi = 7.5B parameters, mixed
// precision (2 + 2 bytes of weights and gradients, K = 12 of optimizer states), N_d = 64.
TEST(Formulas, ZeroModelStatesReproduceThePapersExample) {
  const double psi = 7.5e9;
  const double expected_gb[] = {120, 31.4, 16.6, 1.9};
  for (int stage = 0; stage <= 3; ++stage) {
    const ModelStates s = ZeroModelStates(psi, 2, 2, 12, stage, 64);
    EXPECT_NEAR(s.Total() / 1e9, expected_gb[stage], 0.05) << "stage " << stage;
  }
  // Each stage splits one more part over dp, the others as before.
  const ModelStates one = ZeroModelStates(psi, 2, 2, 12, 1, 64), two = ZeroModelStates(psi, 2, 2, 12, 2, 64);
  EXPECT_EQ(one.weights, two.weights);
  EXPECT_NEAR(two.gradients * 64, one.gradients, 1);
}

// The memory terms of every stage against the ZeRO formulas by hand, on two layouts each (one
// hybrid): with bf16 storage, P parameters on the stage hold 2P bytes of weights, 4P of fp32
// gradients and 12P of fp32 master weights and Adam moments; stage k splits the last k of those
// over the shard group S = dp / dp_replicate (Rajbhandari et al. 2020, figure 1, with
// Megatron's fp32 gradients).
TEST_F(Physics, ZeroMemoryTermsMatchTheFormulasByHand) {
  for (auto [pp, dp, replicas] : {std::tuple{16, 16, 1}, std::tuple{96, 32, 4}}) {
    tunepar::Layout base = Layout(4, pp, dp);
    const double P0 = P(base).memory.weights / 2;  // ZeRO-0: the stage's parameters at 2 bytes
    for (int stage = 0; stage <= 3; ++stage) {
      tunepar::Layout l = base;
      l.zero = stage;
      l.dp_replicate = stage == 0 ? 1 : replicas;
      const double S = l.ShardGroup();
      const MemoryBreakdown m = P(l).memory;
      SCOPED_TRACE(LayoutKey(l));
      EXPECT_NEAR(m.weights, 2 * P0 / (stage >= 3 ? S : 1), 1e-9 * P0);
      EXPECT_NEAR(m.gradients, 4 * P0 / (stage >= 2 ? S : 1), 1e-9 * P0);
      EXPECT_NEAR(m.optimizer_states, 12 * P0 / (stage >= 1 ? S : 1), 1e-9 * P0);
    }
  }
}

TEST_F(Physics, ZeroThreeShardsTheWeightsAndHoldsTwoGatheredLayers) {
  tunepar::Layout one = Layout(4, 16, 16), three = one;
  one.zero = 1;
  three.zero = 3;
  const Prediction p1 = P(one), p3 = P(three);
  // gpt-175b: a layer has (4h^2 + 3h + 2hf + f) / t + 5h parameters on its tp rank, f = 4h; the
  // first stage's embedding shard (V h / t) is smaller, so the two units in flight are layers.
  const double h = model_.hidden, layer = (12 * h * h + 7 * h) / 4 + 5 * h;
  ASSERT_LT(model_.vocab * h / 4, layer);
  EXPECT_NEAR(p3.memory.weights * 16, p1.memory.weights, 1e-6 * p1.memory.weights);
  EXPECT_NEAR(p3.memory.gathered_weights, 2 * layer * 2, 1e-6 * layer);
  EXPECT_EQ(p1.memory.gathered_weights, 0.0);
  EXPECT_NEAR(p3.memory.gradients * 16, p1.memory.gradients, 1e-6 * p1.memory.gradients);
  EXPECT_EQ(p3.memory.optimizer_states, p1.memory.optimizer_states);
  EXPECT_NEAR(p3.memory_bytes, p3.memory.weights + p3.memory.gathered_weights + p3.memory.gradients +
                                   p3.memory.optimizer_states + p3.memory.activations + p3.memory.comm_buffers +
                                   p3.memory.runtime_overhead,
              1.0);
  EXPECT_LT(p3.memory_bytes, p1.memory_bytes);
}

// FSDP gathers the weights twice per micro-batch: across nodes (dp members 4 ranks apart at tp 4,
// so a group of 16 spans 8 nodes) its exposed time exceeds ZeRO-1's, and grows with the group.
// The gathers are their own term of the step; the parts still add up to it.
TEST_F(Physics, ZeroThreeGathersCostMoreAcrossMoreNodes) {
  tunepar::Layout small = Layout(4, 16, 4), large = Layout(4, 16, 16);
  tunepar::Layout small1 = small;
  small.zero = large.zero = 3;
  small1.zero = 1;
  auto data_parallel = [&](const tunepar::Layout& l) {
    const TimeBreakdown t = P(l).time;
    return t.dp_comm_exposed + t.weight_gather_exposed;
  };
  EXPECT_GT(data_parallel(small), data_parallel(small1));
  EXPECT_EQ(P(small1).time.weight_gather_exposed, 0.0);
  EXPECT_GT(P(large).time.weight_gather_exposed, 0.0);
  EXPECT_GT(data_parallel(large) / large.num_micro_batches, data_parallel(small) / small.num_micro_batches);
  const Prediction p = P(large);
  const TimeBreakdown& t = p.time;
  EXPECT_NEAR(t.compute + t.tp_comm + t.pp_p2p + t.bubble + t.dp_comm_exposed + t.weight_gather_exposed +
                  t.optimizer + t.device_sharing,
              p.step_time_s, 1e-9 * p.step_time_s);
}

// Hybrid sharding: a shard group of one node (dp 32 at tp 1 is 4 nodes of 8; dp_replicate 4
// leaves 8 ranks, one node, per group) gathers over the node's links instead of the network,
// holds 4x the sharded states, and all-reduces the gradient shard across the 4 replicas.
TEST_F(Physics, HybridShardingGathersInsideANodeAndHoldsMoreStates) {
  tunepar::Layout full = Layout(1, 96, 32), hybrid = full;  // 1536 / 32 = 48 micro-batches
  full.zero = hybrid.zero = 3;
  hybrid.dp_replicate = 4;
  ASSERT_EQ(hybrid.ShardGroup(), 8);
  const Prediction pf = P(full), ph = P(hybrid);
  EXPECT_NEAR(ph.memory.weights, 4 * pf.memory.weights, 1e-9 * ph.memory.weights);
  EXPECT_NEAR(ph.memory.gradients, 4 * pf.memory.gradients, 1e-9 * ph.memory.gradients);
  EXPECT_NEAR(ph.memory.optimizer_states, 4 * pf.memory.optimizer_states, 1e-9 * ph.memory.optimizer_states);
  EXPECT_EQ(ph.memory.gathered_weights, pf.memory.gathered_weights);
  EXPECT_LT(ph.time.weight_gather_exposed, pf.time.weight_gather_exposed);
}

TEST_F(Physics, FullRecomputationCutsActivationsAndAddsOneForwardPass) {
  tunepar::Layout none = Layout(4, 16, 16), full = none, selective = none;
  full.recompute = Recompute::kFull;
  selective.recompute = Recompute::kSelective;
  const Prediction pn = P(none), pf = P(full), ps = P(selective);
  EXPECT_LT(pf.memory.activations, ps.memory.activations);
  EXPECT_LT(ps.memory.activations, pn.memory.activations);
  // Forward is about a third of forward + backward: full recomputation adds 25-40% compute.
  const double added = pf.time.compute / pn.time.compute - 1.0;
  EXPECT_GT(added, 0.25);
  EXPECT_LT(added, 0.40);
  EXPECT_GT(ps.time.compute, pn.time.compute);
  EXPECT_LT(ps.time.compute, pf.time.compute);
  EXPECT_GT(pf.time.tp_comm, pn.time.tp_comm);  // the recomputed forward repeats its all-reduces
}

TEST_F(Physics, InterleavingShrinksTheBubbleAndAddsPointToPoint) {
  tunepar::Layout plain = Layout(4, 16, 16), interleaved = plain;
  interleaved.virtual_stages = 2;  // 96 layers over 16 stages x 2 chunks
  const Prediction a = P(plain), b = P(interleaved);
  EXPECT_NEAR(b.time.bubble / a.time.bubble, 0.5, 0.05);
  EXPECT_GT(b.time.pp_p2p, a.time.pp_p2p);
  EXPECT_GT(b.memory.activations, a.memory.activations);
}

// Half a node: the same devices, links and NICs per GPU, in nodes of half the size.
HardwareProfile HalfNodes(HardwareProfile hw) {
  hw.gpus_per_node /= 2;
  hw.nics_per_node.value /= 2;
  return hw;
}

TEST_F(Physics, TensorParallelismAcrossNodesCostsMoreThanInside) {
  // tp 8 inside one 8-GPU node versus across two 4-GPU nodes.
  const tunepar::Layout l = Layout(8, 8, 16);
  const HardwareProfile dgx = testing::PresetHardware("dgx-a100");
  EXPECT_GT(P(l, HalfNodes(dgx)).time.tp_comm, 2 * P(l, dgx).time.tp_comm);  // NVLink >> NIC share
  // On MI250X the slowest Infinity Fabric pair is as slow as the NIC share: crossing costs the
  // network's latency.
  EXPECT_GT(P(l, HalfNodes(hw_)).time.tp_comm, P(l).time.tp_comm);
  // Inside a node, a package is faster still: tp 2 on one MI250X package.
  HardwareProfile no_packages = hw_;
  no_packages.gpus_per_package = 1;
  EXPECT_LT(P(Layout(2, 16, 32)).time.tp_comm, P(Layout(2, 16, 32), no_packages).time.tp_comm);
}

TEST_F(Physics, PipelineAcrossNodesUsesTheNetwork) {
  // tp 2 x dp 2: stage neighbours are 4 ranks apart, inside an 8-GPU node; on 2-GPU nodes
  // every stage boundary crosses the network.
  HardwareProfile small_nodes = hw_;
  small_nodes.gpus_per_node = 2;
  small_nodes.nics_per_node.value = 1;
  const tunepar::Layout l = Layout(2, 48, 2);
  EXPECT_GT(P(l, small_nodes).time.pp_p2p, 2 * P(l).time.pp_p2p);
}

TEST_F(Physics, SmallMicroBatchesAndThinShardsRunFurtherFromPeak) {
  // The same work per step, in micro-batches of 1 versus 8: lower efficiency (higher compute time).
  EXPECT_GT(P(Layout(4, 16, 16, 1)).time.compute, P(Layout(4, 16, 16, 8)).time.compute);
  // Compute per GPU at tp 8 is more than 1/8 of tp 1's: thinner GEMMs.
  HardwareProfile hw = hw_;
  const ModelShape small = testing::PresetModel("gpt-1.3b");
  tunepar::Layout l1;
  l1.dp = 1;
  l1.micro_batch = 1;
  l1.num_micro_batches = small.global_batch;
  tunepar::Layout l8 = l1;
  l8.tp = 8;
  Result<PerformanceModel> m = PerformanceModel::Create(small, hw);
  ASSERT_TRUE(m.ok());
  EXPECT_GT(m->Predict(l8).time.compute * 8, m->Predict(l1).time.compute * 1.05);
}

TEST_F(Physics, SequenceParallelismSavesActivationsAndElementWiseTime) {
  tunepar::Layout a = Layout(8, 12, 8), b = a;
  b.seq_parallel = true;
  EXPECT_LT(P(b).memory.activations, P(a).memory.activations);
  EXPECT_LT(P(b).time.compute, P(a).time.compute);
}

TEST_F(Physics, FlashAttentionDropsTheScoreMatrices) {
  tunepar::Layout a = Layout(4, 16, 16, 4), b = a;
  b.flash_attention = true;
  EXPECT_LT(P(b).memory.activations, P(a).memory.activations);
}

TEST_F(Physics, PrecisionChangesPeakAndBytes) {
  tunepar::Layout bf16 = Layout(8, 16, 8), fp32 = bf16, fp16 = bf16;
  fp32.precision = Precision::kFp32;
  fp16.precision = Precision::kFp16;
  const Prediction b = P(bf16), f = P(fp32), h = P(fp16);
  EXPECT_GT(f.step_time_s, 3 * b.step_time_s);  // 47.9 vs 191.5 TFLOP/s peaks
  EXPECT_GT(f.memory.activations, 1.9 * b.memory.activations);
  EXPECT_LT(h.memory.gradients, b.memory.gradients);  // Megatron keeps bf16 gradients in fp32
}

// fp8 on an H100 (FP8 peak 1979, bf16 989): the layers' four GEMMs run at the FP8 peak, attention
// and the LM head stay at bf16's; the casts add element-wise traffic; the weights gain their FP8
// copy and transpose (2 bytes a parameter of the stage's layers); the four GEMMs' inputs are kept
// in FP8 (GPT, f = 4h, flash: 34 16-bit units of s b h per layer become 27).
class Fp8 : public Physics {
 protected:
  void SetUp() override { hw_ = testing::PresetHardware("dgx-h100"); }
  tunepar::Layout Gpt(Precision p) const {
    tunepar::Layout l = Layout(1, 96, 16);  // one layer a stage: no tensor parallelism
    l.flash_attention = true;
    l.precision = p;
    return l;
  }
};

TEST_F(Fp8, LayerGemmsRunAtTheFp8PeakAndTheRestAtBf16s) {
  const Prediction b = P(Gpt(Precision::kBf16)), f = P(Gpt(Precision::kFp8));
  const double ratio = 989.0 / 1979.0;
  EXPECT_NEAR(f.compute_terms.mlp, ratio * b.compute_terms.mlp, 1e-9 * b.compute_terms.mlp);
  EXPECT_NEAR(f.compute_terms.qkv_projections, ratio * b.compute_terms.qkv_projections, 1e-9 * b.compute_terms.mlp);
  EXPECT_NEAR(f.compute_terms.attention_output, ratio * b.compute_terms.attention_output, 1e-9 * b.compute_terms.mlp);
  EXPECT_DOUBLE_EQ(f.compute_terms.attention_core, b.compute_terms.attention_core);
  EXPECT_DOUBLE_EQ(f.compute_terms.head_and_embedding, b.compute_terms.head_and_embedding);
  EXPECT_NEAR(f.mfu, f.tflops_per_gpu / 1979.0, 1e-12);  // judged against the FP8 peak
  EXPECT_LT(f.step_time_s, b.step_time_s);
}

TEST_F(Fp8, CastsAddElementWiseTrafficAndTheWeightCastOncePerStep) {
  const tunepar::Layout l = Gpt(Precision::kFp8);
  const Prediction b = P(Gpt(Precision::kBf16)), f = P(l);
  const double h = model_.hidden, T = model_.seq_len * 1.0, layers_per_step = l.num_micro_batches * 1.0;
  // Forward: QKV and fc1 inputs h each, the projection's h, fc2's 4h; backward: the outputs' gradients
  // 3h, h, 4h and h. 4 bytes a value (read 2, write the FP8 value and its transpose).
  const double cast_bytes = layers_per_step * T * (2 * h + h + 4 * h + 3 * h + h + 4 * h + h) * 4.0;
  const double bandwidth = 3350e9 * 0.8;
  EXPECT_NEAR(f.compute_terms.elementwise - b.compute_terms.elementwise, cast_bytes / bandwidth,
              1e-6 * cast_bytes / bandwidth);
  EXPECT_GT(f.time.optimizer, b.time.optimizer);
}

TEST_F(Fp8, WeightsGainTheirFp8CopiesAndActivationsKeepFp8Inputs) {
  const Prediction b = P(Gpt(Precision::kBf16)), f = P(Gpt(Precision::kFp8));
  const double h = model_.hidden, layer = 12 * h * h + 7 * h + 5 * h;  // one layer a stage, tp 1
  EXPECT_NEAR(f.memory.weights - b.memory.weights, 2 * layer, 1e-6 * layer);
  EXPECT_EQ(f.memory.gradients, b.memory.gradients);
  EXPECT_EQ(f.memory.optimizer_states, b.memory.optimizer_states);
  // The first stage holds min(p, m) = 96 micro-batches of its one layer: 7 units of s b h fewer each.
  const double sbh = model_.seq_len * h * 1.0;
  EXPECT_NEAR(b.memory.activations - f.memory.activations, 96 * 7 * sbh, 1e-6 * sbh);
}

TEST_F(Fp8, NeedsHardwareWithAnFp8Peak) {
  for (const char* name : {"frontier-mi250x", "dgx-a100", "lumi-g"}) {
    Result<PerformanceModel> m = PerformanceModel::Create(model_, testing::PresetHardware(name));
    ASSERT_TRUE(m.ok());
    const Status s = m->CheckLayout(Gpt(Precision::kFp8));
    EXPECT_FALSE(s.ok()) << name;
    EXPECT_NE(s.message().find("FP8 peak"), std::string::npos) << s.message();
  }
  Result<PerformanceModel> h100 = PerformanceModel::Create(model_, hw_);
  EXPECT_TRUE(h100->CheckLayout(Gpt(Precision::kFp8)).ok());
}

TEST_F(Physics, KnownInfeasibleLayoutsDoNotFit) {
  const ModelShape t = testing::PresetModel("gpt-1t");
  for (const char* hw_name : {"dgx-a100", "frontier-mi250x", "dgx-h100"}) {
    Result<PerformanceModel> m = PerformanceModel::Create(t, testing::PresetHardware(hw_name));
    ASSERT_TRUE(m.ok());
    tunepar::Layout l;
    l.dp = 3072;
    l.num_micro_batches = 1;
    EXPECT_FALSE(m->Predict(l).fits) << hw_name;
    EXPECT_GT(m->Predict(l).memory.weights, 1e12) << hw_name;
  }
}

TEST_F(Physics, RejectsIllegalLayoutsWithAReason) {
  Result<PerformanceModel> m = PerformanceModel::Create(model_, hw_);
  ASSERT_TRUE(m.ok());
  tunepar::Layout l = Layout(4, 16, 16);
  l.tp = 5;
  EXPECT_NE(m->CheckLayout(l).message().find("does not divide 96 heads"), std::string::npos);
  l = Layout(4, 16, 16);
  l.num_micro_batches += 1;
  EXPECT_NE(m->CheckLayout(l).message().find("global batch"), std::string::npos);
  l = Layout(4, 16, 16);
  l.virtual_stages = 4;  // 96 / (16 x 4) is not whole
  EXPECT_NE(m->CheckLayout(l).message().find("layers"), std::string::npos);
  l = Layout(4, 16, 16);
  l.precision = Precision::kFp32;
  l.flash_attention = true;
  EXPECT_FALSE(m->CheckLayout(l).ok());
}

// Four ranks on a node with two devices (the local backend on a 2-core machine).
class SharedDevices : public ::testing::Test {
 protected:
  Prediction P(const std::string& key, int ranks_per_node) const {
    Result<Layout> l = ParseLayoutKey(key);
    EXPECT_TRUE(l.ok()) << key;
    PerformanceModel m = *PerformanceModel::Create(model_, hw_);
    m.set_ranks_per_node(ranks_per_node);
    EXPECT_TRUE(m.CheckLayout(*l).ok()) << key;
    return m.Predict(*l);
  }
  ModelShape model_ = testing::PresetModel("small");
  HardwareProfile hw_ = testing::PresetHardware("local-cpu");  // 2 devices per node
};

TEST_F(SharedDevices, OneRankPerDeviceIsTheDefaultPlacement) {
  for (const char* key : {"tp2-pp1-dp1-mbs1-nmb8-fp32-zero0-rcnone-sp0-vpp1-fa0",
                          "tp1-pp2-dp2-mbs2-nmb2-bf16-zero1-rcfull-sp0-vpp1-fa0"}) {
    const Prediction a = P(key, 0), b = P(key, 2);
    EXPECT_EQ(a.step_time_s, b.step_time_s) << key;
    EXPECT_EQ(a.time.device_sharing, 0.0) << key;
  }
}

TEST_F(SharedDevices, BusyRanksShareTheDevicesAndTheBreakdownAddsUp) {
  // Data parallelism keeps all four ranks busy: two devices take twice a rank's work.
  const Prediction p = P("tp1-pp1-dp4-mbs1-nmb2-fp32-zero0-rcnone-sp0-vpp1-fa0", 4);
  const TimeBreakdown& t = p.time;
  const double work = t.compute + t.tp_comm + t.pp_p2p + t.dp_comm_exposed + t.optimizer;
  EXPECT_NEAR(p.step_time_s, 2 * work, 1e-9 * p.step_time_s);
  EXPECT_GT(t.device_sharing, 0.4 * p.step_time_s);
  EXPECT_NEAR(t.compute + t.tp_comm + t.pp_p2p + t.bubble + t.dp_comm_exposed + t.optimizer + t.device_sharing,
              p.step_time_s, 1e-9 * p.step_time_s);
}

TEST_F(SharedDevices, ASequentialPipelineHasADeviceToEachActiveRank) {
  // One micro-batch through four stages: one rank works at a time, nothing waits for a device.
  const Prediction p = P("tp1-pp4-dp1-mbs8-nmb1-fp32-zero0-rcnone-sp0-vpp1-fa0", 4);
  EXPECT_EQ(p.time.device_sharing, 0.0);
  // With eight micro-batches the bubble is filled by the other ranks' work instead.
  const Prediction q = P("tp1-pp4-dp1-mbs1-nmb8-fp32-zero0-rcnone-sp0-vpp1-fa0", 4);
  EXPECT_GT(q.time.device_sharing, 0.0);
  EXPECT_LT(q.step_time_s, p.step_time_s);
}

TEST_F(SharedDevices, RanksOnOneNodeCommunicateOverTheNodesLinks) {
  // Spread over two nodes the DP ring crosses the network; on one node it does not.
  HardwareProfile slow_network = hw_;
  slow_network.nic_bandwidth_gbs.value = hw_.nic_bandwidth_gbs.value / 100;
  PerformanceModel two_nodes = *PerformanceModel::Create(model_, slow_network);
  PerformanceModel one_node = *PerformanceModel::Create(model_, slow_network);
  one_node.set_ranks_per_node(4);
  const tunepar::Layout l = *ParseLayoutKey("tp2-pp1-dp2-mbs1-nmb4-fp32-zero0-rcnone-sp0-vpp1-fa0");
  EXPECT_GT(two_nodes.Predict(l).time.dp_comm_exposed, 10 * one_node.Predict(l).time.dp_comm_exposed);
}

TEST(PerformanceModelProfile, MissingEfficiencyParameterIsNamed) {
  HardwareProfile hw = testing::PresetHardware("dgx-a100");
  hw.efficiency.erase("link_efficiency");
  Result<PerformanceModel> m = PerformanceModel::Create(testing::PresetModel("gpt-22b"), hw);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kConfig);
  EXPECT_NE(m.status().message().find("link_efficiency"), std::string::npos);
  EXPECT_NE(m.status().message().find("dgx-a100"), std::string::npos);
}

// Calibration recovers efficiencies from runs the model itself generated.
TEST(Calibration, RecoversKnownParameters) {
  HardwareProfile hw = testing::PresetHardware("dgx-a100");
  Result<Efficiency> truth = Efficiency::FromProfile(hw);
  ASSERT_TRUE(truth.ok());
  (*truth)[EfficiencyKey::kGemmEfficiency] = 0.62;
  (*truth)[EfficiencyKey::kLinkEfficiency] = 0.55;
  std::vector<MeasuredRun> runs;
  for (const char* name : {"gpt-22b", "gpt-175b"}) {
    const ModelShape m = testing::PresetModel(name);
    for (int tp : {1, 2, 4, 8}) {
      tunepar::Layout l;
      l.tp = tp;
      l.pp = 8;
      l.dp = 4;
      l.micro_batch = 2;
      l.num_micro_batches = m.global_batch / 8;
      l.recompute = Recompute::kFull;
      runs.push_back({name, m, l, PerformanceModel(m, hw, *truth).Predict(l).step_time_s, "synthetic"});
    }
  }
  Result<CalibrationResult> fit =
      Calibrate(runs, hw, {{EfficiencyKey::kGemmEfficiency, EfficiencyKey::kLinkEfficiency}, 4, 7});
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  EXPECT_NEAR(fit->efficiency[EfficiencyKey::kGemmEfficiency], 0.62, 0.005);
  EXPECT_NEAR(fit->efficiency[EfficiencyKey::kLinkEfficiency], 0.55, 0.01);
  EXPECT_LT(fit->max_abs_error, 1e-3);
  // Parameters not fitted keep the profile's values.
  EXPECT_EQ(fit->efficiency[EfficiencyKey::kMemoryEfficiency], (*truth)[EfficiencyKey::kMemoryEfficiency]);
}

TEST(Calibration, WrittenProfileLoadsAndRecordsTheFit) {
  const std::string text = testing::PresetText("hardware", "frontier-mi250x");
  Result<HardwareProfile> hw = ParseHardwareProfile(text, "mi250x");
  ASSERT_TRUE(hw.ok());
  CalibrationResult r;
  r.efficiency = *Efficiency::FromProfile(*hw);
  r.efficiency[EfficiencyKey::kGemmEfficiency] = 0.5;
  r.fitted = {EfficiencyKey::kGemmEfficiency};
  r.rows.resize(3);
  r.mean_abs_error = 0.04;
  r.max_abs_error = 0.06;
  const std::string written = WriteCalibratedProfile(text, *hw, r, "runs.csv", "2026-11-22");
  Result<HardwareProfile> back = ParseHardwareProfile(written, "written");
  ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << written;
  EXPECT_EQ(back->efficiency.at("gemm_efficiency").value, 0.5);
  EXPECT_EQ(back->efficiency.at("gemm_efficiency").origin, NumberOrigin::kFitted);
  ASSERT_TRUE(back->calibration.has_value());
  EXPECT_EQ(back->calibration->runs, 3);
  EXPECT_DOUBLE_EQ(back->calibration->max_abs_error_pct, 6.0);
  EXPECT_EQ(back->launch.cpu_masks, hw->launch.cpu_masks);      // the rest is kept
  EXPECT_NE(written.find("# GCD -> NUMA"), std::string::npos);  // comments too
  // Writing again replaces the tables rather than adding more.
  const std::string twice = WriteCalibratedProfile(written, *back, r, "runs.csv", "2026-11-22");
  EXPECT_EQ(twice, written);
}

TEST(MeasuredRuns, ParsesTflopsAndStepTimes) {
  const std::string csv =
      "# comment\n"
      "label,layers,hidden,heads,seq_len,vocab,global_batch,gpus,tp,pp,micro_batch,virtual_stages,precision,"
      "recompute,zero,seq_parallel,flash_attention,step_time_s,tflops_per_gpu,tflops_formula,source,"
      "ranks_per_node\n"
      "a,24,2304,24,2048,51200,512,32,1,1,16,1,fp16,full,0,0,0,,137,recompute-counted,paper,\n"
      "b,24,2304,24,2048,51200,512,32,2,1,16,1,bf16,selective,1,1,1,3.5,,,measured,16\n";
  Result<std::vector<MeasuredRun>> runs = ParseMeasuredRuns(csv, "t.csv");
  ASSERT_TRUE(runs.ok()) << runs.status().message();
  ASSERT_EQ(runs->size(), 2u);
  const MeasuredRun& a = (*runs)[0];
  EXPECT_EQ(a.layout.dp, 32);
  EXPECT_EQ(a.layout.num_micro_batches, 1);
  EXPECT_NEAR(a.step_time_s, RecomputeCountedFlops(a.model) / (137e12 * 32), 1e-9);
  EXPECT_NEAR(a.FlopsPerStep() / a.step_time_s / 32 / 1e12, 137.0, 1e-9);
  const MeasuredRun& b = (*runs)[1];
  EXPECT_EQ(b.step_time_s, 3.5);
  EXPECT_EQ(b.layout.tp, 2);
  EXPECT_EQ(b.layout.dp, 16);
  EXPECT_TRUE(b.layout.seq_parallel);
  EXPECT_TRUE(b.layout.flash_attention);
  EXPECT_EQ(b.layout.zero, 1);
  EXPECT_EQ(a.ranks_per_node, 0);  // one rank per GPU
  EXPECT_EQ(b.ranks_per_node, 16);
}

TEST(MeasuredRuns, ErrorsNameLineAndColumn) {
  const std::string header =
      "label,layers,hidden,heads,seq_len,vocab,global_batch,gpus,tp,pp,micro_batch,virtual_stages,precision,"
      "recompute,zero,seq_parallel,flash_attention,step_time_s\n";
  auto error = [&](const std::string& row) {
    Result<std::vector<MeasuredRun>> r = ParseMeasuredRuns(header + row, "t.csv");
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_NE(
      error("a,-24,2304,24,2048,51200,512,32,1,1,16,1,fp16,full,0,0,0,3\n").find("t.csv:2: column 'layers'"),
      std::string::npos);
  EXPECT_NE(error("a,24,2304,24,2048,51200,512,30,4,1,16,1,fp16,full,0,0,0,3\n").find("column 'gpus'"),
            std::string::npos);
  EXPECT_NE(
      error("a,24,2304,24,2048,51200,500,32,1,1,16,1,fp16,full,0,0,0,3\n").find("column 'global_batch'"),
      std::string::npos);
  EXPECT_NE(error("a,24,2304,24,2048,51200,512,32,1,1,16,1,fp4,full,0,0,0,3\n").find("column 'precision'"),
            std::string::npos);
  EXPECT_NE(error("a,24,2304,24,2048,51200,512,32,1,1,16,1,fp16,full,0,0,0,x\n").find("column 'step_time_s'"),
            std::string::npos);
  EXPECT_FALSE(ParseMeasuredRuns("label,layers\n", "t.csv").ok());
  EXPECT_FALSE(ParseMeasuredRuns(header, "t.csv").ok());  // no rows
}

}  // namespace
}  // namespace tunepar::runner
