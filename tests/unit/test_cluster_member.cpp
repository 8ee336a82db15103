// test_cluster_member.cpp — a Redis Cluster as one member
// (src/cluster_member.hpp) on fake wires and manual time, against a small
// fake cluster of two shards: routing by slot, the slot's marker behind
// every acquire and its judgement per slot, MOVED and ASK followed within
// a budget, one timeout and one final event per command, keys of several
// slots, and the wait for the first map.
#include <doctest/doctest.h>

#include <array>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cluster_member.hpp"
#include "fake_wire.hpp"
#include "keys.hpp"
#include "node_set.hpp"
#include "resp.hpp"
#include "scripts.hpp"
#include "slot.hpp"
#include "test_runtime.hpp"
#include "validity.hpp"

using namespace redlock;
using namespace redlock::detail;
using namespace redlock::test;
using std::chrono::milliseconds;

namespace {

// Router — one FakeWireFactory per address, so each shard's connection
// can be played on its own.
struct Router final : WireFactory {
  std::map<std::string, FakeWireFactory> by;
  std::unique_ptr<Wire> connect(const NodeAddress& a, WireEvents& e) override { return by[a.display()].connect(a, e); }
  FakeWire* live(const std::string& address) {
    auto it = by.find(address);
    return it == by.end() ? nullptr : it->second.live;
  }
};

struct Event {
  std::size_t tag;
  EventKind kind;
  std::string str;
  bool quarantined;
  std::string text;
};

struct Sink final : ReplySink {
  std::vector<Event> events;
  void on_node_event(std::size_t tag, const NodeEvent& ev) override {
    events.push_back({tag, ev.kind, std::string(ev.reply.str), ev.quarantined, std::string(ev.text)});
  }
};

const std::string shard_a = "10.0.1.1:7001";  // slots 0–8191
const std::string shard_b = "10.0.1.2:7002";  // slots 8192–16383

// key_in: the first "k<n>" whose slot lies in [from, to].
std::string key_in(int from, int to, int skip = 0) {
  for (int n = 0;; ++n) {
    const std::string key = "k" + std::to_string(n);
    const int s = hash_slot(key);
    if (s >= from && s <= to && skip-- == 0) return key;
  }
}

Reply range(long long start, long long end, const std::string& host, long long port, char id) {
  Reply node = strings({host});
  node.elements.push_back(integer(port));
  node.elements.push_back(bulk(std::string(40, id)));
  return {WireReply::Type::array, 0, {}, {integer(start), integer(end), std::move(node)}};
}

// FakeShard — a shard primary: its run id, and each slot's marker
// (epoch, the run id that wrote it; none: absent).
struct FakeShard {
  std::string address, run_id;
  std::map<int, std::pair<std::string, std::string>> markers;
  std::string age = "100000000";  // every marker's age, ms
};

struct Bed {
  ManualRuntime runtime;
  Router wires;
  FakeWireFactory map_wires;
  Options options;
  NodeAddress member;
  QuarantineShare share;
  std::array<std::string, script_count> shas;
  Sink sink;
  int closed = 0;
  std::map<std::string, FakeShard> shards{{shard_a, {shard_a, "aaaa", {}}}, {shard_b, {shard_b, "bbbb", {}}}};
  std::function<std::string(int)> owner = [](int slot) { return slot < 8192 ? shard_a : shard_b; };
  // reply: the answer to a non-marker command on `shard`; nullopt: held.
  std::function<std::optional<Reply>(FakeShard&, const Command&)> reply = [this](FakeShard& s, const Command& c) {
    return moved_or(s, c, status());
  };
  std::vector<std::unique_ptr<Call>> calls;
  std::optional<ClusterMember> cluster;

  Bed() {
    options.max_ttl = milliseconds{10000};
    options.node_timeout = milliseconds{50};
    member.kind = NodeAddress::Kind::cluster;
    member.seeds = {{"10.0.0.1", 7001}};
    for (std::size_t i = 0; i < script_count; ++i) shas[i] = "sha" + std::to_string(i);
  }
  ~Bed() {
    if (cluster) cluster.reset();
  }
  // moved_or: MOVED when `s` does not serve the command's first key's slot.
  std::optional<Reply> moved_or(FakeShard& s, const Command& c, Reply otherwise) {
    const int slot = hash_slot(c.at(3));
    if (owner(slot) != s.address) return error("MOVED " + std::to_string(slot) + " " + owner(slot));
    return otherwise;
  }
  void start(bool serve_map = true) {
    cluster.emplace(runtime, wires, map_wires, member, options, shas.data(), &share, [this] { ++closed; });
    cluster->start();
    if (serve_map) answer_map();
  }
  void answer_map() {
    REQUIRE(map_wires.live != nullptr);
    map_wires.live->connected();
    map_wires.live->flush();
    REQUIRE(map_wires.live->next() == Command{"CLUSTER", "SLOTS"});
    map_wires.live->answer({WireReply::Type::array, 0, {},
                            {range(0, 8191, "10.0.1.1", 7001, 'a'), range(8192, 16383, "10.0.1.2", 7002, 'b')}});
    for (auto& [address, shard] : shards) {
      REQUIRE(wires.live(address) != nullptr);
      wires.live(address)->connected();
    }
    serve();
  }
  std::optional<Reply> master(FakeShard& s, const Command& c) {
    if (c[0] == "INFO") {
      return bulk("redis_version:7.0.15\r\nrun_id:" + s.run_id +
                  "\r\nuptime_in_seconds:100000\r\ncluster_enabled:1\r\nrole:master\r\n");
    }
    if (c[0] == "SCRIPT") {
      Reply r{WireReply::Type::array, 0, {}, {}};
      for (std::size_t i = 2; i < c.size(); ++i) r.elements.push_back(integer(1));
      return r;
    }
    if (c[0] == "PING") return status("PONG");
    if (c[0] == "ASKING") return status();
    if (c[0] == "EVALSHA" && c[1] == shas[static_cast<std::size_t>(CommandId::marker)]) {
      // KEYS: marker, server, replid; ARGV: epoch, ms, run id, replid.
      const int slot = hash_slot(c[3]);
      if (owner(slot) != s.address && c[3] != last_asked) return error("MOVED " + std::to_string(slot) + " " + owner(slot));
      auto it = s.markers.find(slot);
      if (it == s.markers.end() || it->second.second != c[8]) {
        const char* state = it == s.markers.end() ? "created" : "replaced";
        s.markers[slot] = {c[6], c[8]};
        return strings({state, c[6], c[7], "0"});
      }
      return strings({"found", it->second.first, c[7], s.age});
    }
    return reply(s, c);
  }
  std::string last_asked;  // a marker key sent behind ASKING runs where it was sent
  // serve flushes and answers every shard until nothing is left or held.
  void serve() {
    for (bool progress = true; progress;) {
      progress = false;
      for (auto& [address, shard] : shards) {
        FakeWire* w = wires.live(address);
        if (w == nullptr) continue;
        w->flush();
        while (w->answered < w->sent.size()) {
          const Command& c = w->next();
          if (c[0] == "ASKING" && w->answered + 1 < w->sent.size()) last_asked = w->sent[w->answered + 1].at(3);
          std::optional<Reply> r = master(shard, c);
          if (!r) break;
          w->answer(*r);
          progress = true;
          w->flush();
        }
      }
    }
  }
  bool send(CommandId id, std::string key, std::size_t tag = 0) {
    std::string why;
    return cluster->send(kept_call(calls, id, std::move(key)), &sink, tag, why);
  }
  std::vector<Command> sent(const std::string& address) { return wires.by[address].log; }
  std::size_t count(const std::string& address, std::string_view name) {
    std::size_t n = 0;
    for (const Command& c : sent(address)) n += c[0] == name ? 1 : 0;
    return n;
  }
  std::size_t slot_asks() const {
    std::size_t n = 0;
    for (const Command& c : map_wires.log) n += c == Command{"CLUSTER", "SLOTS"} ? 1 : 0;
    return n;
  }
};

}  // namespace

TEST_CASE("cluster member: a command goes to the primary serving its slot, an acquire with that slot's marker behind it") {
  Bed bed;
  bed.start();
  const std::string key = key_in(0, 8191);
  const int slot = hash_slot(key);
  bed.shards[shard_a].markers[slot] = {"e1", "aaaa"};  // met long ago
  REQUIRE(bed.send(CommandId::acquire, key));
  bed.serve();
  REQUIRE(bed.sink.events.size() == 1);
  CHECK(bed.sink.events[0].kind == EventKind::reply);
  CHECK_FALSE(bed.sink.events[0].quarantined);
  // On shard A: the acquire, then the marker of its slot, with A's own run
  // id (the connection's) filled in.
  const std::vector<Command> a = bed.sent(shard_a);
  REQUIRE(a.size() >= 2);
  CHECK(a[a.size() - 2].at(3) == key);
  const Command& marker = a.back();
  CHECK(marker.at(1) == bed.shas[static_cast<std::size_t>(CommandId::marker)]);
  CHECK(marker.at(3) == slot_marker_key(slot));
  CHECK(marker.at(4) == slot_marker_server_key(slot));
  CHECK(marker.at(5) == slot_marker_replid_key(slot));
  CHECK(marker.at(8) == "aaaa");
  CHECK(bed.count(shard_b, "EVALSHA") == 0);
  // A release is not followed by a marker.
  const std::size_t before = bed.count(shard_a, "EVALSHA");
  REQUIRE(bed.send(CommandId::release, key, 1));
  bed.serve();
  CHECK(bed.count(shard_a, "EVALSHA") == before + 1);
}

TEST_CASE("cluster member: a slot whose marker is missing, replaced or young sits out the period; the other slots count") {
  Bed bed;
  bed.options.quarantine = true;
  bed.start();
  const std::string fresh = key_in(0, 8191);
  const std::string warm = key_in(0, 8191, 1);
  REQUIRE(hash_slot(fresh) != hash_slot(warm));
  bed.shards[shard_a].markers[hash_slot(warm)] = {"e1", "aaaa"};
  REQUIRE(bed.send(CommandId::acquire, fresh, 0));
  REQUIRE(bed.send(CommandId::acquire, warm, 1));
  bed.serve();
  REQUIRE(bed.sink.events.size() == 2);
  CHECK(bed.sink.events[0].quarantined);
  CHECK(bed.sink.events[0].text.starts_with("slot " + std::to_string(hash_slot(fresh)) + ": new, or lost its keys"));
  CHECK_FALSE(bed.sink.events[1].quarantined);
  CHECK(bed.cluster->slot_quarantine_left(hash_slot(fresh), bed.runtime.now()) ==
        quarantine_period(bed.options.max_ttl, bed.options.drift_factor));
  CHECK(bed.cluster->slot_quarantine_left(hash_slot(warm), bed.runtime.now()).count() == 0);

  // The warm slot loses its keys (reassigned without them, say): its
  // marker is gone, and the next acquire's yes does not count. Without a
  // marker per slot nothing on the shard would show it.
  bed.shards[shard_a].markers.erase(hash_slot(warm));
  REQUIRE(bed.send(CommandId::acquire, warm, 2));
  bed.serve();
  REQUIRE(bed.sink.events.size() == 3);
  CHECK(bed.sink.events[2].quarantined);
  CHECK(bed.sink.events[2].text.find("lost its keys (marker missing)") != std::string::npos);
  // The marker written again carries a fresh epoch: a client that met the
  // old one must not read the new one as intact.
  const std::string rewritten = bed.shards[shard_a].markers.at(hash_slot(warm)).first;
  REQUIRE(bed.send(CommandId::acquire, warm, 9));
  bed.shards[shard_a].markers.erase(hash_slot(warm));
  bed.serve();
  CHECK(bed.shards[shard_a].markers.at(hash_slot(warm)).first != rewritten);
  bed.sink.events.pop_back();

  // Another slot's marker written by another server (a failed-over shard,
  // a migrated slot): replaced.
  const std::string moved = key_in(0, 8191, 2);
  bed.shards[shard_a].markers[hash_slot(moved)] = {"e9", "cccc"};
  REQUIRE(bed.send(CommandId::acquire, moved, 3));
  bed.serve();
  CHECK(bed.sink.events.back().quarantined);
  CHECK(bed.sink.events.back().text.find("another server now") != std::string::npos);

  // A young marker (someone created it 1 s ago): the rest of the period.
  const std::string young = key_in(8192, 16383);
  bed.shards[shard_b].markers[hash_slot(young)] = {"e5", "bbbb"};
  bed.shards[shard_b].age = "1000";
  REQUIRE(bed.send(CommandId::acquire, young, 4));
  bed.serve();
  CHECK(bed.sink.events.back().quarantined);
  CHECK(bed.cluster->slot_quarantine_left(hash_slot(young), bed.runtime.now()) ==
        quarantine_period(bed.options.max_ttl, bed.options.drift_factor) - milliseconds{1000});
}

TEST_CASE("cluster member: MOVED sends the command where it was told and asks for the map; more than 5 fail it") {
  Bed bed;
  bed.start();
  const std::string key = key_in(0, 8191);
  const int slot = hash_slot(key);
  bed.shards[shard_b].markers[slot] = {"e1", "bbbb"};
  bed.owner = [](int) { return shard_b; };  // every slot moved to B
  const std::size_t asks = bed.slot_asks();
  REQUIRE(bed.send(CommandId::acquire, key));
  bed.serve();
  REQUIRE(bed.sink.events.size() == 1);
  CHECK(bed.sink.events[0].kind == EventKind::reply);
  CHECK(bed.sink.events[0].str == "OK");
  CHECK_FALSE(bed.sink.events[0].quarantined);
  bed.runtime.advance(milliseconds{60});  // the refresh's gap
  CHECK(bed.slot_asks() > asks);
  // The next command of that slot goes to B at once.
  const std::size_t a_before = bed.count(shard_a, "EVALSHA");
  REQUIRE(bed.send(CommandId::release, key, 1));
  bed.serve();
  CHECK(bed.count(shard_a, "EVALSHA") == a_before);

  // Two nodes that send each other's clients back and forth: the command
  // fails after 5 redirects, with one final event.
  Bed loop;
  loop.start();
  loop.reply = [](FakeShard& s, const Command& c) -> std::optional<Reply> {
    const int sl = hash_slot(c.at(3));
    return error("MOVED " + std::to_string(sl) + " " + (s.address == shard_a ? shard_b : shard_a));
  };
  REQUIRE(loop.send(CommandId::extend, key));
  loop.serve();
  REQUIRE(loop.sink.events.size() == 1);
  CHECK(loop.sink.events[0].kind == EventKind::failed);
  CHECK(loop.sink.events[0].text.find("more than 5 redirects") != std::string::npos);
  CHECK(loop.count(shard_a, "EVALSHA") + loop.count(shard_b, "EVALSHA") == 6);
}

TEST_CASE("cluster member: ASK sends that command behind ASKING to the node named, and the map stays") {
  Bed bed;
  bed.start();
  const std::string key = key_in(0, 8191);
  const int slot = hash_slot(key);
  bool asked = false;
  bed.reply = [&](FakeShard& s, const Command&) -> std::optional<Reply> {
    if (s.address == shard_a && !asked) {
      asked = true;
      return error("ASK " + std::to_string(slot) + " " + shard_b);
    }
    return status();
  };
  REQUIRE(bed.send(CommandId::extend, key));
  bed.serve();
  REQUIRE(bed.sink.events.size() == 1);
  CHECK(bed.sink.events[0].str == "OK");
  const std::vector<Command> b = bed.sent(shard_b);
  REQUIRE(b.size() >= 2);
  CHECK(b[b.size() - 2] == Command{"ASKING"});
  CHECK(b.back().at(3) == key);
  // The slot is still A's: the next command goes there.
  const std::size_t a_before = bed.count(shard_a, "EVALSHA");
  REQUIRE(bed.send(CommandId::extend, key, 1));
  bed.serve();
  CHECK(bed.count(shard_a, "EVALSHA") == a_before + 1);
}

TEST_CASE("cluster member: a timeout, then a redirect that times out again: one timeout event, then one final") {
  Bed bed;
  bed.start();
  const std::string key = key_in(0, 8191);
  const int slot = hash_slot(key);
  bool hold = true;
  bed.reply = [&](FakeShard& s, const Command&) -> std::optional<Reply> {
    if (hold) return std::nullopt;
    if (s.address == shard_a) return error("MOVED " + std::to_string(slot) + " " + shard_b);
    return status();
  };
  REQUIRE(bed.send(CommandId::extend, key));
  bed.serve();
  bed.runtime.advance(milliseconds{60});
  REQUIRE(bed.sink.events.size() == 1);
  CHECK(bed.sink.events[0].kind == EventKind::timeout);
  hold = false;
  bed.serve();  // A: MOVED; B holds no more, answers at once
  hold = true;
  REQUIRE(bed.sink.events.size() == 2);
  CHECK(bed.sink.events[1].kind == EventKind::reply);

  // Held on B too: still one timeout.
  Bed late;
  late.start();
  bool moved = false;
  late.reply = [&](FakeShard& s, const Command&) -> std::optional<Reply> {
    if (s.address == shard_a && !moved) {
      moved = true;
      return std::nullopt;
    }
    if (s.address == shard_a) return error("MOVED " + std::to_string(slot) + " " + shard_b);
    return std::nullopt;
  };
  REQUIRE(late.send(CommandId::extend, key));
  late.serve();
  late.runtime.advance(milliseconds{60});
  late.wires.live(shard_a)->answer(error("MOVED " + std::to_string(slot) + " " + shard_b));
  late.serve();
  late.runtime.advance(milliseconds{60});
  int timeouts = 0;
  for (const Event& e : late.sink.events) timeouts += e.kind == EventKind::timeout ? 1 : 0;
  CHECK(timeouts == 1);
}

TEST_CASE("cluster member: a redirect about another slot is no answer: the command fails and nothing is dialled") {
  Bed bed;
  bed.start();
  const std::string key = key_in(0, 8191);
  bed.reply = [&](FakeShard&, const Command&) -> std::optional<Reply> {
    return error("MOVED " + std::to_string((hash_slot(key) + 1) % slot_count) + " 10.9.9.9:6379");
  };
  REQUIRE(bed.send(CommandId::extend, key));
  bed.serve();
  REQUIRE(bed.sink.events.size() == 1);
  CHECK(bed.sink.events[0].kind == EventKind::failed);
  CHECK(bed.sink.events[0].text.starts_with("a redirect for slot"));
  CHECK(bed.wires.by.count("10.9.9.9:6379") == 0);
}

TEST_CASE("cluster member: an acquire whose marker was redirected does not count (the slot moved during the round)") {
  Bed bed;
  bed.start();
  const std::string key = key_in(0, 8191);
  const int slot = hash_slot(key);
  bed.shards[shard_a].markers[slot] = {"e1", "aaaa"};
  // A runs the acquire, then learns the slot went to B before the marker.
  bed.reply = [&](FakeShard&, const Command&) -> std::optional<Reply> {
    bed.owner = [](int) { return shard_b; };
    return status();
  };
  REQUIRE(bed.send(CommandId::acquire, key));
  bed.serve();
  REQUIRE(bed.sink.events.size() == 1);
  CHECK(bed.sink.events[0].str == "OK");
  CHECK(bed.sink.events[0].quarantined);
  CHECK(bed.sink.events[0].text.find("may have moved during the round") != std::string::npos);
}

TEST_CASE("cluster member: keys of several slots — a multi-key call is refused, a batch is split per slot and put back in order") {
  Bed bed;
  bed.start();
  const std::string a1 = key_in(0, 8191), a2 = key_in(0, 8191, 1), b1 = key_in(8192, 16383);
  auto multi = std::make_unique<Call>();
  multi->command = CommandId::multi_acquire;
  multi->key = a1;
  multi->more_keys = {b1};
  multi->arg1 = "v";
  std::string why;
  CHECK_FALSE(bed.cluster->send(*multi, &bed.sink, 0, why));
  CHECK(why.find("2 hash slots of cluster redis+cluster://10.0.0.1:7001") != std::string::npos);

  auto batch = std::make_unique<Call>();
  batch->command = CommandId::extend_batch;
  for (const std::string& k : {a1, b1, a2}) {
    resp::append_bulk(batch->encoded_keys, k);
    resp::append_bulk(batch->encoded_args, "v-" + k);
    resp::append_bulk(batch->encoded_args, "1000");
  }
  batch->encoded_key_count = 3;
  batch->encoded_arg_count = 6;
  bed.reply = [&](FakeShard&, const Command& c) -> std::optional<Reply> {
    // One flag per key: '1' for the keys of slot a1's and b1's, '0' else.
    std::string flags;
    const std::size_t n = std::stoul(c.at(2));
    for (std::size_t i = 0; i < n; ++i) flags += c.at(3 + i) == a2 ? '0' : '1';
    return bulk(flags);
  };
  REQUIRE(bed.cluster->send(*batch, &bed.sink, 7, why));
  bed.serve();
  REQUIRE(bed.sink.events.size() == 1);
  CHECK(bed.sink.events[0].tag == 7);
  CHECK(bed.sink.events[0].kind == EventKind::reply);
  CHECK(bed.sink.events[0].str == "110");  // a1, b1, a2: the caller's order
  CHECK(bed.count(shard_a, "EVALSHA") >= 1);
  CHECK(bed.count(shard_b, "EVALSHA") >= 1);

  // One part answers an error: the batch fails as a whole.
  bed.reply = [&](FakeShard& s, const Command& c) -> std::optional<Reply> {
    return s.address == shard_b ? error("ERR boom") : bulk(std::string(std::stoul(c.at(2)), '1'));
  };
  REQUIRE(bed.cluster->send(*batch, &bed.sink, 8, why));
  bed.serve();
  REQUIRE(bed.sink.events.size() == 2);
  CHECK(bed.sink.events[1].kind == EventKind::failed);
  CHECK_MESSAGE(bed.sink.events[1].text.find("ERR boom") != std::string::npos, bed.sink.events[1].text);
  bed.calls.push_back(std::move(multi));
  bed.calls.push_back(std::move(batch));
}

TEST_CASE("cluster member: commands wait for the first map, and fail naming it when none comes within connect_timeout") {
  Bed bed;
  bed.start(false);
  const std::string key = key_in(0, 8191);
  REQUIRE(bed.send(CommandId::extend, key));
  bed.runtime.advance(milliseconds{10});
  CHECK(bed.sink.events.empty());
  bed.answer_map();  // the map comes: the command goes to A
  REQUIRE(bed.sink.events.size() == 1);
  CHECK(bed.sink.events[0].str == "OK");

  Bed none;
  none.start(false);
  REQUIRE(none.send(CommandId::extend, key));
  none.runtime.advance(none.options.connect_timeout + milliseconds{1});
  REQUIRE(none.sink.events.size() == 1);
  CHECK(none.sink.events[0].kind == EventKind::failed);
  CHECK(none.sink.events[0].text.starts_with("no slot map from the cluster within 200 ms"));
}

TEST_CASE("cluster member: its wake-up subscriber leaves a seed that the map names no primary for the map's first") {
  struct NoListener final : WakeListener {
    void on_wake(Why, std::string_view) override {}
  } listener;
  ManualRuntime runtime;
  Router wires;
  Config config;
  NodeAddress member;
  member.kind = NodeAddress::Kind::cluster;
  member.seeds = {{"10.0.0.9", 7001}, {"10.0.1.1", 7001}};  // the first seed is gone
  config.nodes = {member};
  NodeSet nodes(runtime, wires, config);
  nodes.start();
  REQUIRE(nodes.watch("redlock:{r}:released", &listener) != WatchState::unavailable);
  runtime.advance(milliseconds{1});
  REQUIRE(wires.live("10.0.0.9:7001") != nullptr);
  CHECK(wires.by["10.0.0.9:7001"].connects == 2);  // the map's connection and the subscriber's
  // Neither connects (connect_timeout): the map comes from the next seed,
  // and names 10.0.1.1:7001 and 10.0.1.2:7002.
  for (int i = 0; i < 2000 && wires.live("10.0.1.1:7001") == nullptr; ++i) runtime.advance(milliseconds{1});
  FakeWire* map = wires.live("10.0.1.1:7001");
  REQUIRE(map != nullptr);
  map->connected();
  map->flush();
  REQUIRE(map->next() == Command{"CLUSTER", "SLOTS"});
  map->answer({WireReply::Type::array, 0, {},
               {range(0, 8191, "10.0.1.1", 7001, 'a'), range(8192, 16383, "10.0.1.2", 7002, 'b')}});
  for (int i = 0; i < 2000; ++i) {
    bool subscribed = false;
    for (const Command& c : wires.by["10.0.1.1:7001"].log) subscribed = subscribed || c[0] == "SUBSCRIBE";
    if (subscribed) break;
    if (FakeWire* w = wires.live("10.0.1.1:7001")) {
      w->connected();
      w->flush();
    }
    runtime.advance(milliseconds{1});
  }
  bool subscribed = false;
  for (const Command& c : wires.by["10.0.1.1:7001"].log) subscribed = subscribed || c[0] == "SUBSCRIBE";
  CHECK(subscribed);
  nodes.close([] {});
  runtime.advance(milliseconds{1000});
}
