#include "base/layout.h"
#include "base/knob_support.h"

#include <gtest/gtest.h>

#include "tests/test_support.h"

namespace tunepar::search {
namespace {

Layout Example() {
  Layout l;
  l.tp = 4;
  l.pp = 16;
  l.dp = 48;
  l.micro_batch = 1;
  l.num_micro_batches = 64;
  l.precision = Precision::kBf16;
  l.zero = 1;
  l.recompute = Recompute::kFull;
  l.seq_parallel = true;
  l.virtual_stages = 2;
  l.flash_attention = true;
  return l;
}

// The key is a storage format: stores written by one version are read by the next. This pins
// the exact text; changing it is a schema change.
TEST(LayoutKey, IsPinned) {
  EXPECT_EQ(LayoutKey(Example()), "tp4-pp16-dp48-mbs1-nmb64-bf16-zero1-rcfull-sp1-vpp2-fa1");
  EXPECT_EQ(LayoutKey(Layout{}), "tp1-pp1-dp1-mbs1-nmb1-bf16-zero0-rcnone-sp0-vpp1-fa0");
  Layout l = Example();
  l.precision = Precision::kFp16;
  l.recompute = Recompute::kSelective;
  l.seq_parallel = false;
  EXPECT_EQ(LayoutKey(l), "tp4-pp16-dp48-mbs1-nmb64-fp16-zero1-rcselective-sp0-vpp2-fa1");
}

TEST(LayoutKey, RoundTrips) {
  for (Precision p : {Precision::kFp32, Precision::kFp16, Precision::kBf16}) {
    for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
      Layout l = Example();
      l.precision = p;
      l.recompute = r;
      l.tp = 8;
      l.pp = 35;
      Result<Layout> parsed = ParseLayoutKey(LayoutKey(l));
      ASSERT_TRUE(parsed.ok()) << parsed.status().message();
      EXPECT_EQ(*parsed, l);
    }
  }
}

TEST(LayoutKey, DistinguishesEveryField) {
  const Layout base = Example();
  std::vector<Layout> variants(11, base);
  variants[0].tp = 2;
  variants[1].pp = 8;
  variants[2].dp = 96;
  variants[3].micro_batch = 2;
  variants[4].num_micro_batches = 32;
  variants[5].precision = Precision::kFp32;
  variants[6].zero = 0;
  variants[7].recompute = Recompute::kNone;
  variants[8].seq_parallel = false;
  variants[9].virtual_stages = 1;
  variants[10].flash_attention = false;
  for (const Layout& v : variants) EXPECT_NE(LayoutKey(v), LayoutKey(base));
}

TEST(LayoutKey, RejectsMalformedKeys) {
  for (const char* bad : {"", "tp4", "tp4-pp16-dp48-mbs1-nmb64-bf16-zero1-rcfull-sp1-vpp2",
                          "tp0-pp16-dp48-mbs1-nmb64-bf16-zero1-rcfull-sp1-vpp2-fa1",
                          "tp4-pp16-dp48-mbs1-nmb64-bf17-zero1-rcfull-sp1-vpp2-fa1",
                          "tp4-pp16-dp48-mbs1-nmb64-bf16-zero4-rcfull-sp1-vpp2-fa1",
                          "tp4-pp16-dp48-mbs1-nmb64-bf16-zero1-rcall-sp1-vpp2-fa1",
                          "tp4-pp16-dp48-mbs1-nmb64-bf16-zero1-rcfull-sp1-vpp2-fa1-x",
                          "tpx-pp16-dp48-mbs1-nmb64-bf16-zero1-rcfull-sp1-vpp2-fa1"}) {
    Result<Layout> parsed = ParseLayoutKey(bad);
    EXPECT_FALSE(parsed.ok()) << bad;
    if (!parsed.ok()) {
      EXPECT_NE(parsed.status().message().find("malformed"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace tunepar::search

namespace tunepar {
namespace {

KnobSupport CoreLike() {
  KnobSupport core;
  core.Of(Knob::kSeqParallel) = {0};
  core.Of(Knob::kVirtualStages) = {1};
  core.Of(Knob::kFlashAttention) = {0};
  return core;
}

TEST(KnobSupport, RestrictsASpaceToWhatTheProgramRuns) {
  SpaceSpec space;
  space.Set(Knob::kSeqParallel, testing::Codes({false, true}));
  space.Set(Knob::kVirtualStages, testing::Codes({1, 2, 4}));
  space.Set(Knob::kFlashAttention, testing::Codes({true, false}));
  space.Set(Knob::kRecompute, testing::Codes({Recompute::kNone, Recompute::kSelective, Recompute::kFull}));
  const KnobSupport core = CoreLike();
  const SpaceSpec restricted = Restrict(space, core, 16);
  EXPECT_EQ(restricted.Of(Knob::kSeqParallel).codes, std::vector<int>{0});
  EXPECT_EQ(restricted.Of(Knob::kVirtualStages).codes, std::vector<int>{1});
  EXPECT_EQ(restricted.Of(Knob::kFlashAttention).codes, std::vector<int>{0});
  EXPECT_EQ(restricted.Of(Knob::kRecompute), space.Of(Knob::kRecompute));
  EXPECT_EQ(Restrict(space, KnobSupport{}, 16).Of(Knob::kVirtualStages), space.Of(Knob::kVirtualStages));  // all supported: unchanged
  // A program that tells only full recomputation apart, and runs tensor parallelism 1 only.
  KnobSupport folded;
  folded.Of(Knob::kRecompute) = {static_cast<int>(Recompute::kNone), static_cast<int>(Recompute::kFull)};
  folded.Of(Knob::kTp) = {1};
  const SpaceSpec f = Restrict(space, folded, 16);
  EXPECT_EQ(f.Of(Knob::kRecompute).codes, testing::Codes({Recompute::kNone, Recompute::kFull}));
  EXPECT_FALSE(f.Of(Knob::kTp).divisors_of_world);
  EXPECT_EQ(f.Values(Knob::kTp, 16), std::vector<int>{1});
  EXPECT_EQ(f.Values(Knob::kPp, 16), (std::vector<int>{1, 2, 4, 8, 16}));
  // Recorded in a study's settings as the allowed values (layout-key fragments), and read back.
  EXPECT_EQ(PinnedKnobs(core), "sp0 vpp1 fa0");
  EXPECT_EQ(PinnedKnobs(folded), "tp1 rcnone rcfull");
  EXPECT_EQ(PinnedKnobs(KnobSupport{}), "");
  for (const KnobSupport& s : {core, KnobSupport{}, folded}) {
    Result<KnobSupport> parsed = ParsePinnedKnobs(PinnedKnobs(s));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, s);
  }
  EXPECT_EQ(UnreceivedKnobs(core), "seq_parallel off, virtual_stages 1, flash_attention off");
  EXPECT_EQ(UnreceivedKnobs(folded), "tp 1");  // recompute is received (two values told apart)
  EXPECT_FALSE(ParsePinnedKnobs("sp0 tq8").ok());
  EXPECT_FALSE(ParsePinnedKnobs("sp2").ok());
}

TEST(KnobSupport, NamesWhatAProgramCannotRun) {
  const KnobSupport core = CoreLike();
  Layout l;
  l.tp = 2;
  EXPECT_TRUE(CheckSupported(l, core, "tunepar-core").ok());
  l.seq_parallel = true;
  l.virtual_stages = 2;
  const Status s = CheckSupported(l, core, "tunepar-core");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("tunepar-core cannot run"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("seq_parallel on, virtual_stages 2"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("flash_attention on"), std::string::npos) << s.message();
  EXPECT_TRUE(CheckSupported(l, KnobSupport{}, "a command").ok());
}

TEST(Knobs, FragmentsAndValuesRoundTrip) {
  Layout l;
  for (Knob k : Knobs()) {
    const int code = KnobCode(k, l);
    Result<std::pair<Knob, int>> parsed = ParseKnobFragment(KnobFragment(k, code));
    ASSERT_TRUE(parsed.ok()) << KnobFragment(k, code);
    EXPECT_EQ(parsed->first, k);
    EXPECT_EQ(parsed->second, code);
    EXPECT_EQ(ParseKnobValue(k, KnobValueText(k, code)).value(), code) << KnobName(k);
    EXPECT_EQ(KnobCode(k, WithKnob(l, k, code)), code);
  }
  EXPECT_EQ(ParseKnobFragment("vpp4").value().first, Knob::kVirtualStages);
  EXPECT_EQ(ParseKnobFragment("pp4").value().first, Knob::kPp);
  EXPECT_EQ(ParseKnobFragment("fp16").value().second, static_cast<int>(Precision::kFp16));
  EXPECT_EQ(ParseKnobName("vpp").value(), Knob::kVirtualStages);
  EXPECT_FALSE(ParseKnobValue(Knob::kZero, "4").ok());
  EXPECT_EQ(ParseKnobValue(Knob::kZero, "3").value(), 3);
  EXPECT_FALSE(ParseKnobValue(Knob::kTp, "0").ok());
  EXPECT_FALSE(ParseKnobName("tensor").ok());
}

}  // namespace
}  // namespace tunepar
