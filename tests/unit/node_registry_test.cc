// NodeRegistry: sessions, lasting inventory changes, drains stored first, rendezvous ports.
#include "src/daemon/state/node_registry.h"

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "src/common/convert.h"
#include "src/daemon/state/node_view_cache.h"
#include "tests/testing/state_parts.h"

namespace hetpool::daemon {
namespace {

using testing::StateParts;

TEST(NodeRegistry, OnlyTheLatestRegistrationsSessionIsLive) {
  StateParts parts;
  const std::string first = parts.Register("a", 2).session_id;
  EXPECT_TRUE(parts.nodes.CheckSession("a", first).ok());
  EXPECT_EQ(parts.store.StoredNode("a").inventory().devices_size(), 0);  // the request carried none
  EXPECT_EQ(parts.store.StoredNode("a").address(), "127.0.0.1");

  const std::string second = parts.Register("a", 2).session_id;
  EXPECT_NE(first, second);
  const absl::Status stale = parts.nodes.CheckSession("a", first);
  EXPECT_TRUE(absl::IsNotFound(stale)) << stale;
  EXPECT_NE(stale.message().find("register again"), std::string::npos) << stale;
  EXPECT_TRUE(parts.nodes.Session("a", second).ok());
  EXPECT_TRUE(absl::IsNotFound(parts.nodes.CheckSession("nobody", second)));
}

// Issue 19: after a restart every node of the pool registers again within seconds; one that
// comes back as it was costs no store write (no fsync queued behind the others).
TEST(NodeRegistry, RegisteringAgainUnchangedWritesNothing) {
  StateParts parts;
  parts.Register("a", 2);
  pb::Node marked = parts.store.StoredNode("a");
  marked.set_torchrun_path("marker: not rewritten");
  ASSERT_TRUE(parts.store.PutNode(marked).ok());
  parts.Register("a", 2);  // the same registration again
  EXPECT_EQ(parts.store.StoredNode("a").torchrun_path(), "marker: not rewritten");
  pb::RegisterRequest relabelled = testing::Registration("a");
  (*relabelled.mutable_labels())["rack"] = "r7";
  parts.nodes.Register(relabelled, testing::H100s(2), parts.now);
  EXPECT_EQ(parts.store.StoredNode("a").labels().at("rack"), "r7");
  EXPECT_NE(parts.store.StoredNode("a").torchrun_path(), "marker: not rewritten");
}

// A start decodes the stored nodes on several threads, inventories converted there too; a node
// whose stored inventory is unusable loads without cards and waits for its agent to register.
TEST(NodeRegistry, StoredNodesDecodeOnThreadsAndAnUnusableInventoryWaitsForTheAgent) {
  std::vector<StoredRow> rows;
  for (int i = 0; i < 3'000; ++i) {
    pb::Node node;
    node.set_name(absl::StrFormat("n-%04d", i));
    *node.mutable_inventory() = ToProto(testing::H100s(8));
    if (i == 1'234) node.mutable_inventory()->add_collectives("NOT A NAME");
    rows.push_back({node.name(), node.SerializeAsString()});
  }
  auto stored = DecodeStoredNodes(rows);
  ASSERT_TRUE(stored.ok()) << stored.status();
  ASSERT_EQ(stored->size(), 3'000u);
  ASSERT_TRUE((*stored)[7].inventory.ok());
  EXPECT_EQ((*stored)[7].inventory->devices.size(), 8u);
  EXPECT_FALSE((*stored)[1'234].inventory.ok());
  StateParts parts;
  parts.nodes.Load(*std::move(stored), parts.now);
  EXPECT_EQ(parts.nodes.Find("n-0007")->inventory.devices.size(), 8u);
  EXPECT_TRUE(parts.nodes.Find("n-1234")->inventory.devices.empty());
  EXPECT_FALSE(parts.nodes.Find("n-0007")->ready);  // until its agent registers again

  rows[2'999].bytes = "\xff";
  rows[1'500].bytes = "\xff";
  auto bad = DecodeStoredNodes(std::move(rows));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("node row 'n-1500'"), std::string::npos) << bad.status();
}

// Issue 19: a loaded node keeps its stored row, not its cards parsed twice, until its agent
// registers again; its inventory is whole wherever the reported one is read: ListNodes, the
// comparison a registration makes (so coming back as it was writes nothing), a drain's write.
TEST(NodeRegistry, ALoadedNodeKeepsItsRowUntilAskedAndItsInventoryIsWholeWhereRead) {
  std::vector<StoredRow> rows;
  for (const std::string name : {"a", "b"}) {
    const pb::RegisterRequest req = testing::Registration(name);
    pb::Node node;
    node.set_name(name);
    node.set_address(req.address());
    node.set_torchrun_path(req.torchrun_path());
    node.set_work_dir(req.work_dir());
    *node.mutable_inventory() = ToProto(testing::H100s(2));
    rows.push_back({name, node.SerializeAsString()});
  }
  auto stored = DecodeStoredNodes(rows);
  ASSERT_TRUE(stored.ok()) << stored.status();
  StateParts parts;
  parts.nodes.Load(*std::move(stored), parts.now);
  NodeEntry& a = *parts.nodes.Find("a");
  EXPECT_EQ(a.record.inventory().devices_size(), 0);  // left in the row
  EXPECT_EQ(a.stored_row, rows[0].bytes);
  EXPECT_EQ(a.inventory.devices.size(), 2u);  // converted for the scheduler
  const pb::Node listed = NodeRegistry::Snapshot(a);
  EXPECT_EQ(listed.inventory().devices_size(), 2);
  EXPECT_EQ(listed.inventory().devices(1).uuid(), ToProto(testing::H100s(2)).devices(1).uuid());
  EXPECT_FALSE(a.stored_row.empty());  // listing parsed into its copy

  pb::Node marked;
  ASSERT_TRUE(marked.ParseFromString(rows[0].bytes));
  marked.set_torchrun_path("marker: not rewritten");
  ASSERT_TRUE(parts.store.PutNode(marked).ok());
  pb::RegisterRequest again = testing::Registration("a");
  *again.mutable_inventory() = ToProto(testing::H100s(2));
  parts.nodes.Register(again, testing::H100s(2), parts.now);
  EXPECT_EQ(parts.store.StoredNode("a").torchrun_path(), "marker: not rewritten");  // unchanged: no write
  EXPECT_TRUE(a.stored_row.empty());
  EXPECT_EQ(a.record.inventory().devices_size(), 2);

  NodeEntry& b = *parts.nodes.Find("b");
  ASSERT_TRUE(parts.nodes.SetDrained(b, true, "by a test").ok());
  EXPECT_TRUE(parts.store.StoredNode("b").drained());
  EXPECT_EQ(parts.store.StoredNode("b").inventory().devices_size(), 2);  // written whole
}

TEST(NodeRegistry, OnlyLastingInventoryChangesAreStoredAndWakeTheScheduler) {
  StateParts parts;
  NodeEntry& node = parts.Register("a", 1);
  pb::NodeInventory reported;
  auto* card = reported.add_devices();
  card->set_id("nvidia0");
  card->set_healthy(true);
  ASSERT_TRUE(parts.nodes.UpdateInventory(node, reported, testing::H100s(1)));  // first report: lasting
  EXPECT_TRUE(parts.wakeups.TakeCapacityChanged());

  reported.mutable_devices(0)->set_utilization_percent(93);  // changes on every refresh
  reported.mutable_devices(0)->set_memory_used_mib(4096);
  EXPECT_FALSE(parts.nodes.UpdateInventory(node, reported, testing::H100s(1)));
  EXPECT_FALSE(parts.wakeups.capacity_changed());
  EXPECT_EQ(node.record.inventory().devices(0).utilization_percent(), 93);  // kept in memory
  EXPECT_EQ(parts.store.StoredNode("a").inventory().devices(0).utilization_percent(), 0);

  reported.mutable_devices(0)->set_healthy(false);
  EXPECT_TRUE(parts.nodes.UpdateInventory(node, reported, testing::H100s(1)));
  EXPECT_TRUE(parts.wakeups.capacity_changed());
  EXPECT_FALSE(parts.store.StoredNode("a").inventory().devices(0).healthy());
  EXPECT_EQ(parts.store.StoredNode("a").inventory().devices(0).memory_used_mib(), 4096u);  // stored with it
}

TEST(NodeRegistry, ADrainCountsOnlyOnceStored) {
  StateParts parts;
  NodeEntry& node = parts.Register("a", 1);
  parts.store.Refuse(true);
  const absl::Status refused = parts.nodes.SetDrained(node, true, "by a test");
  EXPECT_TRUE(absl::IsUnavailable(refused)) << refused;
  EXPECT_TRUE(node.schedulable());
  parts.store.Refuse(false);
  ASSERT_TRUE(parts.nodes.SetDrained(node, true, "by a test").ok());
  EXPECT_FALSE(node.schedulable());
  EXPECT_TRUE(parts.store.StoredNode("a").drained());
}

// Issue 44: a scheduling pass reads again only the nodes the registry noted as changed. Every
// change a node's view is built from is noted: after each, the views synced in place are those
// a cache that never saw the pool before builds (generations are hashes of the content), for
// each of two readers. A change made behind the registry's back is missed until the periodic
// check reads every node.
TEST(NodeRegistry, EveryChangeANodesViewReadsIsNotedForTheNextPass) {
  StateParts parts;
  parts.Register("a", 2);
  parts.Register("b", 2);
  NodeViewCache cache(parts.nodes, false), other(parts.nodes, false);  // two readers of the notes
  std::vector<scheduler::NodeView> views, other_views;
  cache.Sync(views);  // the first copies every view
  other.Sync(other_views);
  auto synced_as_fresh = [&](const std::string& after) {
    cache.Sync(views);
    const std::vector<scheduler::NodeView> fresh = NodeViewCache(parts.nodes, false).Views(false);
    ASSERT_EQ(views.size(), fresh.size()) << after;
    for (size_t i = 0; i < views.size(); ++i) {
      EXPECT_EQ(views[i].name, fresh[i].name) << after;
      EXPECT_EQ(views[i].generation, fresh[i].generation) << after << ": node " << fresh[i].name;
    }
  };
  NodeEntry& a = *parts.nodes.Find("a");
  a.claims[{"job-1", 1}] = Claim{{"nvidia0"}};
  synced_as_fresh("a claim");
  views[0].devices[1].held = true;  // a pass's own mark on its vector
  views[0].generation = scheduler::ContentGeneration(views[0]);
  synced_as_fresh("a held mark");
  a.claims.erase({"job-1", 1});
  synced_as_fresh("a claim gone");
  parts.nodes.SetFault(a, "fence watchdog fired");
  synced_as_fresh("a fault");
  parts.nodes.SetFault(a, "");
  ASSERT_TRUE(parts.nodes.SetDrained(a, true, "by a test").ok());
  synced_as_fresh("a drain");
  ASSERT_TRUE(parts.nodes.SetDrained(a, false, "by a test").ok());
  parts.nodes.EndSession(a);
  synced_as_fresh("a lapsed lease");
  parts.Register("a", 4);
  synced_as_fresh("a registration with more cards");
  NodeInventory sick = testing::H100s(4);
  sick.devices[3].healthy = false;
  pb::NodeInventory reported;
  reported.add_devices()->set_id("nvidia3");
  parts.nodes.UpdateInventory(a, reported, sick);
  synced_as_fresh("a heartbeat's inventory");
  other.Sync(other_views);  // the first reader's takes left the second's notes
  EXPECT_EQ(other_views[0].generation, views[0].generation);
  EXPECT_EQ(other_views[0].devices.size(), 4u);
  parts.Register("0-first", 1);  // sorts first: every slot moves
  synced_as_fresh("a new node");
  EXPECT_EQ(cache.unnoted_changes(), 0u);

  NodeEntry& b = *parts.nodes.Find("b");
  b.ready = false;  // not through the registry: no note
  cache.Sync(views);
  EXPECT_TRUE(views[2].schedulable) << "an unnoted change is not read (which is why changes must be noted)";
  for (uint64_t i = 0; i < NodeViewCache::kCheckEverySyncs && cache.unnoted_changes() == 0; ++i) cache.Sync(views);
  EXPECT_EQ(cache.unnoted_changes(), 1u) << "the periodic check finds it";
  EXPECT_FALSE(views[2].schedulable);
}

const absl::Time kPortsNow = absl::FromUnixSeconds(1'800'000'000);

TEST(NodeRegistry, RendezvousPortsGoRoundTheRangeAndSkipThoseHeld) {
  StateParts parts;  // ports 29500-29502
  NodeEntry& node = parts.Register("a", 1);
  EXPECT_EQ(*parts.nodes.PickRendezvousPort("127.0.0.1", kPortsNow), 29500);
  EXPECT_EQ(*parts.nodes.PickRendezvousPort("127.0.0.1", kPortsNow), 29501);
  EXPECT_EQ(*parts.nodes.PickRendezvousPort("10.0.0.9", kPortsNow), 29500);  // each address its own
  node.claims[{"job-1", 1}].rendezvous_endpoint = "127.0.0.1:29502";
  node.claims[{"job-2", 1}].rendezvous_endpoint = "127.0.0.1:29500";
  EXPECT_EQ(*parts.nodes.PickRendezvousPort("127.0.0.1", kPortsNow), 29501);  // the one a claim does not hold
  node.claims[{"job-3", 1}].rendezvous_endpoint = "127.0.0.1:29501";
  EXPECT_TRUE(absl::IsResourceExhausted(parts.nodes.PickRendezvousPort("127.0.0.1", kPortsNow).status()));
}

// A port an agent found another process listening on is skipped on that address for a while.
TEST(NodeRegistry, APortFoundInUseByAnotherProcessIsSkippedForAWhile) {
  StateParts parts;  // ports 29500-29502
  parts.Register("a", 1);
  parts.nodes.NoteForeignPort("127.0.0.1:29500", kPortsNow);
  EXPECT_EQ(*parts.nodes.PickRendezvousPort("127.0.0.1", kPortsNow), 29501);
  EXPECT_EQ(*parts.nodes.PickRendezvousPort("127.0.0.1", kPortsNow), 29502);
  EXPECT_EQ(*parts.nodes.PickRendezvousPort("127.0.0.1", kPortsNow), 29501);  // round the range, past 29500
  EXPECT_EQ(*parts.nodes.PickRendezvousPort("10.0.0.9", kPortsNow), 29500);   // another host's is its own
  parts.nodes.NoteForeignPort("127.0.0.1:29501", kPortsNow);
  parts.nodes.NoteForeignPort("127.0.0.1:29502", kPortsNow);
  const auto none = parts.nodes.PickRendezvousPort("127.0.0.1", kPortsNow);
  ASSERT_TRUE(absl::IsResourceExhausted(none.status()));
  EXPECT_EQ(none.status().message(),
            "no free rendezvous port on 127.0.0.1 (--rdzv-port-range 29500-29502: 3 held by running jobs or found in "
            "use by other processes)");
  const absl::Time later = kPortsNow + NodeRegistry::kForeignPortMemory;
  EXPECT_TRUE(parts.nodes.PickRendezvousPort("127.0.0.1", later).ok());  // they may have gone
}

}  // namespace
}  // namespace hetpool::daemon
