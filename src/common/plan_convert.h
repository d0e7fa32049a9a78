// API messages <-> planner types (planner/ knows nothing of protobuf). Shared by hetpoold's
// PlannerService and submit-by-model, and by `hetpoolctl plan --pool` planning offline.
#pragma once

#include "absl/status/statusor.h"
#include "hetpool/v1/planner.pb.h"
#include "planner/mixed_plan.h"
#include "planner/planner.h"

namespace hetpool {

namespace pb = ::hetpool::v1;

// Resolves the model (preset, config.json text or dimensions) and the workload's defaults;
// errors name the field that is wrong.
absl::StatusOr<planner::PlanRequest> FromProto(const pb::PlanRequest& request);

pb::PlanRow ToProto(const planner::Plan& plan, const planner::Workload& workload);
pb::PlanResponse ToProto(const planner::PlanResult& result, const planner::PlanRequest& request,
                         const planner::PriceTable& prices);

// The whole answer to a PlanRequest on `classes`: the request read (FromProto), planned per class
// (MakePlan) or as one job across them (request.mixed: MakeMixedPlan), and written back.
absl::StatusOr<pb::PlanResponse> AnswerPlan(const pb::PlanRequest& request,
                                            const std::vector<planner::PoolClass>& classes,
                                            const planner::PriceTable& prices);

// "tp8,pp2,dp4", "TP8 PP2 DP4" (as plans print it) or any subset in any order; a degree left out
// is 1. Errors say which word is wrong.
absl::StatusOr<pb::PlanLayout> ParseLayout(absl::string_view text);

// The plan's layout as planner::LayoutName writes it: "TP8 PP2 DP1 ZeRO-3".
std::string LayoutName(const pb::PlanRow& plan);

// Reads and checks a price table file (hetpoold --prices, hetpoolctl plan --prices); errors
// name the file.
absl::StatusOr<planner::PriceTable> ReadPriceTableFile(const std::string& path);

// The environment a job submitted by model gets: HETPOOL_TP, _PP, _DP, _ZERO_STAGE, _MICRO_BATCH,
// _GRAD_ACCUM and the plan's class.
std::vector<std::pair<std::string, std::string>> PlanEnvironment(const pb::PlanRow& plan);

}  // namespace hetpool
