// test_network.cpp — the simulated masters and connections
// (tools/sim/network.hpp): FIFO replies, batches and on_flush, refused and
// reset connections, crashes and restarts, blackholes, pauses of masters
// and clients, and late bytes from a dropped connection arriving after its
// replacement's. Deterministic; nothing sleeps.
#include <doctest/doctest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "network.hpp"

namespace {

using namespace redlock::sim;
using redlock::detail::Wire;
using redlock::detail::WireEvents;
using redlock::detail::WireReply;

std::string text(const WireReply& r) {
  switch (r.type) {
    case WireReply::Type::status: return "+" + std::string(r.str);
    case WireReply::Type::string: return "\"" + std::string(r.str) + "\"";
    case WireReply::Type::integer: return ":" + std::to_string(r.integer);
    case WireReply::Type::nil: return "(nil)";
    case WireReply::Type::error: return "-" + std::string(r.str);
    case WireReply::Type::array: {
      std::string s = "[";
      for (const WireReply& e : r.elements) s += (s.size() > 1 ? ", " : "") + text(e);
      return s + "]";
    }
  }
  return "?";
}

struct Recorder final : WireEvents {
  std::vector<std::string> log;
  std::function<void()> flush_hook;
  void on_connected() override { log.push_back("connected"); }
  void on_reply(const WireReply& r) override { log.push_back(text(r)); }
  void on_flush() override {
    log.push_back("flush");
    if (flush_hook) flush_hook();
  }
  void on_lost(std::string_view why) override { log.push_back("lost: " + std::string(why)); }
};

void put(Wire& w, std::vector<std::string_view> argv) { REQUIRE(w.write(argv)); }

// Bed — one world, one master net, one client process.
struct Bed {
  explicit Bed(NetConfig cfg = {}, std::size_t masters = 1) : net(world, masters, cfg) {}
  World world{99};
  Network net;
  Process client{world, "client", 0, 0};
  redlock::detail::WireFactory& wires = net.factory(client);

  // in_turn runs `f` as a loop turn of the client (writes flush at its end).
  void in_turn(std::function<void()> f) {
    world.post(world.now(), &client, std::move(f));
    world.run_until(world.now());
  }
  void run_ms(double m) { world.run_until(world.now() + ms(m)); }
  // connected: a wire to master 0, up, its log empty.
  std::unique_ptr<Wire> connected(Recorder& ev) {
    std::unique_ptr<Wire> w;
    in_turn([&] { w = wires.connect(net.address(0), ev); });
    run_ms(5);
    REQUIRE(ev.log == std::vector<std::string>{"connected"});
    ev.log.clear();
    return w;
  }
};

}  // namespace

TEST_CASE("Network: connect, one batch per turn, replies in order") {
  Bed bed;
  Recorder ev;
  std::unique_ptr<Wire> w;
  bed.in_turn([&] {
    w = bed.wires.connect(bed.net.address(0), ev);
    put(*w, {"PING"});  // queued before the connection is up
  });
  CHECK(ev.log.empty());  // nothing inside connect
  bed.run_ms(5);
  CHECK(ev.log == std::vector<std::string>{"connected", "flush", "+PONG"});
  ev.log.clear();
  bed.in_turn([&] {
    put(*w, {"SET", "k", "v"});
    put(*w, {"GET", "k"});
  });
  bed.run_ms(5);
  CHECK(ev.log == std::vector<std::string>{"flush", "+OK", "\"v\""});
  CHECK(bed.net.executed() == 3);
}

TEST_CASE("Network: commands written inside on_flush go in the same batch, behind it") {
  Bed bed;
  Recorder ev;
  std::unique_ptr<Wire> w = bed.connected(ev);
  ev.flush_hook = [&] {
    ev.flush_hook = nullptr;
    put(*w, {"GET", "k"});
  };
  bed.in_turn([&] { put(*w, {"SET", "k", "x"}); });
  bed.run_ms(5);
  CHECK(ev.log == std::vector<std::string>{"flush", "+OK", "\"x\""});
}

TEST_CASE("Network: a crash resets connections, a down master refuses, a restart keeps or loses data") {
  Bed bed;
  Recorder ev;
  std::unique_ptr<Wire> w = bed.connected(ev);
  bed.in_turn([&] { put(*w, {"SET", "k", "v"}); });
  bed.run_ms(5);
  bed.net.crash(0);
  bed.run_ms(5);
  CHECK(ev.log.back() == "lost: connection reset by peer");
  bed.in_turn([&] { CHECK_FALSE(w->write(std::vector<std::string_view>{"PING"})); });

  Recorder ev2;
  bed.in_turn([&] { w = bed.wires.connect(bed.net.address(0), ev2); });
  bed.run_ms(5);
  CHECK(ev2.log == std::vector<std::string>{"lost: connection refused"});

  bed.net.restart(0, true);
  CHECK(bed.net.master(0).master().key_count() == 1);
  bed.net.restart(0, false);
  CHECK(bed.net.master(0).master().key_count() == 0);
  CHECK(bed.net.master(0).incarnation() == 3);
}

TEST_CASE("Network: a blackhole holds both directions until it heals; a connect over it hangs") {
  Bed bed;
  Recorder ev;
  std::unique_ptr<Wire> w;
  bed.in_turn([&] { w = bed.wires.connect(bed.net.address(0), ev); });
  bed.run_ms(5);
  bed.net.blackhole(0, 0, true, false);
  bed.in_turn([&] { put(*w, {"SET", "k", "1"}); });
  bed.run_ms(100);
  CHECK(bed.net.master(0).master().key_count() == 0);
  Recorder ev2;
  std::unique_ptr<Wire> w2;
  bed.in_turn([&] { w2 = bed.wires.connect(bed.net.address(0), ev2); });
  bed.run_ms(100);
  CHECK(ev2.log.empty());
  bed.net.heal(0, 0);
  bed.run_ms(5);
  CHECK(ev.log.back() == "+OK");
  CHECK(ev2.log == std::vector<std::string>{"connected"});

  bed.net.blackhole(0, 0, false, true);  // replies held: the command runs
  bed.in_turn([&] { put(*w, {"SET", "k", "2"}); });
  bed.run_ms(50);
  CHECK(bed.net.master(0).master().keys()[0].second == "2");
  CHECK(ev.log.back() == "flush");  // its reply held
  CHECK(ev.log.size() == 4);
  bed.net.heal(0, 0);
  bed.run_ms(5);
  CHECK(ev.log.back() == "+OK");
  CHECK(ev.log.size() == 5);
}

TEST_CASE("Network: a paused master runs nothing until it resumes; a paused client reads nothing") {
  Bed bed;
  Recorder ev;
  std::unique_ptr<Wire> w = bed.connected(ev);
  bed.net.pause(0);
  bed.in_turn([&] { put(*w, {"SET", "k", "1"}); });
  bed.run_ms(200);
  CHECK(bed.net.master(0).master().key_count() == 0);
  bed.net.resume(0);
  bed.client.pause();
  bed.run_ms(5);
  CHECK(bed.net.master(0).master().key_count() == 1);
  CHECK(ev.log == std::vector<std::string>{"flush"});
  bed.client.resume();
  bed.run_ms(1);
  CHECK(ev.log == std::vector<std::string>{"flush", "+OK"});
}

TEST_CASE("Network: late bytes — a dropped connection's command runs after its replacement's") {
  NetConfig cfg;
  cfg.late_chance = 1.0;
  cfg.late_min = ms(100);
  cfg.late_max = ms(100);
  Bed bed(cfg);
  Recorder ev, ev2;
  std::unique_ptr<Wire> w, w2;
  std::vector<std::string> seen;
  bed.net.on_command = [&](const ExecutedCommand& c) {
    seen.push_back(std::string(c.argv[2]) + (c.late ? " late" : ""));
  };
  bed.in_turn([&] { w = bed.wires.connect(bed.net.address(0), ev); });
  bed.run_ms(5);
  bed.in_turn([&] { put(*w, {"SET", "k", "old"}); });
  bed.in_turn([&] {
    w.reset();  // dropped with the SET in flight
    w2 = bed.wires.connect(bed.net.address(0), ev2);
    put(*w2, {"SET", "k", "new"});
  });
  bed.run_ms(500);
  CHECK(seen == std::vector<std::string>{"new", "old late"});
  CHECK(bed.net.master(0).master().keys()[0].second == "old");
  CHECK(ev.log == std::vector<std::string>{"connected", "flush"});  // no event after the drop
}

TEST_CASE("Network: the same seed replays the same trace") {
  auto run = [](std::uint64_t seed) {
    World world(seed);
    Network net(world, 3);
    Process client(world, "c", 0, 0);
    auto& wires = net.factory(client);
    std::vector<std::unique_ptr<Recorder>> evs;
    std::vector<std::unique_ptr<Wire>> ws;
    world.post(0, &client, [&] {
      for (std::size_t m = 0; m < 3; ++m) {
        evs.push_back(std::make_unique<Recorder>());
        ws.push_back(wires.connect(net.address(m), *evs.back()));
        for (int i = 0; i < 20; ++i) {
          const std::string v = std::to_string(i);
          ws.back()->write(std::vector<std::string_view>{"SET", "k", v});
        }
      }
    });
    world.run_until(ms(50));
    return std::make_pair(net.trace_hash(), net.executed());
  };
  CHECK(run(5) == run(5));
  CHECK(run(5).second == 60);
}

TEST_CASE("Network: pub/sub — one confirmation per channel, messages behind them, subscribed mode, UNSUBSCRIBE") {
  Bed bed;
  Recorder sub_ev, pub_ev;
  std::unique_ptr<Wire> sub = bed.connected(sub_ev);
  std::unique_ptr<Wire> pub = bed.connected(pub_ev);
  bed.in_turn([&] { put(*sub, {"SUBSCRIBE", "a", "b"}); });
  bed.run_ms(5);
  CHECK(sub_ev.log == std::vector<std::string>{"flush", "[\"subscribe\", \"a\", :1]", "[\"subscribe\", \"b\", :2]"});
  sub_ev.log.clear();
  // PUBLISH, directly and from a script: each counts its receivers.
  bed.in_turn([&] {
    put(*pub, {"PUBLISH", "b", "one"});
    put(*pub, {"EVAL", "return redis.call('PUBLISH', KEYS[1], ARGV[1])", "1", "a", "two"});
    put(*pub, {"PUBLISH", "nobody", "three"});
  });
  bed.run_ms(5);
  CHECK(pub_ev.log == std::vector<std::string>{"flush", ":1", ":1", ":0"});
  CHECK(sub_ev.log == std::vector<std::string>{"[\"message\", \"b\", \"one\"]", "[\"message\", \"a\", \"two\"]"});
  CHECK(bed.net.messages_delivered() == 2);
  sub_ev.log.clear();
  // A subscribed connection runs no other command.
  bed.in_turn([&] {
    put(*sub, {"SET", "k", "v"});
    put(*sub, {"UNSUBSCRIBE", "a"});
    put(*sub, {"UNSUBSCRIBE"});
    put(*sub, {"UNSUBSCRIBE"});
  });
  bed.run_ms(5);
  REQUIRE(sub_ev.log.size() == 5);
  CHECK(sub_ev.log[1].rfind("-ERR Can't execute 'SET'", 0) == 0);
  CHECK(sub_ev.log[2] == "[\"unsubscribe\", \"a\", :1]");
  CHECK(sub_ev.log[3] == "[\"unsubscribe\", \"b\", :0]");
  CHECK(sub_ev.log[4] == "[\"unsubscribe\", (nil), :0]");
  sub_ev.log.clear();
  bed.in_turn([&] { put(*sub, {"SET", "k", "v"}); });  // out of subscribed mode
  bed.run_ms(5);
  CHECK(sub_ev.log == std::vector<std::string>{"flush", "+OK"});
}

TEST_CASE("Network: subscriptions die with their connection and with the master's incarnation") {
  Bed bed;
  Recorder sub_ev, pub_ev;
  std::unique_ptr<Wire> sub = bed.connected(sub_ev);
  bed.in_turn([&] { put(*sub, {"SUBSCRIBE", "a"}); });
  bed.run_ms(5);
  auto publish = [&](std::unique_ptr<Wire>& pub) {
    pub_ev.log.clear();
    bed.in_turn([&] { put(*pub, {"PUBLISH", "a", "x"}); });
    bed.run_ms(5);
    REQUIRE(pub_ev.log.size() == 2);
    return pub_ev.log[1];
  };
  std::unique_ptr<Wire> pub = bed.connected(pub_ev);
  CHECK(publish(pub) == ":1");
  // A restart (even with data) ends every connection and its subscriptions.
  bed.net.restart(0, true);
  bed.run_ms(5);
  CHECK(sub_ev.log.back() == "lost: connection reset by peer");
  pub_ev.log.clear();
  pub = bed.connected(pub_ev);
  CHECK(publish(pub) == ":0");
  // A dropped subscriber (the client let its Wire go) receives nothing.
  sub_ev.log.clear();
  std::unique_ptr<Wire> sub2 = bed.connected(sub_ev);
  bed.in_turn([&] { put(*sub2, {"SUBSCRIBE", "a"}); });
  bed.run_ms(5);
  CHECK(publish(pub) == ":1");
  sub2.reset();
  CHECK(publish(pub) == ":0");
}

TEST_CASE("Network: a flood — unsolicited replies only while nothing is asked; a kept connection keeps its client busy") {
  Bed bed;
  Recorder ev;
  std::unique_ptr<Wire> w = bed.connected(ev);
  bed.net.flood(0, 0, true);
  bed.run_ms(0.5);
  // One came (the client kept the connection): its process runs nothing
  // more, not even the reply to what it had written.
  REQUIRE(ev.log == std::vector<std::string>{"+OK"});
  CHECK(bed.client.paused());
  CHECK(bed.net.busy_connections() == 1);
  bed.run_ms(50);
  CHECK(ev.log.size() == 1);
  bed.net.flood(0, 0, false);
  CHECK_FALSE(bed.client.paused());
  bed.run_ms(5);
  bed.in_turn([&] { w.reset(); });

  // A command in flight: nothing unsolicited crosses it; a client that
  // ends the connection at the first one is never busy.
  Recorder ev2;
  std::unique_ptr<Wire> w2 = bed.connected(ev2);
  bed.net.set_extra_delay(0, 0, ms(20));
  bed.in_turn([&] { put(*w2, {"SET", "k", "1"}); });
  bed.net.flood(0, 0, true);
  bed.run_ms(30);
  CHECK(ev2.log == std::vector<std::string>{"flush"});
  bed.run_ms(60);
  REQUIRE(ev2.log.size() == 3);
  CHECK(ev2.log[1] == "+OK");  // the SET's reply first
  CHECK(ev2.log[2] == "+OK");  // then the flood's
  CHECK(bed.client.paused());
  bed.net.flood(0, 0, false);
  bed.in_turn([&] { w2.reset(); });
  CHECK(bed.net.busy_connections() == 0);
  CHECK(bed.net.master(0).flooded() >= 2);

  // A client that ends the connection at its first unsolicited reply (as
  // NodeSession does) is never busy.
  struct Dropper final : WireEvents {
    std::unique_ptr<Wire>* wire = nullptr;
    int replies = 0;
    void on_connected() override {}
    void on_reply(const WireReply&) override {
      ++replies;
      wire->reset();
    }
    void on_flush() override {}
    void on_lost(std::string_view) override {}
  } dropper;
  std::unique_ptr<Wire> w3;
  dropper.wire = &w3;
  bed.in_turn([&] { w3 = bed.wires.connect(bed.net.address(0), dropper); });
  bed.net.flood(0, 0, true);
  bed.run_ms(100);
  CHECK(dropper.replies == 1);
  CHECK(w3 == nullptr);
  CHECK_FALSE(bed.client.paused());
  CHECK(bed.net.busy_connections() == 0);
  bed.net.flood(0, 0, false);
}

TEST_CASE("Network: a cluster's masters answer CLUSTER SLOTS and MOVED, and a slot reassigned loses its keys") {
  Bed bed({}, 3);
  bed.net.add_cluster({1, 2});  // master 0 alone; masters 1 and 2 one cluster, slots split in two
  const std::vector<redlock::NodeAddress> members = bed.net.members();
  REQUIRE(members.size() == 2);
  CHECK(members[0].port == bed.net.address(0).port);
  CHECK(members[1].kind == redlock::NodeAddress::Kind::cluster);
  REQUIRE(members[1].seeds.size() == 2);
  CHECK(members[1].seeds[1].port == bed.net.address(2).port);
  Recorder ev;
  std::unique_ptr<Wire> w;
  bed.in_turn([&] { w = bed.wires.connect(bed.net.address(1), ev); });
  bed.run_ms(5);
  ev.log.clear();
  const std::string p1 = std::to_string(bed.net.address(1).port), p2 = std::to_string(bed.net.address(2).port);
  // "a" is in slot 15495 (master 2's half), "b" in 3300 (master 1's).
  bed.in_turn([&] {
    put(*w, {"CLUSTER", "SLOTS"});
    put(*w, {"SET", "a", "1"});
    put(*w, {"SET", "b", "1"});
    put(*w, {"ASKING"});
  });
  bed.run_ms(5);
  REQUIRE(ev.log.size() == 5);
  CHECK(ev.log[1] == "[[:0, :8191, [\"sim\", :" + p1 + ", \"" + std::string(39, '0') + "2\"]], [:8192, :16383, [\"sim\", :" +
                         p2 + ", \"" + std::string(39, '0') + "3\"]]]");
  CHECK(ev.log[2] == "-MOVED 15495 sim:" + p2);
  CHECK(ev.log[3] == "+OK");
  CHECK(ev.log[4] == "+OK");
  // Slot 3300 goes to master 2 without its keys: master 1 dropped "b" and
  // now sends it there.
  bed.net.reassign(0, 3300, 2);
  CHECK(bed.net.master(1).master().key_count() == 0);
  CHECK(bed.net.slot_owner(0, 3300) == 2);
  ev.log.clear();
  bed.in_turn([&] { put(*w, {"GET", "b"}); });
  bed.run_ms(5);
  CHECK(ev.log == std::vector<std::string>{"flush", "-MOVED 3300 sim:" + p2});
}
