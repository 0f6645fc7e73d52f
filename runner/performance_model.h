// The performance model: step time and memory of a layout, from FLOPs, bytes and the hardware
// profile. It is the `model` backend (a dry run at any scale) and the search's prior.
//
// Time. One optimizer step of the 1F1B pipeline schedule takes (m + (p - 1) / v) slots of the
// slowest stage's per-micro-batch time T_mb (Narayanan et al. 2021, eq. 1 with interleaving),
// plus the exposed data-parallel reduction and the optimizer step. T_mb adds, for the stage's
// layers: the GEMMs (each priced from its M x N x K shape: efficiency e / (1 + d0/M + d0/N +
// d0/K) of the precision's dense peak), the attention core (batched GEMMs, or a fused flash
// kernel), the memory-bound element-wise kernels (bytes / achieved bandwidth), a fixed
// per-layer overhead, the recomputation pass, and the tensor-parallel collectives; plus the LM
// head on the last stage and the pipeline point-to-point transfers.
//
// Context parallelism (cp): each rank computes s / cp tokens of every sequence and 1 / cp of its
// attention; per layer the K/V blocks pass around the cp ring, each hop hidden behind one block's
// attention as far as it goes (KvExchangeExposedTime). Uneven stages: the slowest stage of
// base/pipeline_split.h's split sets the slot.
//
// Placement follows Megatron's rank order: tensor-parallel ranks innermost (within a package,
// then a node), then context-parallel, data-parallel, then pipeline stages. A group's collective runs at the
// slowest link it crosses; groups that leave the node share its NICs with the node's other
// groups communicating at the same time.
//
// Oversubscription. When a node runs more ranks than it has devices (a workstation's cores
// standing in for GPUs), the ranks time-share the devices: a rank idle in a bubble or a
// collective gives its device to another, and the step takes at least the node's total work
// over its devices. The step time is the larger of that and the dedicated-device schedule.
//
// Memory. Weights, gradients and Adam states of the most loaded stage (ZeroModelStates: ZeRO 1-3
// shard them over dp; with 3, FSDP, a layer's gathered weights and the next one's, prefetched,
// are whole while it computes), activations in flight under 1F1B (Korthikanti et al. 2022), the
// communication buffers, and the runtime overhead (a constant plus a fragmentation fraction).
#pragma once

#include <string_view>

#include "base/status.h"
#include "base/flops.h"
#include "runner/efficiency.h"
#include "runner/hardware_profile.h"
#include "base/layout.h"
#include "base/model_shape.h"

namespace tunepar::runner {

// Which model produced a prediction; part of a model-backend study's identity.
inline constexpr std::string_view kPerformanceModelId = "roofline-v1";
inline constexpr std::string_view kPerformanceModelVersion =
    "roofline-v1: shape-aware GEMM efficiency, memory-bound kernels, TP/PP/DP communication "
    "on the links each group crosses, 1F1B bubble; memory after Korthikanti et al. 2022";

struct TimeBreakdown {         // seconds per optimizer step; they add up to the step time
  double compute = 0;          // GEMMs, attention, element-wise kernels, recomputation
  double tp_comm = 0;          // tensor-parallel collectives (not overlapped)
  double cp_comm = 0;          // context parallelism's K/V exchange (ring) not hidden by the chunk attention
  double moe_all_to_all = 0;   // a MoE layer's token dispatch and combine (4 all-to-alls per micro-batch)
  double pp_p2p = 0;           // pipeline sends and receives
  double bubble = 0;           // pipeline fill and drain: (p - 1) / v slots
  double dp_comm_exposed = 0;  // gradient reduction (and ZeRO-1/2's weight gather) not hidden by backward
  double weight_gather_exposed = 0;  // ZeRO-3 / FSDP: per-layer weight all-gathers not hidden by compute
  double optimizer = 0;        // AdamW update, memory-bound
  double device_sharing = 0;   // ranks waiting for a device other ranks use (oversubscribed runs)
};

// What `TimeBreakdown::compute` is spent on, seconds per step (the slowest stage's micro-batches):
// they add up to it. Each GEMM term counts its forward and backward passes.
struct ComputeTerms {
  double qkv_projections = 0;     // Q, K, V GEMM (GQA: K and V g/a of Q)
  double attention_output = 0;    // the attention's output projection
  double mlp = 0;                 // the MLP's GEMMs (SwiGLU: gate and up stacked, then down)
  double attention_core = 0;      // softmax(Q K^T) V: batched GEMMs or the flash kernel
  double elementwise = 0;         // norms, dropout, residuals, GeLU / SwiGLU product, rotary, softmax
  double kernel_overhead = 0;     // fixed per-layer launch and synchronisation cost
  double recompute = 0;           // the forward pass again (full) or the attention core (selective)
  double head_and_embedding = 0;  // LM head and cross-entropy; a ViT's patch embedding and head
  double experts = 0;             // a MoE layer's router and expert GEMMs (the most loaded expert rank's)
  double Total() const {
    return qkv_projections + attention_output + mlp + attention_core + elementwise + kernel_overhead + recompute +
           head_and_embedding + experts;
  }
};

struct MemoryBreakdown {  // bytes per device, on the most loaded pipeline stage
  double weights = 0;
  double gradients = 0;
  double optimizer_states = 0;
  double activations = 0;
  double comm_buffers = 0;
  double runtime_overhead = 0;
  double gathered_weights = 0;  // ZeRO-3 / FSDP: the whole weights of the unit computing and the one prefetched
  double Total() const {
    return weights + gradients + optimizer_states + activations + comm_buffers + runtime_overhead + gathered_weights;
  }
};

// The model states of one device holding `params` parameters, under ZeRO `stage` over `dp` ranks
// (Rajbhandari et al. 2020, figure 1): weights (`weight_bytes` per parameter), gradients
// (`gradient_bytes`) and optimizer states (`optimizer_bytes`, their K) each replicated or split
// over dp: stage 1 splits the optimizer states, 2 the gradients too, 3 the weights too.
struct ModelStates {
  double weights = 0, gradients = 0, optimizer = 0;
  double Total() const { return weights + gradients + optimizer; }
};
ModelStates ZeroModelStates(double params, double weight_bytes, double gradient_bytes, double optimizer_bytes,
                            int stage, int dp);

struct Prediction {
  double step_time_s = 0;
  double tokens_per_s = 0;
  // Model FLOPs per second per GPU: 72 B L s h^2 (1 + s/(6h) + V/(12 h L)) per step (Korthikanti
  // et al. 2022 eq. 7; recomputation not counted) / step time / GPUs.
  double tflops_per_gpu = 0;
  double mfu = 0;  // tflops_per_gpu / the device's dense peak for the layout's precision
  double memory_bytes = 0;
  bool fits = false;  // memory_bytes <= device memory
  TimeBreakdown time;
  ComputeTerms compute_terms;  // time.compute, term by term
  MemoryBreakdown memory;
};

class PerformanceModel {
 public:
  // Fails when the profile lacks an efficiency parameter the model needs.
  static Result<PerformanceModel> Create(const ModelShape& model, const HardwareProfile& hardware);
  // The same with explicit efficiencies (the calibration fit varies them).
  PerformanceModel(const ModelShape& model, const HardwareProfile& hardware,
                   const Efficiency& efficiency);

  // Places `ranks` ranks on each node (0 or the profile's GPUs per node: one rank per device).
  // More ranks than devices time-share them, and every group of ranks within a node
  // communicates over the node's links.
  PerformanceModel& set_ranks_per_node(int ranks);
  int ranks_per_node() const { return ranks_per_node_; }

  // The layout must be legal for the model (see CheckLayout); microseconds per call.
  Prediction Predict(const Layout& layout) const;

  // One line naming what makes the layout impossible to run for this model, or ok.
  Status CheckLayout(const Layout& layout) const;

  const Efficiency& efficiency() const { return eff_; }
  const ModelShape& model() const { return model_; }

 private:
  struct LinkSpeed {
    double bandwidth;  // bytes/s per GPU, per direction
    double latency;    // s per step
  };
  // The terms of a prediction (performance_model.cc says what each counts).
  struct LayerTime {  // one layer, one micro-batch, one tensor-parallel rank, seconds
    double forward = 0, backward = 0, recompute = 0, tp_comm = 0;
    double cp_comm = 0;  // the K/V ring's exposed hops (context parallelism)
    double moe_comm = 0;  // a MoE layer's all-to-alls (forward, backward, recomputed forward)
    double experts = 0;   // the router and expert GEMMs, forward (in mlp's place; backward 2x)
    // The forward pass's parts (the backward pass runs each GEMM twice, the rest as LayerTimes says).
    double qkv = 0, attention_output = 0, mlp = 0, attention_forward = 0, attention_backward = 0;
    double elementwise = 0, overhead = 0;
  };
  struct HeadTime {  // the LM head (or a ViT's head and patch embedding) per micro-batch
    double compute = 0, tp_comm = 0;
  };
  struct StageParameters {  // parameters per device
    double first = 0, last = 0, most_loaded = 0, embedding = 0;
    double middle = 0;  // the most loaded middle stage's (uneven splits; 0 when even)
    double layer = 0;  // one transformer layer's, on its tensor-parallel rank
    // Of `layer`: the routed experts' weights a rank holds (E / ep experts, split over tp; a MoE
    // model's mean over its dense and MoE layers), whose states ZeRO shards over the expert-dp ranks.
    double expert_layer = 0;
  };
  LayerTime LayerTimes(const Layout& layout) const;
  // A MoE model: the MoE layers' router, experts and all-to-alls in `layer`, as the mean over its
  // dense and MoE layers.
  void AddExperts(const Layout& layout, LayerTime* layer) const;
  double ExpertForwardTime(const Layout& layout) const;  // one MoE layer, one micro-batch
  double AllToAllTime(const Layout& layout) const;       // one dispatch or combine
  double ExpertLayerParameters(const Layout& layout) const;
  double KvExchangeExposedTime(const Layout& layout, const LayerTime& layer) const;
  struct StageLayers {  // layers on the first, the most loaded middle and the last stage
    double first = 0, middle = 0, last = 0;
    bool uneven = false;  // from base/pipeline_split.h's uneven rule (else L / p each)
  };
  StageLayers LayersOnStages(const Layout& layout) const;
  struct SlowestStage {  // the stage whose micro-batch takes longest, per micro-batch
    double layers = 0;   // its layers
    double ends = 0;     // its end's compute: the LM head (last stage), a ViT's patch embedding (first)
    double ends_tp = 0;  // the head's tensor-parallel collectives
    bool uneven = false;
  };
  HeadTime HeadTimes(const Layout& layout) const;
  double EmbedTime(const Layout& layout) const;
  SlowestStage SlowestStageOf(const Layout& layout, const LayerTime& layer, const HeadTime& head, double embed) const;
  ComputeTerms TermsPerStep(const Layout& layout, const LayerTime& layer, const SlowestStage& slowest) const;
  double PipelineTransferTime(const Layout& layout) const;
  StageParameters StageParams(const Layout& layout) const;
  // Per micro-batch, the compute a data-parallel collective can hide behind.
  struct DpOverlap {
    double forward = 0, backward = 0;
  };
  struct DpExposed {  // seconds per step
    double gradients = 0;      // gradient reduction, and ZeRO-1/2's gather of the updated weights
    double weight_gather = 0;  // ZeRO-3's per-layer gathers before forward and backward
  };
  DpExposed DataParallelExposedTime(const Layout& layout, const StageParameters& stage, DpOverlap hide) const;
  double TiedEmbeddingTime(const Layout& layout, double embedding_params) const;
  double OptimizerTime(const Layout& layout, double params, double expert_params) const;
  double Fp8WeightCastTime(const Layout& layout, const StageParameters& stage) const;
  double Fp8CastValuesPerPass(const Layout& layout) const;
  double DeviceSharingTime(const Layout& layout, const TimeBreakdown& time, double head_per_micro_batch,
                           double dedicated) const;
  MemoryBreakdown Memory(const Layout& layout, const StageParameters& stage) const;
  struct ActivationUnits {  // 16-bit units of s b h per layer and micro-batch
    double replicated = 0;  // R: on every TP rank (split only by sequence parallelism)
    double split = 0;       // S: split over tp
  };
  static ActivationUnits ActivationUnitsPerLayer(const ModelShape& model, int tp, Precision precision);
  // A MoE model's MLP units of S (split over tp) per layer, the mean over its dense and MoE layers.
  static double MoeMlpUnits(const ModelShape& model, double dense_mlp_units);
  // The link a group of `size` ranks, `stride` ranks apart, runs its collectives over.
  LinkSpeed GroupLink(int size, int stride) const;
  double GemmTime(double m, double n, double k, double peak) const;
  double RingAllReduceTime(double bytes, int ranks, const LinkSpeed& link) const;

  ModelShape model_;
  Efficiency eff_;
  // Hardware, in SI units.
  double peak_[4] = {0, 0, 0, 0};  // FLOP/s by Precision
  double memory_bytes_ = 0;
  double memory_bandwidth_ = 0;  // achieved by element-wise kernels, bytes/s
  int gpus_per_node_ = 1;
  int ranks_per_node_ = 1;  // >= gpus_per_node_
  int gpus_per_package_ = 1;
  double package_bandwidth_ = 0;  // achieved by collectives, bytes/s
  double node_bandwidth_ = 0;     // achieved by collectives, bytes/s
  double node_network_ = 0;       // all NICs of a node together, achieved, bytes/s
  double model_flops_ = 0;
};

// Convenience for one-off predictions: builds the model each call (use PerformanceModel in loops).
Result<Prediction> Predict(const Layout& layout, const ModelShape& model,
                           const HardwareProfile& hardware);

}  // namespace tunepar::runner
