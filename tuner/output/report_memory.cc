// `tunepar report`: what the study's trials taught the search's memory model (search/feasibility.h)
// about the performance model's memory: each component's fitted multiplier (measured bytes over
// the model's bytes of that component) with a 90% interval, and the trials it learned from, said
// no further than they go.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "search/proposer.h"
#include "tuner/output/report.h"
#include "tuner/output/text_table.h"
#include "tuner/study/trial_records.h"

namespace tunepar {

namespace {

constexpr double kInterval = 0.9;
constexpr double kZ90 = 1.6448536269514722;  // a standard normal's 95th percentile
// An interval whose log sd is still this share of the prior's is about as wide as before any trial.
constexpr double kAsWideAsPrior = 0.8;

// The trials the memory model learned from, as Proposer::Memory takes them: the ok and OOM
// trials of the study's legal layouts, with their peaks when measured on the whole world (an
// OOM's peak is a lower bound); and the probes among the trials, by status.
struct MemoryEvidenceCounts {
  int ok = 0, oom = 0;
  int ok_peaks = 0, oom_peaks = 0;
  int probes = 0;
  std::map<std::string, int64_t> probe_outcomes;
};

MemoryEvidenceCounts CountEvidence(const search::Proposer& proposer,
                                   const std::vector<search::Outcome>& history) {
  MemoryEvidenceCounts c;
  for (const search::Outcome& o : history) {
    if (proposer.IndexOf(o.layout) < 0) continue;
    if (o.probe) {
      ++c.probes;
      ++c.probe_outcomes[std::string(ToString(o.status))];
    }
    const bool peak = !o.sliced && o.peak_memory_bytes.has_value();
    if (o.status == TrialStatus::kOk) c.ok += 1, c.ok_peaks += peak;
    if (o.status == TrialStatus::kOom) c.oom += 1, c.oom_peaks += peak;
  }
  return c;
}

std::string BytesText(double bytes) {
  return GigabytesText(bytes) + (bytes >= 1e9 ? " GB" : "");
}

// "10 ok (8 with a measured peak), 2 OOM (1 with the peak reached, a lower bound); 1 probe past
// the predicted memory limit: oom 1".
std::string EvidenceText(const MemoryEvidenceCounts& c) {
  std::string text =
      fmt::format("{} ok ({} with a measured peak), {} OOM ({} with the peak reached, a lower bound)", c.ok,
                  c.ok_peaks, c.oom, c.oom_peaks);
  if (c.probes == 0) return text + "; no probe past the predicted memory limit";
  std::string outcomes;
  for (const auto& [status, n] : c.probe_outcomes)
    outcomes += fmt::format("{}{} {}", outcomes.empty() ? "" : ", ", status, n);
  return text + fmt::format("; {} past the predicted memory limit: {}", Counted(c.probes, "probe"), outcomes);
}

// What bounds the multipliers when no peak was measured ("" when one was).
std::string WithoutPeaks(const MemoryEvidenceCounts& c, double device_memory_bytes) {
  if (c.ok_peaks + c.oom_peaks > 0) return "";
  const std::string device = BytesText(device_memory_bytes);
  if (c.oom == 0)
    return fmt::format(
        "no peak measured and no OOM: the trials say only that {} layouts fit in {}, which bounds the "
        "multipliers from above",
        c.ok, device);
  if (c.ok == 0)
    return fmt::format(
        "no peak measured and nothing ran: the trials say only that {} layouts did not fit in {}, which "
        "bounds the multipliers from below",
        c.oom, device);
  return fmt::format(
      "no peak measured: the multipliers are bounded only by which trials fit in {} ({} ok) and which "
      "did not ({} OOM)",
      device, c.ok, c.oom);
}

// One component's fitted multiplier, its interval, and whether the trials narrowed it.
struct ComponentFit {
  std::string name;
  double multiplier = 1, low = 1, high = 1, log_sd = 0;
  bool as_wide_as_prior = true;
};

std::vector<ComponentFit> FitsOf(const search::FeasibilityModel& memory, double prior_sd) {
  const search::MemoryComponents multipliers = memory.Multipliers(), log_sd = memory.MultiplierLogSd();
  std::vector<ComponentFit> fits;
  for (int c = 0; c < search::kMemoryComponents; ++c) {
    fits.push_back({std::string(search::MemoryComponentName(c)), multipliers[c],
                    multipliers[c] * std::exp(-kZ90 * log_sd[c]), multipliers[c] * std::exp(kZ90 * log_sd[c]),
                    log_sd[c], log_sd[c] >= kAsWideAsPrior * prior_sd});
  }
  return fits;
}

std::string FitsTable(const std::vector<ComponentFit>& fits) {
  TextTable table;
  table.AddColumn("component", TextTable::Align::kLeft);
  table.AddColumn("multiplier");
  table.AddColumn("interval");
  table.AddColumn("interval vs prior", TextTable::Align::kLeft);
  for (const ComponentFit& f : fits) {
    table.AddRow({f.name, Fixed(f.multiplier, 2), fmt::format("{} - {}", Fixed(f.low, 2), Fixed(f.high, 2)),
                  f.as_wide_as_prior ? "about as wide" : "narrower"});
  }
  return table.Render();
}

nlohmann::json FitsJson(const std::vector<ComponentFit>& fits, double prior_sd) {
  nlohmann::json components = nlohmann::json::array();
  for (const ComponentFit& f : fits) {
    components.push_back({{"component", f.name},
                          {"multiplier", f.multiplier},
                          {"low", f.low},
                          {"high", f.high},
                          {"log_sd", f.log_sd},
                          {"prior_log_sd", prior_sd},
                          {"as_wide_as_prior", f.as_wide_as_prior}});
  }
  return components;
}

nlohmann::json CountsJson(const MemoryEvidenceCounts& c) {
  return {{"ok", c.ok},
          {"oom", c.oom},
          {"ok_peaks", c.ok_peaks},
          {"oom_peaks", c.oom_peaks},
          {"probes", c.probes},
          {"probe_outcomes", c.probe_outcomes}};
}

}  // namespace

void AddMemoryModel(const StudyContext& context, const StudyTrials& trials, Report* report) {
  const search::ProposerOptions& options = context.proposer_options;
  if (context.study.backend == "model" || !(options.device_memory_bytes > 0)) return;
  const search::Proposer proposer(context.space.legal, context.Prior(), options);
  const std::vector<search::Outcome> history = History(trials.all);
  const MemoryEvidenceCounts counts = CountEvidence(proposer, history);
  if (counts.ok + counts.oom == 0) return;
  const double prior_sd = std::hypot(options.feasibility.shared_sd, options.feasibility.component_sd);
  const std::vector<ComponentFit> fits = FitsOf(proposer.Memory(history), prior_sd);
  const std::string note = WithoutPeaks(counts, options.device_memory_bytes);
  report->text += fmt::format(
      "\nMemory: what {} taught about the performance model's memory per device (device {}): {}.\n"
      "Each multiplier is measured over predicted bytes of its component, with a {:.0f}% interval:\n{}{}",
      Counted(counts.ok + counts.oom, "trial"), BytesText(options.device_memory_bytes), EvidenceText(counts),
      100 * kInterval, FitsTable(fits), note.empty() ? "" : note + "\n");
  report->json["memory_model"] = {{"device_memory_bytes", options.device_memory_bytes},
                                  {"interval", kInterval},
                                  {"learned_from", CountsJson(counts)},
                                  {"components", FitsJson(fits, prior_sd)},
                                  {"note", note.empty() ? nlohmann::json() : nlohmann::json(note)}};
}

}  // namespace tunepar
