#include "runner/core/core_options.h"

#include <fstream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/presets.h"
#include "base/byte_size.h"
#include "base/device_memory.h"
#include "base/pipeline_split.h"
#include "runner/core/ops.h"
#include "runner/core/supported_knobs.h"

namespace tunepar::core {

std::string_view ToString(Fault fault) {
  switch (fault) {
    case Fault::kNone: return "none";
    case Fault::kCrash: return "crash";
    case Fault::kHang: return "hang";
    case Fault::kOom: return "oom";
    case Fault::kDevice: return "device";
    case Fault::kTeardownHang: return "teardown-hang";
  }
  return "?";
}

namespace {

// "24GB", "512MiB", "1e9": bytes.
Result<double> ParseBytes(const std::string& text) {
  const std::optional<double> bytes = ParseByteSize(text);
  if (!bytes) return InvalidArgument(fmt::format("--memory-cap {}: not a positive size (e.g. 16GB, 512MiB, 2e9)", text));
  return *bytes;
}

// A trial file: {"layout": "<key>"} or the layout's fields, plus optional run settings.
Status ReadTrialFile(const std::string& path, Layout& layout, bool& have_layout, CoreOptions& o) {
  std::ifstream in(path);
  if (!in) return InvalidArgument(fmt::format("--trial {}: cannot read the file", path));
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return InvalidArgument(fmt::format("--trial {}: not a JSON object", path));
  try {
    if (j.contains("layout")) {
      Result<Layout> l = ParseLayoutKey(j["layout"].get<std::string>());
      if (!l.ok()) return l.status().WithContext("--trial " + path);
      layout = *l;
      have_layout = true;
    }
    if (j.contains("steps")) o.steps = j["steps"].get<int>();
    if (j.contains("warmup")) o.warmup = j["warmup"].get<int>();
    if (j.contains("seed")) o.seed = j["seed"].get<uint64_t>();
    if (j.contains("lr")) o.lr = j["lr"].get<double>();
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(fmt::format("--trial {}: {}", path, e.what()));
  }
  return Status::Ok();
}

// The flags as given, before they are resolved into CoreOptions.
struct CoreFlags {
  std::string model = "tiny", layout_key, trial, precision = "fp32", recompute = "none", memory_cap, fault = "none",
              comm;
  int tp = 1, pp = 1, cp = 1, dp = 0, micro_batch = 0, micro_batches = 0, zero = 0, dp_replicate = 1;
  bool flash_attention = false;
  bool sequence_parallel = false;
  bool uneven_stages = false;
};

void AddLayoutFlags(CLI::App& app, CoreFlags& f) {
  app.add_option("--model", f.model, "model preset or TOML file (configs/models)")->capture_default_str();
  app.add_option("--layout", f.layout_key, "layout key, e.g. tp2-pp2-dp1-mbs2-nmb4-fp32-zero0-rcnone-sp0-vpp1-fa0");
  app.add_option("--trial", f.trial, "JSON trial file: {\"layout\": KEY, \"steps\": N, ...}");
  app.add_option("--tp", f.tp, "tensor-parallel size")->capture_default_str();
  app.add_option("--pp", f.pp, "pipeline-parallel size (stages)")->capture_default_str();
  app.add_option("--cp", f.cp,
                 "context-parallel size: the sequence split over cp ranks (2 cp chunks, causal load balance), ring "
                 "attention over them (needs --flash-attention)")
      ->capture_default_str();
  app.add_option("--dp", f.dp, "data-parallel size (default: ranks / (tp cp pp))");
  app.add_option("--micro-batch", f.micro_batch, "sequences per micro-batch (default: the model's global batch / (dp nmb))");
  app.add_option("--micro-batches", f.micro_batches, "micro-batches per step per replica (default: global batch / (dp mbs))");
  app.add_option("--precision", f.precision, "fp32 | bf16 | fp16 (16-bit storage, fp32 master weights)")
      ->capture_default_str();
  app.add_option("--zero", f.zero,
                 "ZeRO stage over the shard group (dp / dp-replicate ranks): 0 none, 1 optimizer states sharded, 2 "
                 "and gradients, 3 and weights (FSDP: each unit gathered before it computes)")
      ->capture_default_str();
  app.add_option("--dp-replicate", f.dp_replicate,
                 "hybrid sharding: dp = shard group x dp-replicate replicas; ZeRO shards inside a shard group and "
                 "all-reduces the gradient shard across the replicas (needs --zero >= 1)")
      ->capture_default_str();
  app.add_option("--recompute", f.recompute, "none | selective | full")->capture_default_str();
  app.add_flag("--flash-attention", f.flash_attention,
               "fused attention (fa1): no T x T probabilities kept or computed (CPU and CUDA builds)");
  app.add_flag("--sequence-parallel", f.sequence_parallel,
               "sequence parallelism (sp1, tp > 1): norms and residual adds on 1/tp of the tokens, all-gather and "
               "reduce-scatter around the TP layers (CPU and CUDA builds)");
  app.add_flag("--uneven-stages", f.uneven_stages,
               "uneven pipeline stages (uneven1, pp > 1): Megatron-LM's first/last-stage layer counts, balanced "
               "against the embedding and head (base/pipeline_split.h)");
}

void AddRunFlags(CLI::App& app, CoreFlags& f, CoreOptions& o) {
  app.add_option("--hardware", o.hardware, "hardware preset or TOML: its device memory caps each rank");
  app.add_option("--memory-cap", f.memory_cap, "device memory per rank, e.g. 2GB (overrides --hardware)");
  app.add_option("--steps", o.steps, "measured steps")->capture_default_str();
  app.add_option("--warmup", o.warmup, "steps before measuring")->capture_default_str();
  app.add_option("--threads", o.threads, "threads per rank (default: the rank's CPUs / ranks sharing them)");
  app.add_option("--cpu-bind", o.cpu_bind,
                 "which CPUs a rank runs on: near-device (its share of the CPUs sysfs lists as near its GPU) | "
                 "as-launched | auto (near-device unless the launcher bound the rank)")
      ->capture_default_str();
  app.add_option("--wait", o.wait,
                 "how ranks wait for MPI: spin | sleep (yield the core; for more ranks than cores) | auto "
                 "(sleep when this node's ranks outnumber its CPUs)")
      ->capture_default_str();
  app.add_option("--comm", f.comm,
                 "how device data moves between ranks: nccl (GPU builds' default) | mpi-staged (through host "
                 "memory: any MPI, several ranks per GPU) | mpi-direct (a GPU-aware MPI) | mpi (the CPU build's)");
  app.add_flag("--smoke", o.smoke,
               "check one all-reduce over every rank's device with --comm, print one line per node, exit");
  app.add_option("--lr", o.lr, "AdamW learning rate")->capture_default_str();
  app.add_option("--seed", o.seed, "initialisation and data seed")->capture_default_str();
  app.add_option("--data", o.data, "train on the bytes of a text file (default: synthetic tokens)");
  app.add_option("--output,-o", o.output, "write the JSON result here (default: stdout)");
  app.add_option("--dump", o.dump, "write the initial weights, every step's batch, the first step's gradients and the final weights (global tensors, JSON: reference_dump.h) here");
  app.add_option("--gradient-check", o.gradient_check, "compare gradients with finite differences at N points per tensor");
  app.add_option("--fault", f.fault, "test hook: crash | hang | oom | device (a failing device call) at --fault-step on --fault-rank | "
                 "teardown-hang (--fault-rank never ends after its result)")->capture_default_str();
  app.add_option("--fault-rank", o.fault_rank, "rank that fails")->capture_default_str();
  app.add_option("--fault-step", o.fault_step, "step at which it fails")->capture_default_str();
  app.add_flag("--quiet,-q", o.quiet, "no summary line on stderr");
}

// The model, and the memory cap: --memory-cap, else the hardware profile's device memory.
Status ResolveModelAndCap(const CoreFlags& f, CoreOptions& o) {
  Result<ConfigText> model_text = ResolveConfig("models", f.model);
  if (!model_text.ok()) return model_text.status();
  Result<ModelShape> shape = ParseModelShape(model_text->text, model_text->origin, model_text->name);
  if (!shape.ok()) return shape.status();
  o.model = *shape;
  o.model_origin = model_text->origin;
  if (!f.memory_cap.empty()) {
    Result<double> cap = ParseBytes(f.memory_cap);
    if (!cap.ok()) return cap.status();
    o.memory_cap_bytes = *cap;
  } else if (!o.hardware.empty()) {
    Result<ConfigText> hw_text = ResolveConfig("hardware", o.hardware);
    if (!hw_text.ok()) return hw_text.status();
    Result<double> memory = DeviceMemoryBytes(hw_text->text, hw_text->origin);
    if (!memory.ok()) return memory.status();
    o.memory_cap_bytes = *memory;
  }
  return Status::Ok();
}

// The layout from the flags: dp from the world size, the micro-batch size or count from the
// model's global batch when one of them is not given.
Status LayoutFromFlags(const CoreFlags& f, int world_size, CoreOptions& o) {
  Layout& l = o.layout;
  l.tp = f.tp;
  l.pp = f.pp;
  l.cp = f.cp;
  l.dp = f.dp > 0 ? f.dp : (f.tp * f.pp * f.cp > 0 ? world_size / (f.tp * f.pp * f.cp) : 0);
  Result<Precision> p = ParsePrecision(f.precision);
  if (!p.ok()) return p.status().WithContext("--precision");
  if (*p == Precision::kFp8)
    return InvalidArgument("--precision fp8: tunepar-core has no FP8 GEMMs (fp32, fp16 or bf16)");
  l.precision = *p;
  Result<Recompute> r = ParseRecompute(f.recompute);
  if (!r.ok()) return r.status().WithContext("--recompute");
  l.recompute = *r;
  l.zero = f.zero;
  l.dp_replicate = f.dp_replicate;
  l.flash_attention = f.flash_attention;
  l.seq_parallel = f.sequence_parallel;
  l.uneven_stages = f.uneven_stages;
  const int gb = o.model.global_batch;
  l.micro_batch = f.micro_batch;
  l.num_micro_batches = f.micro_batches;
  if (l.micro_batch <= 0 && l.num_micro_batches <= 0) l.num_micro_batches = 1;
  if (l.dp > 0 && l.micro_batch <= 0)
    l.micro_batch = gb % (l.dp * l.num_micro_batches) == 0 ? gb / (l.dp * l.num_micro_batches) : 0;
  if (l.dp > 0 && l.num_micro_batches <= 0)
    l.num_micro_batches = gb % (l.dp * l.micro_batch) == 0 ? gb / (l.dp * l.micro_batch) : 0;
  if (l.micro_batch <= 0 || l.num_micro_batches <= 0) {
    return InvalidArgument(fmt::format(
        "the model's global batch {} does not split over dp {}: give --micro-batch and --micro-batches", gb, l.dp));
  }
  return Status::Ok();
}

// The layout: a trial file's, a layout key, else the flags.
Status ResolveLayout(const CoreFlags& f, int world_size, CoreOptions& o) {
  bool have_layout = false;
  if (!f.trial.empty()) TUNEPAR_RETURN_IF_ERROR(ReadTrialFile(f.trial, o.layout, have_layout, o));
  if (!f.layout_key.empty()) {
    Result<Layout> parsed = ParseLayoutKey(f.layout_key);
    if (!parsed.ok()) return parsed.status().WithContext("--layout");
    o.layout = *parsed;
    have_layout = true;
  }
  return have_layout ? Status::Ok() : LayoutFromFlags(f, world_size, o);
}

Status ResolveFault(const std::string& fault, CoreOptions& o) {
  if (fault == "crash")
    o.fault = Fault::kCrash;
  else if (fault == "hang")
    o.fault = Fault::kHang;
  else if (fault == "oom")
    o.fault = Fault::kOom;
  else if (fault == "device")
    o.fault = Fault::kDevice;
  else if (fault == "teardown-hang")
    o.fault = Fault::kTeardownHang;
  else if (fault != "none")
    return InvalidArgument(
        fmt::format("--fault {}: expected crash, hang, oom, device, teardown-hang or none", fault));
  return Status::Ok();
}

// --comm, else the build's default; whether this build and MPI can run it.
Status ResolveComm(const std::string& comm, CoreOptions& o) {
  o.comm = DefaultCommMode(BackendName());
  if (!comm.empty()) {
    Result<CommMode> mode = ParseCommMode(comm);
    if (!mode.ok()) return mode.status();
    o.comm = *mode;
    o.comm_given = true;
  }
  return CheckCommMode(o.comm, BackendName());
}

// Context parallelism: ring attention runs the fused kernel on each K/V block, and the sequence
// is cut into 2 cp chunks of whole tokens (rank i holds chunks i and 2 cp - 1 - i).
Status CheckContextParallel(const ModelShape& m, const Layout& l) {
  if (l.cp < 1) return InvalidArgument(fmt::format("--cp {}: must be >= 1", l.cp));
  if (l.cp == 1) return Status::Ok();
  if (!l.flash_attention)
    return InvalidArgument(fmt::format("context parallelism (cp {}) runs ring attention on the fused kernel: add "
                                       "--flash-attention (fa1)", l.cp));
  if (m.seq_len % (2 * l.cp) != 0)
    return InvalidArgument(fmt::format("context parallelism: the sequence length {} of {} does not split into 2 cp = "
                                       "{} chunks of whole tokens", m.seq_len, m.name, 2 * l.cp));
  return Status::Ok();
}

// The model features the core trains (supported_knobs.h SupportsModel), K/V heads split whole
// over tp as Megatron-LM splits them.
Status CheckModelRunnable(const ModelShape& m, const Layout& l) {
  if (Status supported = SupportsModel(m); !supported.ok()) return InvalidArgument(supported.message());
  if (m.KvHeads() % l.tp != 0)
    return InvalidArgument(fmt::format("tp {} must divide the {} K/V heads of {} (as Megatron-LM's query groups)",
                                       l.tp, m.KvHeads(), m.name));
  if (l.seq_parallel && l.tp == 1) return InvalidArgument("sequence parallelism needs --tp > 1");
  if (l.seq_parallel && (m.seq_len / l.cp) % l.tp != 0)
    return InvalidArgument(fmt::format("sequence parallelism: tp {} must divide the sequence length ({}) / cp {} of {}",
                                       l.tp, m.seq_len, l.cp, m.name));
  return CheckContextParallel(m, l);
}

// ZeRO's stage and hybrid sharding's replicas (base/layout_rules.cc states the same rules).
Status CheckSharding(const Layout& l) {
  if (l.zero < 0 || l.zero > 3) return InvalidArgument(fmt::format("--zero {}: 0, 1, 2 or 3", l.zero));
  if (l.dp_replicate < 1) return InvalidArgument(fmt::format("--dp-replicate {}: must be >= 1", l.dp_replicate));
  if (l.dp_replicate == 1) return Status::Ok();
  if (l.zero == 0)
    return InvalidArgument(fmt::format("--dp-replicate {}: hybrid sharding needs --zero 1, 2 or 3", l.dp_replicate));
  if (l.dp % l.dp_replicate != 0)
    return InvalidArgument(fmt::format("--dp-replicate {} does not divide dp {}", l.dp_replicate, l.dp));
  if (l.dp / l.dp_replicate < 2)
    return InvalidArgument(fmt::format("--dp-replicate {} with dp {} leaves shard groups of {} rank (need >= 2)",
                                       l.dp_replicate, l.dp, l.dp / l.dp_replicate));
  return Status::Ok();
}

// What the core can run: the layout on this job's ranks, the model split over tp and pp, and
// sensible run settings.
Status CheckRunnable(const CoreOptions& o, int world_size) {
  const ModelShape& m = o.model;
  const Layout& l = o.layout;
  const int F = m.MlpWidth();
  if (l.World() != world_size) {
    return InvalidArgument(fmt::format("layout {} needs {} ranks, the job has {}", LayoutKey(l), l.World(), world_size));
  }
  const CoreBuild build = CoreBuildNamed(BackendName()).value_or(CoreBuild::kCpu);
  TUNEPAR_RETURN_IF_ERROR(CheckSupported(l, SupportedKnobs(build), BinaryName(build)));
  TUNEPAR_RETURN_IF_ERROR(CheckSharding(l));
  if (m.heads % l.tp != 0 || m.hidden % l.tp != 0 || F % l.tp != 0 || m.vocab % l.tp != 0) {
    return InvalidArgument(fmt::format("tp {} must divide the heads ({}), hidden ({}), MLP width ({}) and vocabulary ({}) of {}",
                                       l.tp, m.heads, m.hidden, F, m.vocab, m.name));
  }
  TUNEPAR_RETURN_IF_ERROR(CheckModelRunnable(m, l));
  if (l.pp > m.layers) return InvalidArgument(fmt::format("pp {} exceeds the {} layers of {}", l.pp, m.layers, m.name));
  if (l.uneven_stages && UnevenSplit(m, l.pp).layers.empty()) {
    return InvalidArgument(fmt::format("uneven stages: the first/last-stage rule has no split of the {} layers of {} "
                                       "over pp {} (it needs pp >= 2 and a layer per stage)",
                                       m.layers, m.name, l.pp));
  }
  if (o.steps < 1 || o.warmup < 0) return InvalidArgument("--steps must be >= 1 and --warmup >= 0");
  if (o.threads < 0) return InvalidArgument("--threads must be >= 0");
  if (o.cpu_bind != "auto" && o.cpu_bind != "near-device" && o.cpu_bind != "as-launched")
    return InvalidArgument(fmt::format("--cpu-bind {}: auto, near-device or as-launched", o.cpu_bind));
  if (o.wait != "auto" && o.wait != "spin" && o.wait != "sleep")
    return InvalidArgument(fmt::format("--wait {}: auto, spin or sleep", o.wait));
  if (o.gradient_check > 0 && world_size != 1) return InvalidArgument("--gradient-check runs on one rank");
  if (o.gradient_check > 0 && l.precision != Precision::kFp32)
    return InvalidArgument("--gradient-check needs --precision fp32");
  return Status::Ok();
}

}  // namespace

Result<CoreOptions> ParseCoreOptions(int argc, char** argv, int world_size, std::string* help) {
  CoreOptions o;
  CLI::App app{
      "tunepar-core: a GPT training step over MPI with tensor, pipeline and data parallelism, "
      "timed and memory-checked; rank 0 writes one JSON result.",
      "tunepar-core"};
  CoreFlags f;
  AddLayoutFlags(app, f);
  AddRunFlags(app, f, o);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    *help = app.help();
    return InvalidArgument("help requested");
  } catch (const CLI::ParseError& e) {
    return InvalidArgument(e.what());
  }
  TUNEPAR_RETURN_IF_ERROR(ResolveModelAndCap(f, o));
  TUNEPAR_RETURN_IF_ERROR(ResolveComm(f.comm, o));
  if (o.smoke) {
    o.layout.dp = world_size;  // one group of every rank; no training
    return o;
  }
  TUNEPAR_RETURN_IF_ERROR(ResolveLayout(f, world_size, o));
  TUNEPAR_RETURN_IF_ERROR(ResolveFault(f.fault, o));
  TUNEPAR_RETURN_IF_ERROR(CheckRunnable(o, world_size));
  return o;
}

}  // namespace tunepar::core
