// `hetpoolctl admin`: local administration that needs no daemon. `token` makes a bearer token
// and appends its hash to a token file; `revoke` removes a user's tokens. hetpoold re-reads the
// file when it changes.
#pragma once

#include <string>
#include <vector>

#include "src/cli/client.h"

namespace hetpool::cli {

int AdminCommand(Client& client, const std::vector<std::string>& args);

}  // namespace hetpool::cli
