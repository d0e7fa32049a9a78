// PoolQueries: read-only views of the pool computed from the node registry and the job table
// (ClusterState takes its lock around them): devices with what holds them, fingerprint classes
// with free counts, the planner's pool, the metrics snapshot, and quota holdings and checks.
// Every "free" here is claim_ledger.h's.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "hetpool/v1/cluster.pb.h"
#include "planner/pool.h"
#include "src/daemon/security/quota.h"
#include "src/daemon/sharing/fair_share.h"
#include "src/daemon/state/job_table.h"
#include "src/daemon/state/node_registry.h"
#include "src/daemon/state/pool_snapshot.h"
#include "src/daemon/state/quota_ledger.h"

namespace hetpool::daemon {

// The devices of `node_name` (every node when empty) of `vendor` (every vendor when empty).
std::vector<pb::DeviceView> DeviceViews(const NodeRegistry& nodes, const std::string& node_name,
                                        const std::string& vendor);
std::vector<pb::FingerprintClass> FingerprintClasses(const NodeRegistry& nodes);
// The schedulable pool by fingerprint class, with free counts and link groups, for the planner.
std::vector<planner::PoolClass> PlannerPool(const NodeRegistry& nodes);
PoolSnapshot SnapshotOf(const NodeRegistry& nodes, const JobTable& jobs, absl::Time now);

// What every user and group holds now (all claims, including those being stopped).
// What fair share weighs (sharing/fair_share.h): the healthy cards of registered nodes per class,
// and what each group's users' jobs hold now.
struct GroupHoldings {
  CardHoldings capacity;
  std::map<std::string, UserHoldings> held;  // group -> user -> cards (none for a user who only waits)
};
GroupHoldings HoldingsByGroup(const NodeRegistry& nodes, const JobTable& jobs);

QuotaLedger HoldingsLedger(const QuotaTable& quotas, const NodeRegistry& nodes, const JobTable& jobs);
// Quotas at submission: the queue limit, a job the quota alone rules out, and (on_exceed
// "reject") a job over quota now.
absl::Status CheckQuotaAtSubmit(const QuotaTable& quotas, const NodeRegistry& nodes, const JobTable& jobs,
                                const pb::JobSpec& spec);

}  // namespace hetpool::daemon
