// A Store kept in memory, with a switch that makes every write fail the way a full disk does:
// the state parts' unit tests check what is stored (and what is not) without a database.
#pragma once

#include <map>
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
    return absl::OkStatus();
  }
  absl::Status PutNode(const hetpool::v1::Node& node) override {
    absl::MutexLock lock(&mu_);
    if (refuse_) return absl::InternalError("memory store: refusing writes (disk full)");
    nodes_[node.name()] = node;
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<hetpool::v1::Job>> LoadJobs() override {
    absl::MutexLock lock(&mu_);
    std::vector<hetpool::v1::Job> out;
    for (const auto& [id, job] : jobs_) out.push_back(job);
    return out;
  }
  absl::StatusOr<std::vector<hetpool::v1::Node>> LoadNodes() override {
    absl::MutexLock lock(&mu_);
    std::vector<hetpool::v1::Node> out;
    for (const auto& [name, node] : nodes_) out.push_back(node);
    return out;
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
  std::map<std::string, hetpool::v1::Job> jobs_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, hetpool::v1::Node> nodes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hetpool::testing
