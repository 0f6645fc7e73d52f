#include "search/knob_shapley.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>

#include "search/space.h"

namespace tunepar::search {

KnobShapley::KnobShapley(const std::vector<Layout>& legal, std::vector<double> f, std::vector<int> background)
    : legal_(legal), f_(std::move(f)), background_(std::move(background)), codes_(NumKnobs()), knob_codes_(NumKnobs()) {
  // A small integer code per knob value, packed into one 64-bit key per layout: a hybrid layout
  // is then a key with some fields swapped, looked up in the legal set.
  int shift = 0;
  for (int k = 0; k < NumKnobs(); ++k) {
    const Knob knob = static_cast<Knob>(k);
    auto& codes = codes_[k];
    for (const Layout& l : legal_) {
      if (codes.emplace(KnobValue(knob, l), codes.size()).second) knob_codes_[k].push_back(KnobCode(knob, l));
    }
    const int bits = std::max(1, static_cast<int>(std::bit_width(codes.size())));
    fields_.push_back({knob, shift, ((uint64_t{1} << bits) - 1) << shift});
    shift += bits;
  }
  keys_.reserve(legal_.size());
  for (size_t i = 0; i < legal_.size(); ++i) {
    keys_.push_back(Key(legal_[i]));
    index_.emplace(keys_.back(), static_cast<int>(i));
  }
  // The world size every legal layout shares (0 when they do not: then no twin is looked for).
  for (const Layout& l : legal_) {
    const int world = l.World();
    if (world_ == 0) world_ = world;
    if (world != world_) {
      world_ = -1;
      break;
    }
  }
}

int KnobShapley::Resolve(uint64_t key) const {
  if (auto it = index_.find(key); it != index_.end()) return it->second;
  if (auto it = resolved_.find(key); it != resolved_.end()) return it->second;
  int index = -1;
  Layout l;
  for (const Field& field : fields_) {
    const uint64_t code = (key & field.mask) >> field.shift;
    const auto& values = knob_codes_[static_cast<int>(field.knob)];
    l = WithKnob(l, field.knob, code < values.size() ? values[code] : values.front());
  }
  if (world_ > 0 && world_ % (l.tp * l.cp * l.pp) == 0) {
    l.dp = world_ / (l.tp * l.cp * l.pp);
    const Layout canonical = CanonicalLayout(l);
    bool known = true;  // every value of the twin is one the legal layouts take
    for (const Field& field : fields_)
      known = known && codes_[static_cast<int>(field.knob)].count(KnobValue(field.knob, canonical)) != 0;
    if (known) {
      if (auto it = index_.find(Key(canonical)); it != index_.end()) index = it->second;
    }
  }
  resolved_.emplace(key, index);
  return index;
}

uint64_t KnobShapley::Code(Knob knob, const Layout& l) const {
  const auto& codes = codes_[static_cast<int>(knob)];
  auto it = codes.find(KnobValue(knob, l));
  return it == codes.end() ? 0 : it->second;
}

uint64_t KnobShapley::Key(const Layout& l) const {
  uint64_t key = 0;
  for (const Field& field : fields_) key |= Code(field.knob, l) << field.shift;
  return key;
}

// The players: the knobs on which x or some background point differ.
std::vector<const KnobShapley::Field*> KnobShapley::Players(uint64_t x_key, std::vector<Knob>* knobs) const {
  std::vector<const Field*> players;
  for (const Field& field : fields_) {
    bool varies = false;
    for (int z : background_) varies = varies || (keys_[z] & field.mask) != (x_key & field.mask);
    if (varies) {
      players.push_back(&field);
      knobs->push_back(field.knob);
    }
  }
  return players;
}

double KnobShapley::BackgroundMean() const {
  double sum = 0;
  int defined = 0;
  for (int z : background_) {
    if (std::isfinite(f_[z])) {
      sum += f_[z];
      ++defined;
    }
  }
  return defined > 0 ? sum / defined : 0.0;
}

// The mean of f over the legal hybrids; with no legal hybrid, the mean over the legal layouts
// that agree with x on the coalition's knobs (`mask`); `fallback` when there are none either.
double KnobShapley::MeanOverHybrids(const std::vector<uint64_t>& hybrid, uint64_t mask, uint64_t x_key,
                                    double fallback) const {
  double sum = 0;
  int count = 0;
  for (uint64_t key : hybrid) {
    const int i = Resolve(key);
    if (i >= 0 && std::isfinite(f_[i])) {
      sum += f_[i];
      ++count;
    }
  }
  if (count > 0) return sum / count;
  for (size_t i = 0; i < keys_.size(); ++i) {
    if ((keys_[i] & mask) == (x_key & mask) && std::isfinite(f_[i])) {
      sum += f_[i];
      ++count;
    }
  }
  return count > 0 ? sum / count : fallback;
}

KnobExplanation KnobShapley::Explain(int index, bool interactions, int max_exact_players) const {
  KnobExplanation out;
  const uint64_t x_key = keys_[index];
  out.value = f_[index];
  const std::vector<const Field*> players = Players(x_key, &out.knobs);
  const int d = static_cast<int>(players.size());
  out.baseline = BackgroundMean();
  // Hybrid keys per background point: x's values on the coalition's knobs, the point's on the
  // rest; updated one field at a time along the Gray code when exact.
  std::vector<uint64_t> hybrid(background_.size());
  auto fields_of = [&](uint32_t coalition) {
    uint64_t m = 0;
    for (int p = 0; p < d; ++p) {
      if (coalition & (1u << p)) m |= players[p]->mask;
    }
    return m;
  };
  const CoalitionValue gray_value = [&](uint32_t coalition, int flipped) {
    if (flipped < 0) {
      for (size_t b = 0; b < background_.size(); ++b) hybrid[b] = keys_[background_[b]];
    } else {
      const uint64_t m = players[flipped]->mask;
      for (size_t b = 0; b < background_.size(); ++b) {
        const uint64_t own = keys_[background_[b]] & m;
        const uint64_t field = (coalition & (1u << flipped)) ? (x_key & m) : own;
        hybrid[b] = (hybrid[b] & ~m) | field;
      }
    }
    if (coalition == 0) return out.baseline;  // by definition, whatever the background holds
    if (coalition == (d == 0 ? 0u : (1u << d) - 1)) return out.value;
    return MeanOverHybrids(hybrid, fields_of(coalition), x_key, out.value);
  };
  const CoalitionValue direct_value = [&](uint32_t coalition, int) {
    const uint64_t m = fields_of(coalition);
    for (size_t b = 0; b < background_.size(); ++b) hybrid[b] = (keys_[background_[b]] & ~m) | (x_key & m);
    if (coalition == 0) return out.baseline;
    if (d < 32 && coalition == (1u << d) - 1) return out.value;
    return MeanOverHybrids(hybrid, m, x_key, out.value);
  };
  ShapleyResult r;
  if (d <= max_exact_players) {
    r = ExactShapley(d, gray_value, interactions);
  } else {
    r = SampledShapley(d, direct_value, 256, 0x5eed);
    out.exact = false;
  }
  out.phi = r.phi;
  out.error = r.error;
  out.interaction = r.interaction;
  return out;
}

KnobImportance KnobShapley::Global(bool interactions) const {
  KnobImportance out;
  for (const Field& field : fields_) {
    bool varies = false;
    for (int z : background_)
      varies = varies || (keys_[z] & field.mask) != (keys_[background_.front()] & field.mask);
    if (varies) out.knobs.push_back(field.knob);
  }
  const size_t d = out.knobs.size();
  out.mean_abs_phi.assign(d, 0.0);
  if (interactions) out.interaction.assign(d, std::vector<double>(d, 0.0));
  for (int point : background_) {
    const KnobExplanation e = Explain(point, interactions);
    std::vector<double> phi(d, 0.0);
    for (size_t p = 0; p < e.knobs.size(); ++p) {
      const size_t k = std::find(out.knobs.begin(), out.knobs.end(), e.knobs[p]) - out.knobs.begin();
      phi[k] = e.phi[p];
      if (interactions && !e.interaction.empty()) {
        for (size_t q = 0; q < e.knobs.size(); ++q) {
          const size_t l = std::find(out.knobs.begin(), out.knobs.end(), e.knobs[q]) - out.knobs.begin();
          out.interaction[k][l] += std::abs(e.interaction[p][q]) / background_.size();
        }
      }
    }
    for (size_t k = 0; k < d; ++k) out.mean_abs_phi[k] += std::abs(phi[k]) / background_.size();
    out.points.push_back(point);
    out.phi.push_back(std::move(phi));
  }
  return out;
}

double SpearmanCorrelation(const std::vector<double>& a, const std::vector<double>& b) {
  auto ranks = [](const std::vector<double>& v) {
    std::vector<size_t> order(v.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t i, size_t j) { return v[i] < v[j]; });
    std::vector<double> r(v.size());
    for (size_t i = 0; i < order.size();) {
      size_t j = i;
      while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
      for (size_t k = i; k <= j; ++k) r[order[k]] = 0.5 * (i + j);
      i = j + 1;
    }
    return r;
  };
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  const double n = static_cast<double>(a.size());
  if (n < 2) return 1.0;
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n,
               mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double cov = 0, va = 0, vb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    cov += (ra[i] - ma) * (rb[i] - mb);
    va += (ra[i] - ma) * (ra[i] - ma);
    vb += (rb[i] - mb) * (rb[i] - mb);
  }
  return va > 0 && vb > 0 ? cov / std::sqrt(va * vb) : 0.0;
}

}  // namespace tunepar::search
