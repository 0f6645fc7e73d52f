#include "runner/core/data.h"

#include <cmath>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "runner/core/parameters.h"

namespace tunepar::core {

TokenSource TokenSource::Synthetic(int vocab, uint64_t seed) {
  TokenSource s;
  s.vocab_ = vocab;
  s.seed_ = seed;
  s.successors_.resize(static_cast<size_t>(vocab) * 4);
  for (size_t i = 0; i < s.successors_.size(); ++i)
    s.successors_[i] = static_cast<int>(Mix(seed ^ 0x5eed, i) % vocab);
  return s;
}

Result<TokenSource> TokenSource::TextFile(const std::string& path, int vocab, uint64_t seed) {
  if (vocab < 256)
    return InvalidArgument(
        fmt::format("--data {}: byte-level text needs vocab >= 256, the model has {}", path, vocab));
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument(fmt::format("--data {}: cannot read the file", path));
  TokenSource s;
  s.vocab_ = vocab;
  s.seed_ = seed;
  s.text_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (s.text_.size() < 4096)
    return InvalidArgument(
        fmt::format("--data {}: {} bytes is too short (4096 at least)", path, s.text_.size()));
  return s;
}

void TokenSource::Sample(int64_t index, int length, int* tokens) const {
  const uint64_t sample = Mix(seed_, static_cast<uint64_t>(index));
  if (!text_.empty()) {
    const uint64_t span = text_.size() - static_cast<uint64_t>(length);
    const uint64_t start = span == 0 ? 0 : sample % span;
    for (int t = 0; t < length; ++t) tokens[t] = text_[start + t];
    return;
  }
  int token = static_cast<int>(sample % vocab_);
  for (int t = 0; t < length; ++t) {
    tokens[t] = token;
    const uint64_t r = Mix(sample, static_cast<uint64_t>(t));
    token = (r & 7) == 0 ? static_cast<int>((r >> 8) % vocab_)
                         : successors_[static_cast<size_t>(token) * 4 + ((r >> 3) & 3)];
  }
}

double TokenSource::EntropyRate() const {
  if (!text_.empty()) return 0;
  const double noise = 1.0 / (8.0 * vocab_), likely = 7.0 / 32.0 + noise;
  return -4 * likely * std::log(likely) - (vocab_ - 4) * noise * std::log(noise);
}

}  // namespace tunepar::core
