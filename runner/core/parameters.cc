#include "runner/core/parameters.h"

#include <cmath>

namespace tunepar::core {

ModelDims DimsOf(const ModelShape& s) {
  ModelDims d{s.layers, s.hidden, s.heads, s.seq_len, s.vocab, s.MlpWidth(), s.tied_embeddings};
  d.KV = s.KvHeads();
  d.swiglu = s.mlp == MlpKind::kSwiglu;
  d.rotary = s.positions == Positions::kRotary;
  d.learned_positions = s.positions == Positions::kLearned;
  d.rmsnorm = s.norm == NormKind::kRmsNorm;
  d.biases = s.linear_biases;
  return d;
}

Shard ShardOf(const ModelDims& d, int tp, int tp_rank, const StageSplit& split, int pp_rank) {
  const int pp = split.Stages();
  Shard s;
  s.tp = tp;
  s.tp_rank = tp_rank;
  s.pp = pp;
  s.pp_rank = pp_rank;
  s.num_layers = split.layers[pp_rank];
  for (int stage = 0; stage < pp_rank; ++stage) s.first_layer += split.layers[stage];
  s.Cl = d.C / tp;
  s.NHl = d.NH / tp;
  s.KVl = d.KvHeads() / tp;
  s.Fl = d.F / tp;
  s.Vl = d.V / tp;
  s.v0 = tp_rank * s.Vl;
  s.has_embedding = pp_rank == 0;
  s.has_head = pp_rank == pp - 1;
  s.head_is_embedding = d.tied && pp == 1;
  return s;
}

int64_t TensorSpec::GlobalIndex(int64_t local) const {
  switch (slicing) {
    case Slicing::kReplicated: return local;
    case Slicing::kRows: return first * cols + local;
    case Slicing::kBlockRows: {
      int64_t row = local / cols, global_row = 0;
      const int64_t col = local % cols;
      for (int64_t block_rows : blocks) {  // this rank holds block_rows / tp rows of each block
        const int64_t held = block_rows / tp;
        if (row < held) return (global_row + tp_rank * held + row) * cols + col;
        row -= held;
        global_row += block_rows;
      }
      return -1;
    }
    case Slicing::kColumns: {
      const int64_t row = local / local_cols, col = local % local_cols;
      return row * cols + first + col;
    }
  }
  return local;
}

uint64_t Mix(uint64_t a, uint64_t b) {
  uint64_t z = a * 0x9e3779b97f4a7c15ull + b + 0x632be59bd9b4e019ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double InitialValue(const TensorSpec& spec, int64_t global_index, uint64_t seed) {
  if (spec.init_std == 0) return spec.init_value;
  const uint64_t h = Mix(Mix(seed, spec.init_id), static_cast<uint64_t>(global_index));
  // Box-Muller on two 26-bit uniforms in (0, 1).
  const double u1 = (static_cast<double>(h >> 38) + 0.5) / static_cast<double>(1ull << 26);
  const double u2 =
      (static_cast<double>((h >> 12) & ((1ull << 26) - 1)) + 0.5) / static_cast<double>(1ull << 26);
  return spec.init_std * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

namespace {

class LayoutBuilder {
 public:
  explicit LayoutBuilder(const Shard& shard) : shard_(shard) {}

  // Row blocks (kBlockRows): the unsliced rows of each block.
  int64_t AddBlocks(std::string name, std::vector<int64_t> blocks, int64_t cols, uint64_t init_id, double init_std) {
    int64_t rows = 0;
    for (int64_t r : blocks) rows += r;
    pending_blocks_ = std::move(blocks);
    return Add(std::move(name), rows, cols, Slicing::kBlockRows, init_id, init_std);
  }

  int64_t Add(std::string name, int64_t rows, int64_t cols, Slicing slicing, uint64_t init_id,
              double init_std, double init_value = 0) {
    TensorSpec t;
    t.blocks = std::move(pending_blocks_);
    pending_blocks_.clear();
    t.name = std::move(name);
    t.rows = rows;
    t.cols = cols;
    t.local_cols = cols;
    t.slicing = slicing;
    t.init_id = init_id;
    t.init_std = init_std;
    t.init_value = init_value;
    t.decay = rows > 1 && cols > 1;
    t.tp_replicated = slicing == Slicing::kReplicated;
    int64_t local_rows = rows;
    switch (slicing) {
      case Slicing::kReplicated: break;
      case Slicing::kRows:
        local_rows = rows / shard_.tp;
        t.first = shard_.tp_rank * local_rows;
        break;
      case Slicing::kBlockRows:
        local_rows = rows / shard_.tp;
        t.tp = shard_.tp;
        t.tp_rank = shard_.tp_rank;
        break;
      case Slicing::kColumns:
        t.local_cols = cols / shard_.tp;
        t.first = shard_.tp_rank * t.local_cols;
        break;
    }
    t.size = local_rows * t.local_cols;
    t.offset = count_;
    count_ += t.size;
    tensors_.push_back(std::move(t));
    return tensors_.back().offset;
  }

  // Pads the count to a multiple of `multiple` (> 0): the end of an FSDP unit.
  void EndUnit(int64_t multiple) {
    if (multiple > 0) count_ = (count_ + multiple - 1) / multiple * multiple;
  }

  TensorSpec& last() { return tensors_.back(); }
  int64_t count() const { return count_; }
  std::vector<TensorSpec> Take() { return std::move(tensors_); }

 private:
  const Shard& shard_;
  std::vector<TensorSpec> tensors_;
  std::vector<int64_t> pending_blocks_;
  int64_t count_ = 0;
};

constexpr double kStd = 0.02;
constexpr uint64_t kWteId = 1, kWpeId = 2, kLnfWId = 3, kLnfBId = 4, kLmHeadId = 5;
uint64_t BlockTensorId(int layer, int k) {
  return 100 + 16 * static_cast<uint64_t>(layer) + k;
}

}  // namespace

namespace {

// Q, K and V rows of qkv.w: C query rows, then KV hs key and KV hs value rows (MHA: C each).
std::vector<int64_t> QkvBlocks(const ModelDims& d) {
  const int64_t kv_rows = int64_t{d.KvHeads()} * d.HeadSize();
  return {d.C, kv_rows, kv_rows};
}
// fc.w's rows: F units, or SwiGLU's gate (Meta's w1) then up (w3) blocks of F.
std::vector<int64_t> MlpInBlocks(const ModelDims& d) {
  return d.swiglu ? std::vector<int64_t>{d.F, d.F} : std::vector<int64_t>{d.F};
}

BlockTensors LayoutBlock(const ModelDims& d, int l, double residual_std, LayoutBuilder& b) {
  const std::string h = "h" + std::to_string(l) + ".";
  const auto norm_bias = [&](const std::string& name, int k) {
    return d.rmsnorm ? -1 : b.Add(h + name, 1, d.C, Slicing::kReplicated, BlockTensorId(l, k), 0);
  };
  const auto row_bias = [&](const std::string& name, std::vector<int64_t> blocks, int k) {
    return d.biases ? b.AddBlocks(h + name, std::move(blocks), 1, BlockTensorId(l, k), 0) : -1;
  };
  const auto replicated_bias = [&](const std::string& name, int k) {
    return d.biases ? b.Add(h + name, 1, d.C, Slicing::kReplicated, BlockTensorId(l, k), 0) : -1;
  };
  BlockTensors t;
  t.ln1_w = b.Add(h + "ln1.w", 1, d.C, Slicing::kReplicated, BlockTensorId(l, 0), 0, 1.0);
  t.ln1_b = norm_bias("ln1.b", 1);
  t.qkv_w = b.AddBlocks(h + "qkv.w", QkvBlocks(d), d.C, BlockTensorId(l, 2), kStd);
  t.qkv_b = row_bias("qkv.b", QkvBlocks(d), 3);
  t.attproj_w = b.Add(h + "attproj.w", d.C, d.C, Slicing::kColumns, BlockTensorId(l, 4), residual_std);
  t.attproj_b = replicated_bias("attproj.b", 5);
  t.ln2_w = b.Add(h + "ln2.w", 1, d.C, Slicing::kReplicated, BlockTensorId(l, 6), 0, 1.0);
  t.ln2_b = norm_bias("ln2.b", 7);
  t.fc_w = b.AddBlocks(h + "fc.w", MlpInBlocks(d), d.C, BlockTensorId(l, 8), kStd);
  t.fc_b = row_bias("fc.b", MlpInBlocks(d), 9);
  t.fcproj_w = b.Add(h + "fcproj.w", d.C, d.F, Slicing::kColumns, BlockTensorId(l, 10), residual_std);
  t.fcproj_b = replicated_bias("fcproj.b", 11);
  return t;
}

}  // namespace

namespace {

void AddFinalNorm(const ModelDims& d, ParameterLayout& p, LayoutBuilder& b) {
  p.lnf_w = b.Add("lnf.w", 1, d.C, Slicing::kReplicated, kLnfWId, 0, 1.0);
  if (!d.rmsnorm) p.lnf_b = b.Add("lnf.b", 1, d.C, Slicing::kReplicated, kLnfBId, 0);
}

// Opens a unit at the builder's count, closing the one before it.
void StartUnit(ParameterLayout& p, const LayoutBuilder& b) {
  if (!p.units.empty()) p.units.back().end = b.count();
  p.units.push_back({b.count(), b.count()});
}

}  // namespace

BlockTensors Rebased(BlockTensors t, int64_t base) {
  for (int64_t* o : {&t.ln1_w, &t.ln1_b, &t.qkv_w, &t.qkv_b, &t.attproj_w, &t.attproj_b, &t.ln2_w, &t.ln2_b, &t.fc_w,
                     &t.fc_b, &t.fcproj_w, &t.fcproj_b}) {
    if (*o >= 0) *o -= base;
  }
  return t;
}

ParameterLayout EndsRebased(const ParameterLayout& p, int64_t base) {
  ParameterLayout r;
  r.wte = p.wte;
  r.wpe = p.wpe;
  r.lnf_w = p.lnf_w;
  r.lnf_b = p.lnf_b;
  r.lm_head = p.lm_head;
  for (int64_t* o : {&r.wte, &r.wpe, &r.lnf_w, &r.lnf_b, &r.lm_head}) {
    if (*o >= 0) *o -= base;
  }
  return r;
}

ParameterLayout LayoutParameters(const ModelDims& d, const Shard& s, int64_t unit_multiple) {
  ParameterLayout p;
  LayoutBuilder b(s);
  const double residual_std = kStd / std::sqrt(2.0 * d.L);
  // FSDP units: the final norm joins a tied head's embedding, so the head computes with one unit.
  const bool norm_with_embedding = unit_multiple > 0 && s.head_is_embedding;
  if (s.has_embedding) {
    StartUnit(p, b);
    p.embedding_unit = 0;
    p.wte = b.Add("wte", d.V, d.C, Slicing::kRows, kWteId, kStd);
    if (d.learned_positions) p.wpe = b.Add("wpe", d.T, d.C, Slicing::kReplicated, kWpeId, 0.01);
    if (norm_with_embedding) AddFinalNorm(d, p, b);
    b.EndUnit(unit_multiple);
  }
  p.first_block_unit = static_cast<int>(p.units.size());
  for (int i = 0; i < s.num_layers; ++i) {
    StartUnit(p, b);
    p.block_begin.push_back(b.count());
    p.blocks.push_back(LayoutBlock(d, s.first_layer + i, residual_std, b));
    b.EndUnit(unit_multiple);
  }
  if (s.has_head && norm_with_embedding) {
    p.lm_head = p.wte;
  } else if (s.has_head) {
    StartUnit(p, b);
    p.head_unit = static_cast<int>(p.units.size()) - 1;
    p.block_begin.push_back(b.count());
    AddFinalNorm(d, p, b);
    if (s.head_is_embedding) {
      p.lm_head = p.wte;
    } else if (d.tied) {
      // The last stage's copy of the token embedding: initialised identically, its gradient
      // summed with the first stage's every step, so both copies stay equal.
      p.lm_head = b.Add("wte", d.V, d.C, Slicing::kRows, kWteId, kStd);
      b.last().tied_copy = true;
    } else {
      p.lm_head = b.Add("lm_head", d.V, d.C, Slicing::kRows, kLmHeadId, kStd);
    }
    b.EndUnit(unit_multiple);
  }
  p.count = b.count();
  if (!p.units.empty()) p.units.back().end = p.count;
  p.tensors = b.Take();
  return p;
}

}  // namespace tunepar::core
