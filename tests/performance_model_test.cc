#include "runner/performance_model.h"

#include <cmath>

#include <gtest/gtest.h>

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

search::ModelShape Shape(const Table1Row& r) {
  search::ModelShape m;
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
    const search::ModelShape m = Shape(r);
    const double L = m.layers, h = m.hidden, V = m.vocab, s = m.seq_len;
    const double eq2 = 12 * L * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * L * h));
    EXPECT_NEAR(m.Parameters(), eq2 + 2 * h, 1e-6 * eq2);  // + the final layer norm
    // The paper's column is rounded; the formula lands within 3% of it.
    EXPECT_NEAR(m.Parameters() / 1e9, r.params_billion, 0.03 * r.params_billion) << r.params_billion;
  }
}

TEST(Formulas, FlopsMatchThePublishedEquations) {
  for (const Table1Row& r : kTable1) {
    const search::ModelShape m = Shape(r);
    const double B = m.global_batch, L = m.layers, h = m.hidden, V = m.vocab, s = m.seq_len;
    const double model = 72 * B * L * s * h * h * (1 + s / (6 * h) + V / (12 * h * L));  // Korthikanti eq. 7
    const double full = 96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h));   // Narayanan eq. 3
    // Selective recomputation runs the attention core's forward again: QK^T and the product
    // with V, 4 s^2 h per layer and sequence. (Korthikanti et al.'s eq. 8 counts 12 B L s^2 h,
    // three times that; we count the FLOPs that are executed.)
    const double selective = model + 4 * B * L * s * s * h;
    EXPECT_NEAR(ModelFlopsPerStep(m), model, 1e-9 * model);
    EXPECT_NEAR(HardwareFlopsPerStep(m, search::Recompute::kFull), full, 1e-9 * full);
    EXPECT_NEAR(HardwareFlopsPerStep(m, search::Recompute::kSelective), selective, 1e-9 * selective);
    EXPECT_DOUBLE_EQ(HardwareFlopsPerStep(m, search::Recompute::kNone), ModelFlopsPerStep(m));
  }
}

class ModelPhysics : public ::testing::Test {
 protected:
  search::ModelShape model_ = testing::PresetModel("gpt-175b");
  HardwareProfile hw_ = testing::PresetHardware("frontier-mi250x");
  search::Layout Base() const {
    search::Layout l;
    l.tp = 4;
    l.pp = 16;
    l.dp = 16;
    l.micro_batch = 1;
    l.num_micro_batches = model_.global_batch / l.dp;
    return l;
  }
};

TEST_F(ModelPhysics, MoreTensorParallelismLowersWeightMemory) {
  search::Layout a = Base(), b = Base();
  b.tp = 8;
  b.dp = 8;
  b.num_micro_batches = model_.global_batch / b.dp;
  EXPECT_LT(Predict(b, model_, hw_).memory.weights, Predict(a, model_, hw_).memory.weights);
}

TEST_F(ModelPhysics, ZeroOneShardsOptimizerStatesOverDp) {
  search::Layout a = Base(), b = Base();
  b.zero = 1;
  EXPECT_NEAR(Predict(b, model_, hw_).memory.optimizer_states * b.dp,
              Predict(a, model_, hw_).memory.optimizer_states,
              1e-6 * Predict(a, model_, hw_).memory.optimizer_states);
}

TEST_F(ModelPhysics, FullRecomputeTradesMemoryForTime) {
  search::Layout a = Base(), b = Base();
  b.recompute = search::Recompute::kFull;
  const Prediction pa = Predict(a, model_, hw_), pb = Predict(b, model_, hw_);
  EXPECT_LT(pb.memory.activations, pa.memory.activations);
  EXPECT_GT(pb.step_time_s, pa.step_time_s);
}

TEST_F(ModelPhysics, MoreMicroBatchesShrinkTheBubbleShare) {
  search::Layout a = Base(), b = Base();
  b.dp = 4;
  b.tp = 16;  // the same pp with 4x the micro-batches per pipeline
  b.num_micro_batches = model_.global_batch / b.dp;
  const Prediction pa = Predict(a, model_, hw_), pb = Predict(b, model_, hw_);
  EXPECT_LT(pb.time.bubble / pb.step_time_s, pa.time.bubble / pa.step_time_s);
}

TEST_F(ModelPhysics, ReportsConsistentThroughputFigures) {
  const Prediction p = Predict(Base(), model_, hw_);
  EXPECT_NEAR(p.tokens_per_s * p.step_time_s, static_cast<double>(model_.global_batch) * model_.seq_len,
              1e-6);
  EXPECT_NEAR(p.mfu, p.tflops_per_gpu / hw_.peak_tflops_bf16.value, 1e-12);
  EXPECT_NEAR(p.memory_bytes, p.memory.Total(), 1.0);
  EXPECT_EQ(p.fits, p.memory_bytes <= 64e9);
}

}  // namespace
}  // namespace tunepar::runner
