#include "store/claims.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "base/no_follow.h"
#include "base/provenance.h"
#include "store/claim_files.h"

namespace tunepar::store {

namespace fs = std::filesystem;

namespace {

std::string StateText(ClaimState s) {
  switch (s) {
    case ClaimState::kRunning: return "running";
    case ClaimState::kDone: return "done";
    case ClaimState::kReleased: return "released";
    case ClaimState::kForgotten: return "forgotten";
  }
  return "running";
}

ClaimState ParseState(const std::string& s) {
  if (s == "done") return ClaimState::kDone;
  if (s == "released") return ClaimState::kReleased;
  if (s == "forgotten") return ClaimState::kForgotten;
  return ClaimState::kRunning;
}

std::string Encode(const ClaimOwner& o, ClaimState state, const std::string& detail) {
  return fmt::format("{}state={}\ndetail={}\n", OwnerLines(o), StateText(state), detail);
}

// A claim file as written by Encode; a file cut short (its owner died while writing it cannot
// happen: files appear whole by link) reads as an owner with no token, which is gone.
ClaimFile Decode(const std::string& name, int generation, const std::string& text) {
  ClaimFile c;
  c.name = name;
  c.generation = generation;
  std::map<std::string, std::string> f = ParseKeyValues(text);
  c.owner = OwnerFromFields(f);
  c.state = ParseState(f["state"]);
  c.detail = f["detail"];
  return c;
}

std::string GenerationPath(const std::string& dir, const std::string& name, int generation) {
  return fmt::format("{}/{}.g{}", dir, name, generation);
}

// The latest generation of every claim in `dir`, read; the folder must exist (StudyClaims::Join
// made it: gone now, it was deleted).
Result<std::map<std::string, ClaimFile>> LatestClaims(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return ClaimsVanished(fmt::format("the folder {} is gone", dir));
  Result<std::map<std::string, int>> latest = LatestGenerations(dir);
  if (!latest.ok()) return latest.status();
  std::map<std::string, ClaimFile> out;
  for (const auto& [name, generation] : *latest) {
    Result<std::string> text = ReadSmallFile(GenerationPath(dir, name, generation));
    if (!text.ok()) return text.status();
    out[name] = Decode(name, generation, *text);
  }
  return out;
}

}  // namespace

std::string OwnerLines(const ClaimOwner& o) {
  return fmt::format("owner={}\nnode={}\nhost={}\nboot={}\npid={}\nstart={}\n", o.token, o.node_id, o.host, o.boot_id,
                     o.pid, o.start_ticks);
}

ClaimOwner OwnerFromFields(const std::map<std::string, std::string>& f) {
  auto field = [&](const char* key) {
    auto it = f.find(key);
    return it == f.end() ? std::string() : it->second;
  };
  ClaimOwner o;
  o.token = field("owner");
  o.node_id = field("node");
  o.host = field("host");
  o.boot_id = field("boot");
  o.pid = std::atoll(field("pid").c_str());
  o.start_ticks = std::atoll(field("start").c_str());
  return o;
}

ClaimOwner ThisProcess(const std::string& node_id) {
  ClaimOwner o;
  o.node_id = node_id;
  o.host = HostName();
  o.boot_id = BootId();
  o.pid = getpid();
  o.start_ticks = ProcessStartTicks(o.pid).value_or(0);
  o.token = FileSafe(fmt::format("{}@{}.{}.{}", node_id, o.host, o.pid, o.start_ticks));
  return o;
}

LeaseWatch::LeaseWatch(std::string store_dir, ClaimOwner self, double lease_s)
    : store_dir_(std::move(store_dir)), self_(std::move(self)), lease_s_(lease_s) {}

bool LeaseWatch::Gone(const ClaimOwner& owner, bool by_held_node) {
  if (owner.token == self_.token) return false;
  if (owner.token.empty()) return true;
  // This process holds the node id (for the study whose claims it judges): any other process
  // that held it has ended.
  if (by_held_node && holds_node_ && owner.node_id == self_.node_id) return true;
  if (owner.host == self_.host) {
    if (owner.boot_id != self_.boot_id) return true;  // the host rebooted since
    if (ProcessStartTicks(owner.pid) != std::optional<int64_t>(owner.start_ticks)) return true;
  }
  // No heartbeat file reads as a counter that stands still: a process that left has finished or
  // released its claims, so only a crashed one, or a heartbeat deleted by hand, leaves a claim
  // running without one, and both are judged by the lease like any silent owner.
  Result<std::string> read = ReadSmallFile(BeatPath(store_dir_, owner.token));
  const std::string counter = read.ok() ? *read : std::string();
  const auto now = std::chrono::steady_clock::now();
  auto [it, fresh] = seen_.try_emplace(owner.token, Seen{counter, now});
  if (!fresh && it->second.counter != counter) it->second = Seen{counter, now};
  return std::chrono::duration<double>(now - it->second.since).count() >= lease_s_;
}

Status Heartbeat::Beat() {
  const std::string path = BeatPath(store_dir_, self_.token);
  if (count_ == 0) {
    TUNEPAR_RETURN_IF_ERROR(MakeDirectoriesBelow(store_dir_, "claims/beats"));
  } else if (Status intact = Check(); !intact.ok()) {
    return intact;
  }
  ++count_;
  return ReplaceFile(path, fmt::format("{}\n", count_));
}

Status Heartbeat::Check() const {
  std::error_code ec;
  if (count_ > 0 && !fs::exists(BeatPath(store_dir_, self_.token), ec))
    return ClaimsVanished(fmt::format("this process's heartbeat {} is gone", BeatPath(store_dir_, self_.token)));
  return Status::Ok();
}

void Heartbeat::Stop() {
  std::error_code ec;
  fs::remove(BeatPath(store_dir_, self_.token), ec);
}

StudyClaims::StudyClaims(std::string store_dir, std::string study_id, LeaseWatch& watch)
    : store_dir_(std::move(store_dir)),
      relative_dir_("claims/" + study_id),
      dir_((fs::path(store_dir_) / relative_dir_).string()),
      watch_(watch) {}

std::string StudyClaims::LayoutsDir() const { return dir_ + "/layouts"; }
std::string StudyClaims::SlotsDir() const { return dir_ + "/slots"; }

Result<std::optional<HeldClaim>> StudyClaims::ClaimLayout(const std::string& layout_key, int measurement) {
  const std::string name = fmt::format("{}.m{}", layout_key, measurement);
  Result<std::map<std::string, ClaimFile>> latest = LatestClaims(LayoutsDir());
  if (!latest.ok()) return latest.status();
  int generation = 1;
  if (auto it = latest->find(name); it != latest->end()) {
    const ClaimFile& c = it->second;
    if (c.state == ClaimState::kDone) return std::optional<HeldClaim>();
    if (c.state == ClaimState::kRunning && !watch_.Gone(c.owner)) return std::optional<HeldClaim>();
    generation = c.generation + 1;
  }
  Result<bool> won = CreateOnce(GenerationPath(LayoutsDir(), name, generation),
                                Encode(watch_.self(), ClaimState::kRunning, ""), watch_.self().token);
  if (!won.ok()) return won.status();
  if (!*won) return std::optional<HeldClaim>();
  HeldClaim held;
  held.layout_key = layout_key;
  held.measurement = measurement;
  held.layout_generation = generation;
  return std::optional<HeldClaim>(held);
}

Result<bool> StudyClaims::ClaimSlot(int limit, HeldClaim& held) {
  Result<std::map<std::string, ClaimFile>> latest = LatestClaims(SlotsDir());
  if (!latest.ok()) return latest.status();
  const std::string paid_for = fmt::format("{}.m{}.g{}", held.layout_key, held.measurement, held.layout_generation);
  for (int n = 1; n <= limit; ++n) {
    int generation = 1;
    if (auto it = latest->find(std::to_string(n)); it != latest->end()) {
      const ClaimFile& c = it->second;
      if (c.state == ClaimState::kDone) continue;
      if (c.state == ClaimState::kRunning && !watch_.Gone(c.owner)) continue;
      generation = c.generation + 1;
    }
    Result<bool> won = CreateOnce(GenerationPath(SlotsDir(), std::to_string(n), generation),
                                  Encode(watch_.self(), ClaimState::kRunning, paid_for), watch_.self().token);
    if (!won.ok()) return won.status();
    if (*won) {
      held.slot = n;
      held.slot_generation = generation;
      return true;
    }
  }
  return false;
}

Status StudyClaims::CheckHeldFiles(const HeldClaim& held) const {
  const std::string layout = fmt::format("{}.m{}", held.layout_key, held.measurement);
  std::error_code ec;
  for (const std::string& path : {GenerationPath(LayoutsDir(), layout, held.layout_generation),
                                  held.slot > 0 ? GenerationPath(SlotsDir(), std::to_string(held.slot), held.slot_generation)
                                                : std::string()}) {
    if (!path.empty() && !fs::exists(path, ec)) return ClaimsVanished(fmt::format("this process's claim {} is gone", path));
  }
  return Status::Ok();
}

Status StudyClaims::Finish(const HeldClaim& held) {
  TUNEPAR_RETURN_IF_ERROR(CheckHeldFiles(held));
  const std::string layout = fmt::format("{}.m{}", held.layout_key, held.measurement);
  if (held.slot > 0) {
    TUNEPAR_RETURN_IF_ERROR(
        ReplaceFile(GenerationPath(SlotsDir(), std::to_string(held.slot), held.slot_generation),
                    Encode(watch_.self(), ClaimState::kDone,
                           fmt::format("{}.g{}", layout, held.layout_generation))));
  }
  return ReplaceFile(GenerationPath(LayoutsDir(), layout, held.layout_generation),
                     Encode(watch_.self(), ClaimState::kDone, std::to_string(held.slot)));
}

Status StudyClaims::Release(const HeldClaim& held) {
  TUNEPAR_RETURN_IF_ERROR(CheckHeldFiles(held));
  const std::string layout = fmt::format("{}.m{}", held.layout_key, held.measurement);
  if (held.slot > 0) {
    TUNEPAR_RETURN_IF_ERROR(ReplaceFile(GenerationPath(SlotsDir(), std::to_string(held.slot), held.slot_generation),
                                        Encode(watch_.self(), ClaimState::kReleased, "")));
  }
  return ReplaceFile(GenerationPath(LayoutsDir(), layout, held.layout_generation),
                     Encode(watch_.self(), ClaimState::kReleased, ""));
}

Result<bool> StudyClaims::StillHeld(const HeldClaim& held) {
  TUNEPAR_RETURN_IF_ERROR(CheckHeldFiles(held));
  const std::string layout = fmt::format("{}.m{}", held.layout_key, held.measurement);
  std::error_code ec;
  if (fs::exists(GenerationPath(LayoutsDir(), layout, held.layout_generation + 1), ec)) return false;
  if (held.slot > 0 && fs::exists(GenerationPath(SlotsDir(), std::to_string(held.slot), held.slot_generation + 1), ec))
    return false;
  return true;
}

Status StudyClaims::Join(int finished) {
  TUNEPAR_RETURN_IF_ERROR(MakeDirectoriesBelow(store_dir_, relative_dir_ + "/layouts"));
  TUNEPAR_RETURN_IF_ERROR(MakeDirectoriesBelow(store_dir_, relative_dir_ + "/slots"));
  Result<std::map<std::string, int>> slots = LatestGenerations(SlotsDir());
  if (!slots.ok()) return slots.status();
  // Every joining node fills the missing slots among 1..finished itself (not only the first to
  // find none): a node that saw a slot another node had just begun to create and went on would
  // claim a slot still missing below `finished` as free, and the study would finish one trial
  // more than its budget (store_integrity_test, once in several runs).
  for (int n = 1; n <= finished; ++n) {
    if (slots->count(std::to_string(n)) > 0) continue;
    // Nodes joining at the same moment write the same thing: whichever link wins is right.
    Result<bool> created = CreateOnce(GenerationPath(SlotsDir(), std::to_string(n), 1),
                                      Encode(watch_.self(), ClaimState::kDone, "finished before these claims"),
                                      watch_.self().token);
    if (!created.ok()) return created.status();
  }
  return Status::Ok();
}

Result<bool> StudyClaims::SettleFinished(const ClaimFile& layout_claim) {
  const std::string paid_for = fmt::format("{}.g{}", layout_claim.name, layout_claim.generation);
  Result<bool> settled = CreateOnce(GenerationPath(LayoutsDir(), layout_claim.name, layout_claim.generation + 1),
                                    Encode(watch_.self(), ClaimState::kDone, "settled: finished, left running"),
                                    watch_.self().token);
  if (!settled.ok() || !*settled) return settled;
  Result<std::map<std::string, ClaimFile>> slots = LatestClaims(SlotsDir());
  if (!slots.ok()) return slots.status();
  for (const auto& [name, slot] : *slots) {
    if (slot.state != ClaimState::kRunning || slot.detail != paid_for) continue;
    Result<bool> done = CreateOnce(GenerationPath(SlotsDir(), name, slot.generation + 1),
                                   Encode(watch_.self(), ClaimState::kDone, paid_for), watch_.self().token);
    if (!done.ok()) return done.status();
  }
  return true;
}

Result<int> StudyClaims::Forget(const std::string& layout_key, int count) {
  Result<std::map<std::string, ClaimFile>> latest = LatestClaims(LayoutsDir());
  if (!latest.ok()) return latest.status();
  std::vector<std::pair<int, const ClaimFile*>> done;  // (k, claim)
  for (const auto& [name, c] : *latest) {
    const auto [key, k] = SplitMeasurement(name);
    if (key == layout_key && c.state == ClaimState::kDone) done.emplace_back(k, &c);
  }
  std::sort(done.begin(), done.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  int marked = 0;
  for (const auto& [k, c] : done) {
    if (marked == count) break;
    Result<bool> created = CreateOnce(GenerationPath(LayoutsDir(), c->name, c->generation + 1),
                                      Encode(watch_.self(), ClaimState::kForgotten, "its trial was forgotten"),
                                      watch_.self().token);
    if (!created.ok()) return created.status();
    marked += *created ? 1 : 0;
  }
  return marked;
}

Status StudyClaims::CheckIntact(const std::vector<HeldClaim>& held) const {
  std::error_code ec;
  for (const std::string& dir : {dir_, LayoutsDir(), SlotsDir()})
    if (!fs::is_directory(dir, ec)) return ClaimsVanished(fmt::format("the folder {} is gone", dir));
  for (const HeldClaim& h : held) TUNEPAR_RETURN_IF_ERROR(CheckHeldFiles(h));
  return Status::Ok();
}

Result<ClaimsView> StudyClaims::Read(int slot_limit) {
  ClaimsView view;
  Result<std::map<std::string, ClaimFile>> layouts = LatestClaims(LayoutsDir());
  if (!layouts.ok()) return layouts.status();
  for (auto& [name, c] : *layouts) {
    if (c.state == ClaimState::kDone || c.state == ClaimState::kForgotten) continue;
    const bool gone = c.state == ClaimState::kReleased || watch_.Gone(c.owner);
    if (gone) {
      view.orphaned.push_back(c);
    } else if (c.owner.token != watch_.self().token) {
      view.running_elsewhere.push_back(c);
    }
  }
  Result<std::map<std::string, ClaimFile>> slots = LatestClaims(SlotsDir());
  if (!slots.ok()) return slots.status();
  int all_done = 0;
  for (auto& [name, c] : *slots) {
    all_done += c.state == ClaimState::kDone ? 1 : 0;
    if (std::atoi(name.c_str()) > slot_limit) continue;
    if (c.state == ClaimState::kDone) {
      ++view.slots_done;
    } else if (c.state == ClaimState::kRunning && !watch_.Gone(c.owner)) {
      ++view.slots_held;
    }
  }
  // A slot once done stays done: fewer now means claim files were deleted.
  if (all_done < done_seen_)
    return ClaimsVanished(fmt::format("{} of the {} finished budget slots in {} are gone", done_seen_ - all_done,
                                      done_seen_, SlotsDir()));
  done_seen_ = all_done;
  for (auto& [name, c] : *layouts)
    if (c.state == ClaimState::kDone) view.done.push_back(name);
  return view;
}

// "<layout>.m<k>" -> (layout, k)
std::pair<std::string, int> SplitMeasurement(const std::string& name) {
  const size_t m = name.rfind(".m");
  if (m == std::string::npos) return {name, 1};
  return {name.substr(0, m), std::atoi(name.c_str() + m + 2)};
}

}  // namespace tunepar::store
