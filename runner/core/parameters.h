// The parameters one rank holds: the tensors of its pipeline stage, sliced over its TP group,
// in one contiguous buffer with typed views (llm.c style). Each tensor knows how its elements
// map to the unsliced model, so initialisation gives every slice the values the single-rank
// model has there, and gradients can be compared with a single-rank run element by element.
//
// Megatron's slicing: QKV and MLP-in are column-parallel (rows of the (out, in) weight: a head
// group's Q, K and V rows, a slice of MLP units), attention-out and MLP-out are row-parallel
// (columns of the weight), token embedding and LM head are vocabulary-parallel (rows); layer
// norms, position embedding and the biases of row-parallel layers are replicated.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/model_shape.h"
#include "base/pipeline_split.h"

namespace tunepar::core {

// The unsliced model: L layers, C hidden, NH heads, KV K/V heads (query groups), T sequence,
// V vocabulary, F MLP width; the Llama-style choices (SwiGLU, rotary positions, RMSNorm, no
// biases) beside GPT-2's (GELU, a learned position table, LayerNorm, biases).
struct ModelDims {
  int L = 0, C = 0, NH = 0, T = 0, V = 0, F = 0;
  bool tied = true;  // the LM head is the token embedding
  int KV = 0;
  bool swiglu = false, rotary = false, rmsnorm = false, biases = true;
  bool learned_positions = true;  // a position table added to the token embedding
  int HeadSize() const { return C / NH; }
  int KvHeads() const { return KV > 0 ? KV : NH; }  // KV, or NH (multi-head) where not given
  int MlpInRows() const { return swiglu ? 2 * F : F; }  // SwiGLU's fc holds gate and up
};
ModelDims DimsOf(const ModelShape& shape);

// What this rank holds of the model.
struct Shard {
  int tp = 1, tp_rank = 0, pp = 1, pp_rank = 0;
  int first_layer = 0, num_layers = 0;  // this stage's blocks
  int Cl = 0, NHl = 0, Fl = 0, Vl = 0;  // per-TP-rank channels, heads, MLP units, vocabulary rows
  int KVl = 0;                          // per-TP-rank K/V heads (tp divides KV)
  int QkvCols(int hs) const { return (NHl + 2 * KVl) * hs; }  // a qkv row: [Q | K | V]
  int v0 = 0;                           // first vocabulary row held
  bool has_embedding = false, has_head = false;
  bool head_is_embedding = false;  // tied with one stage: the LM head reads the embedding's rows
};
// Stage `pp_rank` of `split` (base/pipeline_split.h SplitLayers: pp = split.Stages()) holds
// split.layers[pp_rank] blocks, after the blocks of the stages before it.
Shard ShardOf(const ModelDims& dims, int tp, int tp_rank, const StageSplit& split, int pp_rank);

// How a local tensor's elements map to the unsliced tensor (rows x cols, row-major).
enum class Slicing {
  kReplicated,  // the whole tensor
  kRows,        // rows [first, first + local rows)
  kBlockRows,   // rows in blocks (Q, K, V; SwiGLU's gate, up), each block's rows sliced by tp
  kColumns,     // columns [first, first + local cols)
};

struct TensorSpec {
  std::string name;  // e.g. "h1.qkv.w" (global layer index), "wte", "lm_head"
  int64_t offset = 0;
  int64_t size = 0;            // local elements
  int64_t rows = 0, cols = 0;  // unsliced shape (vectors: rows = 1)
  int64_t local_cols = 0;      // columns held (kColumns), else cols
  Slicing slicing = Slicing::kReplicated;
  int64_t first = 0;           // first row / column held (kRows, kColumns)
  int tp = 1, tp_rank = 0;     // kBlockRows: the slicing
  std::vector<int64_t> blocks;  // kBlockRows: unsliced rows per block (Q, K, V: C, KV hs, KV hs)
  bool tp_replicated = false;  // identical on every TP rank (counted once in norms)
  bool tied_copy = false;      // the last stage's copy of a tied embedding (counted once)
  bool decay = false;          // weight decay applies (matrices)
  uint64_t init_id = 0;        // tensor identity for the counter-based initialiser
  double init_std = 0;         // N(0, std^2); 0: constant init_value
  double init_value = 0;

  int64_t GlobalIndex(int64_t local) const;
};

// Views of one block's tensors (offsets into a flat buffer).
struct BlockTensors {
  // -1 where the model has no such tensor (RMSNorm: no norm biases; Llama: no linear biases).
  int64_t ln1_w, ln1_b, qkv_w, qkv_b, attproj_w, attproj_b, ln2_w, ln2_b, fc_w, fc_b, fcproj_w, fcproj_b;
};

// A range [begin, end) of the flat parameters that ZeRO-2/3 gathers, reduce-scatters and shards
// as one (an FSDP unit): the embedding (with learned positions), each block, the head.
struct ParameterUnit {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

struct ParameterLayout {
  std::vector<TensorSpec> tensors;
  int64_t count = 0;  // elements
  // Offsets (-1 when not on this stage).
  int64_t wte = -1, wpe = -1, lnf_w = -1, lnf_b = -1, lm_head = -1;
  std::vector<BlockTensors> blocks;  // this stage's, in order
  // Buffer offsets where each block's tensors start (the DP buckets follow these boundaries).
  std::vector<int64_t> block_begin;
  // The units in flat order, covering [0, count): the embedding's (first stage), each block's,
  // the head's (last stage; with a head tied to the embedding on one stage the final norm sits in
  // the embedding's unit instead, as the head reads the embedding's rows). -1: none here.
  std::vector<ParameterUnit> units;
  int embedding_unit = -1, head_unit = -1, first_block_unit = 0;
  int BlockUnit(int i) const { return first_block_unit + i; }
  // The unit the head computes with (the embedding's when they share it).
  int HeadComputeUnit() const { return head_unit >= 0 ? head_unit : embedding_unit; }
};
// `unit_multiple` > 0: the FSDP layout (ZeRO-2/3): every unit padded to a multiple of it (the
// shard group's size, so each rank's shard of a unit is contiguous), and a head tied to the
// embedding on one stage with its final norm in the embedding's unit. 0: the plain layout (one
// unit per block and end, unpadded).
ParameterLayout LayoutParameters(const ModelDims& dims, const Shard& shard, int64_t unit_multiple = 0);

// The offsets of a unit's tensors relative to `base` (where the unit's buffer starts), for the
// layers to read a gathered unit or write a unit's gradients; -1 stays -1.
BlockTensors Rebased(BlockTensors t, int64_t base);
// The embedding's and head's offsets (wte, wpe, lnf, lm_head) rebased the same way.
ParameterLayout EndsRebased(const ParameterLayout& p, int64_t base);

// The value of element `global_index` of tensor `spec` at initialisation (GPT-2: N(0, 0.02),
// residual projections N(0, 0.02 / sqrt(2 L)), biases 0, layer-norm weights 1), from a counter
// hash of (seed, tensor, element): the same on any layout.
double InitialValue(const TensorSpec& spec, int64_t global_index, uint64_t seed);

// A 64-bit mix of the inputs (splitmix64), the core's only source of randomness.
uint64_t Mix(uint64_t a, uint64_t b);

}  // namespace tunepar::core
