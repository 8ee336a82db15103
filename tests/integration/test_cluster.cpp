// test_cluster.cpp — a Redis Cluster as one member (redis+cluster://…):
// the client routes each resource's keys to the shard primary that serves
// their slot, follows MOVED and ASK, and counts a shard's yes only when
// the slot's marker shows it lost nothing (docs/design.md §5, "Cluster
// members"). Real 7.0 clusters on loopback (support/redis_cluster.hpp).
// Where a lone master votes too, the config is 1 lone + the cluster: the
// round needs both (quorum 2 of 2), so the cluster's outcome is always
// read, never `pending`; where the lone master would decide the round
// alone (it says held), the cluster is the client's only member.
#include <doctest/doctest.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cli_harness.hpp"
#include "helpers.hpp"
#include "redis_cluster.hpp"
#include "redis_sentinel.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;

namespace {

std::string lock_key(const std::string& resource) { return "redlock:{" + resource + "}:lock"; }
int slot_of(const std::string& resource) { return ClusterBed::hash_slot(lock_key(resource)); }

bool usable(Client& client, std::size_t i) {
  const Result<NodesReport> report = client.nodes();
  return report.ok() && report->nodes.size() > i && report->nodes[i].reachable && !report->nodes[i].quarantined;
}

template <class T>
const std::vector<NodeOutcome>& outcomes(const Result<T>& r) {
  return r.ok() ? r->nodes : r.error().nodes;
}
template <class T>
std::string why(const Result<T>& r) {
  return r.ok() ? std::string() : r.error().to_string();
}

// steady: patient answers, and a bounded wait for the first slot map that
// a loaded machine does not run out of.
void steady(Options& o) {
  patient(o);
  o.connect_timeout = 2000ms;
}
// strict: the quarantine on, with a short period (max_ttl + drift);
// acquires take max_ttl.
std::function<void(Options&)> strict(std::chrono::milliseconds max_ttl) {
  return [max_ttl](Options& o) {
    steady(o);
    o.quarantine = true;
    o.max_ttl = max_ttl;
    o.default_ttl = max_ttl;
  };
}

// moved_count: how many MOVED replies node i gave (INFO errorstats).
long long moved_count(ClusterBed& bed, std::size_t i) {
  const std::string field = info_field(bed.node(i), "errorstats", "errorstat_MOVED");  // "count=N"
  return field.starts_with("count=") ? std::stoll(field.substr(6)) : 0;
}

// keys_in_slot: the keys node i has in `slot` (CLUSTER GETKEYSINSLOT: a
// plain GET on an importing node would answer MOVED).
std::vector<std::string> keys_in_slot(ClusterBed& bed, std::size_t i, int slot) {
  std::vector<std::string> keys;
  for (const Reply& r : bed.node(i).command({"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), "100"}).elements) {
    keys.push_back(r.str);
  }
  return keys;
}
bool has_key(ClusterBed& bed, std::size_t i, int slot, const std::string& key) {
  for (const std::string& k : keys_in_slot(bed, i, slot)) {
    if (k == key) return true;
  }
  return false;
}

// Moving — a cluster and one lone master, a client of both, and the slot
// of "ledger" with its owner and the shard it is moved to.
struct Moving {
  ClusterBed bed;
  RedisGroup plain{1};
  std::unique_ptr<Client> client = client_for({plain[0].url(), bed.url()}, steady);
  int slot = slot_of("ledger");
  std::size_t from = bed.owner(slot);
  std::size_t to = (from + 1) % bed.shards();
};

// held_by_both: `resource` acquired (10 s) by a client of one lone master
// and the cluster, the cluster's answer ok.
Result<Lock> held_by_both(Client& client, const std::string& resource) {
  auto lock = client.try_acquire(resource, 10000ms);
  REQUIRE_MESSAGE(lock.ok(), why(lock));
  REQUIRE(lock->nodes[1].outcome == Outcome::ok);
  return lock;
}

// hold_after_first_touch: `resource` acquired by `client` (the cluster its
// only member) once the members and the slot's first-touch quarantine
// (a marker younger than the period) are waited out.
Lock hold_after_first_touch(Client& client, const std::string& resource) {
  std::optional<Lock> held;
  std::string last;
  const bool got = eventually([&] {
    auto r = client.try_acquire(resource);
    if (r.ok()) held = *r;
    last = why(r);
    return r.ok();
  }, 20000ms);
  REQUIRE_MESSAGE(got, last);
  REQUIRE(held->nodes.size() == 1);
  REQUIRE(held->nodes[0].outcome == Outcome::ok);
  return *held;
}

}  // namespace

// Routing: the lock's keys land on the slot's owner and nowhere else.
TEST_CASE("a cluster member locks through the shard that serves the resource's slot, and only there") {
  ClusterBed bed;
  RedisGroup plain(1);
  auto client = client_for({plain[0].url(), bed.url()}, steady);
  const std::size_t owner = bed.owner(slot_of("ledger"));
  auto lock = client->try_acquire("ledger", 3000ms);
  REQUIRE_MESSAGE(lock.ok(), why(lock));
  REQUIRE(lock->nodes.size() == 2);
  CHECK(lock->nodes[1].outcome == Outcome::ok);
  CHECK(bed.node(owner).command({"GET", lock_key("ledger")}).str == lock->token);
  for (std::size_t i = 0; i < bed.shards(); ++i) {
    if (i != owner) CHECK(bed.node(i).command({"DBSIZE"}).integer == 0);
  }
  CHECK(usable(*client, 1));
  REQUIRE(client->release(*lock).ok());
  CHECK(bed.node(owner).command({"EXISTS", lock_key("ledger")}).integer == 0);
}

// MOVED: a slot migrated with its keys; extend and release follow the
// redirect to the new owner, and later acquires go there directly.
TEST_CASE("MOVED: extend and release of a held lock reach the slot's new owner after a migration") {
  Moving m;
  auto& [bed, plain, client, slot, from, to] = m;
  auto lock = held_by_both(*client, "ledger");

  bed.migrate(slot, to);
  REQUIRE(bed.owner(slot) == to);
  REQUIRE(bed.node(to).command({"GET", lock_key("ledger")}).str == lock->token);
  const long long moved_before = moved_count(bed, from);
  auto extended = client->extend(*lock, 30000ms);
  REQUIRE_MESSAGE(extended.ok(), why(extended));
  CHECK(extended->nodes[1].outcome == Outcome::ok);
  CHECK(moved_count(bed, from) > moved_before);  // the client's map was old: it followed a MOVED
  CHECK(bed.node(to).command({"PTTL", lock_key("ledger")}).integer > 20000);  // the extend ran there
  auto released = client->release(*extended);
  REQUIRE_MESSAGE(released.ok(), why(released));
  CHECK(released->nodes[1].outcome == Outcome::ok);
  CHECK(bed.node(to).command({"EXISTS", lock_key("ledger")}).integer == 0);

  auto again = client->try_acquire("ledger", 10000ms);
  REQUIRE_MESSAGE(again.ok(), why(again));
  CHECK(again->nodes[1].outcome == Outcome::ok);
  CHECK(bed.node(to).command({"GET", lock_key("ledger")}).str == again->token);
  CHECK(bed.node(from).command({"DBSIZE"}).integer == 0);
  CHECK(client->release(*again).ok());
}

// ASK: mid-migration, the lock's key already on the target; the release
// follows ASK there (behind ASKING) and deletes it.
TEST_CASE("ASK: a release during a slot's migration follows the key to the importing node") {
  Moving m;
  auto& [bed, plain, client, slot, from, to] = m;
  auto lock = held_by_both(*client, "ledger");

  bed.start_migration(slot, to);
  bed.move_key(lock_key("ledger"), to);
  REQUIRE_FALSE(has_key(bed, from, slot, lock_key("ledger")));
  REQUIRE(has_key(bed, to, slot, lock_key("ledger")));
  auto released = client->release(*lock);
  REQUIRE_MESSAGE(released.ok(), why(released));
  CHECK(released->nodes[1].outcome == Outcome::ok);
  CHECK_FALSE(has_key(bed, to, slot, lock_key("ledger")));

  bed.finish_migration(slot, to);
  REQUIRE(bed.owner(slot) == to);
  auto again = client->try_acquire("ledger", 10000ms);
  REQUIRE_MESSAGE(again.ok(), why(again));
  CHECK(again->nodes[1].outcome == Outcome::ok);
  CHECK(bed.node(to).command({"GET", lock_key("ledger")}).str == again->token);
}

// The per-slot marker: a slot reassigned without its keys reads "created"
// on its new owner, so a client that meets it there does not count that
// shard's yes (without the marker it would: the key is gone, SET NX works).
TEST_CASE("a slot reassigned without its keys is quarantined: a second client gets no yes from it while the lock is held") {
  ClusterBed bed;
  auto holder = client_for({bed.url()}, strict(2000ms));
  const int slot = slot_of("ledger");
  const std::size_t from = bed.owner(slot);
  const std::size_t to = (from + 1) % bed.shards();
  const Lock lock = hold_after_first_touch(*holder, "ledger");
  REQUIRE(bed.node(from).command({"GET", lock_key("ledger")}).str == lock.token);

  bed.reassign_without_keys(slot, to);
  CHECK(eventually([&] { return bed.node(from).command({"DBSIZE"}).integer == 0; }, 5000ms));  // lost, not moved
  CHECK(bed.node(to).command({"EXISTS", lock_key("ledger")}).integer == 0);
  auto other = client_for({bed.url()}, strict(2000ms));
  auto second = other->try_acquire("ledger");
  WARN(lock.valid());  // else the check below still holds, but proves less
  CHECK_FALSE(second.ok());
  REQUIRE(outcomes(second).size() == 1);
  const NodeOutcome& n = outcomes(second)[0];
  CAPTURE(n.error);
  CHECK(n.outcome == Outcome::quarantined);
  CHECK(n.error.starts_with("slot " + std::to_string(slot) + ":"));
}

// Failover: the slot's new primary is another server (its marker was
// written by the old one's run id); a client meeting it there gets no yes,
// whether the key was replicated (held) or not (quarantined).
TEST_CASE("a shard's primary killed: its promoted replica gives a second client no yes for the held lock") {
  ClusterBed bed(ClusterOptions{.replicas = 1});
  // A TTL that outlives the failover (cluster-node-timeout 1 s, then the
  // election: about 3 s).
  auto holder = client_for({bed.url()}, strict(6000ms));
  const int slot = slot_of("ledger");
  const std::size_t owner = bed.owner(slot);
  const Lock lock = hold_after_first_touch(*holder, "ledger");
  REQUIRE(bed.node(owner).command({"GET", lock_key("ledger")}).str == lock.token);

  const std::size_t promoted = bed.kill_primary(bed.shard_of(owner));
  REQUIRE(bed.owner(slot) == promoted);
  auto other = client_for({bed.url()}, strict(6000ms));
  auto second = other->try_acquire("ledger");
  WARN(lock.valid());  // else the check below still holds, but proves less
  CAPTURE(bed.node(promoted).command({"GET", lock_key("ledger")}).str);
  CHECK_FALSE(second.ok());
  REQUIRE(outcomes(second).size() == 1);
  const NodeOutcome& n = outcomes(second)[0];
  CAPTURE(outcome_name(n.outcome));
  CAPTURE(n.error);
  CHECK((n.outcome == Outcome::held || n.outcome == Outcome::quarantined));
}

// Several resources in one script need one slot: across slots the cluster
// member refuses (and says why), within one it takes them all.
TEST_CASE("acquire_many on a cluster member: refused across hash slots, taken within one") {
  ClusterBed bed;
  RedisGroup plain(1);
  auto client = client_for({plain[0].url(), bed.url()}, steady);
  std::string apart = "b";
  for (int n = 0; slot_of(apart) == slot_of("a"); ++n) apart = "b" + std::to_string(n);
  auto refused = client->acquire_many({"a", apart}, {.ttl = 5000ms});
  CHECK_FALSE(refused.ok());
  REQUIRE(outcomes(refused).size() == 2);
  CAPTURE(outcomes(refused)[1].error);
  CHECK(outcomes(refused)[1].outcome == Outcome::error);
  CHECK(outcomes(refused)[1].error.find("hash slots of cluster") != std::string::npos);
  CHECK(eventually([&] { return plain[0].command({"EXISTS", lock_key("a")}).integer == 0; }));  // its yes undone

  std::string together = "c";
  for (int n = 0; slot_of(together) != slot_of("a"); ++n) together = "c" + std::to_string(n);
  auto taken = client->acquire_many({"a", together}, {.ttl = 5000ms});
  REQUIRE_MESSAGE(taken.ok(), why(taken));
  CHECK(taken->nodes[1].outcome == Outcome::ok);
  const std::size_t owner = bed.owner(slot_of("a"));
  CHECK(bed.node(owner).command({"GET", lock_key("a")}).str == taken->token);
  CHECK(bed.node(owner).command({"GET", lock_key(together)}).str == taken->token);
  CHECK(client->release_many(*taken).ok());
}

// The CLI over members of every kind: a lock is taken, and `nodes` shows
// the cluster member with its shard primaries.
TEST_CASE("cli: a cluster member among lone, sentinel and replicated members: acquire works, `nodes` names the shard primaries") {
  using namespace redlock::test::cli_harness;
  ClusterBed bed;
  SentinelBed sentinel;
  RedisGroup lone(3);
  const std::string nodes = lone[0].url() + "," + lone[1].url() + "," + bed.url() + "," + sentinel.url() + "," +
                            lone[2].url() + "?replicated=1";
  auto acquired = cli({"--no-quarantine", "--json", "acquire", "nightly", "--ttl", "30s", "--nodes", nodes});
  REQUIRE(acquired.exit_code == 0);
  const json lock = json_of(acquired);
  REQUIRE(lock["nodes"].size() == 5);
  CAPTURE(lock["nodes"][2].dump());
  CHECK((lock["nodes"][2]["outcome"] == "ok" || lock["nodes"][2]["outcome"] == "pending"));

  auto report = cli({"--no-quarantine", "--json", "nodes", "--nodes", nodes});
  CHECK(report.exit_code == 0);
  const json j = json_of(report);
  REQUIRE(j["nodes"].size() == 5);
  const json& cluster = j["nodes"][2];
  CHECK(cluster["address"].get<std::string>().starts_with("redis+cluster://"));
  CHECK(cluster["reachable"] == true);
  REQUIRE(cluster["primary"].is_string());
  const std::string primaries = cluster["primary"].get<std::string>();
  CAPTURE(primaries);
  for (std::size_t s = 0; s < bed.shards(); ++s) CHECK(primaries.find(bed.node(s).address()) != std::string::npos);
  CHECK(j["nodes"][3]["primary"] == sentinel.server(0).address());
  auto human = cli({"--no-quarantine", "nodes", "--nodes", nodes});
  CHECK(human.out.find(" -> " + primaries) != std::string::npos);
}
