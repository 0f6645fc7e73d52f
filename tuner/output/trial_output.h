// Trials for people and programs: ranking, a text table, status counts and JSON, shared by
// `search`, `show` and `export`.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/knob_support.h"
#include "store/records.h"
#include "tuner/output/text_table.h"
#include "tuner/study/study_context.h"

namespace tunepar {

// Finished ok trials, best throughput first, one per layout key (the first one finished).
std::vector<const store::TrialRecord*> RankByThroughput(const std::vector<store::TrialRecord>& trials);

// "12,345 tok/s", or the custom metric as the program printed it ("higher 410"); "-" when the
// trial has neither.
std::string ThroughputText(const store::TrialRecord& trial);

// Columns: rank, the layout knobs, step time, tokens/s, TFLOP/s per GPU, memory; plus the
// status and trial id when `with_status` (a slice trial, measured on part of the world and
// completed by the model, reads "ok (sliced)"), else a
// "measured" column (whole or slice + model) when some trial is a slice.
TextTable TrialTable(const std::vector<const store::TrialRecord*>& trials, bool with_status);

// Number of trials per status name, e.g. {"ok": 12, "oom": 3}.
std::map<std::string, int64_t> CountByStatus(const std::vector<store::TrialRecord>& trials);

// Every field of a trial: layout (key and knobs), status, measured and predicted metrics,
// details (the breakdowns), provenance.
nlohmann::json TrialJson(const store::TrialRecord& trial);
// The same, with the breakdown of a prediction that a dry run stored without it (details "{}"
// on a model-backend row: the study's model, hardware and space make it again). A row whose
// stored prediction today's performance model does not give again says so instead.
nlohmann::json TrialJson(const store::TrialRecord& trial, const StudyContext& context);
// The context to show a model study's trials with (nullopt for other backends, or when the
// study's configuration no longer loads: the rows are then shown as stored).
std::optional<StudyContext> ContextForPredictions(const store::StudyRecord& study,
                                                  const std::vector<store::TrialRecord>& trials);

// The knobs a study's program does not receive, with the value every trial ran with, e.g.
// {"recompute": "none", "zero": "0"}: not measured. From the support, or from the
// study's pinned knobs (an unreadable record: none).
nlohmann::json UnmeasuredKnobsJson(const KnobSupport& support);
KnobSupport SupportOf(const store::StudyRecord& study);

}  // namespace tunepar
