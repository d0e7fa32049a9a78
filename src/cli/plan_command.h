// `hetpoolctl plan`: ranked ways to train or serve a model on the pool's cards, from hetpoold's
// PlannerService or offline against inventory files (--pool) with no daemon running.
#pragma once

#include <string>
#include <vector>

#include "src/cli/client.h"

namespace hetpool::cli {

int PlanCommand(Client& client, const std::vector<std::string>& args);

}  // namespace hetpool::cli
