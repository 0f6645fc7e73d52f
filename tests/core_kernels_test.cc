// The core's building blocks, without MPI: 16-bit rounding, the row kernels' backward passes
// against finite differences (fp64 build of the core), the tracking allocator, how tensors are
// sliced over TP ranks, and the deterministic data.
#include <unistd.h>

#include <cfloat>
#include <cstdlib>
#include <cmath>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "runner/core/comm.h"
#include "runner/core/data.h"
#include "runner/core/device_cpus.h"
#include "runner/core/kernels.h"
#include "runner/core/memory.h"
#include "runner/core/ops.h"
#include "runner/core/parameters.h"

namespace tunepar::core {
namespace {

static_assert(sizeof(real) == 8, "the kernel tests link the fp64 build of the core");

// Issue 29 item 2: a GPU build's default NCCL becomes mpi-staged when a node runs more ranks than
// it has devices (NCCL refuses two ranks on one device); a mode given with --comm, the CPU build,
// and a placement with a device per rank keep theirs.
TEST(CommChoice, MoreRanksThanDevicesOnANodeStageThroughTheHost) {
  EXPECT_EQ(CommForPlacement(CommMode::kNccl, false, "cuda", 2, 1), CommMode::kMpiStaged);
  EXPECT_EQ(CommForPlacement(CommMode::kNccl, false, "hip", 16, 8), CommMode::kMpiStaged);
  EXPECT_EQ(CommForPlacement(CommMode::kNccl, false, "cuda", 8, 8), CommMode::kNccl);
  EXPECT_EQ(CommForPlacement(CommMode::kNccl, true, "cuda", 2, 1), CommMode::kNccl);  // asked: stays, refused later
  EXPECT_EQ(CommForPlacement(CommMode::kMpiDirect, false, "cuda", 2, 1), CommMode::kMpiDirect);
  EXPECT_EQ(CommForPlacement(CommMode::kMpi, false, "cpu", 4, 1), CommMode::kMpi);
  EXPECT_EQ(CommForPlacement(CommMode::kNccl, false, "cuda", 2, 0), CommMode::kNccl);  // no device: said elsewhere
}

TEST(Rounding, Bf16RoundsToNearestEvenWithEightSignificantBits) {
  EXPECT_EQ(RoundBf16(1.0f), 1.0f);
  EXPECT_EQ(RoundBf16(1.0f + 1.0f / 256), 1.0f);               // a tie: to even
  EXPECT_EQ(RoundBf16(1.0f + 3.0f / 256), 1.0f + 4.0f / 256);  // a tie: to even (up)
  EXPECT_EQ(RoundBf16(1.0f + 1.5f / 256), 1.0f + 2.0f / 256);  // above the tie
  EXPECT_EQ(RoundBf16(-3.14159f), -3.140625f);
  EXPECT_TRUE(std::isinf(RoundBf16(FLT_MAX)));  // past the largest bf16, 3.3895e38
  EXPECT_TRUE(std::isinf(RoundBf16(INFINITY)));
  EXPECT_TRUE(std::isnan(RoundBf16(NAN)));
}

TEST(Rounding, Fp16KeepsElevenSignificantBitsAndOverflowsPast65504) {
  EXPECT_EQ(RoundFp16(1.0f + 1.0f / 2048), 1.0f);  // a tie: to even
  EXPECT_EQ(RoundFp16(1.0f + 3.0f / 2048), 1.0f + 4.0f / 2048);
  EXPECT_EQ(RoundFp16(65504.0f), 65504.0f);  // the largest fp16
  EXPECT_EQ(RoundFp16(65519.0f), 65504.0f);
  EXPECT_TRUE(std::isinf(RoundFp16(65520.0f)));
  EXPECT_EQ(RoundFp16(std::ldexp(1.0f, -24)), std::ldexp(1.0f, -24));  // the smallest subnormal
  EXPECT_EQ(RoundFp16(std::ldexp(1.0f, -26)), 0.0f);
  EXPECT_EQ(RoundFp16(-0.1f), -0.0999755859375f);
}

// Central differences of f: R^n -> R at x, for comparing with an analytic gradient.
template <typename F>
std::vector<double> NumericGradient(F f, std::vector<real> x) {
  std::vector<double> g(x.size());
  const double h = 1e-6;
  for (size_t i = 0; i < x.size(); ++i) {
    const real saved = x[i];
    x[i] = saved + h;
    const double up = f(x);
    x[i] = saved - h;
    const double down = f(x);
    x[i] = saved;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

std::vector<real> Pseudorandom(size_t n, uint64_t seed, double scale = 1.0) {
  std::vector<real> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * (static_cast<double>(Mix(seed, i) % 2001) / 1000.0 - 1.0);
  return v;
}

TEST(Kernels, GeluGradientIsTheDerivative) {
  for (double x : {-3.0, -1.0, -0.1, 0.0, 0.3, 2.0}) {
    const double numeric = (Gelu(x + 1e-6) - Gelu(x - 1e-6)) / 2e-6;
    EXPECT_NEAR(GeluGrad(x), numeric, 1e-8) << x;
  }
}

TEST(Kernels, LayerNormBackwardMatchesFiniteDifferences) {
  const int C = 7;
  const std::vector<real> w = Pseudorandom(C, 1), b = Pseudorandom(C, 2), dout = Pseudorandom(C, 3);
  const std::vector<real> x = Pseudorandom(C, 4, 2.0);
  // L = dout . layernorm(x): its gradient in x is the backward pass of dout.
  auto loss = [&](const std::vector<real>& in) {
    std::vector<real> out(C);
    real mean, rstd;
    LayerNormRow(in.data(), w.data(), b.data(), out.data(), &mean, &rstd, C);
    double l = 0;
    for (int i = 0; i < C; ++i) l += dout[i] * out[i];
    return l;
  };
  std::vector<real> out(C), dx(C, 0), dw(C, 0), db(C, 0);
  real mean, rstd;
  LayerNormRow(x.data(), w.data(), b.data(), out.data(), &mean, &rstd, C);
  LayerNormRowBackward(x.data(), w.data(), mean, rstd, dout.data(), dx.data(), dw.data(), db.data(), C);
  const std::vector<double> numeric = NumericGradient(loss, x);
  for (int i = 0; i < C; ++i) EXPECT_NEAR(dx[i], numeric[i], 1e-8) << i;
  for (int i = 0; i < C; ++i) EXPECT_NEAR(db[i], dout[i], 1e-15);
}

TEST(Kernels, AttentionBackwardMatchesFiniteDifferences) {
  const int B = 1, T = 5, NH = 2, C = 6;
  const std::vector<real> qkv = Pseudorandom(static_cast<size_t>(T) * 3 * C, 5);
  const std::vector<real> dy = Pseudorandom(static_cast<size_t>(T) * C, 6);
  auto loss = [&](const std::vector<real>& in) {
    std::vector<real> y(static_cast<size_t>(T) * C), att(static_cast<size_t>(NH) * T * T);
    AttentionForward(y.data(), att.data(), in.data(), B, T, C, NH);
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += dy[i] * y[i];
    return l;
  };
  std::vector<real> y(static_cast<size_t>(T) * C), att(static_cast<size_t>(NH) * T * T), dqkv(qkv.size(), 0);
  AttentionForward(y.data(), att.data(), qkv.data(), B, T, C, NH);
  AttentionBackward(dqkv.data(), dy.data(), qkv.data(), att.data(), B, T, C, NH);
  const std::vector<double> numeric = NumericGradient(loss, qkv);
  for (size_t i = 0; i < qkv.size(); ++i) EXPECT_NEAR(dqkv[i], numeric[i], 1e-8) << i;
  // Causality: the first position's output depends on nothing after it.
  for (int i = 0; i < C; ++i) EXPECT_NEAR(y[i], qkv[2 * C + i], 1e-15);
}

TEST(Kernels, VocabularyParallelCrossEntropyEqualsTheWholeRow) {
  const int V = 12, target = 9;
  const std::vector<real> logits = Pseudorandom(V, 7, 3.0);
  // The whole row on one rank.
  const real max = RowMax(logits.data(), V);
  const real log_sum = Log(RowSumExp(logits.data(), max, V)) + max;
  std::vector<real> whole(V);
  CrossEntropyRowBackward(logits.data(), log_sum, target, 0, whole.data(), 1.0, V);
  // Split over 3 ranks of 4 rows, combined as the all-reduces would.
  real global_max = -INFINITY, sum = 0;
  for (int r = 0; r < 3; ++r) global_max = std::max(global_max, RowMax(logits.data() + 4 * r, 4));
  for (int r = 0; r < 3; ++r) sum += RowSumExp(logits.data() + 4 * r, global_max, 4);
  EXPECT_NEAR(Log(sum) + global_max, log_sum, 1e-14);
  for (int r = 0; r < 3; ++r) {
    std::vector<real> part(4);
    CrossEntropyRowBackward(logits.data() + 4 * r, log_sum, target, 4 * r, part.data(), 1.0, 4);
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(part[i], whole[4 * r + i], 1e-15);
  }
  double total = 0;
  for (real g : whole) total += g;
  EXPECT_NEAR(total, 0.0, 1e-14);  // softmax - onehot sums to zero
}

TEST(TrackingAllocator, CountsStorageBytesPerCategoryAndRefusesPastTheCap) {
  TrackingAllocator a(1000);
  {
    Buffer w(a, MemoryCategory::kWeights, 100, 2.0);  // 16-bit: 200 bytes
    Buffer g(a, MemoryCategory::kGradients, 100, 4.0);
    EXPECT_EQ(a.in_use(), 600);
    try {
      Buffer big(a, MemoryCategory::kActivations, 101, 4.0);
      ADD_FAILURE() << "no OutOfMemory";
    } catch (const OutOfMemory& e) {
      EXPECT_EQ(e.category(), MemoryCategory::kActivations);
      EXPECT_NE(std::string(e.what()).find("activations"), std::string::npos);
    }
    Buffer fits(a, MemoryCategory::kActivations, 100, 4.0);
    EXPECT_EQ(a.in_use(), 1000);
  }
  EXPECT_EQ(a.in_use(), 0);
  EXPECT_EQ(a.peak(), 1000);
  EXPECT_EQ(a.peak_by_category()[static_cast<int>(MemoryCategory::kWeights)], 200);
  EXPECT_EQ(a.peak_by_category()[static_cast<int>(MemoryCategory::kActivations)], 400);
}

// Issue 29, bad input "more ranks than the devices can take even staged": each rank on a shared
// GPU gets its share of the device's memory, not the whole device, so too many ranks end as an
// out-of-memory trial that names the sharing (never a device allocation failing mid-step).
TEST(DeviceShare, RanksOnOneDeviceSplitItsMemoryAndTheOomSaysSo) {
  const double gb = 1e9;
  EXPECT_EQ(ShareOfDevice(80 * gb, 141 * gb, 1, "cuda:0").cap_bytes, 80 * gb);  // the profile's cap fits
  EXPECT_EQ(ShareOfDevice(80 * gb, 141 * gb, 1, "cuda:0").why, "");
  const DeviceShare two = ShareOfDevice(80 * gb, 141 * gb, 2, "cuda:0");
  EXPECT_EQ(two.cap_bytes, 70.5 * gb);
  EXPECT_EQ(two.why, "2 ranks share cuda:0 (141.0 GB): 70.5 GB each");
  EXPECT_EQ(ShareOfDevice(80 * gb, 40 * gb, 1, "cuda:0").cap_bytes, 40 * gb);  // a smaller device than the profile's
  EXPECT_EQ(ShareOfDevice(0, 141 * gb, 8, "cuda:0").cap_bytes, 141 * gb / 8);   // no cap asked: the share still holds
  EXPECT_EQ(ShareOfDevice(5 * gb, 0, 8, "cpu:0").cap_bytes, 5 * gb);            // the host: no device bound
  TrackingAllocator a(two.cap_bytes / 1e9 * 1000, two.why);  // the same share, scaled to a test's bytes: 70.5 kB
  try {
    Buffer big(a, MemoryCategory::kWeights, 20000, 4.0);  // 80 kB
    ADD_FAILURE() << "no OutOfMemory";
  } catch (const OutOfMemory& e) {
    EXPECT_NE(std::string(e.what()).find("(2 ranks share cuda:0 (141.0 GB): 70.5 GB each)"), std::string::npos)
        << e.what();
  }
}

// Issue 29 item 2: each GPU rank on its share of the CPUs near its device, as sysfs lists them.
TEST(DeviceCpus, CpuListsParseAndPrintAsSysfsWritesThem) {
  EXPECT_EQ(ParseCpuList("0-3,8,10-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(CpuListText({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_TRUE(ParseCpuList("").empty());
  EXPECT_TRUE(ParseCpuList("ff,ffffffff").empty());  // a mask, not a list
  EXPECT_TRUE(ParseCpuList("1-").empty());
}

TEST(DeviceCpus, RanksNearOneDomainSplitItsCpusInLocalRankOrder) {
  const std::vector<int> socket0 = ParseCpuList("0-23"), socket1 = ParseCpuList("24-47");
  // Four GPUs, two per socket; ranks 0-3 on devices 0-3.
  const std::vector<std::vector<int>> node = {socket0, socket0, socket1, socket1};
  EXPECT_EQ(CpuListText(ShareOfNearCpus(node, 0, {})), "0-11");
  EXPECT_EQ(CpuListText(ShareOfNearCpus(node, 1, {})), "12-23");
  EXPECT_EQ(CpuListText(ShareOfNearCpus(node, 2, {})), "24-35");
  EXPECT_EQ(CpuListText(ShareOfNearCpus(node, 3, {})), "36-47");
  // One rank per domain takes all of it; more ranks than CPUs still get one each.
  EXPECT_EQ(CpuListText(ShareOfNearCpus({socket0, socket1}, 1, {})), "24-47");
  const std::vector<std::vector<int>> crowded(4, std::vector<int>{6, 7});
  EXPECT_EQ(CpuListText(ShareOfNearCpus(crowded, 3, {})), "7");
  EXPECT_EQ(CpuListText(ShareOfNearCpus(crowded, 0, {})), "6");
  // Within what the rank may run on; nothing to bind when the device says nothing.
  EXPECT_EQ(CpuListText(ShareOfNearCpus(node, 1, ParseCpuList("0-15"))), "12-15");
  EXPECT_TRUE(ShareOfNearCpus(node, 2, ParseCpuList("0-15")).empty());
  EXPECT_TRUE(ShareOfNearCpus({{}, socket0}, 0, {}).empty());
}

TEST(DeviceCpus, SysfsNamesTheCpusNearAPciDevice) {
  const std::string root = ::testing::TempDir() + "/sysfs-" + std::to_string(::getpid());
  const std::string dir = root + "/bus/pci/devices/0000:3b:00.0";
  ASSERT_EQ(std::system(("mkdir -p '" + dir + "' && echo 0-11,48-59 > '" + dir + "/local_cpulist'").c_str()), 0);
  EXPECT_EQ(CpuListText(CpusNearPciDevice(root, "0000:3B:00.0")), "0-11,48-59");
  EXPECT_EQ(CpuListText(CpusNearPciDevice(root, "00000000:3B:00.0")), "0-11,48-59");  // CUDA's 8-digit domain
  EXPECT_TRUE(CpusNearPciDevice(root, "0000:af:00.0").empty());
  EXPECT_TRUE(CpusNearPciDevice(root, "").empty());
  EXPECT_TRUE(CpusNearPciDevice(root, "../../etc").empty());
}

TEST(Parameters, TpSlicesPartitionEveryTensor) {
  const ModelDims d{4, 64, 4, 32, 256, 256, false};
  for (int tp : {1, 2, 4}) {
    const ParameterLayout whole = LayoutParameters(d, ShardOf(d, 1, 0, EvenSplit(d.L, 1), 0));
    std::map<std::string, std::multiset<int64_t>> seen;
    for (int r = 0; r < tp; ++r) {
      const ParameterLayout p = LayoutParameters(d, ShardOf(d, tp, r, EvenSplit(d.L, 1), 0));
      for (const TensorSpec& t : p.tensors) {
        if (t.tp_replicated && r > 0) continue;
        for (int64_t i = 0; i < t.size; ++i) seen[t.name].insert(t.GlobalIndex(i));
      }
    }
    for (const TensorSpec& t : whole.tensors) {
      const std::multiset<int64_t>& s = seen[t.name];
      ASSERT_EQ(static_cast<int64_t>(s.size()), t.size) << t.name << " tp " << tp;
      EXPECT_EQ(std::set<int64_t>(s.begin(), s.end()).size(), s.size()) << t.name << " tp " << tp;
      EXPECT_EQ(*s.begin(), 0);
      EXPECT_EQ(*s.rbegin(), t.size - 1);
    }
  }
}

TEST(Parameters, QkvSliceHoldsItsHeadsOfQKAndV) {
  const ModelDims d{2, 8, 4, 4, 16, 32, true};
  const ParameterLayout p = LayoutParameters(d, ShardOf(d, 2, 1, EvenSplit(d.L, 1), 0));
  const TensorSpec& qkv = p.tensors[2 + 2];  // wte, wpe, ln1.w, ln1.b, qkv.w
  ASSERT_EQ(qkv.name, "h0.qkv.w");
  // Rank 1 of 2 holds rows 4..7 of Q, K and V: global rows 4-7, 12-15, 20-23.
  EXPECT_EQ(qkv.GlobalIndex(0), 4 * 8);
  EXPECT_EQ(qkv.GlobalIndex(4 * 8), 12 * 8);
  EXPECT_EQ(qkv.GlobalIndex(8 * 8 + 3), 20 * 8 + 3);
}

TEST(Parameters, StagesSplitTheLayersAndTheEnds) {
  const ModelDims d{5, 8, 2, 4, 16, 32, true};
  int layers = 0;
  for (int s = 0; s < 3; ++s) {
    const Shard shard = ShardOf(d, 1, 0, EvenSplit(d.L, 3), s);
    EXPECT_EQ(shard.first_layer, layers);
    EXPECT_EQ(shard.num_layers, s < 2 ? 2 : 1);  // earlier stages take the extra layers
    layers += shard.num_layers;
    EXPECT_EQ(shard.has_embedding, s == 0);
    EXPECT_EQ(shard.has_head, s == 2);
  }
  EXPECT_EQ(layers, 5);
  // Tied embeddings over stages: the last stage holds a copy, initialised identically.
  const ParameterLayout last = LayoutParameters(d, ShardOf(d, 1, 0, EvenSplit(d.L, 3), 2));
  EXPECT_TRUE(last.tensors.back().tied_copy);
  EXPECT_EQ(last.tensors.back().name, "wte");
  const ParameterLayout first = LayoutParameters(d, ShardOf(d, 1, 0, EvenSplit(d.L, 3), 0));
  EXPECT_EQ(InitialValue(first.tensors[0], 17, 99), InitialValue(last.tensors.back(), 17, 99));
}

// An uneven split (base/pipeline_split.h): each stage holds its count, after the stages before it.
TEST(Parameters, StagesHoldTheirCountOfAnUnevenSplit) {
  const ModelDims d{7, 8, 2, 4, 16, 32, true};
  const StageSplit split{{3, 3, 1}};
  const std::vector<int> first_layers = {0, 3, 6};
  for (int s = 0; s < 3; ++s) {
    const Shard shard = ShardOf(d, 1, 0, split, s);
    EXPECT_EQ(shard.first_layer, first_layers[s]) << "stage " << s;
    EXPECT_EQ(shard.num_layers, split.layers[s]) << "stage " << s;
    const ParameterLayout p = LayoutParameters(d, shard, 2);  // FSDP units: one per block
    EXPECT_EQ(static_cast<int>(p.blocks.size()), split.layers[s]);
    EXPECT_EQ(p.tensors[s == 0 ? 2 : 0].name, "h" + std::to_string(first_layers[s]) + ".ln1.w");
  }
}

TEST(Data, SamplesAreDeterministicAndStructured) {
  const TokenSource a = TokenSource::Synthetic(1024, 5), b = TokenSource::Synthetic(1024, 5);
  std::vector<int> x(129), y(129), z(129);
  a.Sample(12345, 129, x.data());
  b.Sample(12345, 129, y.data());
  a.Sample(12346, 129, z.data());
  EXPECT_EQ(x, y);
  EXPECT_NE(x, z);
  for (int t : x) {
    EXPECT_GE(t, 0);
    EXPECT_LT(t, 1024);
  }
  EXPECT_NEAR(a.EntropyRate(), 2.456, 0.01);  // nats: far below log(1024) = 6.93
}

}  // namespace
}  // namespace tunepar::core
