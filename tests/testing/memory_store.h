// A Store kept in memory, with a switch that makes every write fail the way a full disk does:
// the state parts' unit tests check what is stored (and what is not) without a database.
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "src/daemon/store/store.h"

namespace hetpool::testing {

class MemoryStore final : public daemon::Store {
 public:
  absl::Status PutJob(const hetpool::v1::Job& job) override {
    absl::MutexLock lock(&mu_);
    if (refuse_) return absl::InternalError("memory store: refusing writes (disk full)");
    jobs_[job.id()] = job;
    ++job_writes_;
    return absl::OkStatus();
  }
  absl::Status PutNode(const hetpool::v1::Node& node) override {
    absl::MutexLock lock(&mu_);
    if (refuse_) return absl::InternalError("memory store: refusing writes (disk full)");
    nodes_[node.name()] = node;
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<daemon::StoredRow>> LoadJobRows() override {
    absl::MutexLock lock(&mu_);
    std::vector<daemon::StoredRow> out;
    for (const auto& [id, job] : jobs_) out.push_back({id, job.SerializeAsString()});
    return out;
  }
  absl::StatusOr<std::vector<daemon::StoredRow>> LoadNodeRows() override {
    absl::MutexLock lock(&mu_);
    std::vector<daemon::StoredRow> out;
    for (const auto& [name, node] : nodes_) out.push_back({name, node.SerializeAsString()});
    return out;
  }

  absl::Status ArchiveJobs(const std::vector<hetpool::v1::Job>& jobs, bool keep) override {
    absl::MutexLock lock(&mu_);
    if (refuse_) return absl::InternalError("memory store: refusing writes (disk full)");
    for (const auto& job : jobs) {
      if (keep) archive_[job.id()] = job;
      jobs_.erase(job.id());
      highest_seq_ = std::max<uint64_t>(highest_seq_, job.submit_seq());
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::optional<hetpool::v1::Job>> GetArchivedJob(const std::string& id) override {
    absl::MutexLock lock(&mu_);
    auto it = archive_.find(id);
    if (it == archive_.end()) return std::optional<hetpool::v1::Job>();
    return std::optional<hetpool::v1::Job>(it->second);
  }
  absl::StatusOr<std::vector<hetpool::v1::Job>> ArchivedJobsSince(absl::Time since) override {
    absl::MutexLock lock(&mu_);
    std::vector<hetpool::v1::Job> out;
    for (const auto& [id, job] : archive_) {
      if (job.finished_at().seconds() >= absl::ToUnixSeconds(since)) out.push_back(job);
    }
    return out;
  }
  absl::StatusOr<uint64_t> HighestJobSeq() override {
    absl::MutexLock lock(&mu_);
    return highest_seq_;
  }

  // Job writes taken so far.
  int job_writes() {
    absl::MutexLock lock(&mu_);
    return job_writes_;
  }
  void Refuse(bool refuse) {
    absl::MutexLock lock(&mu_);
    refuse_ = refuse;
  }
  // The stored copy of a job or node (default instance when absent).
  hetpool::v1::Job StoredJob(const std::string& id) {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(id);
    return it == jobs_.end() ? hetpool::v1::Job() : it->second;
  }
  hetpool::v1::Node StoredNode(const std::string& name) {
    absl::MutexLock lock(&mu_);
    auto it = nodes_.find(name);
    return it == nodes_.end() ? hetpool::v1::Node() : it->second;
  }

 private:
  absl::Mutex mu_;
  bool refuse_ ABSL_GUARDED_BY(mu_) = false;
  int job_writes_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, hetpool::v1::Job> jobs_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, hetpool::v1::Node> nodes_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, hetpool::v1::Job> archive_ ABSL_GUARDED_BY(mu_);
  uint64_t highest_seq_ ABSL_GUARDED_BY(mu_) = 0;  // of archived jobs only (as a store's meta row)
};

}  // namespace hetpool::testing
