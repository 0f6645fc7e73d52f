// A node id is owned by one live process per store and study, whatever its work directory: two
// searches of one study that share a node id (two jobs on one host, both named after
// $SLURMD_NODENAME) would otherwise kill each other's trials and overwrite each other's rows;
// searches of different studies write different files and may run side by side.
//
//   <store>/nodes/<node>@<study>.g<g>  the owner record: token, host, boot id, pid, start time,
//                                      work dir
//   <store>/nodes/<node>.g<g>          the record of a tunepar before schema 5, which held the
//                                      node id for every study: while its owner lives, no study
//                                      of that id is taken (and such a tunepar refuses a store
//                                      of schema 5: shards/store-format.sqlite)
//
// Taking the id creates the next generation once the current owner is gone (claims.h: its
// process ended on this host, or its heartbeat stood still for the lease on another host), so
// of two processes started at the same instant exactly one runs; it removes the records of the
// owners before it. The owner checks at every heartbeat and before every publish that no later
// generation exists.
#pragma once

#include <string>

#include "base/status.h"
#include "store/claims.h"

namespace tunepar::store {

class NodeOwnership {
 public:
  // Takes `watch.self()`'s node id in the store, or refuses (kStore, one line naming the live
  // owner). An owner on another host is watched for up to the lease before it is judged gone.
  static Result<NodeOwnership> Acquire(const std::string& store_dir, const std::string& study_id,
                                       const std::string& work_dir, LeaseWatch& watch);

  // kStore when another process has taken the id since (it judged this one gone).
  Status Check() const;
  // Marks the record released (the process is leaving), so the next owner need not wait.
  void Release();

  const std::string& path() const { return path_; }

 private:
  void RemoveEarlierGenerations() const;

  std::string dir_, node_id_, name_, path_;  // name_: "<node>@<study>", the record's name
  int generation_ = 0;
  ClaimOwner self_;
  std::string work_dir_;
};

}  // namespace tunepar::store
