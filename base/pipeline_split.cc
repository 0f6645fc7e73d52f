#include "base/pipeline_split.h"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>

#include "base/flops.h"

namespace tunepar {

int StageSplit::Most() const { return *std::max_element(layers.begin(), layers.end()); }

bool StageSplit::Even() const {
  return std::all_of(layers.begin(), layers.end(), [&](int n) { return n == layers.front(); });
}

std::string StageSplit::Text() const {
  if (layers.empty()) return "no split";
  if (Even()) return fmt::format("{} x {}", Stages(), First());
  if (Stages() == 2) return fmt::format("{} + {}", First(), Last());
  const std::vector<int> middle(layers.begin() + 1, layers.end() - 1);
  const bool equal_middle = std::all_of(middle.begin(), middle.end(), [&](int n) { return n == middle.front(); });
  if (!equal_middle) {
    std::string text;
    for (int n : layers) text += (text.empty() ? "" : " + ") + std::to_string(n);
    return text;
  }
  const std::string mid = middle.size() == 1 ? std::to_string(middle.front())
                                             : fmt::format("{} x {}", middle.size(), middle.front());
  return fmt::format("{} + {} + {}", First(), mid, Last());
}

StageSplit EvenSplit(int layers, int pp) {
  StageSplit split;
  const int base = layers / pp, extra = layers % pp;
  for (int stage = 0; stage < pp; ++stage) split.layers.push_back(base + (stage < extra ? 1 : 0));
  return split;
}

namespace {

// The split's forward work per stage, and the search for the best (first, last) around a middle
// count. Candidates compare as (most loaded stage's work, first, last): the least work, then the
// fewest layers first, then last.
struct SplitSearch {
  double layer = 0;      // one layer's forward FLOPs
  EndsFlops ends;        // the first and last stage's extra work
  int total = 0, middles = 0;
  std::tuple<double, int, int> best{0.0, 0, 0};
  bool found = false;

  // The best split found: first, the middles sharing the rest, last.
  StageSplit Split() const {
    const auto [most, first, last] = best;
    StageSplit split;
    split.layers.push_back(first);
    for (int stage = 0; stage < middles; ++stage) split.layers.push_back((total - first - last) / middles);
    split.layers.push_back(last);
    return split;
  }
  void Consider(int first, int last, int middle) {
    const double most = std::max({first * layer + ends.first, last * layer + ends.last, middle * layer});
    const std::tuple<double, int, int> candidate{most, first, last};
    if (!found || candidate < best) best = candidate, found = true;
  }
  // Every (first, last) with this middle count that could match the best: candidates whose
  // most loaded stage exceeds the best so far are skipped, never ties.
  void ScanMiddle(int middle) {
    const int rest = total - middles * middle;  // first + last
    if (rest < 2) return;
    const double bound = std::get<0>(best);
    if (found && (middle * layer > bound || (rest * layer + ends.first + ends.last) / 2 > bound * (1 + 1e-12))) return;
    // last * layer + ends.last <= bound needs last <= (bound - ends.last) / layer (one spare).
    const int first_from = found ? std::max(1, rest - static_cast<int>((bound - ends.last) / layer) - 1) : 1;
    for (int first = first_from; first < rest; ++first) {
      if (found && first * layer + ends.first > std::get<0>(best)) break;
      Consider(first, rest - first, middle);
    }
  }
};

}  // namespace

StageSplit UnevenSplit(const ModelShape& model, int pp) {
  if (pp < 2 || model.layers < pp) return {};
  SplitSearch search{LayerForwardFlops(model), EndsForwardFlops(model), model.layers, pp - 2};
  const int total = model.layers, middles = pp - 2;
  // Seed the bound with a near-even split, then scan every middle count (none with two stages).
  const int seed_middle = middles == 0 ? 0 : total / pp, seed_rest = total - middles * seed_middle;
  search.Consider(seed_rest / 2, seed_rest - seed_rest / 2, seed_middle);
  if (middles == 0) {
    search.ScanMiddle(0);
  } else {
    for (int middle = 1; middles * middle <= total - 2; ++middle) search.ScanMiddle(middle);
  }
  return search.Split();
}

// The exhaustive search the rule is defined by (tests compare UnevenSplit with it).
StageSplit UnevenSplitByEveryCandidate(const ModelShape& model, int pp) {
  if (pp < 2 || model.layers < pp) return {};
  SplitSearch search{LayerForwardFlops(model), EndsForwardFlops(model), model.layers, pp - 2};
  const int total = model.layers, middles = pp - 2;
  for (int first = 1; first < total; ++first) {
    for (int last = 1; first + last <= total; ++last) {
      const int rest = total - first - last;
      if (middles == 0 ? rest != 0 : (rest % middles != 0 || rest / middles < 1)) continue;
      search.Consider(first, last, middles == 0 ? 0 : rest / middles);
    }
  }
  return search.Split();
}

StageSplit SplitLayers(const ModelShape& model, int pp, bool uneven) {
  if (uneven && pp > 1) return UnevenSplit(model, pp);
  return EvenSplit(model.layers, pp);
}

}  // namespace tunepar
