// Which knobs matter: Shapley values of a function of layouts (the surrogate's or the
// performance model's log throughput), with the knobs of a layout as the players.
//
// Players are the independent knobs, the rows of the knob table (base/knobs.h). dp and the
// micro-batch count are derived (from
// tp, pp and micro_batch for a fixed world and global batch), so they are not players: their
// effect is credited to the knobs that set them. A knob that does not vary (in the background
// or the explained layout) is not a player and gets nothing.
//
// Interventional value of a coalition S for the explained layout x: the mean of f over the
// background layouts z, each with S's knobs set to x's values (Janzing et al. 2020). Such a
// hybrid may not be a legal layout. Knobs whose legality depends on others are read as physics
// (search::CanonicalLayout): ZeRO-1 taken from x onto a z with one data-parallel rank shards
// nothing, so the hybrid is z's layout with zero 0; likewise sequence parallelism without tp,
// interleaving without pp, and flash in fp32. A knob then gets no credit where it cannot act,
// instead of the credit of the knobs it is only legal with (dropping such hybrids would average
// over the z that happen to share x's tp and pp, handing zero their effect). Hybrids that are
// still not legal (tp from x, pp from z may not divide the world) are left out; when none is
// legal, the mean over every legal layout that agrees with x on S stands in (x itself always
// does). On a space where every hybrid is legal this is the plain interventional value.
// Efficiency holds exactly: sum of phi = f(x) - mean of f over the background.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/knobs.h"
#include "base/layout.h"
#include "search/shapley.h"

namespace tunepar::search {

// The knobs (base/knobs.h), named here as the players.
using ::tunepar::Knob;
using ::tunepar::KnobName;
using ::tunepar::KnobValue;
using ::tunepar::NumKnobs;

struct KnobExplanation {
  std::vector<Knob> knobs;                       // the players, in Knob order
  std::vector<double> phi;                       // contribution of each player to f(x) - baseline
  std::vector<double> error;                     // standard error (0 when exact)
  std::vector<std::vector<double>> interaction;  // pairwise Shapley interaction index (exact only)
  double value = 0;                              // f(x)
  double baseline = 0;                           // mean of f over the background
  bool exact = true;
};

struct KnobImportance {
  std::vector<Knob> knobs;
  std::vector<double> mean_abs_phi;              // global importance of each knob
  std::vector<int> points;                       // the explained background points (legal indices)
  std::vector<std::vector<double>> phi;          // phi[point][knob]
  std::vector<std::vector<double>> interaction;  // mean |interaction| over the points
};

class KnobShapley {
 public:
  // f: one value per legal layout (NaN where undefined, e.g. a layout that does not fit);
  // background: indices into `legal` where f is defined.
  KnobShapley(const std::vector<Layout>& legal, std::vector<double> f, std::vector<int> background);

  // The layout legal[index] explained; exact up to `max_exact_players` players, else sampled.
  KnobExplanation Explain(int index, bool interactions = false, int max_exact_players = 12) const;

  // Every background point explained; importance = mean |phi| per knob.
  KnobImportance Global(bool interactions = false) const;

  const std::vector<int>& background() const { return background_; }

 private:
  struct Field {
    Knob knob;
    int shift;
    uint64_t mask;
  };
  uint64_t Code(Knob knob, const Layout& l) const;
  uint64_t Key(const Layout& l) const;
  // The legal layout a hybrid key runs as (CanonicalLayout); -1 when there is none.
  int Resolve(uint64_t key) const;
  std::vector<const Field*> Players(uint64_t x_key, std::vector<Knob>* knobs) const;
  double BackgroundMean() const;
  double MeanOverHybrids(const std::vector<uint64_t>& hybrid, uint64_t mask, uint64_t x_key, double fallback) const;

  std::vector<Layout> legal_;
  std::vector<double> f_;
  std::vector<int> background_;
  std::vector<Field> fields_;                                     // one per knob, in Knob order
  std::vector<std::unordered_map<std::string, uint64_t>> codes_;  // per knob: value -> code
  std::vector<std::vector<int>> knob_codes_;                      // per knob: field code -> KnobCode
  std::vector<uint64_t> keys_;                                    // per legal layout
  std::unordered_map<uint64_t, int> index_;
  int world_ = 0;
  mutable std::unordered_map<uint64_t, int> resolved_;            // hybrid key -> Resolve()
};

// Spearman rank correlation of two equally long vectors (average ranks for ties).
double SpearmanCorrelation(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace tunepar::search
