#include "store/node_owner.h"

#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "base/no_follow.h"
#include "store/claim_files.h"

namespace tunepar::store {

namespace fs = std::filesystem;

namespace {

std::string Record(const ClaimOwner& o, const std::string& state, const std::string& work_dir) {
  return fmt::format("{}state={}\nwork_dir={}\n", OwnerLines(o), state, work_dir);
}

// Whether the recorded owner is gone, watching an owner on another host for up to the lease.
bool OwnerGone(LeaseWatch& watch, const ClaimOwner& owner) {
  if (owner.host == watch.self().host || owner.token.empty()) return watch.Gone(owner, false);
  fmt::print(stderr, "tunepar: node id '{}' was held by pid {} on {}: watching its heartbeat for up to {:g} s\n", owner.node_id,
               owner.pid, owner.host, watch.lease_s());
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(watch.lease_s() + 1);
  while (std::chrono::steady_clock::now() < until) {
    if (watch.Gone(owner, false)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  return watch.Gone(owner, false);
}

}  // namespace

namespace {

// kStore naming the live owner of record `name` (its latest generation), if it has one.
Status LiveOwner(const std::string& dir, const std::string& name, int generation, LeaseWatch& watch,
                 const std::string& what) {
  Result<std::string> text = ReadSmallFile(fmt::format("{}/{}.g{}", dir, name, generation));
  std::map<std::string, std::string> f = ParseKeyValues(text.ok() ? *text : "");
  const ClaimOwner owner = OwnerFromFields(f);
  if (f["state"] == "released" || OwnerGone(watch, owner)) return Status::Ok();
  return StoreError(fmt::format("node id '{}' is in use in this store {}by pid {} on {} (work dir {}); give this search "
                                "another --node-id",
                                watch.self().node_id, what, owner.pid, owner.host,
                                f["work_dir"].empty() ? "the store's" : f["work_dir"]));
}

}  // namespace

Result<NodeOwnership> NodeOwnership::Acquire(const std::string& store_dir, const std::string& study_id,
                                             const std::string& work_dir, LeaseWatch& watch) {
  NodeOwnership n;
  n.dir_ = (fs::path(store_dir) / "nodes").string();
  n.self_ = watch.self();
  n.node_id_ = n.self_.node_id;
  n.name_ = n.node_id_ + "@" + study_id;
  n.work_dir_ = work_dir;
  TUNEPAR_RETURN_IF_ERROR(MakeDirectoriesBelow(store_dir, "nodes"));
  Result<std::map<std::string, int>> latest = LatestGenerations(n.dir_);
  if (!latest.ok()) return latest.status();
  // A tunepar before schema 5 holds the id for every study.
  if (auto legacy = latest->find(n.node_id_); legacy != latest->end())
    TUNEPAR_RETURN_IF_ERROR(LiveOwner(n.dir_, n.node_id_, legacy->second, watch, "for every study (an older tunepar) "));
  int generation = 1;
  if (auto it = latest->find(n.name_); it != latest->end()) {
    TUNEPAR_RETURN_IF_ERROR(LiveOwner(n.dir_, n.name_, it->second, watch, fmt::format("for study {} ", study_id)));
    generation = it->second + 1;
  }
  n.generation_ = generation;
  n.path_ = fmt::format("{}/{}.g{}", n.dir_, n.name_, generation);
  Result<bool> won = CreateOnce(n.path_, Record(n.self_, "running", work_dir), n.self_.token);
  if (!won.ok()) return won.status();
  if (!*won) {
    return StoreError(fmt::format(
        "node id '{}' was taken by another process starting at the same moment; give this search another --node-id",
        n.node_id_));
  }
  watch.HoldNode();
  n.RemoveEarlierGenerations();
  return n;
}

// The records of owners before this one: judged gone, and an owner that is not gone after all
// learns it from the later generation that remains (Check), so they are only clutter.
void NodeOwnership::RemoveEarlierGenerations() const {
  std::error_code ec;
  for (int g = generation_ - 1; g >= 1; --g) fs::remove(fmt::format("{}/{}.g{}", dir_, name_, g), ec);
}

Status NodeOwnership::Check() const {
  // Any later generation, not only the next: earlier ones are removed by the owner that follows.
  Result<std::map<std::string, int>> latest = LatestGenerations(dir_);
  if (!latest.ok()) return latest.status();
  auto it = latest->find(name_);
  if (it == latest->end() || it->second <= generation_) return Status::Ok();
  Result<std::string> text = ReadSmallFile(fmt::format("{}/{}.g{}", dir_, name_, it->second));
  std::map<std::string, std::string> f = ParseKeyValues(text.ok() ? *text : "");
  return StoreError(fmt::format(
      "node id '{}' was taken over by pid {} on {} (this process did not renew its heartbeat within the lease); "
      "stopping without writing",
      node_id_, f["pid"], f["host"]));
}

void NodeOwnership::Release() {
  if (path_.empty() || !Check().ok()) return;
  (void)ReplaceFile(path_, Record(self_, "released", work_dir_));
}

}  // namespace tunepar::store
