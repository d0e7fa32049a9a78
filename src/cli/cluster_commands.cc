// hetpoolctl's pool commands: nodes, devices, fingerprints, drain and undrain.
#include <iostream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "src/common/convert.h"
#include "src/cli/command.h"
#include "src/cli/output.h"

namespace hetpool::cli {
namespace {

// When a quarantine began, in UTC: "2026-12-07 19:02:11 UTC".
std::string SinceWords(const pb::CardQuarantine& q) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", FromProtoTime(q.since()), absl::UTCTimeZone());
}

int Nodes(Client& client, const Invocation&, const NoOptions&) {
  pb::ListNodesResponse resp;
  auto status = client.cluster().ListNodes(client.Context().get(), pb::ListNodesRequest(), &resp);
  if (!status.ok()) return client.Failed(status);
  if (client.json()) {
    std::cout << ToJson(resp);
    return 0;
  }
  Table table({"NAME", "STATE", "ADDRESS", "DEVICES", "CPUS", "BACKEND", "LABELS", "JOBS", "HEARTBEAT"});
  for (const auto& n : resp.nodes()) {
    std::map<std::string, int> by_model;
    for (const auto& d : n.inventory().devices()) ++by_model[d.vendor() + "/" + d.model()];
    std::vector<std::string> devices;
    for (const auto& [model, count] : by_model) devices.push_back(absl::StrCat(count, "x", model));
    std::string state = n.state() == pb::NODE_STATE_READY ? "Ready" : "NotReady";
    if (n.drained()) state += ",Drained";
    if (!n.fault().empty()) state += ",Faulted";
    if (n.has_quarantine()) state += ",Quarantined";
    std::map<std::string, std::string> labels(n.labels().begin(), n.labels().end());
    table.Add({n.name(), state, n.address(), devices.empty() ? "cpu-only" : absl::StrJoin(devices, " "),
               absl::StrCat(n.inventory().cpus()), n.inventory().backend(),
               labels.empty() ? "-" : absl::StrJoin(labels, ",", absl::PairFormatter("=")),
               absl::StrJoin(n.running_jobs(), ","), Age(n.last_heartbeat().seconds())});
  }
  std::cout << table.Render();
  for (const auto& n : resp.nodes()) {
    if (!n.fault().empty()) std::cout << n.name() << " takes no new work: " << n.fault() << "\n";
    if (n.has_quarantine()) {
      std::cout << n.name() << " quarantined since " << SinceWords(n.quarantine()) << ": " << n.quarantine().reason()
                << " (hetpoolctl return-node " << n.name() << " after repair)\n";
    }
    if (const auto& runtime = n.inventory().container_runtime(); !runtime.name().empty()) {
      std::cout << n.name() << " runs jobs in images through " << runtime.name() << " " << runtime.version() << " ("
                << n.inventory().images_size() << (n.inventory().images_size() == 1 ? " image" : " images")
                << " here)\n";
    }
    for (const auto& d : n.inventory().devices()) {
      if (!d.dirty().empty()) std::cout << n.name() << " " << d.id() << " is dirty: " << d.dirty() << "\n";
    }
  }
  return 0;
}

struct DevicesOptions {
  std::string node, vendor;
  bool quarantined = false;
};

void DeclareDevices(FlagSet& flags, DevicesOptions* o) {
  flags.String("node", &o->node, "only this node");
  flags.CompleteAs("node", ValueCompletion::kNodeName);
  flags.String("vendor", &o->vendor, "only this vendor");
  flags.Values("vendor", {"nvidia", "metax", "cambricon", "intel", "cpu"});
  flags.Bool("quarantined", &o->quarantined, "only quarantined cards: since when, why, and the evidence");
}

// The quarantined cards: which, since when, why, and the failures that put them there.
int QuarantinedDevices(const pb::ListDevicesResponse& resp) {
  Table table({"NODE", "DEVICE", "MODEL", "SINCE", "WHY", "EVIDENCE"});
  for (const auto& v : resp.devices()) {
    if (!v.has_quarantine()) continue;
    const pb::CardQuarantine& q = v.quarantine();
    table.Add({v.node(), v.device().id(), v.device().model(), SinceWords(q), q.reason(),
               q.evidence_size() > 0 ? q.evidence(q.evidence_size() - 1) : "-"});
  }
  std::cout << table.Render();
  return 0;
}

// "ok", "unhealthy: <the vendor's words>", "dirty: pid 4242 (uid 0, python3) holds 2658 MiB" or
// "degraded: PCIe link x8 of x16 (Gen5 of Gen5)" (placed last: docs/reliability.md).
std::string DeviceHealthWords(const pb::Device& d) {
  if (!d.healthy()) return "unhealthy: " + d.health_message();
  if (!d.dirty().empty()) return "dirty: " + d.dirty();
  std::vector<std::string> degraded;
  for (const pb::HealthSignal& s : d.signals()) {
    if (s.severity() == "degraded") degraded.push_back(s.what());
  }
  return degraded.empty() ? "ok" : "degraded: " + absl::StrJoin(degraded, "; ");
}

int Devices(Client& client, const Invocation&, const DevicesOptions& o) {
  pb::ListDevicesRequest req;
  req.set_node(o.node);
  req.set_vendor(o.vendor);
  pb::ListDevicesResponse resp;
  auto status = client.cluster().ListDevices(client.Context().get(), req, &resp);
  if (!status.ok()) return client.Failed(status);
  if (o.quarantined) {
    auto* devices = resp.mutable_devices();
    devices->erase(
        std::remove_if(devices->begin(), devices->end(), [](const pb::DeviceView& v) { return !v.has_quarantine(); }),
        devices->end());
  }
  if (client.json()) {
    std::cout << ToJson(resp);
    return 0;
  }
  if (o.quarantined) return QuarantinedDevices(resp);
  Table table({"NODE", "DEVICE", "VENDOR", "MODEL", "ARCH", "MEMORY", "NUMA", "PCI", "FINGERPRINT", "HEALTH", "JOB"});
  for (const auto& v : resp.devices()) {
    const auto& d = v.device();
    table.Add({v.node(), d.id(), d.vendor(), d.model(), d.architecture(), absl::StrCat(d.memory_mib() / 1024, " GiB"),
               absl::StrCat(d.numa_node()), d.pci_bus_id(), d.fingerprint(), DeviceHealthWords(d),
               v.allocated_to().empty() ? "-" : absl::StrCat(v.allocated_to(), " (", v.allocated_milli(), "/1000)")});
  }
  std::cout << table.Render();
  return 0;
}

int Fingerprints(Client& client, const Invocation&, const NoOptions&) {
  pb::ListFingerprintsResponse resp;
  auto status = client.cluster().ListFingerprints(client.Context().get(), pb::ListFingerprintsRequest(), &resp);
  if (!status.ok()) return client.Failed(status);
  if (client.json()) {
    std::cout << ToJson(resp);
    return 0;
  }
  Table table({"FINGERPRINT", "CLASS", "PRECISIONS", "BW GB/s", "FREE/TOTAL", "UNHEALTHY", "NODES"});
  for (const auto& c : resp.classes()) {
    const auto& cap = c.example().capability();
    table.Add({c.fingerprint(), c.label(), absl::StrJoin(cap.precisions(), ","),
               cap.bandwidth_gbps() > 0 ? absl::StrCat(cap.bandwidth_gbps()) : "?",
               absl::StrCat(c.free(), "/", c.total()), absl::StrCat(c.unhealthy()), absl::StrJoin(c.nodes(), ",")});
  }
  std::cout << table.Render();
  return 0;
}

// "1.5" for 1.5 cards, "2" for 2.
std::string Cards(double cards) { return absl::StrFormat("%.4g", cards); }

struct QueuesOptions {
  bool users = false;
};

void DeclareQueues(FlagSet& flags, QueuesOptions* o) {
  flags.Bool("users", &o->users, "also a row per user of each group (GROUP/USER)");
}

int Queues(Client& client, const Invocation&, const QueuesOptions& o) {
  pb::ListQueuesResponse resp;
  auto status = client.cluster().ListQueues(client.Context().get(), pb::ListQueuesRequest(), &resp);
  if (!status.ok()) return client.Failed(status);
  if (client.json()) {
    std::cout << ToJson(resp);
    return 0;
  }
  Table table({"GROUP", "WEIGHT", "NOMINAL", "ENTITLED", "USED", "BORROWED", "WAITING", "RUNNING", "PENDING", "SHARE"});
  for (const auto& q : resp.queues()) {
    std::map<std::string, double> nominal(q.nominal().begin(), q.nominal().end());
    std::vector<std::string> parts;
    for (const auto& [selector, cards] : nominal) parts.push_back(absl::StrCat(selector, ":", Cards(cards)));
    const std::string group = q.group().empty() ? "(none)" : q.group();
    table.Add({group, Cards(q.weight()), parts.empty() ? "-" : absl::StrJoin(parts, ","), Cards(q.entitled()),
               Cards(q.used()), Cards(q.borrowed()), Cards(q.waiting()), absl::StrCat(q.running_jobs()),
               absl::StrCat(q.pending_jobs()), absl::StrFormat("%.3f", q.share())});
    if (!o.users) continue;
    // A user's SHARE is among the group's users only: it orders the group's own jobs.
    for (const auto& u : q.users()) {
      table.Add({absl::StrCat(group, "/", u.user()), Cards(u.weight()), "-", Cards(u.entitled()), Cards(u.used()), "-",
                 Cards(u.waiting()), absl::StrCat(u.running_jobs()), absl::StrCat(u.pending_jobs()),
                 absl::StrFormat("%.3f", u.share())});
    }
  }
  std::cout << table.Render();
  if (resp.fair_share()) {
    std::cout << "fair share on: lowest SHARE first among equal priorities; usage half-life " << resp.usage_half_life()
              << "\n";
  } else {
    std::cout << "fair share off (hetpoold without --queues): jobs wait in priority order; figures for equal weights\n";
  }
  return 0;
}

int SetDrained(Client& client, const std::string& name, bool drain) {
  pb::DrainNodeRequest req;
  req.set_name(name);
  pb::Node node;
  auto ctx = client.Context();
  auto status =
      drain ? client.cluster().DrainNode(ctx.get(), req, &node) : client.cluster().UndrainNode(ctx.get(), req, &node);
  if (!status.ok()) return client.Failed(status);
  std::cout << node.name() << (node.drained() ? " drained" : " undrained") << "\n";
  return 0;
}

int Drain(Client& client, const Invocation& in, const NoOptions&) { return SetDrained(client, in.operands[0], true); }

// Returns a quarantined card, or with no device the node, to service.
int ReturnToService(Client& client, const std::string& node_name, const std::string& device) {
  pb::ReturnCardRequest req;
  req.set_node(node_name);
  req.set_device_id(device);
  pb::Node node;
  auto status = client.cluster().ReturnCard(client.Context().get(), req, &node);
  if (!status.ok()) return client.Failed(status);
  std::cout << node_name << (device.empty() ? "" : "/" + device) << " returned to service\n";
  return 0;
}
int ReturnCard(Client& client, const Invocation& in, const NoOptions&) {
  return ReturnToService(client, in.operands[0], in.operands[1]);
}
int ReturnNode(Client& client, const Invocation& in, const NoOptions&) {
  return ReturnToService(client, in.operands[0], "");
}
int Undrain(Client& client, const Invocation& in, const NoOptions&) {
  return SetDrained(client, in.operands[0], false);
}

}  // namespace

std::vector<CommandEntry> ClusterCommands() {
  return {
      {.name = "nodes",
       .summary = "the nodes: state, devices, labels, running jobs, last heartbeat",
       .examples = {"hetpoolctl nodes"},
       .make = Make<NoOptions>(nullptr, Nodes)},
      {.name = "devices",
       .summary = "every card: model, memory, NUMA node, fingerprint, health, the job holding it",
       .examples = {"hetpoolctl devices --vendor nvidia", "hetpoolctl devices --quarantined"},
       .make = Make<DevicesOptions>(DeclareDevices, Devices)},
      {.name = "fingerprints",
       .summary = "classes of identical cards: free/total, unhealthy, nodes",
       .examples = {"hetpoolctl fingerprints"},
       .make = Make<NoOptions>(nullptr, Fingerprints)},
      {.name = "queues",
       .summary = "each group's fair-share queue: entitled, used, borrowed and waiting cards, share",
       .details = "SHARE is the group's dominant share of what it is entitled to (held now or its decayed\n"
                  "average, whichever is larger); pending jobs of equal priority go lowest SHARE first.\n"
                  "With --users, a row per user of each group: its weight within the group, its part of\n"
                  "the group's cards, and its SHARE among the group's users, which orders the group's jobs.",
       .examples = {"hetpoolctl queues", "hetpoolctl queues --users"},
       .make = Make<QueuesOptions>(DeclareQueues, Queues)},
      {.name = "drain",
       .synopsis = "NODE",
       .summary = "stop placing jobs on a node (running jobs stay)",
       .examples = {"hetpoolctl drain node-a"},
       .operands = Operands::kNodeName,
       .make = Make<NoOptions>(nullptr, Drain)},
      {.name = "return-card",
       .synopsis = "NODE DEVICE",
       .summary = "return a quarantined card to service after repair (audited)",
       .details = "A card is quarantined when jobs of different ids fail on it with a hardware signature\n"
                  "(hetpoold --quarantine-after, within --quarantine-window); `devices --quarantined` lists\n"
                  "them with the evidence. Returning one makes it placeable again at once.",
       .examples = {"hetpoolctl return-card node-a nvidia2"},
       .operands = Operands::kNodeCard,
       .make = Make<NoOptions>(nullptr, ReturnCard)},
      {.name = "return-node",
       .synopsis = "NODE",
       .summary = "return a quarantined node to service after repair (audited)",
       .details = "A node is quarantined when the evidence is node-wide: hetpoold --quarantine-node-after-cards\n"
                  "of its cards quarantined, or jobs of --quarantine-after ids failing with its network's\n"
                  "signature. `nodes` shows it and why. Its quarantined cards stay out until returned too.",
       .examples = {"hetpoolctl return-node node-a"},
       .operands = Operands::kNodeName,
       .make = Make<NoOptions>(nullptr, ReturnNode)},
      {.name = "undrain",
       .synopsis = "NODE",
       .summary = "place jobs on a drained node again",
       .examples = {"hetpoolctl undrain node-a"},
       .operands = Operands::kNodeName,
       .make = Make<NoOptions>(nullptr, Undrain)},
  };
}

}  // namespace hetpool::cli
