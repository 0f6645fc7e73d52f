#include "runner/performance_model.h"

#include "base/pipeline_split.h"
#include "base/rank_order.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace tunepar::runner {


namespace {

// Values moved by the memory-bound kernels of one layer's forward pass, per token (a value is
// 2 bytes in 16-bit training, 4 in fp32). Per hidden unit: two layer norms (read, write: 2
// each) and two bias + dropout + residual kernels (read 2, write 1, mask 1/2: 3.5 each) = 11.
// Per MLP unit: bias + GeLU (read, write) = 2. Per attention score (no flash): fused
// scale-mask-softmax (read, write) and dropout (read, write, mask 1/2) = 4.5. Backward moves
// about twice as much.
constexpr double kValuesPerHidden = 11.0;
constexpr double kValuesPerMlpUnit = 2.0;
constexpr double kValuesPerScore = 4.5;
// SwiGLU's product silu(gate) * up per MLP unit: read gate and up, write the product = 3.
constexpr double kValuesPerSwigluUnit = 3.0;
// Rotary embeddings per Q and K value: read and write (the cos/sin table is small and cached).
constexpr double kValuesPerRotaryValue = 2.0;
// The LM head's cross-entropy in fp32 (4 bytes): softmax read and write, loss, gradient.
constexpr double kCrossEntropyValuesPerLogit = 4.0;
// A ViT head's mean-squared error in fp32 per output: read, write the difference, gradient.
constexpr double kMseValuesPerOutput = 3.0;
// Fused attention's backward pass costs about 2.5 times its forward (Dao 2023).
constexpr double kFlashBackwardFactor = 2.5;

// Bytes of a stored, communicated or element-wise value: fp8 training keeps weights, activations
// and their communication in bf16 (TransformerEngine casts each GEMM's operands to FP8 itself).
double BytesPerValue(Precision p) {
  return p == Precision::kFp32 ? 4.0 : 2.0;
}

// Gradient bytes per parameter: Megatron keeps fp16 gradients in fp16 and accumulates bf16 (and
// fp8's bf16) gradients in fp32; fp32 training has fp32 gradients.
double GradientBytes(Precision p) {
  return p == Precision::kFp16 ? 2.0 : 4.0;
}

// K/V heads summed over the tensor-parallel ranks: g when tp divides them; tp when tp exceeds g
// (each rank holds one K/V head, replicated on tp / g ranks). Multi-head attention: a.
double KvHeadsOverTp(const ModelShape& m, int tp) {
  return std::max(m.KvHeads(), tp);
}

// The peak of everything but the layers' GEMMs: fp8 runs attention, the LM head and the embedding
// in bf16 (Megatron's output layer is not a TransformerEngine module; FP8 attention is opt-in).
int StoragePeakIndex(Precision p) {
  return static_cast<int>(p == Precision::kFp8 ? Precision::kBf16 : p);
}

// FP8 GEMMs read operands TransformerEngine casts from bf16, each cast reading 2 bytes and writing
// the FP8 value and its transpose (1 + 1: the backward GEMMs need the other layout).
constexpr double kFp8CastBytesPerValue = 4.0;

// Latency steps of an all-reduce over n ranks: a ring's 2 (n - 1) for small groups; a tree's
// 2 log2(n) once that is fewer (as NCCL/RCCL switch at scale).
double CollectiveSteps(int n) {
  if (n <= 1) return 0.0;
  return std::min(2.0 * (n - 1), 2.0 * std::ceil(std::log2(static_cast<double>(n))) + 2.0);
}

// Tokens one rank computes per micro-batch: its micro-batch's sequences, or with context
// parallelism its 1 / cp of each (2 of the 2 cp chunks).
double TokensPerRank(const Layout& l, const ModelShape& m) {
  return static_cast<double>(l.micro_batch) * m.seq_len / l.cp;
}

}  // namespace

Result<PerformanceModel> PerformanceModel::Create(const ModelShape& model, const HardwareProfile& hardware) {
  Result<Efficiency> eff = Efficiency::FromProfile(hardware);
  if (!eff.ok()) return eff.status();
  return PerformanceModel(model, hardware, *eff);
}

PerformanceModel::PerformanceModel(const ModelShape& model, const HardwareProfile& hw, const Efficiency& eff)
    : model_(model), eff_(eff) {
  using K = EfficiencyKey;
  for (Precision p : {Precision::kFp32, Precision::kFp16, Precision::kBf16, Precision::kFp8}) {
    peak_[static_cast<int>(p)] = hw.PeakFlops(p);
  }
  memory_bytes_ = hw.MemoryBytes();
  memory_bandwidth_ = hw.memory_bandwidth_gbs.value * 1e9 * eff[K::kMemoryEfficiency];
  gpus_per_node_ = hw.gpus_per_node;
  ranks_per_node_ = gpus_per_node_;
  gpus_per_package_ = hw.gpus_per_package;
  node_bandwidth_ = hw.intra_node_bandwidth_gbs.value * 1e9 * eff[K::kLinkEfficiency];
  package_bandwidth_ = gpus_per_package_ > 1 ? hw.package_bandwidth_gbs.value * 1e9 * eff[K::kLinkEfficiency]
                                             : node_bandwidth_;
  node_network_ = hw.nics_per_node.value * hw.nic_bandwidth_gbs.value * 1e9 * eff[K::kNetworkEfficiency];
  model_flops_ = ModelFlopsPerStep(model);
}

PerformanceModel& PerformanceModel::set_ranks_per_node(int ranks) {
  ranks_per_node_ = std::max(gpus_per_node_, ranks);
  return *this;
}

PerformanceModel::LinkSpeed PerformanceModel::GroupLink(int size, int stride) const {
  const double link_latency = eff_[EfficiencyKey::kLinkLatencyUs] * 1e-6;
  const int span = size * stride;  // consecutive ranks the group covers
  if (span <= gpus_per_package_) return {package_bandwidth_, link_latency};
  if (span <= ranks_per_node_) return {node_bandwidth_, link_latency};
  // The group leaves the node. Every GPU of the node is in such a group, and all of them
  // communicate at once: the node's NICs are shared. A group with g members in a node moves
  // 1/g of its ring traffic across the node boundary per member.
  const int members_per_node = std::max(1, std::min(size, ranks_per_node_ / std::max(1, stride)));
  const double per_gpu = node_network_ * members_per_node / ranks_per_node_;
  return {std::min(node_bandwidth_, per_gpu), eff_[EfficiencyKey::kNetworkLatencyUs] * 1e-6};
}

double PerformanceModel::GemmTime(double m, double n, double k, double peak) const {
  // A GEMM of M x K by K x N: 2 M N K FLOPs at an efficiency that falls off when any dimension
  // is small (tile quantisation, too few thread blocks, short inner loops).
  const double d0 = eff_[EfficiencyKey::kGemmHalfSize];
  const double efficiency = eff_[EfficiencyKey::kGemmEfficiency] / (1.0 + d0 / m + d0 / n + d0 / k);
  return 2.0 * m * n * k / (peak * efficiency);
}

double PerformanceModel::RingAllReduceTime(double bytes, int ranks, const LinkSpeed& link) const {
  if (ranks <= 1) return 0.0;
  return 2.0 * (ranks - 1) / ranks * bytes / link.bandwidth + CollectiveSteps(ranks) * link.latency;
}

Status PerformanceModel::CheckLayout(const Layout& l) const {
  const ModelShape& m = model_;
  auto bad = [&](const std::string& why) {
    return InvalidArgument(
        fmt::format("layout {} is not legal for model {}: {}", LayoutKey(l), m.name, why));
  };
  if (l.tp < 1 || l.pp < 1 || l.dp < 1 || l.micro_batch < 1 || l.num_micro_batches < 1 ||
      l.virtual_stages < 1 || l.dp_replicate < 1 || l.cp < 1)
    return bad("sizes must be positive");
  if (m.heads % l.tp != 0) return bad(fmt::format("tp {} does not divide {} heads", l.tp, m.heads));
  const int g = m.KvHeads();
  if (g % l.tp != 0 && l.tp % g != 0)
    return bad(fmt::format("tp {} neither divides {} kv heads nor is a multiple of them", l.tp, g));
  if (l.cp > 1 && m.seq_len % (2 * l.cp) != 0)
    return bad(fmt::format("cp {} does not split the sequence of {} into {} equal chunks", l.cp, m.seq_len, 2 * l.cp));
  if (l.cp > 1 && !l.flash_attention) return bad("context parallelism needs flash attention (per K/V chunk)");
  if (l.seq_parallel && m.seq_len % (l.tp * l.cp) != 0)
    return bad(fmt::format("sequence parallelism: tp {} does not split the sequence of {} (over cp {}) evenly", l.tp,
                           m.seq_len, l.cp));
  if (m.MlpWidth() % l.tp != 0)
    return bad(fmt::format("tp {} does not divide the MLP width {}", l.tp, m.MlpWidth()));
  if (l.uneven_stages && l.pp > 1) {
    if (l.virtual_stages > 1) return bad("uneven stages run without interleaving (virtual stages 1)");
    if (UnevenSplit(m, l.pp).layers.empty())
      return bad(fmt::format("uneven stages: {} layers cannot give each of {} stages a layer", m.layers, l.pp));
  } else if (m.layers % (l.pp * l.virtual_stages) != 0) {
    return bad(
        fmt::format("pp {} x virtual stages {} does not divide {} layers", l.pp, l.virtual_stages, m.layers));
  }
  if (l.GlobalBatch() != m.global_batch)
    return bad(fmt::format("micro_batch {} x {} micro-batches x dp {} is not the global batch {}",
                           l.micro_batch, l.num_micro_batches, l.dp, m.global_batch));
  if (l.virtual_stages > 1 && (l.pp == 1 || l.num_micro_batches % l.pp != 0))
    return bad("interleaving needs pp > 1 and a micro-batch count divisible by pp");
  if (l.flash_attention && l.precision == Precision::kFp32) return bad("flash attention needs fp16 or bf16");
  if (l.precision == Precision::kFp8 && peak_[static_cast<int>(Precision::kFp8)] <= 0)
    return bad("fp8 needs hardware with an FP8 peak (its profile has no peak_tflops_fp8)");
  if (l.zero < 0 || l.zero > 3) return bad("ZeRO stage must be 0, 1, 2 or 3");
  if (l.dp_replicate < 1 || l.dp % l.dp_replicate != 0)
    return bad(fmt::format("dp_replicate {} does not divide dp {}", l.dp_replicate, l.dp));
  if (l.ep < 1) return bad("ep must be positive");
  if (l.ep > 1 && m.experts == 0) return bad(fmt::format("ep {} needs a model with experts (a dense model)", l.ep));
  if (m.experts > 0 && m.experts % l.ep != 0)
    return bad(fmt::format("ep {} does not divide {} experts", l.ep, m.experts));
  if ((l.dp * l.cp) % l.ep != 0) return bad(fmt::format("ep {} does not divide dp {} x cp {}", l.ep, l.dp, l.cp));
  return Status::Ok();
}

// ---- One layer, one micro-batch, on one tensor-parallel rank.
PerformanceModel::LayerTime PerformanceModel::LayerTimes(const Layout& l) const {
  using K = EfficiencyKey;
  const ModelShape& m = model_;
  const double peak = peak_[StoragePeakIndex(l.precision)];
  const double gemm_peak = peak_[static_cast<int>(l.precision)];
  const double bv = BytesPerValue(l.precision);
  const double h = m.hidden, f = m.MlpWidth(), s = m.seq_len, a = m.heads;
  const double t = l.tp, b = l.micro_batch, tokens = TokensPerRank(l, m), head_dim = h / a;
  const double queries = s / l.cp;  // a rank's query rows per sequence
  const double kv = KvHeadsOverTp(m, l.tp);
  const bool swiglu = m.mlp == MlpKind::kSwiglu;
  LayerTime layer;
  layer.overhead = eff_[K::kKernelOverheadUs] * 1e-6;
  // GEMMs (M x N x K): QKV (T, (h + 2 g d)/t, h): GQA's K and V projections are g/a of Q's (3h/t
  // for multi-head attention); attention output (T, h, h/t); MLP in (T, f/t, h), SwiGLU's gate and
  // up stacked in one (T, 2f/t, h) as Megatron's linear_fc1; MLP out (T, h, f/t).
  // fp8: these four run at the FP8 peak.
  layer.qkv = GemmTime(tokens, (h + 2 * kv * head_dim) / t, h, gemm_peak);
  layer.attention_output = GemmTime(tokens, h, h / t, gemm_peak);
  const double mlp_in = GemmTime(tokens, (swiglu ? 2 * f : f) / t, h, gemm_peak);
  const double mlp_out = GemmTime(tokens, h, f / t, gemm_peak);
  layer.mlp = mlp_in + mlp_out;
  const double gemm = layer.qkv + layer.attention_output + mlp_in + mlp_out;  // summed in this order (golden test)
  // Attention core, 4 b s^2 h / t FLOPs (query heads: GQA shrinks K and V, not the scores): a
  // fused flash kernel, or batched GEMMs (s x d x s). ALiBi's biases are added inside the
  // softmax (or flash) kernel: nothing more moves. Context parallelism: a rank's s / cp queries
  // meet every key, the causal load balance giving each rank 1 / cp of the work.
  if (l.flash_attention) {
    layer.attention_forward = 4 * b * s * s * h / t / l.cp / (peak * eff_[K::kFlashEfficiency]);
    layer.attention_backward = kFlashBackwardFactor * layer.attention_forward;
  } else {
    const double per_head = GemmTime(queries, s, head_dim, peak) + GemmTime(queries, head_dim, s, peak);
    layer.attention_forward = b * (a / t) * per_head;
    layer.attention_backward = 2 * layer.attention_forward;
  }
  // Memory-bound kernels. Without sequence parallelism every TP rank repeats the norms (RMSNorm
  // moves the bytes LayerNorm does: it saves FLOPs, not traffic), dropouts and residuals on the
  // whole sequence; with it, each handles s / t tokens. The MLP's activation and rotary's rotation
  // of Q and K run on the rank's heads and MLP columns.
  const double hidden_values = tokens * kValuesPerHidden * h / (l.seq_parallel ? t : 1.0);
  const double mlp_values = tokens * (swiglu ? kValuesPerSwigluUnit : kValuesPerMlpUnit) * f / t;
  const double rotary_values =
      m.positions == Positions::kRotary ? tokens * kValuesPerRotaryValue * (h + kv * head_dim) / t : 0.0;
  const double score_values = l.flash_attention ? 0.0 : b * (a / t) * queries * s * kValuesPerScore;
  const double elementwise = (hidden_values + mlp_values + rotary_values) * bv / memory_bandwidth_ +
                             Fp8CastValuesPerPass(l) * kFp8CastBytesPerValue / memory_bandwidth_;
  const double softmax = score_values * bv / memory_bandwidth_;
  layer.elementwise = elementwise + softmax;

  layer.forward = gemm + layer.attention_forward + elementwise + softmax + layer.overhead;
  layer.backward = 2 * gemm + layer.attention_backward + 2 * (elementwise + softmax) + 2 * layer.overhead;
  if (l.recompute == Recompute::kFull) layer.recompute = layer.forward;
  if (l.recompute == Recompute::kSelective) layer.recompute = layer.attention_forward + softmax;
  // Tensor-parallel collectives: two all-reduces (or all-gather + reduce-scatter with sequence
  // parallelism, the same volume) of T x h values forward, two backward, two more when the
  // forward pass is recomputed.
  const double collectives = 4 + (l.recompute == Recompute::kFull ? 2 : 0);
  layer.tp_comm = collectives * RingAllReduceTime(tokens * h * bv, l.tp, GroupLink(l.tp, RankOrder::Of(l).Stride(GridDim::kTp)));
  layer.cp_comm = KvExchangeExposedTime(l, layer);
  if (m.experts > 0) AddExperts(l, &layer);
  return layer;
}

// ---- Mixtures of experts (issue 36). A MoE layer runs, in the dense MLP's place: the router
// (a (T, E, h) GEMM replicated over tp and its softmax and top-k over T x E fp32 scores), the
// shared experts as a dense MLP shared f_e wide split over tp, and the routed experts. Expert
// parallelism with expert tensor parallelism = tp (Megatron-Core's default; ETP is not modelled
// apart): each rank holds E / ep experts, each split over tp, and receives from its ep group's
// ranks the tokens routed to them: ep T k / E rows per expert when routing is balanced, times the
// load (the most loaded rank sets the pace: ModelShape::ExpertLoad, the stated imbalance, or with
// a capacity factor every expert padded to ep ceil(T k CF / E) rows). Element-wise: the tokens'
// permutation and unpermutation (read and write k h values each) and the experts' activation.
// Four all-to-alls per micro-batch (dispatch and combine, forward and backward; two more when
// the forward pass is recomputed), not overlapped. The layer's terms are the mean over the
// model's dense and MoE layers (moe_every), so every stage holds the model's mix.
void PerformanceModel::AddExperts(const Layout& l, LayerTime* layer) const {
  const ModelShape& m = model_;
  const double moe = static_cast<double>(m.MoeLayers()) / m.layers;
  const double f = m.MlpWidth(), t = l.tp, tokens = TokensPerRank(l, m);
  const double dense_activation = tokens * (m.mlp == MlpKind::kSwiglu ? kValuesPerSwigluUnit : kValuesPerMlpUnit) * f /
                                  t * BytesPerValue(l.precision) / memory_bandwidth_;
  const double replaced = moe * (layer->mlp + dense_activation);  // the dense MLP the MoE layers do not run
  layer->mlp -= moe * layer->mlp;
  layer->elementwise -= moe * dense_activation;
  layer->experts = moe * ExpertForwardTime(l);
  const double added = layer->experts - replaced;
  layer->forward += added;
  layer->backward += 2 * added;
  if (l.recompute == Recompute::kFull) layer->recompute = layer->forward;
  layer->moe_comm = moe * (4 + (l.recompute == Recompute::kFull ? 2 : 0)) * AllToAllTime(l);
}

double PerformanceModel::ExpertForwardTime(const Layout& l) const {
  const ModelShape& m = model_;
  const double gemm_peak = peak_[static_cast<int>(l.precision)], peak = peak_[StoragePeakIndex(l.precision)];
  const double bv = BytesPerValue(l.precision), h = m.hidden, f_e = m.ExpertMlpWidth(), t = l.tp;
  const double E = m.experts, k = m.top_k, ep = l.ep, tokens = TokensPerRank(l, m);
  const bool swiglu = m.mlp == MlpKind::kSwiglu;
  const double in_width = swiglu ? 2 * f_e : f_e, unit_values = swiglu ? kValuesPerSwigluUnit : kValuesPerMlpUnit;
  // The router on the rank's tokens (s / t of them with sequence parallelism): logits, then the
  // fp32 softmax and top-k (read, write).
  const double router_tokens = tokens / (l.seq_parallel ? t : 1.0);
  const double router = GemmTime(router_tokens, E, h, peak) + router_tokens * E * 2 * 4.0 / memory_bandwidth_;
  // Rows per local expert: balanced ep T k / E, times the load; padded to capacity with a CF.
  const double rows = m.capacity_factor > 0 ? ep * std::ceil(tokens * k * m.capacity_factor / E)
                                            : ep * tokens * k / E * m.moe_imbalance;
  const double routed = E / ep * (GemmTime(rows, in_width / t, h, gemm_peak) + GemmTime(rows, h, f_e / t, gemm_peak));
  const double shared_width = m.shared_experts * f_e;
  const double shared = m.shared_experts == 0 ? 0.0
                                              : GemmTime(tokens, (swiglu ? 2 : 1) * shared_width / t, h, gemm_peak) +
                                                    GemmTime(tokens, h, shared_width / t, gemm_peak);
  const double values = E / ep * rows * (2 * 2 * h + unit_values * f_e / t) + tokens * unit_values * shared_width / t;
  return router + routed + shared + values * bv / memory_bandwidth_;
}

// One dispatch (or combine): each rank sends its T k routed copies (T = b s / (t cp) with the tp
// ranks splitting the tokens, Megatron's alltoall dispatcher) of h values, times the load, and
// keeps the (1 / ep) bound for its own experts; the rest crosses the links the ep group spans
// (members tp apart, rank order etp-ep-edp-pp): those inside the node at the node's bandwidth,
// those on other nodes through the node's NICs, shared by its ranks all sending at once.
double PerformanceModel::AllToAllTime(const Layout& l) const {
  if (l.ep == 1) return 0.0;
  const ModelShape& m = model_;
  const double e = l.ep;
  const double bytes = TokensPerRank(l, m) / l.tp * m.top_k * m.ExpertLoad() * m.hidden * BytesPerValue(l.precision);
  const int stride = RankOrder::Of(l).Stride(GridDim::kEp);
  const double in_node = std::clamp(ranks_per_node_ / std::max(1, stride), 1, l.ep);  // ep members per node
  const LinkSpeed inside = GroupLink(static_cast<int>(in_node), stride);
  double time = bytes * (in_node - 1) / e / inside.bandwidth + inside.latency;
  if (in_node < e) {
    const double nic_per_rank = node_network_ / ranks_per_node_;
    time += bytes * (e - in_node) / e / nic_per_rank + eff_[EfficiencyKey::kNetworkLatencyUs] * 1e-6;
  }
  return time;
}

// ---- Context parallelism, Megatron-Core's ring (cp_comm_type p2p, TransformerEngine's
// attention with CP): per layer and micro-batch a rank's K/V block (its s / cp tokens' K and V
// heads of its TP shard: GQA moves g / a of what multi-head attention would) passes cp - 1 hops
// around the cp group, each posted before the attention of the block in hand and hidden behind
// it (1 / cp of the rank's attention: the causal load balance evens the blocks). Backward, the
// K/V block and its dK/dV accumulator travel together (twice the bytes) behind each block's
// backward, and the dK/dV go home one last hop nothing hides. Recomputation (full or
// selective) runs the forward ring again. The ring's neighbours are tp ranks apart (cp inside
// dp, tp innermost): its hops cross the link the cp group spans.
double PerformanceModel::KvExchangeExposedTime(const Layout& l, const LayerTime& layer) const {
  if (l.cp == 1) return 0.0;
  const ModelShape& m = model_;
  const double kv_heads = KvHeadsOverTp(m, l.tp) / l.tp;
  const double block = TokensPerRank(l, m) * 2 * kv_heads * m.HeadDim() * BytesPerValue(l.precision);
  const LinkSpeed link = GroupLink(l.cp, RankOrder::Of(l).Stride(GridDim::kCp));
  auto hop = [&](double bytes) { return bytes / link.bandwidth + link.latency; };
  const double hops = l.cp - 1;
  const double forward = hops * std::max(0.0, hop(block) - layer.attention_forward / l.cp);
  const double backward = hops * std::max(0.0, hop(2 * block) - layer.attention_backward / l.cp) + hop(block);
  return forward + backward + (l.recompute != Recompute::kNone ? forward : 0.0);
}

// ---- fp8's casts per layer and pass, averaged over forward and backward (the element-wise
// term counts once forward, twice backward): forward the four GEMMs' inputs (the norms' outputs
// on the rank's tokens, the attention output's and fc2's inputs on its columns), backward the
// gradients of their outputs, both cast to FP8 with a transpose. The weights' casts, once per
// step, are counted with the optimizer (Fp8WeightCastTime).
double PerformanceModel::Fp8CastValuesPerPass(const Layout& l) const {
  if (l.precision != Precision::kFp8) return 0.0;
  const ModelShape& m = model_;
  const double h = m.hidden, f = m.MlpWidth(), t = l.tp, tokens = TokensPerRank(l, m);
  const double kv = KvHeadsOverTp(m, l.tp), head_dim = h / m.heads;
  const double fc1_columns = (m.mlp == MlpKind::kSwiglu ? 2 * f : f) / t;
  const double forward = tokens * (2 * h / (l.seq_parallel ? t : 1.0) + h / t + f / t);
  const double backward = tokens * ((h + 2 * kv * head_dim) / t + h + fc1_columns + h);
  return (forward + backward) / 3.0;
}

// ---- The head on the last stage, per micro-batch. A language model: logits GEMM (T, V/t, h)
// forward and backward, and the fp32 cross-entropy over the vocabulary shard. A model without a
// vocabulary (a ViT): the head GEMM (T, O, h), replicated over tp (no collective), and the fp32
// mean-squared error over its outputs (read, write, gradient). Both: the final norm.
PerformanceModel::HeadTime PerformanceModel::HeadTimes(const Layout& l) const {
  const double peak = peak_[StoragePeakIndex(l.precision)];
  const double bv = BytesPerValue(l.precision);
  const double h = model_.hidden, V = model_.vocab, t = l.tp;
  const double tokens = TokensPerRank(l, model_);
  HeadTime head;
  if (!model_.HasVocabulary()) {
    const double O = model_.output_width;
    head.compute = 3 * GemmTime(tokens, O, h, peak) + tokens * O * kMseValuesPerOutput * 4.0 / memory_bandwidth_ +
                   3 * tokens * h * bv / memory_bandwidth_;
    return head;
  }
  head.compute = 3 * GemmTime(tokens, V / t, h, peak) +
                 tokens * (V / t) * kCrossEntropyValuesPerLogit * 4.0 / memory_bandwidth_ +
                 3 * tokens * h * bv / memory_bandwidth_;
  head.tp_comm = l.tp > 1 ? 3 * RingAllReduceTime(tokens * 4.0, l.tp, GroupLink(l.tp, RankOrder::Of(l).Stride(GridDim::kTp))) : 0.0;
  return head;
}

// ---- A ViT's patch embedding on the first stage, per micro-batch: the (T, h, P) GEMM forward
// and its weight gradient (the input patches need no gradient); replicated over tp. A language
// model's token embedding is a table lookup, counted nowhere (as before).
double PerformanceModel::EmbedTime(const Layout& l) const {
  if (model_.HasVocabulary()) return 0.0;
  const double peak = peak_[StoragePeakIndex(l.precision)];
  const double tokens = TokensPerRank(l, model_);
  return 2 * GemmTime(tokens, model_.hidden, model_.patch_tokens, peak);
}

// ---- Pipeline transfers per micro-batch: activations forward and gradients backward at every
// chunk boundary, v per micro-batch; T x h values, split over the TP ranks (Megatron's
// scatter/gather, or sequence-parallel shards). Stage neighbours are t * cp * d ranks apart.
double PerformanceModel::PipelineTransferTime(const Layout& l) const {
  if (l.pp == 1) return 0;
  const double tokens = TokensPerRank(l, model_);
  const LinkSpeed pp_link = GroupLink(2, RankOrder::Of(l).Stride(GridDim::kPp));  // neighbouring stages
  const double bytes = tokens * model_.hidden * BytesPerValue(l.precision) / l.tp;
  return 2.0 * l.virtual_stages * (bytes / pp_link.bandwidth + pp_link.latency);
}

// ---- Parameters per device of the first, the last and the most loaded stage. Per layer,
// split over tp: Q, K, V (GQA: K and V g/a of Q; replicated K/V heads when tp > g), the
// attention output, the MLP's k matrices (SwiGLU 3), and their biases (none in Llama); on
// every rank: the norms (LayerNorm weight and bias, RMSNorm a weight) and one row-parallel
// bias. Megatron keeps both row-parallel biases replicated (6h for GPT, not 5h): the missing h
// is kept for exactness with earlier predictions until its own issue fixes it.
PerformanceModel::StageParameters PerformanceModel::StageParams(const Layout& l) const {
  const ModelShape& m = model_;
  const double h = m.hidden, f = m.MlpWidth(), s = m.seq_len, V = m.vocab, t = l.tp;
  const double d = h / m.heads, kv = KvHeadsOverTp(m, l.tp), k = m.MlpMatrices();
  const double beta = m.linear_biases ? 1.0 : 0.0, norm_vectors = m.norm == NormKind::kLayerNorm ? 2.0 : 1.0;
  const double qkv_width = h + 2 * kv * d;
  // GPT: (4h^2 + 3h + 2hf + f) / t + 5h, every term an exact integer before the division.
  const double split = h * qkv_width + h * h + k * h * f + beta * (qkv_width + (k - 1) * f);
  double layer_params = split / t + (2 * norm_vectors * h + beta * h);
  StageParameters stage;
  if (m.experts > 0) {  // the MoE layers' share: experts and shared experts split over tp, the router whole
    const double moe = static_cast<double>(m.MoeLayers()) / m.layers;
    stage.expert_layer = ExpertLayerParameters(l);
    layer_params += moe * (m.shared_experts * m.ExpertParameters() / t + h * m.experts -
                           (k * h * f + beta * (k - 1) * f) / t) + stage.expert_layer;
  }
  const StageLayers on = LayersOnStages(l);
  const double layers_per_stage = on.first;  // every stage's when the split is even
  const double positions = m.positions == Positions::kLearned ? s * h : 0.0;
  const double final_norm = norm_vectors * h;
  stage.layer = layer_params;
  if (!m.HasVocabulary()) {  // a ViT: patch embedding and head replicated over tp, never tied
    const double embed = m.patch_tokens * h + beta * h, head = h * m.output_width + beta * m.output_width;
    stage.first = layers_per_stage * layer_params + embed + positions;
    stage.last = on.last * layer_params + final_norm + head;
    stage.middle = on.middle * layer_params;
    stage.most_loaded = l.pp == 1 ? layers_per_stage * layer_params + embed + head + positions + final_norm
                                  : std::max({stage.first, stage.last, stage.middle});
    return stage;
  }
  stage.embedding = V * h / t;
  stage.first = layers_per_stage * layer_params + stage.embedding + positions;
  stage.last = on.last * layer_params + final_norm + (m.tied_embeddings && l.pp > 1 ? stage.embedding : 0.0) +
               (m.tied_embeddings ? 0.0 : stage.embedding);
  stage.middle = on.middle * layer_params;
  stage.most_loaded = l.pp == 1 ? layers_per_stage * layer_params + stage.embedding * (m.tied_embeddings ? 1 : 2) +
                                      positions + final_norm
                                : std::max({stage.first, stage.last, stage.middle});
  return stage;
}

// ---- The routed experts' weights a rank holds per layer: E / ep experts split over tp (expert
// tensor parallelism = tp), the mean over the dense and MoE layers.
double PerformanceModel::ExpertLayerParameters(const Layout& l) const {
  const ModelShape& m = model_;
  const double moe = static_cast<double>(m.MoeLayers()) / m.layers;
  return moe * m.experts / l.ep * m.ExpertParameters() / l.tp;
}

// ---- The layers on the first, the middle (the most loaded of them) and the last stage: L / p
// each when the split is even (pp divides the layers), else base/pipeline_split.h's rule.
PerformanceModel::StageLayers PerformanceModel::LayersOnStages(const Layout& l) const {
  if (!l.uneven_stages || l.pp == 1) {
    const double even = static_cast<double>(model_.layers) / l.pp;
    return {even, even, even, false};
  }
  const StageSplit split = UnevenSplit(model_, l.pp);
  const double middle = l.pp > 2 ? *std::max_element(split.layers.begin() + 1, split.layers.end() - 1) : 0.0;
  return {static_cast<double>(split.First()), middle, static_cast<double>(split.Last()), true};
}

// ---- The stage that sets the pipeline's pace: the one whose micro-batch takes longest. Evenly
// split, every stage runs L / p layers and the slowest is the one with the heavier end (the LM
// head on the last, a ViT's patch embedding on the first; both with one stage). Unevenly split,
// the first (its layers and the embedding), the most loaded middle stage and the last (its
// layers and the head) are compared.
PerformanceModel::SlowestStage PerformanceModel::SlowestStageOf(const Layout& l, const LayerTime& layer,
                                                                const HeadTime& head, double embed) const {
  const StageLayers on = LayersOnStages(l);
  if (!on.uneven) return {on.first, l.pp == 1 ? head.compute + embed : std::max(head.compute, embed), head.tp_comm, false};
  const double per_layer =
      layer.forward + layer.backward + layer.recompute + layer.tp_comm + layer.cp_comm + layer.moe_comm;
  SlowestStage slowest{on.first, embed, 0.0, true};
  auto time = [&](const SlowestStage& stage) { return stage.layers * per_layer + stage.ends + stage.ends_tp; };
  for (const SlowestStage& stage : {SlowestStage{on.middle, 0.0, 0.0, true}, SlowestStage{on.last, head.compute, head.tp_comm, true}})
    if (time(stage) > time(slowest)) slowest = stage;
  return slowest;
}

// ---- Data parallelism: members are t ranks apart. The reduction of gradients can hide
// behind the last micro-batch's backward pass; ZeRO-1 reduce-scatters instead and then
// all-gathers the updated 16-bit weights, which nothing hides. ZeRO-2 keeps only its gradient
// shard, so it reduce-scatters after every micro-batch's backward (hidden behind it as far as it
// goes), then gathers the weights as ZeRO-1 does. ZeRO-3 (FSDP) gathers each layer's weights
// before its forward and again before its backward (resharded after forward), every
// micro-batch, and reduce-scatters its gradients: prefetched on the communication stream, each
// hides behind that pass's compute as far as it goes; the updated weights stay sharded.
// Hybrid sharding runs those collectives inside a shard group (dp / dp_replicate ranks, t apart)
// and all-reduces the gradient shard across the replicas (t x shard group apart) once per step.
// Context parallelism's ranks hold the same weights: every group above spans them too (cp x
// the shard group, Megatron-Core's dp-cp group), cp being inside dp in the rank order.
PerformanceModel::DpExposed PerformanceModel::DataParallelExposedTime(const Layout& l, const StageParameters& stage,
                                                                      DpOverlap hide) const {
  if (l.dp * l.cp == 1) return {};
  const double grad_bytes = GradientBytes(l.precision), bv = BytesPerValue(l.precision);
  const double params = stage.most_loaded, mb = l.num_micro_batches;
  const RankOrder order = RankOrder::Of(l);
  // The shard group with its cp peers (cp inside dp: consecutive, tp ranks apart).
  const int shard = l.ZeroGroup();
  const LinkSpeed shard_link = GroupLink(shard, order.Stride(GridDim::kCp));
  if (l.zero == 0)
    return {std::max(0.0, RingAllReduceTime(params * grad_bytes, l.dp * l.cp, shard_link) - hide.backward), 0.0};
  const double d = shard, steps = CollectiveSteps(shard) * shard_link.latency;
  const double reduce_scatter = (d - 1) / d * params * grad_bytes / shard_link.bandwidth + steps / 2;
  const double all_gather = (d - 1) / d * params * bv / shard_link.bandwidth + steps / 2;
  const double across_replicas =
      RingAllReduceTime(params * grad_bytes / d, l.dp_replicate,
                        GroupLink(l.dp_replicate, order.Stride(GridDim::kDpReplicate)));
  if (l.zero == 1) return {std::max(0.0, reduce_scatter + across_replicas - hide.backward) + all_gather, 0.0};
  if (l.zero == 2) return {mb * std::max(0.0, reduce_scatter - hide.backward) + across_replicas + all_gather, 0.0};
  // ZeRO-3: one collective per layer and pass, each paying its latency.
  const double units = std::max(1.0, params / std::max(stage.layer, 1.0));
  const double per_layer_latency = (units - 1) * steps / 2;
  const double gather = all_gather + per_layer_latency, scatter = reduce_scatter + per_layer_latency;
  const double gather_exposed = std::max(0.0, gather - hide.forward) + std::max(0.0, gather - hide.backward);
  const double backward_exposed = std::max(0.0, gather + scatter - hide.backward);
  return {mb * (backward_exposed - std::max(0.0, gather - hide.backward)) + across_replicas, mb * gather_exposed};
}

// ---- Tied embeddings with pp > 1: once per step the first and last stages sum their embedding
// gradients (a pipeline-level transfer, counted with the point-to-point time).
double PerformanceModel::TiedEmbeddingTime(const Layout& l, double embedding_params) const {
  if (l.pp == 1 || !model_.tied_embeddings) return 0;
  const LinkSpeed ends = GroupLink(2, RankOrder::Of(l).Stride(GridDim::kPp) * (l.pp - 1));  // first and last stage
  return RingAllReduceTime(embedding_params * GradientBytes(l.precision), 2, ends);
}

// ---- AdamW: per parameter it reads the gradient (twice, with the norm for clipping), reads
// and writes the fp32 master weight and both moments, and writes the 16-bit copy.
// A MoE model's expert parameters (`expert_params` of them) are updated in shards over the
// expert-dp ranks, the rest over dp x cp.
double PerformanceModel::OptimizerTime(const Layout& l, double params, double expert_params) const {
  const bool mixed = l.precision != Precision::kFp32;
  const double optimizer_bytes = 2 * GradientBytes(l.precision) + 3 * 8.0 + (mixed ? BytesPerValue(l.precision) : 0.0);
  const bool sharded = l.zero >= 1;
  const double updated = (params - expert_params) / (sharded ? static_cast<double>(l.ZeroGroup()) : 1.0) +
                         expert_params / (sharded ? static_cast<double>(l.ExpertZeroGroup()) : 1.0);
  return updated * optimizer_bytes / memory_bandwidth_;
}

// ---- fp8: once per step, on the step's first micro-batch, TransformerEngine casts the stage's
// layer weights (whole, as each rank computes with them) to FP8 and their transposes.
double PerformanceModel::Fp8WeightCastTime(const Layout& l, const StageParameters& stage) const {
  if (l.precision != Precision::kFp8) return 0.0;
  const StageLayers on = LayersOnStages(l);
  const double params = on.uneven ? stage.layer * std::max({on.first, on.middle, on.last})
                                  : stage.layer * model_.layers / l.pp;  // the stage's layers
  return params * kFp8CastBytesPerValue / memory_bandwidth_;
}

// ---- Time-shared devices (more ranks than devices on a node): the node's ranks' work (the LM
// head on one stage in p) over its devices, beyond the dedicated-device schedule.
double PerformanceModel::DeviceSharingTime(const Layout& l, const TimeBreakdown& time, double head_per_mb,
                                           double dedicated) const {
  if (ranks_per_node_ <= gpus_per_node_) return 0;
  const double p = l.pp, mb = l.num_micro_batches;
  const double work_per_rank = time.compute - mb * head_per_mb * (p - 1) / p + time.tp_comm + time.cp_comm +
                               time.moe_all_to_all + time.pp_p2p + time.dp_comm_exposed + time.weight_gather_exposed + time.optimizer;
  const double shared = work_per_rank * ranks_per_node_ / gpus_per_node_;
  return std::max(0.0, shared - dedicated);
}

// ---- Activations kept per layer and micro-batch (Korthikanti et al. 2022 §4.1), in 16-bit
// units of s b h. R, kept whole on every TP rank without sequence parallelism: the two norms'
// inputs 4, the QKV and MLP inputs (norm outputs) 2 each, two dropout masks 2. S, split over tp:
// Q 2, K and V 4 g/a (GQA; one replicated K/V head per rank when tp > g), the attention output
// projection's input 2, and the MLP: GeLU's input and fc2's input 2 f/h each; SwiGLU's stacked
// gate and up 4 f/h and fc2's input silu(gate) * up 2 f/h. GPT: R 10, S 24 (f = 4h), Korthikanti's 34.
// RMSNorm keeps what LayerNorm keeps; rotary keeps nothing (Q and K are stored rotated, and the
// rotation's backward needs only the cos/sin table); ALiBi keeps nothing.
// fp8 keeps the four GEMMs' inputs in FP8 for their backward (TransformerEngine's Linear and
// LayerNormLinear save the FP8 casts, 1 byte): the QKV and MLP inputs 1 each, the attention output
// projection's input 1 and fc2's f/h.
PerformanceModel::ActivationUnits PerformanceModel::ActivationUnitsPerLayer(const ModelShape& m, int tp,
                                                                            Precision precision) {
  const double f_over_h = static_cast<double>(m.MlpWidth()) / m.hidden;
  const double kv_over_a = KvHeadsOverTp(m, tp) / m.heads;
  const double dense_mlp = m.mlp == MlpKind::kSwiglu ? 6 * f_over_h : 4 * f_over_h;
  const double mlp = m.experts > 0 ? MoeMlpUnits(m, dense_mlp) : dense_mlp;
  if (precision == Precision::kFp8) return {8.0, 2 + 4 * kv_over_a + 1 + mlp - f_over_h};
  return {10.0, 2 + 4 * kv_over_a + 2 + mlp};
}

// A MoE layer keeps, per token, its k routed copies (the permuted inputs, 2 units each) and each
// copy's expert activations as a dense MLP f_e wide keeps them, times the load (the most loaded
// rank's; padded to capacity with a CF); its shared experts' as a dense MLP; the router's scores
// are not counted (T x E, small beside them). Dense layers keep the dense MLP's.
double PerformanceModel::MoeMlpUnits(const ModelShape& m, double dense_mlp_units) {
  const double moe = static_cast<double>(m.MoeLayers()) / m.layers;
  const double fe_over_h = static_cast<double>(m.ExpertMlpWidth()) / m.hidden;
  const double expert = (m.mlp == MlpKind::kSwiglu ? 6 : 4) * fe_over_h;
  const double moe_layer = m.top_k * m.ExpertLoad() * (expert + 2) + m.shared_experts * expert;
  return (1 - moe) * dense_mlp_units + moe * moe_layer;
}

ModelStates ZeroModelStates(double params, double weight_bytes, double gradient_bytes, double optimizer_bytes,
                            int stage, int dp) {
  const double d = dp;
  ModelStates s;
  s.weights = params * weight_bytes / (stage >= 3 ? d : 1.0);
  s.gradients = params * gradient_bytes / (stage >= 2 ? d : 1.0);
  s.optimizer = params * optimizer_bytes / (stage >= 1 ? d : 1.0);
  return s;
}

// ---- Memory: the first stage (embedding, the most activations in flight) or the last (LM head,
// fp32 logits), whichever needs more; with one stage, both on one device. Activations per layer
// per micro-batch (Korthikanti et al. 2022), in 16-bit units of s b h.
MemoryBreakdown PerformanceModel::Memory(const Layout& l, const StageParameters& stage) const {
  using K = EfficiencyKey;
  const ModelShape& m = model_;
  const double bv = BytesPerValue(l.precision), grad_bytes = GradientBytes(l.precision);
  const double h = m.hidden, s = m.seq_len, a = m.heads, V = m.vocab;
  const double t = l.tp, p = l.pp, v = l.virtual_stages, mb = l.num_micro_batches;
  const double b = l.micro_batch, tokens = TokensPerRank(l, m);
  const StageLayers on = LayersOnStages(l);
  const bool mixed = l.precision != Precision::kFp32;
  const double scores_kept = l.flash_attention ? 0.0 : 5 * a * s / (h * t);
  const double scores = l.recompute != Recompute::kNone ? 0.0 : scores_kept;
  const ActivationUnits units = ActivationUnitsPerLayer(m, l.tp, l.precision);
  // Without sequence parallelism every TP rank keeps R whole and S / t; with it, both split.
  const double kept = l.seq_parallel ? (units.replicated + units.split) / t
                                     : (l.tp == 1 ? units.replicated + units.split : units.replicated + units.split / t);
  const double full_layer = kept + scores;
  const double stored = l.recompute == Recompute::kFull ? (l.seq_parallel ? 2 / t : 2.0) : full_layer;
  // Full recomputation: the layer being recomputed holds its full activations meanwhile.
  const double working = l.recompute == Recompute::kFull ? kept + scores_kept : 0.0;
  const double sbh = s / l.cp * b * h * bv / 2.0;  // a rank's s / cp tokens under context parallelism
  // 1F1B: the first stage holds min(p, m) micro-batches in flight (L layers' worth when m >= p),
  // more with interleaving; the last stage holds one micro-batch, and the logits (16-bit and fp32).
  const double in_flight = std::min(p, mb) * (v > 1 ? 1.0 + (p - 1) / (p * v) : 1.0);
  // The head's outputs, 16-bit and fp32: a vocabulary shard's logits, or a ViT's O values (replicated).
  const double logits = m.HasVocabulary() ? tokens * V / t * (4.0 + bv) : tokens * m.output_width * (4.0 + bv);
  // Context parallelism's ring holds 4 K/V blocks at most: backward's K/V and dK/dV in hand and arriving.
  const double kv_block = tokens * 2 * KvHeadsOverTp(m, l.tp) / t * m.HeadDim() * bv;
  const double comm_buffers = (l.pp > 1 ? 2 * v * tokens * h * bv / t : 0.0) + (l.tp > 1 ? tokens * h * bv : 0.0) +
                              (l.cp > 1 ? 4 * kv_block : 0.0) +
                              (l.ep > 1 ? 2 * tokens / t * m.top_k * m.ExpertLoad() * h * bv : 0.0);
  // FSDP (ZeRO-3) holds a unit's weights whole while it computes (a layer, or the embedding or
  // the head: a vocabulary shard), and the next unit's, gathered ahead on the communication stream.
  const double gathered = l.zero >= 3 ? (stage.layer + std::max(stage.layer, stage.embedding)) * bv : 0.0;
  // fp8 caches each layer weight's FP8 copy and transpose through the step (2 bytes a parameter),
  // of the whole layers a rank computes with: the stage's, or under ZeRO-3 the gathered ones.
  auto fp8_copies = [&](double stage_layers) {
    return l.precision != Precision::kFp8 ? 0.0 : l.zero >= 3 ? 2.0 * 2 * stage.layer : 2.0 * stage.layer * stage_layers;
  };
  // A MoE model's expert weights: their states sharded by ZeRO over the expert-dp ranks
  // (world / (tp ep pp), Megatron's theoretical_memory_usage), the rest over dp x cp.
  auto stage_memory = [&](double stage_params, double stage_layers, double activations) {
    MemoryBreakdown mem;
    const double experts = stage.expert_layer * stage_layers;
    const ModelStates states =
        ZeroModelStates(stage_params - experts, bv, grad_bytes, mixed ? 12.0 : 8.0, l.zero, l.ZeroGroup());
    const ModelStates expert_states =
        ZeroModelStates(experts, bv, grad_bytes, mixed ? 12.0 : 8.0, l.zero, l.ExpertZeroGroup());
    mem.weights = states.weights + expert_states.weights + fp8_copies(stage_layers);
    mem.gathered_weights = gathered;
    mem.gradients = states.gradients + expert_states.gradients;
    mem.optimizer_states = states.optimizer + expert_states.optimizer;
    mem.activations = activations;
    mem.comm_buffers = comm_buffers;
    mem.runtime_overhead = eff_[K::kMemoryOverheadGb] * 1e9 + eff_[K::kMemoryFragmentation] * activations;
    return mem;
  };
  if (l.pp == 1) return stage_memory(stage.most_loaded, on.first, sbh * (stored * on.first + working) + logits);
  const MemoryBreakdown first = stage_memory(stage.first, on.first, sbh * (stored * on.first * in_flight + working));
  const MemoryBreakdown last = stage_memory(stage.last, on.last, sbh * (stored * on.last + working) + logits);
  const MemoryBreakdown& ends = first.Total() >= last.Total() ? first : last;
  if (!on.uneven || l.pp < 3) return ends;
  // Unevenly split, a middle stage may hold more: the second holds p - 1 micro-batches in flight.
  const MemoryBreakdown middle =
      stage_memory(stage.middle, on.middle, sbh * (stored * on.middle * std::min(p - 1, mb) + working));
  return middle.Total() > ends.Total() ? middle : ends;
}

// ---- time.compute, term by term: per micro-batch, the stage's layers (each GEMM forward and
// twice backward; element-wise kernels and overhead once forward, twice backward) and its end.
ComputeTerms PerformanceModel::TermsPerStep(const Layout& l, const LayerTime& layer, const SlowestStage& slowest) const {
  const double per_step = slowest.uneven ? l.num_micro_batches * slowest.layers
                                         : static_cast<double>(l.num_micro_batches) * model_.layers / l.pp;
  const double ends = slowest.ends;
  ComputeTerms terms;
  terms.qkv_projections = per_step * 3 * layer.qkv;
  terms.attention_output = per_step * 3 * layer.attention_output;
  terms.mlp = per_step * 3 * layer.mlp;
  terms.attention_core = per_step * (layer.attention_forward + layer.attention_backward);
  terms.elementwise = per_step * 3 * layer.elementwise;
  terms.kernel_overhead = per_step * 3 * layer.overhead;
  terms.recompute = per_step * layer.recompute;
  terms.head_and_embedding = static_cast<double>(l.num_micro_batches) * ends;
  terms.experts = per_step * 3 * layer.experts;
  return terms;
}

// The step: m slots of the slowest stage's per-micro-batch time plus the (p - 1) / v slots of
// the bubble, the exposed data-parallel reduction, the optimizer, and the time ranks wait for
// shared devices.
Prediction PerformanceModel::Predict(const Layout& l) const {
  const double p = l.pp, v = l.virtual_stages, mb = l.num_micro_batches;
  const LayerTime layer = LayerTimes(l);
  const double p2p = PipelineTransferTime(l);
  // The head runs on the last stage, a ViT's patch embedding on the first: with one stage both.
  const SlowestStage slowest = SlowestStageOf(l, layer, HeadTimes(l), EmbedTime(l));
  const double layers_per_stage = slowest.layers, ends_mb = slowest.ends;
  const double compute_mb = layers_per_stage * (layer.forward + layer.backward + layer.recompute) + ends_mb;
  const double tp_mb = layers_per_stage * layer.tp_comm + slowest.ends_tp;
  const double cp_mb = layers_per_stage * layer.cp_comm;
  const double moe_mb = layers_per_stage * layer.moe_comm;
  const double slot = compute_mb + tp_mb + cp_mb + moe_mb + p2p;
  Prediction out;
  out.time.compute = mb * compute_mb;
  out.compute_terms = TermsPerStep(l, layer, slowest);
  out.time.tp_comm = mb * tp_mb;
  out.time.cp_comm = mb * cp_mb;
  out.time.moe_all_to_all = mb * moe_mb;
  out.time.pp_p2p = mb * p2p;
  out.time.bubble = (p - 1) / v * slot;
  const StageParameters stage = StageParams(l);
  const double overlap = eff_[EfficiencyKey::kDpOverlap] * layers_per_stage;
  const DpOverlap hide{overlap * layer.forward, overlap * (layer.backward + layer.recompute)};
  const DpExposed dp_exposed = DataParallelExposedTime(l, stage, hide);
  out.time.dp_comm_exposed = dp_exposed.gradients;
  out.time.weight_gather_exposed = dp_exposed.weight_gather;
  out.time.pp_p2p += TiedEmbeddingTime(l, stage.embedding);
  const StageLayers on = LayersOnStages(l);
  const double stage_experts = stage.expert_layer * std::max({on.first, on.middle, on.last});
  out.time.optimizer = OptimizerTime(l, stage.most_loaded, stage_experts) + Fp8WeightCastTime(l, stage);
  const double dedicated = out.time.compute + out.time.tp_comm + out.time.cp_comm + out.time.moe_all_to_all +
                           out.time.pp_p2p + out.time.bubble + out.time.dp_comm_exposed +
                           out.time.weight_gather_exposed + out.time.optimizer;
  out.time.device_sharing = DeviceSharingTime(l, out.time, ends_mb, dedicated);
  out.step_time_s = dedicated + out.time.device_sharing;
  out.tokens_per_s = model_.TokensPerStep() / out.step_time_s;
  out.tflops_per_gpu = model_flops_ / out.step_time_s / l.World() / 1e12;
  out.mfu = out.tflops_per_gpu * 1e12 / peak_[static_cast<int>(l.precision)];  // fp8: of the FP8 peak, as NVIDIA's tables
  out.memory = Memory(l, stage);
  out.memory_bytes = out.memory.Total();
  out.fits = out.memory_bytes <= memory_bytes_;
  return out;
}

Result<Prediction> Predict(const Layout& layout, const ModelShape& model, const HardwareProfile& hardware) {
  Result<PerformanceModel> pm = PerformanceModel::Create(model, hardware);
  if (!pm.ok()) return pm.status();
  TUNEPAR_RETURN_IF_ERROR(pm->CheckLayout(layout));
  return pm->Predict(layout);
}

}  // namespace tunepar::runner
