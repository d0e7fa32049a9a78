#include "src/daemon/services/job_service.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "src/common/convert.h"
#include "src/common/grpc_status.h"

namespace hetpool::daemon {
namespace {

constexpr size_t kLogChunk = 64 * 1024;
constexpr absl::Duration kPollSlice = absl::Milliseconds(500);

// Keeps only the lines torchrun's --tee tagged with one local rank ("[default<r>]:").
class RankFilter {
 public:
  explicit RankFilter(int local_rank) : prefix_(absl::StrCat("[default", local_rank, "]:")) {}
  std::string Feed(absl::string_view data) {
    std::string out;
    for (char c : data) {
      line_ += c;
      if (c == '\n') Flush(out);
    }
    return out;
  }
  std::string Finish() {
    std::string out;
    Flush(out);
    return out;
  }

 private:
  void Flush(std::string& out) {
    if (line_.rfind(prefix_, 0) == 0) out += line_;
    line_.clear();
  }
  std::string prefix_;
  std::string line_;
};

}  // namespace

grpc::Status JobServiceImpl::SubmitJob(grpc::ServerContext* ctx, const pb::SubmitJobRequest* req,
                                       pb::SubmitJobResponse* resp) {
  HETPOOL_SERVE_OR_FORWARD(gate_, pb::JobService, SubmitJob, ctx, req, resp);
  absl::StatusOr<pb::Job> job;
  if (req->spec().has_model()) {
    // Submit by model: the plan fixes the devices, the class and the layout variables.
    pb::JobSpec spec = req->spec();
    auto plan = planner_->ResolveJob(spec, state_->PlannerPool());
    if (!plan.ok()) return ToGrpcStatus(plan.status());
    job = state_->Submit(std::move(spec), req->request_id(), &*plan);
  } else {
    job = state_->Submit(req->spec(), req->request_id());
  }
  if (!job.ok()) return ToGrpcStatus(job.status());
  *resp->mutable_job() = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::GetJob(grpc::ServerContext* ctx, const pb::GetJobRequest* req, pb::Job* resp) {
  HETPOOL_SERVE_OR_FORWARD(gate_, pb::JobService, GetJob, ctx, req, resp);
  auto job = state_->GetJob(req->job_id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  *resp = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::ListJobs(grpc::ServerContext* ctx, const pb::ListJobsRequest* req,
                                      pb::ListJobsResponse* resp) {
  HETPOOL_SERVE_OR_FORWARD(gate_, pb::JobService, ListJobs, ctx, req, resp);
  auto list = state_->ListJobs(*req);
  if (!list.ok()) return ToGrpcStatus(list.status());
  *resp = *std::move(list);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::CancelJob(grpc::ServerContext* ctx, const pb::CancelJobRequest* req,
                                       pb::Job* resp) {
  HETPOOL_SERVE_OR_FORWARD(gate_, pb::JobService, CancelJob, ctx, req, resp);
  auto job = state_->Cancel(req->job_id(), req->reason());
  if (!job.ok()) return ToGrpcStatus(job.status());
  *resp = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::WatchJob(grpc::ServerContext* ctx, const pb::WatchJobRequest* req,
                                      grpc::ServerWriter<pb::WatchJobResponse>* writer) {
  HETPOOL_RETURN_IF_NOT_LEADER(gate_);
  uint64_t seen = 0;
  while (!ctx->IsCancelled()) {
    auto next = state_->WaitJob(req->job_id(), seen, absl::Now() + kPollSlice);
    if (!next.ok()) return ToGrpcStatus(next.status());
    auto& [job, version] = *next;
    if (version > seen) {
      seen = version;
      pb::WatchJobResponse update;
      if (job.events_size() > 0) *update.mutable_event() = job.events(job.events_size() - 1);
      *update.mutable_job() = job;
      if (!writer->Write(update)) return grpc::Status::CANCELLED;
      if (IsTerminal(job.state())) return grpc::Status::OK;
    }
    if (state_->stopping()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "hetpoold is shutting down");
  }
  return grpc::Status::CANCELLED;
}

grpc::Status JobServiceImpl::GetJobLogs(grpc::ServerContext* ctx, const pb::GetJobLogsRequest* req,
                                        grpc::ServerWriter<pb::LogChunk>* writer) {
  HETPOOL_RETURN_IF_NOT_LEADER(gate_);
  uint64_t seen = 0;
  std::map<std::string, uint64_t> offsets;
  std::map<std::string, RankFilter> filters;
  bool final_pass = false;
  while (!ctx->IsCancelled()) {
    auto next = state_->WaitJob(req->job_id(), seen, absl::Now() + (seen ? kPollSlice : absl::ZeroDuration()));
    if (!next.ok()) return ToGrpcStatus(next.status());
    const pb::Job& job = next->first;
    seen = next->second;
    const uint64_t generation = req->generation() ? req->generation() : job.generation();
    if (generation > job.generation()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("job ", job.id(), " has no generation ", generation));
    }
    // Which node files to read: one node, the node of one rank, or the whole placement.
    std::vector<std::string> nodes;
    if (req->has_rank()) {
      const int procs = job.spec().procs_per_node();
      const int world = procs * job.spec().nnodes();
      if (req->rank() < 0 || req->rank() >= world) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            absl::StrCat("rank: must be in [0, ", world, ")"));
      }
      for (const auto& p : job.placement()) {
        for (int local = 0; local < p.global_ranks_size(); ++local) {
          if (p.global_ranks(local) != req->rank()) continue;
          nodes.push_back(p.node());
          filters.try_emplace(p.node(), local);
        }
      }
      // Until the workers are up (and report their ranks) no node is known to hold the rank.
    } else if (!req->node().empty()) {
      nodes.push_back(req->node());
    } else {
      for (const auto& p : job.placement()) nodes.push_back(p.node());
    }
    if (generation > 0) {
      for (const auto& node : nodes) {
        while (true) {
          auto data = logs_->Read(job.id(), generation, node, offsets[node], kLogChunk);
          if (!data.ok()) return ToGrpcStatus(data.status());
          if (data->empty()) break;
          offsets[node] += data->size();
          pb::LogChunk chunk;
          chunk.set_node(node);
          auto filter = filters.find(node);
          chunk.set_data(filter == filters.end() ? *data : filter->second.Feed(*data));
          if (!chunk.data().empty() && !writer->Write(chunk)) return grpc::Status::CANCELLED;
        }
      }
    }
    // Agents push a node's logs before reporting its exit, so one pass after the job ended
    // returns everything.
    const bool ended = IsTerminal(job.state()) || (req->generation() && req->generation() < job.generation());
    if (!req->follow() || final_pass) break;
    if (ended) final_pass = true;
    if (state_->stopping()) break;
  }
  for (auto& [node, filter] : filters) {
    pb::LogChunk chunk;
    chunk.set_node(node);
    chunk.set_data(filter.Finish());
    if (!chunk.data().empty()) writer->Write(chunk);
  }
  return ctx->IsCancelled() ? grpc::Status::CANCELLED : grpc::Status::OK;
}

}  // namespace hetpool::daemon
