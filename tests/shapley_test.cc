// Shapley values: the axioms on known functions, and the knob explanation of layouts.
#include "search/shapley.h"

#include <bit>
#include <cmath>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "search/knob_shapley.h"
#include "search/space.h"

namespace tunepar::search {
namespace {

// A random set function over d players (values per coalition).
std::vector<double> RandomGame(int d, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n;
  std::vector<double> v(1u << d);
  for (double& x : v) x = n(rng);
  return v;
}

TEST(Shapley, EfficiencyHoldsToRoundoff) {
  for (int d : {1, 3, 7, 12}) {
    const std::vector<double> v = RandomGame(d, d);
    const ShapleyResult r = ExactShapley(d, [&](uint32_t s, int) { return v[s]; });
    double sum = 0;
    for (double phi : r.phi) sum += phi;
    EXPECT_NEAR(sum, v.back() - v.front(), 1e-9) << d;
  }
}

TEST(Shapley, GrayCodeVisitsEveryCoalitionFlippingOnePlayer) {
  const int d = 6;
  std::vector<int> seen(1u << d, 0);
  uint32_t previous = 0;
  ExactShapley(d, [&](uint32_t s, int flipped) {
    ++seen[s];
    if (flipped >= 0) {
      EXPECT_EQ(s ^ previous, 1u << flipped);
    }
    previous = s;
    return 0.0;
  });
  for (int count : seen) EXPECT_EQ(count, 1);
}

TEST(Shapley, SymmetryDummyAndAdditivity) {
  const int d = 5;
  // Players 0 and 1 are symmetric; player 4 is a dummy; players 2, 3 add their own terms.
  auto v = [](uint32_t s, int) {
    const int both = ((s & 1u) != 0) + ((s & 2u) != 0);
    return 1.5 * both * both + ((s & 4u) ? 0.7 : 0.0) + ((s & 8u) ? -0.3 : 0.0);
  };
  const ShapleyResult r = ExactShapley(d, v);
  EXPECT_NEAR(r.phi[0], r.phi[1], 1e-12);
  EXPECT_NEAR(r.phi[4], 0.0, 1e-12);
  EXPECT_NEAR(r.phi[2], 0.7, 1e-12);  // an additive term is credited exactly
  EXPECT_NEAR(r.phi[3], -0.3, 1e-12);
  EXPECT_NEAR(r.phi[0] + r.phi[1], 6.0, 1e-12);
}

TEST(Shapley, InteractionIndexFindsThePairThatInteracts) {
  // v = a b (players 0 and 1 interact), + c alone.
  const ShapleyResult r = ExactShapley(
      4, [](uint32_t s, int) { return ((s & 1u) && (s & 2u) ? 2.0 : 0.0) + ((s & 4u) ? 1.0 : 0.0); }, true);
  EXPECT_NEAR(r.interaction[0][1], 2.0, 1e-12);
  EXPECT_NEAR(r.interaction[0][2], 0.0, 1e-12);
  EXPECT_NEAR(r.interaction[2][3], 0.0, 1e-12);
  EXPECT_NEAR(r.interaction[1][0], r.interaction[0][1], 1e-15);
}

TEST(Shapley, SamplingAgreesWithTheExactValuesWithinItsError) {
  const int d = 10;
  const std::vector<double> v = RandomGame(d, 99);
  const ShapleyResult exact = ExactShapley(d, [&](uint32_t s, int) { return v[s]; });
  const ShapleyResult sampled = SampledShapley(
      d, [&](uint32_t s, int) { return v[s]; }, 4000, 7);
  int within = 0;
  for (int i = 0; i < d; ++i) {
    EXPECT_GT(sampled.error[i], 0.0);
    if (std::abs(sampled.phi[i] - exact.phi[i]) <= 3 * sampled.error[i]) ++within;
  }
  EXPECT_GE(within, d - 1);  // 3 standard errors: all but a rare one
  double sum = 0;
  for (double phi : sampled.phi) sum += phi;
  EXPECT_NEAR(sum, v.back() - v.front(), 1e-9);  // antithetic orders keep efficiency exactly
}

// Layouts varying in tp, micro_batch and precision (a full product: every hybrid is legal).
std::vector<Layout> ProductSpace() {
  std::vector<Layout> legal;
  for (int tp : {1, 2, 4}) {
    for (int mbs : {1, 2, 4, 8}) {
      for (Precision p : {Precision::kBf16, Precision::kFp16}) {
        Layout l;
        l.tp = tp;
        l.micro_batch = mbs;
        l.precision = p;
        legal.push_back(l);
      }
    }
  }
  return legal;
}

std::vector<int> All(size_t n) {
  std::vector<int> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<int>(i);
  return v;
}

double G(const Layout& l) {
  return 0.3 * std::log2(l.tp) - 0.05 * std::pow(std::log2(l.micro_batch) - 2, 2);
}

TEST(KnobShapley, AdditiveFunctionGetsItsCentredComponentsExactly) {
  const std::vector<Layout> legal = ProductSpace();
  std::vector<double> f;
  for (const Layout& l : legal) f.push_back(G(l) + (l.precision == Precision::kFp16 ? 0.1 : 0.0));
  const KnobShapley shap(legal, f, All(legal.size()));
  // Centred components over the (uniform product) background.
  double mean_tp = 0, mean_mbs = 0;
  for (const Layout& l : legal) {
    mean_tp += 0.3 * std::log2(l.tp) / legal.size();
    mean_mbs += -0.05 * std::pow(std::log2(l.micro_batch) - 2, 2) / legal.size();
  }
  for (size_t i = 0; i < legal.size(); ++i) {
    const KnobExplanation e = shap.Explain(static_cast<int>(i));
    ASSERT_EQ(e.knobs.size(), 3u);  // tp, micro_batch, precision
    const Layout& l = legal[i];
    EXPECT_NEAR(e.phi[0], 0.3 * std::log2(l.tp) - mean_tp, 1e-12);
    EXPECT_NEAR(e.phi[1], -0.05 * std::pow(std::log2(l.micro_batch) - 2, 2) - mean_mbs, 1e-12);
    EXPECT_NEAR(e.phi[2], (l.precision == Precision::kFp16 ? 0.1 : 0.0) - 0.05, 1e-12);
  }
}

TEST(KnobShapley, AnIgnoredKnobGetsZeroAndConstantKnobsAreNotPlayers) {
  const std::vector<Layout> legal = ProductSpace();
  std::vector<double> f;
  for (const Layout& l : legal) f.push_back(G(l));  // precision ignored
  const KnobShapley shap(legal, f, All(legal.size()));
  const KnobExplanation e = shap.Explain(5);
  ASSERT_EQ(e.knobs.size(), 3u);
  EXPECT_EQ(e.knobs[2], Knob::kPrecision);
  EXPECT_NEAR(e.phi[2], 0.0, 1e-12);
  for (Knob k : e.knobs) EXPECT_NE(k, Knob::kPp);  // pp never varies: not a player
  const KnobImportance g = shap.Global();
  ASSERT_EQ(g.knobs.size(), 3u);
  EXPECT_NEAR(g.mean_abs_phi[2], 0.0, 1e-12);
  EXPECT_GT(g.mean_abs_phi[0], g.mean_abs_phi[1]);  // tp matters more than micro_batch here
}

TEST(KnobShapley, SymmetricKnobsGetEqualValues) {
  // f depends on tp and micro_batch only through their product, with matching value sets.
  std::vector<Layout> legal;
  for (int tp : {1, 2, 4}) {
    for (int mbs : {1, 2, 4}) {
      Layout l;
      l.tp = tp;
      l.micro_batch = mbs;
      legal.push_back(l);
    }
  }
  std::vector<double> f;
  for (const Layout& l : legal) f.push_back(std::log2(l.tp * l.micro_batch) * 0.5);
  const KnobShapley shap(legal, f, All(legal.size()));
  for (size_t i = 0; i < legal.size(); ++i) {
    if (legal[i].tp != legal[i].micro_batch) continue;
    const KnobExplanation e = shap.Explain(static_cast<int>(i));
    EXPECT_NEAR(e.phi[0], e.phi[1], 1e-12);
  }
}

TEST(KnobShapley, EfficiencyHoldsWhenHybridsAreIllegal) {
  // A constrained space: tp x micro_batch <= 8 (as a memory limit would), plus an undefined point.
  std::vector<Layout> legal;
  for (const Layout& l : ProductSpace()) {
    if (l.tp * l.micro_batch <= 8) legal.push_back(l);
  }
  std::vector<double> f;
  for (const Layout& l : legal) f.push_back(G(l) + 0.2 * (l.precision == Precision::kBf16) * std::log2(l.tp));
  f[3] = NAN;
  std::vector<int> background;
  for (size_t i = 0; i < legal.size(); ++i) {
    if (std::isfinite(f[i])) background.push_back(static_cast<int>(i));
  }
  const KnobShapley shap(legal, f, background);
  for (int i : background) {
    const KnobExplanation e = shap.Explain(i, true);
    double sum = 0;
    for (double phi : e.phi) sum += phi;
    EXPECT_NEAR(sum, e.value - e.baseline, 1e-9);
  }
}

// A world of 8: tp in {1, 2, 4, 8}, dp = 8 / tp, and ZeRO-1, which needs dp > 1, so never
// together with tp 8. f depends on tp only: zero must get nothing, though the hybrids that take
// zero 1 from x and tp 8 from the background are not legal layouts.
TEST(KnobShapley, AKnobLegalOnlyWithAnotherDoesNotReceiveItsEffect) {
  std::vector<Layout> legal;
  for (int tp : {1, 2, 4, 8}) {
    for (int zero : {0, 1}) {
      Layout l;
      l.tp = tp;
      l.dp = 8 / tp;
      l.zero = zero;
      if (CanonicalLayout(l) == l) legal.push_back(l);
    }
  }
  ASSERT_EQ(legal.size(), 7u);
  std::vector<double> f;
  for (const Layout& l : legal) f.push_back(0.5 * std::log(l.tp));
  const KnobShapley shap(legal, f, All(legal.size()));
  for (size_t i = 0; i < legal.size(); ++i) {
    const KnobExplanation e = shap.Explain(static_cast<int>(i));
    ASSERT_EQ(e.knobs.size(), 2u);
    EXPECT_EQ(e.knobs[1], Knob::kZero);
    EXPECT_LT(std::abs(e.phi[1]), 0.005) << LayoutKey(legal[i]);
    EXPECT_NEAR(e.phi[0] + e.phi[1], e.value - e.baseline, 1e-9);
  }
}

// Where every hybrid is legal, the values are the plain interventional Shapley values, computed
// here from their definition (a non-additive function, every coalition, every background point).
TEST(KnobShapley, OnAnUnconstrainedSpaceTheValuesAreThePlainOnes) {
  const std::vector<Layout> legal = ProductSpace();
  auto g = [](const Layout& l) {
    return G(l) + 0.15 * std::log2(l.tp) * (l.precision == Precision::kBf16) * std::log2(l.micro_batch);
  };
  std::vector<double> f;
  for (const Layout& l : legal) f.push_back(g(l));
  const std::vector<int> background = {0, 3, 7, 10, 13, 18, 22};
  const KnobShapley shap(legal, f, background);
  for (int x : {2, 9, 17, 23}) {
    const KnobExplanation e = shap.Explain(x);
    ASSERT_EQ(e.knobs.size(), 3u);
    auto hybrid = [&](const Layout& z, uint32_t s) {
      Layout h = z;
      if (s & 1u) h.tp = legal[x].tp;
      if (s & 2u) h.micro_batch = legal[x].micro_batch;
      if (s & 4u) h.precision = legal[x].precision;
      return h;
    };
    auto v = [&](uint32_t s) {
      double sum = 0;
      for (int z : background) sum += g(hybrid(legal[z], s));
      return sum / background.size();
    };
    for (int p = 0; p < 3; ++p) {
      double phi = 0;
      for (uint32_t s = 0; s < 8; ++s) {
        if (s & (1u << p)) continue;
        const int size = std::popcount(s);
        const double weight = (size == 0 ? 2.0 : size == 1 ? 1.0 : 2.0) / 6.0;  // |S|! (2-|S|)! / 3!
        phi += weight * (v(s | (1u << p)) - v(s));
      }
      EXPECT_NEAR(e.phi[p], phi, 1e-12) << p;
    }
  }
}

TEST(Spearman, RankCorrelation) {
  EXPECT_NEAR(SpearmanCorrelation({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0, 1e-12);
  EXPECT_NEAR(SpearmanCorrelation({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0, 1e-12);
  EXPECT_NEAR(SpearmanCorrelation({1, 2, 2, 3}, {1, 2, 2, 3}), 1.0, 1e-12);
}

}  // namespace
}  // namespace tunepar::search
