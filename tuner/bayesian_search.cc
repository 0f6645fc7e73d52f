// `tunepar search` on a backend that measures: propose, record as running (with a lease), run,
// record, repeat; crash-safe and deterministic on resume.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "base/provenance.h"
#include "runner/core_backend.h"
#include "runner/performance_model.h"
#include "runner/process_group.h"
#include "tuner/progress.h"
#include "tuner/searches.h"
#include "tuner/stop_signals.h"
#include "tuner/text_table.h"
#include "tuner/trial_output.h"
#include "tuner/trial_records.h"

namespace tunepar {

namespace {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;

// The marker of a trial's processes: "<study id>/<node>/<number>.<attempt>/<store>", where
// <store> is a hash of the store's path, so that the same study searched in two stores on one
// machine (the same inputs give the same study id) never claims the other's processes, and a
// re-run is never mistaken for what its interrupted attempt left behind.
std::string TrialId(const std::string& store, const store::StudyRecord& study, const std::string& node,
                    int64_t number, int attempt) {
  std::error_code ec;
  const std::string path = fs::weakly_canonical(fs::absolute(store, ec), ec).string();
  const uint64_t store_hash = std::hash<std::string>{}(path)&0xffffffffu;
  return fmt::format("{}/{}/{}.{}/{:08x}", study.id, node, number, attempt, store_hash);
}

std::string TrialDir(const std::string& store, const store::StudyRecord& study, const std::string& node,
                     int64_t number) {
  return (fs::path(store) / "trials" / study.name / fmt::format("{}-{}", node, number)).string();
}

std::string UtcIn(double seconds) {
  const std::time_t t = std::chrono::system_clock::to_time_t(
      std::chrono::system_clock::now() + std::chrono::seconds(static_cast<int64_t>(seconds)));
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Replaces the record with the same (node, number), or adds it; keeps (node, number) order.
void Upsert(std::vector<store::TrialRecord>& trials, const store::TrialRecord& r) {
  auto it = std::find_if(trials.begin(), trials.end(), [&](const store::TrialRecord& t) {
    return t.node_id == r.node_id && t.number == r.number;
  });
  if (it != trials.end()) {
    *it = r;
    return;
  }
  trials.insert(std::upper_bound(trials.begin(), trials.end(), r,
                                 [](const store::TrialRecord& a, const store::TrialRecord& b) {
                                   return std::tie(a.node_id, a.number) < std::tie(b.node_id, b.number);
                                 }),
                r);
}

// "12,345 tok/s", or the raw metric for custom metrics.
std::string Throughput(const store::TrialRecord& t) {
  if (t.tokens_per_s) return fmt::format("{} tok/s", WithCommas(std::llround(*t.tokens_per_s)));
  const nlohmann::json d = nlohmann::json::parse(t.details, nullptr, false);
  if (d.is_object() && d.contains("metric")) {
    return fmt::format("{} {:g}", d["metric"]["kind"].get<std::string>(), d["metric"]["value"].get<double>());
  }
  return "-";
}

const store::TrialRecord* BestTrial(const std::vector<store::TrialRecord>& trials) {
  const store::TrialRecord* best = nullptr;
  for (const store::TrialRecord& t : trials) {
    const std::optional<double> v = ObjectiveOf(t);
    if (v && (best == nullptr || *v < *ObjectiveOf(*best))) best = &t;
  }
  return best;
}

int CountFinished(const std::vector<store::TrialRecord>& trials) {
  int n = 0;
  for (const store::TrialRecord& t : trials) n += search::IsFinished(t.status) ? 1 : 0;
  return n;
}

struct ActiveTrial {
  store::TrialRecord record;  // as recorded running
  runner::Prediction predicted;
  std::unique_ptr<runner::RunningTrial> trial;
};

}  // namespace

Status RunBayesianSearch(const GlobalOptions& global, StudySession& s, runner::Backend& backend,
                         const BayesianSearchOptions& o) {
  InstallStopHandlers();
  const Problem& problem = s.problem;
  const std::string& node = s.node_id();
  Result<runner::PerformanceModel> model = runner::PerformanceModel::Create(problem.model, problem.hardware);
  if (!model.ok()) return model.status();
  // Where the backend puts the ranks (the local backend runs them all on this machine, sharing its
  // cores when they outnumber them).
  model->set_ranks_per_node(backend.RanksPerNode(s.world));
  const double tokens_per_step = static_cast<double>(problem.model.global_batch) * problem.model.seq_len;
  search::ProposerOptions po;
  po.acquisition = o.acquisition;
  po.device_memory_bytes = problem.hardware.MemoryBytes();
  po.tokens_per_step = tokens_per_step;
  po.seed = o.seed;
  const search::Proposer proposer(
      s.space.legal,
      [&](const search::Layout& l) {
        const runner::Prediction p = model->Predict(l);
        return search::PriorPrediction{p.step_time_s, p.memory_bytes};
      },
      po);

  // Trials of this node still marked running belong to a tuner that is gone (this process holds
  // the node's shard exclusively): kill what they left and mark them interrupted.
  std::vector<store::TrialRecord> recovered;
  for (const store::TrialRecord& t : s.trials) {
    if (t.node_id != node || t.status != search::TrialStatus::kRunning) continue;
    store::TrialRecord r = t;
    const nlohmann::json d = nlohmann::json::parse(t.details, nullptr, false);
    const int64_t pgid = d.is_object() && d.contains("pgid") ? d["pgid"].get<int64_t>() : 0;
    int killed = 0;
    if (pgid > 0 && t.host == HostName())
      killed = runner::KillLeftovers(static_cast<pid_t>(pgid),
                                     TrialId(global.store, s.study, node, t.number, t.attempt));
    killed += runner::CancelSlurmSteps(TrialId(global.store, s.study, node, t.number, t.attempt));
    r.status = search::TrialStatus::kInterrupted;
    r.message = fmt::format("interrupted: its tuner (pid {} on {}) stopped before it finished{}", t.pid,
                            t.host, killed > 0 ? fmt::format("; {} leftover processes killed", killed) : "");
    r.finished_at = UtcNow();
    recovered.push_back(r);
  }
  if (!recovered.empty()) {
    TUNEPAR_RETURN_IF_ERROR(s.writer->PutTrials(recovered));
    TUNEPAR_RETURN_IF_ERROR(s.writer->Publish());
    for (const store::TrialRecord& r : recovered) Upsert(s.trials, r);
  }

  const int gpn = problem.hardware.gpus_per_node;
  const int per_node = std::max(gpn, model->ranks_per_node());
  Progress progress(stdout, o.budget, CountFinished(s.trials));
  if (!global.json) {
    const int nodes = (s.world + per_node - 1) / per_node;
    fmt::print(
        "tunepar search: model {} ({} parameters), hardware {}, world {} ({} node{}{}), space {}: {} legal "
        "layouts\n",
        problem.model.name, HumanCount(problem.model.Parameters()), problem.hardware.name, s.world, nodes,
        nodes > 1 ? "s" : "",
        per_node > gpn ? fmt::format("; {} ranks per node share {} devices", per_node, gpn) : "",
        problem.space.name, WithCommas(static_cast<int64_t>(s.space.legal.size())));
    fmt::print(
        "backend {}; Bayesian search (GP on the performance model's prior, {}), batch {}, budget {} "
        "trials{}\n",
        backend.Name(), o.acquisition == search::AcquisitionKind::kLogExpectedImprovement ? "log EI" : "UCB",
        o.batch, o.budget,
        o.time_budget_s > 0 ? fmt::format(", time budget {}", Clock(o.time_budget_s)) : "");
    fmt::print("study {} ({}; {} finished trials so far), node {}\n", s.study.name,
               s.resumed ? "resumed" : "new", CountFinished(s.trials), node);
    for (const store::TrialRecord& r : recovered) {
      fmt::print(
          "trial {}/{} was left running by a stopped tuner: marked interrupted, will be re-run first\n", node,
          r.number);
    }
  }

  const auto run_start = SteadyClock::now();
  std::string stop_reason;
  std::vector<store::TrialRecord> this_run;  // finished trials of this run, in order
  bool interrupted = false;

  while (true) {
    if (StopSignal() != 0) {
      stop_reason = "interrupted";
      interrupted = true;
      break;
    }
    const int finished = CountFinished(s.trials);
    if (finished >= o.budget) {
      stop_reason = fmt::format("the budget of {} trials is reached", o.budget);
      break;
    }
    const double elapsed = std::chrono::duration<double>(SteadyClock::now() - run_start).count();
    if (o.time_budget_s > 0 && elapsed >= o.time_budget_s) {
      stop_reason = fmt::format("the time budget of {} is spent", Clock(o.time_budget_s));
      break;
    }
    const int room = std::min(o.batch, o.budget - finished);

    // Re-run interrupted trials first (in their order), then propose.
    std::set<std::string> done_layouts;
    for (const store::TrialRecord& t : s.trials) {
      if (search::IsFinished(t.status)) done_layouts.insert(search::LayoutKey(t.layout));
    }
    std::vector<store::TrialRecord> batch;
    int64_t next_number = 1;
    for (const store::TrialRecord& t : s.trials) {
      if (t.node_id == node) next_number = std::max(next_number, t.number + 1);
    }
    for (const store::TrialRecord& t : s.trials) {
      if (static_cast<int>(batch.size()) >= room) break;
      if (t.node_id == node && t.status == search::TrialStatus::kInterrupted &&
          !done_layouts.count(search::LayoutKey(t.layout))) {
        store::TrialRecord r = t;
        ++r.attempt;
        done_layouts.insert(search::LayoutKey(t.layout));
        batch.push_back(r);
      }
    }
    if (batch.empty()) {
      for (const search::Proposal& p : proposer.Propose(History(s.trials), room)) {
        store::TrialRecord r;
        r.study_id = s.study.id;
        r.node_id = node;
        r.number = next_number++;
        r.layout = p.layout;
        r.attempt = 1;
        batch.push_back(r);
      }
    }
    if (batch.empty()) {
      stop_reason = "every legal layout has been tried";
      break;
    }

    // Start the batch, then record it as running (a crash in between leaves no process: each
    // trial dies with its tuner).
    std::vector<ActiveTrial> active;
    std::vector<store::TrialRecord> running;
    for (store::TrialRecord& r : batch) {
      const std::string dir = TrialDir(global.store, s.study, node, r.number);
      std::error_code ec;
      fs::create_directories(dir, ec);
      runner::TrialContext context{TrialId(global.store, s.study, node, r.number, r.attempt),
                                   dir,
                                   r.number,
                                   r.attempt,
                                   s.world,
                                   gpn,
                                   &problem.model,
                                   o.seed};
      ActiveTrial a;
      a.predicted = model->Predict(r.layout);
      a.trial = backend.Start(r.layout, context);
      r.status = search::TrialStatus::kRunning;
      r.backend = std::string(backend.Name());
      r.hosts = HostName();
      r.host = HostName();
      r.pid = getpid();
      r.tunepar_version = std::string(Version());
      r.git_revision = std::string(GitRevision());
      r.predicted_step_time_s = a.predicted.step_time_s;
      r.predicted_tokens_per_s = a.predicted.tokens_per_s;
      r.predicted_memory_bytes = a.predicted.memory_bytes;
      r.details = nlohmann::json{{"pgid", a.trial->process_group()}}.dump();
      r.message = r.attempt > 1 ? fmt::format("re-run after an interruption (attempt {})", r.attempt) : "";
      r.log_path = dir + "/output.log";
      r.started_at = r.heartbeat_at = UtcNow();
      r.finished_at = "";
      r.lease_expires_at = UtcIn(o.lease_s);
      r.step_time_s = r.tokens_per_s = r.tflops_per_gpu = r.peak_memory_bytes = r.objective = std::nullopt;
      a.record = r;
      running.push_back(r);
      active.push_back(std::move(a));
    }
    TUNEPAR_RETURN_IF_ERROR(s.writer->PutTrials(running));
    TUNEPAR_RETURN_IF_ERROR(s.writer->Publish());
    for (const store::TrialRecord& r : running) Upsert(s.trials, r);

    auto last_heartbeat = SteadyClock::now();
    while (!active.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      const bool stopping = StopSignal() != 0;
      for (size_t i = 0; i < active.size();) {
        ActiveTrial& a = active[i];
        std::optional<runner::TrialResult> result;
        if (stopping)
          result = a.trial->Interrupt();
        else
          result = a.trial->Poll();
        if (!result) {
          ++i;
          continue;
        }
        store::TrialRecord r =
            ToRecord(s.study.id, node, a.record.number, a.record.layout, *result, a.predicted);
        r.attempt = a.record.attempt;
        r.started_at = a.record.started_at;
        if (r.log_path.empty()) r.log_path = a.record.log_path;
        TUNEPAR_RETURN_IF_ERROR(s.writer->PutTrials({r}));
        TUNEPAR_RETURN_IF_ERROR(s.writer->Publish());
        Upsert(s.trials, r);
        if (search::IsFinished(r.status)) {
          this_run.push_back(r);
          progress.Finished();
        }
        if (!global.json) {
          const store::TrialRecord* best = BestTrial(s.trials);
          progress.Line(fmt::format(
              "trial {:>3}/{}  {:<54}  {:<8} {:>16}  (model {})  best {}{}", CountFinished(s.trials),
              o.budget, search::LayoutKey(r.layout),
              std::string(search::ToString(r.status)) + (Sliced(r) ? " (sliced)" : ""),
              r.status == search::TrialStatus::kOk ? Throughput(r) : "-",
              a.predicted.fits ? fmt::format("{} tok/s", WithCommas(std::llround(a.predicted.tokens_per_s)))
                               : "oom",
              best != nullptr ? Throughput(*best) : "-",
              r.status == search::TrialStatus::kOk ? "" : fmt::format("  [{}]", r.message)));
        }
        active.erase(active.begin() + static_cast<std::ptrdiff_t>(i));
      }
      if (stopping) {
        interrupted = true;
        break;
      }
      if (std::chrono::duration<double>(SteadyClock::now() - last_heartbeat).count() >= o.lease_s / 4) {
        std::vector<store::TrialRecord> beats;
        for (ActiveTrial& a : active) {
          a.record.heartbeat_at = UtcNow();
          a.record.lease_expires_at = UtcIn(o.lease_s);
          beats.push_back(a.record);
        }
        if (!beats.empty()) {
          TUNEPAR_RETURN_IF_ERROR(s.writer->PutTrials(beats));
          TUNEPAR_RETURN_IF_ERROR(s.writer->Publish());
        }
        last_heartbeat = SteadyClock::now();
      }
    }
    if (interrupted) {
      stop_reason = "interrupted";
      break;
    }
    TUNEPAR_RETURN_IF_ERROR(s.Refresh());  // other nodes' progress

    // Every trial failing the same way means the command or its setup is wrong, not the layouts.
    bool any_ok = false;
    for (const store::TrialRecord& t : s.trials) any_ok = any_ok || t.status == search::TrialStatus::kOk;
    if (!any_ok && static_cast<int>(this_run.size()) >= o.failures_to_abort) {
      const store::TrialRecord& first = this_run.front();
      const bool same = std::all_of(this_run.begin(), this_run.end(), [&](const store::TrialRecord& t) {
        return t.status == first.status && t.status != search::TrialStatus::kOom &&
               t.message == first.message;
      });
      if (same) {
        progress.Close();
        return {StatusCode::kTrialsFailed,
                fmt::format("every trial failed the same way ({} trials): {}: {} (log: {})", this_run.size(),
                            search::ToString(first.status), first.message, first.log_path)};
      }
    }
    if (o.early_stop) {
      const search::StopAdvice advice =
          proposer.Advise(History(s.trials), o.early_stop->first, o.early_stop->second);
      if (advice.stop) {
        stop_reason = fmt::format(
            "early stop: no untried layout can improve the best by more than {:g}% with probability {:g}% or "
            "more "
            "(the most promising, {}, has {:.2g}%)",
            100 * o.early_stop->first, 100 * o.early_stop->second,
            advice.most_promising ? search::LayoutKey(*advice.most_promising) : "-",
            100 * advice.best_probability);
        break;
      }
    }
  }
  progress.Close();

  // ---- Summary.
  const store::TrialRecord* best = BestTrial(s.trials);
  int model_best = -1;
  runner::Prediction model_best_prediction;
  for (size_t i = 0; i < s.space.legal.size(); ++i) {
    const runner::Prediction p = model->Predict(s.space.legal[i]);
    if (p.fits && (model_best < 0 || p.step_time_s < model_best_prediction.step_time_s)) {
      model_best = static_cast<int>(i);
      model_best_prediction = p;
    }
  }
  const store::TrialRecord* model_best_measured = nullptr;
  for (const store::TrialRecord& t : s.trials) {
    if (model_best >= 0 && t.layout == s.space.legal[model_best] && search::IsFinished(t.status))
      model_best_measured = &t;
  }
  const std::map<std::string, int64_t> counts = CountByStatus(s.trials);
  if (global.json) {
    nlohmann::json j = {{"study", s.study.name},     {"study_id", s.study.id},
                        {"resumed", s.resumed},      {"node", node},
                        {"backend", backend.Name()}, {"stopped_because", stop_reason},
                        {"trials", s.trials.size()}, {"status_counts", counts}};
    j["best"] = best != nullptr ? TrialJson(*best) : nlohmann::json();
    if (model_best >= 0) {
      j["model_best"] = {
          {"layout", search::LayoutKey(s.space.legal[model_best])},
          {"predicted_tokens_per_s", model_best_prediction.tokens_per_s},
          {"measured", model_best_measured != nullptr ? TrialJson(*model_best_measured) : nlohmann::json()}};
    }
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("\nStopped: {}.\n", stop_reason);
    if (best != nullptr) {
      fmt::print(
          "Best layout: {}  {} {} (trial {}/{}; model predicted {} tok/s)\n", search::LayoutKey(best->layout),
          Throughput(*best), Sliced(*best) ? "from a slice + the model" : "measured", best->node_id, best->number,
          best->predicted_tokens_per_s ? WithCommas(std::llround(*best->predicted_tokens_per_s)) : "-");
    } else {
      fmt::print("No trial has finished ok yet.\n");
    }
    if (model_best >= 0) {
      const std::string key = search::LayoutKey(s.space.legal[model_best]);
      if (model_best_measured == nullptr) {
        fmt::print("The model's top layout, {} (predicted {} tok/s), was not measured.\n", key,
                   WithCommas(std::llround(model_best_prediction.tokens_per_s)));
      } else if (best != nullptr && model_best_measured->status == search::TrialStatus::kOk &&
                 ObjectiveOf(*model_best_measured) && model_best_measured != best) {
        fmt::print("The model's top layout, {}, measured {}: {:.1f}% below the best found.\n", key,
                   Throughput(*model_best_measured),
                   100 * (1 - *ObjectiveOf(*best) / *ObjectiveOf(*model_best_measured)));
      } else if (model_best_measured == best) {
        fmt::print("The model's top layout is the best found.\n");
      } else {
        fmt::print("The model's top layout, {}, was measured: {} ({}).\n", key,
                   search::ToString(model_best_measured->status), model_best_measured->message);
      }
    }
    std::string count_text;
    for (const auto& [status, n] : counts)
      count_text += fmt::format("{}{} {}", count_text.empty() ? "" : ", ", status, n);
    fmt::print("Study {}: {} trials ({}) in store {}.\n", s.study.name, s.trials.size(), count_text,
               global.store);
    fmt::print("Resume: run the same command again (or add --study {}).  Inspect: tunepar show {}\n",
               s.study.name, s.study.name);
  }
  if (interrupted) {
    return {StatusCode::kInterrupted,
            fmt::format(
                "interrupted by signal {}; the running trials were stopped and recorded as interrupted (they "
                "are re-run first on resume)",
                StopSignal())};
  }
  return Status::Ok();
}

}  // namespace tunepar
