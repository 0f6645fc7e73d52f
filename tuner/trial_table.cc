#include "tuner/trial_table.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

namespace tunepar {

std::vector<const store::TrialRecord*> RankByThroughput(const std::vector<store::TrialRecord>& trials) {
  std::vector<const store::TrialRecord*> ok;
  std::set<std::string> seen;
  for (const store::TrialRecord& t : trials) {
    if (t.status != search::TrialStatus::kOk || !t.tokens_per_s) continue;
    if (!seen.insert(search::LayoutKey(t.layout)).second) continue;
    ok.push_back(&t);
  }
  std::stable_sort(ok.begin(), ok.end(), [](const store::TrialRecord* a, const store::TrialRecord* b) {
    return *a->tokens_per_s > *b->tokens_per_s;
  });
  return ok;
}

TextTable TrialTable(const std::vector<const store::TrialRecord*>& trials, bool with_status) {
  using A = TextTable::Align;
  TextTable t;
  t.AddColumn("#");
  if (with_status) {
    t.AddColumn("trial", A::kLeft);
    t.AddColumn("status", A::kLeft);
  }
  for (const char* c : {"tp", "pp", "dp", "mbs", "nmb"}) t.AddColumn(c);
  t.AddColumn("prec", A::kLeft);
  t.AddColumn("zero");
  t.AddColumn("recomp", A::kLeft);
  t.AddColumn("sp");
  t.AddColumn("vpp");
  t.AddColumn("flash");
  t.AddColumn("step s");
  t.AddColumn("tokens/s");
  t.AddColumn("TFLOP/s/GPU");
  t.AddColumn("mem GB");
  int rank = 0;
  for (const store::TrialRecord* r : trials) {
    const search::Layout& l = r->layout;
    std::vector<std::string> row = {std::to_string(++rank)};
    if (with_status) {
      row.push_back(fmt::format("{}/{}", r->node_id, r->number));
      row.emplace_back(search::ToString(r->status));
    }
    for (int v : {l.tp, l.pp, l.dp, l.micro_batch, l.num_micro_batches}) row.push_back(std::to_string(v));
    row.emplace_back(search::ToString(l.precision));
    row.push_back(std::to_string(l.zero));
    row.emplace_back(search::ToString(l.recompute));
    row.emplace_back(l.seq_parallel ? "on" : "off");
    row.push_back(std::to_string(l.virtual_stages));
    row.emplace_back(l.flash_attention ? "on" : "off");
    row.push_back(Fixed(r->step_time_s.value_or(NAN), 3));
    row.push_back(r->tokens_per_s ? WithCommas(static_cast<int64_t>(std::llround(*r->tokens_per_s))) : "-");
    row.push_back(Fixed(r->tflops_per_gpu.value_or(NAN), 1));
    row.push_back(Fixed(r->peak_memory_bytes.value_or(NAN) / 1e9, 1));
    t.AddRow(std::move(row));
  }
  return t;
}

std::map<std::string, int64_t> CountByStatus(const std::vector<store::TrialRecord>& trials) {
  std::map<std::string, int64_t> counts;
  for (const store::TrialRecord& t : trials) ++counts[std::string(search::ToString(t.status))];
  return counts;
}

}  // namespace tunepar
