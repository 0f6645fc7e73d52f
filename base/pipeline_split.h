// How a model's layers are split over pipeline stages: one home for the rule, read by the
// legality rules, the performance model, the command configs' placeholders and tunepar-core.
//
// Even (uneven_stages off): every stage holds layers / pp (when pp does not divide the layers,
// which the tuner's rules exclude, the first layers % pp stages hold one more, as tunepar-core
// has always run such a split).
//
// Uneven (uneven_stages on, pp > 1): Megatron-LM's rule, `--decoder-first-pipeline-num-layers F
// --decoder-last-pipeline-num-layers L`: the first stage holds F layers, the last L, the middle
// pp - 2 stages share the rest equally (Megatron-Core's TransformerConfig asserts the rest
// divides by pp - 2). Of the splits with F, L >= 1 it takes the one whose most loaded stage
// carries the least forward work, counted in FLOPs (base/flops.h) with the embedding charged to
// the first stage (a ViT's patch embedding; a token lookup costs nothing) and the head to the
// last (the LM head's logits); ties go to the fewest layers on the first stage (it holds the
// most activations in flight under 1F1B), then on the last. Llama 3 405B (126 layers, 16
// stages) gets 7 + 14 x 8 + 7, the split Meta describes ("one Transformer layer fewer on the
// first and the last stage", Llama 3 paper section 3.3.2).
#pragma once

#include <string>
#include <vector>

#include "base/model_shape.h"

namespace tunepar {

struct StageSplit {
  std::vector<int> layers;  // per stage, first to last

  int Stages() const { return static_cast<int>(layers.size()); }
  int First() const { return layers.front(); }
  int Last() const { return layers.back(); }
  int Most() const;
  bool Even() const;  // every stage holds the same count
  // "7 + 14 x 8 + 7", "4 x 8", "9 + 7": how predict and reports say it.
  std::string Text() const;
};

// The even split of `layers` over `pp` stages.
StageSplit EvenSplit(int layers, int pp);
// The uneven rule's split, or an empty split (no stages) when none exists (fewer layers than
// stages, or pp 1).
StageSplit UnevenSplit(const ModelShape& model, int pp);
// The same by trying every (first, last) pair: the rule's definition, for tests (quadratic in the
// layers, where UnevenSplit prunes what cannot win).
StageSplit UnevenSplitByEveryCandidate(const ModelShape& model, int pp);
// The split a layout runs: uneven when `uneven` and pp > 1, else even.
StageSplit SplitLayers(const ModelShape& model, int pp, bool uneven);

}  // namespace tunepar
