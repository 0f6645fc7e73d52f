// A layout: one point of the search space, i.e. one way to split a training job over GPUs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "base/status.h"

namespace tunepar {

// kFp8: 16-bit (bf16) storage, communication and attention, with the transformer layers' GEMMs in
// FP8 (TransformerEngine's recipe: e4m3 forward, e5m2 gradients, scaled per tensor); where the
// hardware has an FP8 peak.
enum class Precision { kFp32, kFp16, kBf16, kFp8 };
enum class Recompute { kNone, kSelective, kFull };

std::string_view ToString(Precision precision);  // "fp32" | "fp16" | "bf16" | "fp8"
std::string_view ToString(Recompute recompute);  // "none" | "selective" | "full"
Result<Precision> ParsePrecision(std::string_view text);
Result<Recompute> ParseRecompute(std::string_view text);

struct Layout {
  int tp = 1;                 // tensor-parallel size
  int pp = 1;                 // pipeline-parallel size (stages)
  int dp = 1;                 // data-parallel size, = world / (tp * cp * pp)
  int micro_batch = 1;        // sequences per micro-batch
  int num_micro_batches = 1;  // per pipeline per step, = global_batch / (micro_batch * dp)
  Precision precision = Precision::kBf16;
  int zero = 0;  // ZeRO stage over the shard group: 0 nothing sharded, 1 optimizer states, 2 and gradients, 3 and weights (FSDP)
  Recompute recompute = Recompute::kNone;
  bool seq_parallel = false;  // Megatron sequence parallelism (needs tp > 1)
  int virtual_stages = 1;     // interleaved pipeline: model chunks per pipeline rank
  bool flash_attention = false;
  // Hybrid sharding (HSDP; with tp, Hybrid-STOP): dp = shard group x dp_replicate. ZeRO shards
  // the model states inside a shard group of dp / dp_replicate ranks and replicates them across
  // the groups; 1 shards over all of dp.
  int dp_replicate = 1;
  // Context parallelism: the sequence split over cp ranks (2 cp chunks, rank i holding chunks i and
  // 2 cp - 1 - i for the causal load balance), K/V passed around the ring of the cp group.
  int cp = 1;
  // Uneven pipeline stages: the layers split by base/pipeline_split.h's rule (Megatron-LM's first
  // and last stage counts, balanced against the embedding and the head) instead of evenly.
  bool uneven_stages = false;
  // Expert parallelism (a MoE model's): the experts of each MoE layer split over ep ranks carved
  // from the dp x cp ranks (Megatron-Core's expert grid, base/rank_order.h), expert tensor
  // parallelism = tp; tokens reach their experts by all-to-all.
  int ep = 1;
  // Knobs whose table row keeps them by name (base/knobs.h), at a value other than neutral.
  std::map<std::string, int, std::less<>> more_knobs;

  int World() const { return tp * cp * pp * dp; }
  // Data-parallel ranks in one shard group: dp / dp_replicate (torchtitan's dp_shard).
  int ShardGroup() const { return dp / dp_replicate; }
  // The ranks ZeRO shards the model states over, and the gradient reduction spans inside a
  // replica: the shard group's ranks with their context-parallel peers, which hold the same
  // weights (Megatron-Core's dp-cp group, torchtitan's dp_shard_cp).
  int ZeroGroup() const { return cp * ShardGroup(); }
  // The ranks that hold the same experts: the expert data-parallel size world / (tp ep pp) =
  // dp cp / ep (Megatron-Core's expert-dp group), and the part of it ZeRO shards expert states over.
  int ExpertDataGroup() const { return dp * cp / ep; }
  int ExpertZeroGroup() const { return ZeroGroup() % ep == 0 ? ZeroGroup() / ep : 1; }
  // Model chunks the layers are split into: pipeline stages x virtual stages per stage.
  int ModelChunks() const { return pp * virtual_stages; }
  // Sequences per optimizer step: micro_batch x num_micro_batches x dp.
  int64_t GlobalBatch() const { return static_cast<int64_t>(micro_batch) * num_micro_batches * dp; }
  bool operator==(const Layout&) const = default;
};

// The canonical text key of a layout: every field, in a fixed order, e.g.
//   tp4-pp16-dp48-mbs1-nmb64-bf16-zero1-rcfull-sp1-vpp2-fa1
// The key is stable across versions (stores deduplicate and join on it): a knob added after
// these (base/knobs.h) is appended as its fragment only when it is not at its neutral value.
// (Defined in layout_key.cc, beside the knob table that spells the fields.)
std::string LayoutKey(const Layout& layout);
Result<Layout> ParseLayoutKey(std::string_view key);

}  // namespace tunepar
