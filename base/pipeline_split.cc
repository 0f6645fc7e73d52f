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

StageSplit UnevenSplit(const ModelShape& model, int pp) {
  if (pp < 2 || model.layers < pp) return {};
  const double layer = LayerForwardFlops(model);
  const EndsFlops ends = EndsForwardFlops(model);
  const int total = model.layers, middles = pp - 2;
  // (most loaded stage's work, first, last) of the best split so far, compared in that order.
  std::tuple<double, int, int> best{0.0, 0, 0};
  bool found = false;
  for (int first = 1; first < total; ++first) {
    for (int last = 1; first + last <= total; ++last) {
      const int rest = total - first - last;
      if (middles == 0 ? rest != 0 : (rest % middles != 0 || rest / middles < 1)) continue;
      const double middle = middles == 0 ? 0.0 : rest / middles * layer;
      const double most = std::max({first * layer + ends.first, last * layer + ends.last, middle});
      const std::tuple<double, int, int> candidate{most, first, last};
      if (!found || candidate < best) best = candidate, found = true;
    }
  }
  if (!found) return {};
  StageSplit split;
  const auto [most, first, last] = best;
  split.layers.push_back(first);
  for (int stage = 0; stage < middles; ++stage) split.layers.push_back((total - first - last) / middles);
  split.layers.push_back(last);
  return split;
}

StageSplit SplitLayers(const ModelShape& model, int pp, bool uneven) {
  if (uneven && pp > 1) return UnevenSplit(model, pp);
  return EvenSplit(model.layers, pp);
}

}  // namespace tunepar
