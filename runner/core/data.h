// Training data, deterministic per global sample index, so that every layout sees the same
// samples in a step whatever its data-parallel size and micro-batching:
//   global batch of step s = samples [s GBS, (s + 1) GBS); replica d, micro-batch j takes the
//   B samples starting at s GBS + (d M + j) B (M micro-batches per replica).
// Sources: a synthetic token stream with learnable structure (a sparse Markov chain: each token
// has 4 likely successors, and 1 token in 8 is uniform noise, so the loss can fall from log V
// to the chain's entropy rate, EntropyRate(): 2.46 nats for V = 1024), or the bytes of a text
// file (V >= 256).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace tunepar::core {

class TokenSource {
 public:
  static TokenSource Synthetic(int vocab, uint64_t seed);
  static Result<TokenSource> TextFile(const std::string& path, int vocab, uint64_t seed);

  // Tokens [0, length) of sample `index`: inputs are tokens 0..T-1, targets 1..T.
  void Sample(int64_t index, int length, int* tokens) const;
  // The lowest expected loss a model can reach on the synthetic stream (nats per token):
  // -sum p log p of the next-token distribution (successor collisions ignored); 0 for text.
  double EntropyRate() const;

 private:
  int vocab_ = 0;
  uint64_t seed_ = 0;
  std::vector<int> successors_;  // synthetic: 4 per token
  std::vector<uint8_t> text_;    // text file
};

}  // namespace tunepar::core
