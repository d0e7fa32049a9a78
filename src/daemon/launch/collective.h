// The collective of a job across vendors: which library each group talks through, and between
// groups (docs/mixed-vendor.md). No shipped vendor library spans vendors (VENDORS.md), so:
//   gloo          every rank on gloo (universal, slowest: host memory and TCP);
//   hierarchical  each group on its vendor's own library (NCCL, CNCL, MCCL...), gloo between
//                 groups: gradients reduced inside each group, then across one rank per group;
//   flagcx        BAAI's FlagCX under torch (backend "cpu:gloo,<device>:flagcx"), where every node
//                 of the job reported libflagcx.so.
#pragma once

#include <string>

#include "hetpool/vendor.h"

namespace hetpool::daemon {

// `requested`: the job's collective ("" or auto: flagcx when every node has it, else
// hierarchical). A job that named flagcx was placed only on nodes that have it.
std::string ChooseCollective(const std::string& requested, bool every_node_has_flagcx);

// The torch.distributed backends one node's ranks use under a collective.
struct CollectiveBackends {
  std::string world;  // HETPOOL_DIST_BACKEND: the default process group, spanning every group
  std::string intra;  // HETPOOL_INTRA_BACKEND: inside the node's group
  std::string inter;  // HETPOOL_INTER_BACKEND: between groups
};
CollectiveBackends BackendsFor(const std::string& collective, const VendorRuntime& runtime);

}  // namespace hetpool::daemon
