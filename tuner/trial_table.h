// Trials as a ranked text table, shared by `search` and `show`.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "store/records.h"
#include "tuner/text_table.h"

namespace tunepar {

// Finished ok trials, best throughput first, one per layout key (the first one finished).
std::vector<const store::TrialRecord*> RankByThroughput(const std::vector<store::TrialRecord>& trials);

// Columns: rank, the layout knobs, step time, tokens/s, TFLOP/s per GPU, memory; plus the
// status and trial id when `with_status`.
TextTable TrialTable(const std::vector<const store::TrialRecord*>& trials, bool with_status);

// Number of trials per status name, e.g. {"ok": 12, "oom": 3}.
std::map<std::string, int64_t> CountByStatus(const std::vector<store::TrialRecord>& trials);

}  // namespace tunepar
