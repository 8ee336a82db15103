// test_node_session.cpp — one master's session (src/node_session.hpp) on a
// fake Wire and manual time: the handshake, deadlines, NOSCRIPT, reconnect,
// quarantine, the data-loss marker and its vote check, graceful close,
// unsolicited replies, and the idle connection's keep-alive.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fake_wire.hpp"
#include "node_session.hpp"
#include "resp.hpp"
#include "scripts.hpp"
#include "test_runtime.hpp"
#include "validity.hpp"

using namespace redlock;
using namespace redlock::detail;
using redlock::test::ManualRuntime;
using std::chrono::milliseconds;

namespace {

using namespace redlock::test;

struct Event {
  std::size_t slot;
  EventKind kind;
  WireReply::Type type;  // a reply's (mapped back for checks)
  std::string str;
  long long integer;
  bool quarantined;
  std::string text;
};

struct Sink final : ReplySink {
  std::vector<Event> events;
  void on_node_event(std::size_t slot, const NodeEvent& ev) override {
    events.push_back({slot, ev.kind, static_cast<WireReply::Type>(ev.reply.type), std::string(ev.reply.str),
                      ev.reply.integer, ev.quarantined, std::string(ev.text)});
  }
};

// Bed — a session on a fake wire, with a small fake master: `serve()`
// answers everything sent (the handshake, the marker, GET of the marker,
// and by `script` the calls) until the policy returns nothing.
struct Bed {
  ManualRuntime runtime;
  FakeWireFactory wires;
  Options options;
  NodeAddress address;
  std::array<std::string, script_count> shas;
  Sink sink;
  int closed = 0;
  std::optional<NodeSession> session;
  std::vector<std::unique_ptr<Call>> calls;

  // The fake master.
  std::string info = "redis_version:7.0.0\r\nrun_id:abc\r\nuptime_in_seconds:100000\r\n";
  std::string marker;  // "EPOCH" ("" : none)
  std::string marker_server;        // the run id that wrote it ("" : none)
  std::string marker_replid;        // the master_replid then ("" : none)
  std::string marker_ms;            // the quarantine it declares ("" : the caller's)
  std::string marker_age = "100000000";
  bool marker_clean = false;        // a clean-start marker (BORN_MS 0): "clean" to its own server
  std::set<std::string> loaded;     // the scripts' SHAs in its cache (SCRIPT LOAD adds; "sha" + index here)
  std::function<std::optional<Reply>(const Command&)> script = [](const Command&) -> std::optional<Reply> {
    return status();
  };

  Bed() {
    options.max_ttl = milliseconds{10000};
    options.node_timeout = milliseconds{50};
    address.host = "10.0.0.1";
    for (std::size_t i = 0; i < script_count; ++i) shas[i] = "sha" + std::to_string(i);
  }
  void start() {
    session.emplace(runtime, wires, address, options, shas.data(), [this] { ++closed; });
    session->start();
  }
  FakeWire& wire() {
    REQUIRE(wires.live != nullptr);
    return *wires.live;
  }
  std::optional<Reply> master(const Command& c) {
    if (c[0] == "SCRIPT" && c[1] == "EXISTS") {
      Reply r{WireReply::Type::array, 0, {}, {}};
      for (std::size_t i = 2; i < c.size(); ++i) r.elements.push_back(integer(loaded.count(c[i])));
      return r;
    }
    if (c[0] == "SCRIPT" && c[1] == "LOAD") {
      for (std::size_t i = 0; i < script_count; ++i) {
        if (script_bodies[i] == c[2]) loaded.insert(shas[i]);
      }
      return bulk("sha");
    }
    if (c[0] == "AUTH" || c[0] == "SELECT") return status();
    if (c[0] == "INFO") return bulk(info);
    if (c[0] == "EVALSHA" && c[1] == shas[static_cast<std::size_t>(CommandId::marker)]) {
      // KEYS: the marker, its server, its replid; ARGV: epoch, ms, run id, replid.
      const std::string& run_id = c[8];
      const std::string& replid = c[9];
      const std::string ms = marker_ms.empty() ? c[7] : marker_ms;
      const bool other_server = !marker_server.empty() && !run_id.empty() && marker_server != run_id;
      const bool other_history = !marker_replid.empty() && !replid.empty() && marker_replid != replid;
      if (!replid.empty()) marker_replid = replid;
      if (marker.empty() || other_server || other_history) {
        const char* state = marker.empty() ? "created" : "replaced";
        marker = c[6];
        marker_server = run_id;
        return strings({state, marker, ms, "0"});
      }
      if (marker_server.empty()) {  // adopted: a clean start without its proof is void
        marker_server = run_id;
        marker_clean = false;
      }
      const bool clean = marker_clean && marker_server == run_id;
      return strings({clean ? "clean" : "found", marker, ms, marker_age});
    }
    if (c[0] == "GET" && c[1] == "redlock-marker") {
      return marker.empty() ? nil() : bulk(marker + " " + (marker_ms.empty() ? "10102" : marker_ms) + " 0");
    }
    return script(c);
  }
  // serve flushes and answers until nothing is left or the policy holds.
  void serve() {
    while (wires.live != nullptr) {
      FakeWire& w = *wires.live;
      w.flush();
      if (w.answered == w.sent.size()) return;
      std::optional<Reply> r = master(w.next());
      if (!r) return;
      w.answer(*r);
    }
  }
  // ready: connected, handshake done with a known master (marker seen).
  void ready() {
    marker = "e1";
    start();
    wire().connected();
    serve();
    REQUIRE(session->state() == NodeSession::State::ready);
  }
  bool send(CommandId id, std::string key = "k", std::size_t slot = 0) {
    std::string why;
    const bool ok = session->send(kept_call(calls, id, std::move(key)), &sink, slot, why);
    last_why = why;
    return ok;
  }
  std::string last_why;
  // to_scripts_exist: the connection comes up and INFO is answered; the
  // next command to answer is SCRIPT EXISTS.
  void to_scripts_exist() {
    wire().connected();
    wire().flush();
    wire().answer(*master(wire().next()));  // INFO
    REQUIRE(wire().next()[1] == "EXISTS");
  }
  // reconnect: the connection is lost and the next one's handshake (to
  // whatever the fake master now says) completes.
  void reconnect() {
    wire().lose("connection reset by peer");
    for (const int connects = wires.connects; wires.connects == connects;) runtime.advance(milliseconds{1});
    wire().connected();
    serve();
    REQUIRE(session->state() == NodeSession::State::ready);
  }
  // expect_full_quarantine: the master sits out a whole period from now,
  // and an acquire's yes comes back quarantined, for a reason that starts
  // with `why`.
  void expect_full_quarantine(std::string_view why) {
    CHECK(session->quarantine_left(runtime.now()) == quarantine_period(options.max_ttl, options.drift_factor));
    const std::size_t before = sink.events.size();
    REQUIRE(send(CommandId::set_nx));
    serve();
    REQUIRE(sink.events.size() == before + 1);
    CHECK(sink.events.back().quarantined);
    CHECK(sink.events.back().text.starts_with(why));
  }
  std::size_t count(std::string_view name) const {
    std::size_t n = 0;
    for (const Command& c : wires.log) n += c[0] == name ? 1 : 0;
    return n;
  }
};

}  // namespace

TEST_CASE("nothing is written before the handshake completes; then the waiting commands go in order") {
  Bed bed;
  bed.start();
  REQUIRE(bed.send(CommandId::set_nx, "a", 0));
  REQUIRE(bed.send(CommandId::release, "b", 1));
  bed.wire().connected();
  bed.wire().flush();
  CHECK(bed.count("SET") == 0);
  CHECK(bed.count("SCRIPT") == 1);  // SCRIPT EXISTS
  CHECK(bed.count("INFO") == 1);
  // Answer INFO and SCRIPT EXISTS: the missing scripts (all) are loaded,
  // the marker goes out behind them, still nothing of ours.
  bed.wire().answer(*bed.master(bed.wire().next()));  // INFO
  bed.wire().answer(*bed.master(bed.wire().next()));  // SCRIPT EXISTS
  bed.wire().flush();
  CHECK(bed.count("SCRIPT") == 1 + script_count);
  for (std::size_t i = 0; i < script_count; ++i) bed.wire().answer(*bed.master(bed.wire().next()));
  CHECK(bed.wire().next()[0] == "EVALSHA");
  CHECK(bed.count("SET") == 0);
  CHECK(bed.sink.events.empty());
  bed.wire().answer(*bed.master(bed.wire().next()));  // the marker: ready
  CHECK(bed.session->state() == NodeSession::State::ready);
  bed.wire().flush();
  const std::vector<Command>& sent = bed.wire().sent;
  REQUIRE(sent.size() >= 3);
  CHECK(sent[sent.size() - 3][0] == "SET");
  CHECK(sent[sent.size() - 2][0] == "EVALSHA");  // the release
  CHECK(sent[sent.size() - 1] == Command{"GET", "redlock-marker"});  // the vote check, behind the SET
  bed.script = [](const Command& c) -> std::optional<Reply> { return c[0] == "SET" ? status() : integer(1); };
  bed.serve();
  REQUIRE(bed.sink.events.size() == 2);
  // The release answers first: the SET's yes waited for the vote check.
  CHECK(bed.sink.events[0].slot == 1);
  CHECK(bed.sink.events[1].slot == 0);
  CHECK(bed.sink.events[1].kind == EventKind::reply);
  CHECK(bed.sink.events[1].str == "OK");
  // New master (marker created): quarantined.
  CHECK(bed.sink.events[1].quarantined);
}

TEST_CASE("a server that has every script gets one SCRIPT EXISTS and no SCRIPT LOAD") {
  // A process start costs a master other clients use one command for the
  // scripts, not one per script (a crowd of `redlock run` processes).
  Bed bed;
  for (const std::string& sha : bed.shas) bed.loaded.insert(sha);
  bed.ready();
  CHECK(bed.count("SCRIPT") == 1);
  REQUIRE(bed.send(CommandId::release));
  bed.serve();
  REQUIRE(bed.sink.events.size() == 1);
  CHECK(bed.sink.events[0].kind == EventKind::reply);
}

TEST_CASE("the scripts a server lacks are loaded before the marker's EVALSHA and before anything held back") {
  Bed bed;
  for (const std::string& sha : bed.shas) bed.loaded.insert(sha);
  const auto marker = static_cast<std::size_t>(CommandId::marker);
  const auto release = static_cast<std::size_t>(CommandId::release);
  bed.loaded.erase(bed.shas[marker]);
  bed.loaded.erase(bed.shas[release]);
  bed.marker = "e1";
  bed.start();
  REQUIRE(bed.send(CommandId::release));
  bed.wire().connected();
  bed.serve();
  REQUIRE(bed.session->state() == NodeSession::State::ready);
  std::vector<std::string> order;  // the loads and EVALSHAs, by what they name
  for (const Command& c : bed.wires.log) {
    if (c[0] == "SCRIPT" && c[1] == "LOAD") order.push_back(c[2] == script_bodies[marker] ? "load marker" : "load release");
    if (c[0] == "EVALSHA") order.push_back(c[1] == bed.shas[marker] ? "marker" : c[1] == bed.shas[release] ? "release" : c[1]);
  }
  REQUIRE(order.size() == 4);
  std::sort(order.begin(), order.begin() + 2);  // the loads go in the scripts' order
  CHECK(order == std::vector<std::string>{"load marker", "load release", "marker", "release"});
  REQUIRE(bed.sink.events.size() == 1);
  CHECK(bed.sink.events[0].kind == EventKind::reply);
}

TEST_CASE("a SCRIPT EXISTS the server refuses (an ACL without it) loads every script: the handshake goes on") {
  Bed bed;
  bed.marker = "e1";
  bed.start();
  REQUIRE(bed.send(CommandId::release));
  bed.to_scripts_exist();
  bed.wire().answer(error("NOPERM User lock has no permissions to run the 'script|exists' command"));
  bed.serve();
  CHECK(bed.session->state() == NodeSession::State::ready);
  CHECK(bed.count("SCRIPT") == 1 + script_count);
  REQUIRE(bed.sink.events.size() == 1);
  CHECK(bed.sink.events[0].kind == EventKind::reply);
}

TEST_CASE("a SCRIPT EXISTS that fails otherwise (NOAUTH, say) fails the handshake and says so") {
  Bed bed;
  bed.start();
  REQUIRE(bed.send(CommandId::set_nx));
  bed.to_scripts_exist();
  bed.wire().answer(error("NOAUTH Authentication required."));
  CHECK(bed.wires.live == nullptr);  // dropped
  REQUIRE(bed.sink.events.size() == 1);
  CHECK(bed.sink.events[0].kind == EventKind::failed);
  CHECK(bed.sink.events[0].text == "SCRIPT EXISTS failed: NOAUTH Authentication required.");
  CHECK(bed.count("SCRIPT") == 1);
}

TEST_CASE("a SCRIPT EXISTS answer that is not one 0 or 1 per script ends the connection") {
  Reply all_ones{WireReply::Type::array, 0, {}, {}};
  for (std::size_t i = 0; i < script_count; ++i) all_ones.elements.push_back(integer(1));
  Reply one_short = all_ones;
  one_short.elements.pop_back();
  Reply one_more = all_ones;
  one_more.elements.push_back(integer(1));
  Reply a_two = all_ones;
  a_two.elements[3] = integer(2);
  Reply a_string = all_ones;
  a_string.elements[0] = bulk("1");
  for (const Reply& answer : {integer(1), bulk("OK"), nil(), one_short, one_more, a_two, a_string}) {
    Bed bed;
    bed.marker = "e1";
    bed.start();
    REQUIRE(bed.send(CommandId::set_nx));
    bed.to_scripts_exist();
    bed.wire().answer(answer);
    CHECK(bed.wires.live == nullptr);  // dropped
    REQUIRE(bed.sink.events.size() == 1);
    CHECK(bed.sink.events[0].kind == EventKind::failed);
    CHECK(bed.sink.events[0].text.find("SCRIPT EXISTS answered no array of") != std::string::npos);
    CHECK(bed.count("SET") == 0);
  }
}

TEST_CASE("a command that waited for the handshake gets its whole node timeout from its write") {
  // A master a few round trips away: the handshake alone takes longer than
  // node_timeout. The command's deadline runs from the moment it is
  // written, so it is answered, not timed out while it waited.
  Bed bed;
  bed.marker = "e1";
  bed.start();
  REQUIRE(bed.send(CommandId::set_nx, "a", 0));
  bed.runtime.advance(milliseconds{30});
  bed.wire().connected();
  bed.runtime.advance(milliseconds{60});  // handshake on its way: 90 ms since the send
  CHECK(bed.sink.events.empty());
  bed.script = [](const Command&) -> std::optional<Reply> { return std::nullopt; };
  bed.serve();  // answers the handshake, not yet the SET (it holds)
  REQUIRE(bed.session->state() == NodeSession::State::ready);
  CHECK(bed.count("SET") == 1);
  bed.runtime.advance(milliseconds{40});  // 40 ms after the write: in time
  CHECK(bed.sink.events.empty());
  bed.wire().answer(status());
  bed.wire().answer(bulk("e1 10102 0"));  // the vote check behind it
  REQUIRE(bed.sink.events.size() == 1);
  CHECK(bed.sink.events[0].kind == EventKind::reply);
  CHECK(bed.sink.events[0].str == "OK");

  SUBCASE("and its deadline still holds from the write") {
    REQUIRE(bed.send(CommandId::release, "b", 1));
    bed.serve();
    bed.runtime.advance(milliseconds{52});
    REQUIRE(bed.sink.events.size() == 2);
    CHECK(bed.sink.events[1].slot == 1);
    CHECK(bed.sink.events[1].kind == EventKind::timeout);
  }
}

TEST_CASE("a handshake that never completes fails the waiting command at the connect deadline, naming the stage") {
  Bed bed;
  bed.options.connect_timeout = milliseconds{200};
  bed.start();
  REQUIRE(bed.send(CommandId::set_nx, "a", 0));
  bed.wire().connected();
  bed.wire().flush();  // the handshake is written; the master never answers
  bed.runtime.advance(milliseconds{199});
  CHECK(bed.sink.events.empty());  // no timeout at node_timeout: it was never written
  bed.runtime.advance(milliseconds{1});
  REQUIRE(bed.sink.events.size() == 1);
  CHECK(bed.sink.events[0].kind == EventKind::failed);
  CHECK(bed.sink.events[0].text == "connect timeout after 200 ms, waiting for the server to answer the handshake");
  CHECK(bed.count("SET") == 0);
}

TEST_CASE("a failed handshake fails the waiting commands and writes nothing more") {
  Bed bed;
  bed.address.password = "wrong";
  bed.start();
  REQUIRE(bed.send(CommandId::set_nx));
  bed.wire().connected();
  bed.wire().flush();
  CHECK(bed.wire().next()[0] == "AUTH");
  bed.wire().answer(error("WRONGPASS invalid username-password pair"));
  CHECK(bed.wires.live == nullptr);  // dropped
  REQUIRE(bed.sink.events.size() == 1);
  CHECK(bed.sink.events[0].kind == EventKind::failed);
  CHECK(bed.sink.events[0].text == "AUTH failed: WRONGPASS invalid username-password pair");
  CHECK(bed.count("SET") == 0);
  CHECK(bed.session->state() == NodeSession::State::backing_off);
  CHECK_FALSE(bed.send(CommandId::set_nx));
  CHECK(bed.last_why == bed.sink.events[0].text);
}

TEST_CASE("NOSCRIPT is retried once as EVAL with the script's text") {
  Bed bed;
  bed.ready();
  bed.script = [](const Command& c) -> std::optional<Reply> {
    if (c[0] == "EVALSHA") return error("NOSCRIPT No matching script. Please use EVAL.");
    return integer(1);
  };
  REQUIRE(bed.send(CommandId::extend));
  bed.serve();
  REQUIRE(bed.sink.events.size() == 1);
  CHECK(bed.sink.events[0].kind == EventKind::reply);
  CHECK(bed.sink.events[0].integer == 1);
  REQUIRE(bed.wires.log.back().size() >= 2);
  CHECK(bed.wires.log.back()[0] == "EVAL");
  CHECK(bed.wires.log.back()[1] == extend_script);
}

TEST_CASE("a batch round's keys and arguments, encoded once, go out as EVALSHA sha N keys… values…, and as EVAL after NOSCRIPT") {
  Bed bed;
  bed.ready();
  auto call = std::make_unique<Call>();
  call->command = CommandId::extend_batch;
  for (const char* key : {"app:{a}:lock", "app:{b}:lock"}) resp::append_bulk(call->encoded_keys, key);
  for (const char* arg : {"va", "30000", "vb", "5000"}) resp::append_bulk(call->encoded_args, arg);
  call->encoded_key_count = 2;
  call->encoded_arg_count = 4;
  bed.script = [](const Command& c) -> std::optional<Reply> {
    if (c[0] == "EVALSHA") return error("NOSCRIPT No matching script. Please use EVAL.");
    return integer(1);
  };
  std::string why;
  REQUIRE(bed.session->send(*call, &bed.sink, 0, why));
  bed.serve();
  REQUIRE(bed.wires.log.size() >= 2);
  const Command& first = bed.wires.log[bed.wires.log.size() - 2];
  const Command& again = bed.wires.log.back();
  REQUIRE(first.size() == 9);
  CHECK(first[0] == "EVALSHA");
  CHECK(Command(first.begin() + 2, first.end()) ==
        Command{"2", "app:{a}:lock", "app:{b}:lock", "va", "30000", "vb", "5000"});
  REQUIRE(again.size() == 9);
  CHECK(again[0] == "EVAL");
  CHECK(Command(again.begin() + 2, again.end()) == Command(first.begin() + 2, first.end()));
  REQUIRE(bed.sink.events.size() == 1);
  CHECK(bed.sink.events[0].kind == EventKind::reply);
}

TEST_CASE("RESP: a command written with its tail encoded is byte for byte the command written whole; bad tails are refused") {
  const std::vector<std::string_view> whole = {"EVALSHA", "abc", "2", "k1", "k2", "", "v\r\n2"};
  std::string expected;
  append_command(expected, whole);
  std::string keys, args;
  resp::append_bulk(keys, "k1");
  resp::append_bulk(keys, "k2");
  resp::append_bulk(args, "");
  resp::append_bulk(args, "v\r\n2");
  const std::vector<std::string_view> head(whole.begin(), whole.begin() + 3);
  const std::string_view tail[] = {keys, args};
  std::string written;
  append_command_encoded(written, head, 4, tail);
  CHECK(written == expected);
  std::vector<std::string_view> back;
  const std::string joined = keys + args;  // the views point into it
  REQUIRE(resp::split_bulks(joined, 4, back));
  CHECK(back == std::vector<std::string_view>(whole.begin() + 3, whole.end()));
  for (const std::string_view bad : {std::string_view("$2\r\nk1\r\n"), std::string_view("$3\r\nk1\r\n$2\r\nk2\r\n"),
                                     std::string_view("$x\r\nk1\r\n$2\r\nk2\r\n"), std::string_view("$2\r\nk1$2\r\nk2\r\n"),
                                     std::string_view("$2\r\nk1\r\n$2\r\nk2\r\n$0\r\n\r\n")}) {
    back.clear();
    CHECK_FALSE(resp::split_bulks(bad, 2, back));
  }
}

TEST_CASE("a deadline passes: timeout, then the late reply; meanwhile acquires are refused, releases not") {
  Bed bed;
  bed.ready();
  bed.script = [](const Command&) -> std::optional<Reply> { return std::nullopt; };  // hold
  REQUIRE(bed.send(CommandId::release, "a", 0));
  bed.serve();
  bed.runtime.advance(milliseconds{51});
  CHECK(bed.sink.events.empty());
  bed.runtime.advance(milliseconds{1});  // 2 ms of slack
  REQUIRE(bed.sink.events.size() == 1);
  CHECK(bed.sink.events[0].kind == EventKind::timeout);
  CHECK_FALSE(bed.send(CommandId::set_nx, "b", 1));
  CHECK(bed.last_why.starts_with("not answering"));
  // Only the stall timer is armed now; a new command's deadline still counts.
  REQUIRE(bed.send(CommandId::release, "c", 2));
  bed.serve();
  bed.runtime.advance(milliseconds{52});
  REQUIRE(bed.sink.events.size() == 2);
  CHECK(bed.sink.events[1].slot == 2);
  CHECK(bed.sink.events[1].kind == EventKind::timeout);
  bed.wire().answer(integer(1));  // the late reply
  REQUIRE(bed.sink.events.size() == 3);
  CHECK(bed.sink.events[2].slot == 0);
  CHECK(bed.sink.events[2].kind == EventKind::reply);
  CHECK(bed.send(CommandId::set_nx, "d", 3));  // answering again
}

TEST_CASE("reconnect backs off exponentially to the cap, with jitter from the Runtime") {
  Bed bed;
  bed.options.reconnect_min = milliseconds{100};
  bed.options.reconnect_max = milliseconds{400};
  bed.runtime.draw = [](std::uint64_t bound) { return bound - 1; };  // the top of each jitter range
  bed.start();
  const long long expected[] = {100, 200, 400, 400};
  for (int i = 0; i < 4; ++i) {
    bed.wire().lose("connection refused");
    CHECK(bed.session->state() == NodeSession::State::backing_off);
    CHECK_FALSE(bed.send(CommandId::set_nx));
    CHECK(bed.last_why == "connection refused");
    bed.runtime.advance(milliseconds{expected[i] - 1});
    CHECK(bed.wires.connects == i + 1);
    bed.runtime.advance(milliseconds{1});
    CHECK(bed.wires.connects == i + 2);
  }
  // The bottom of the range: half the step.
  bed.runtime.draw = [](std::uint64_t) { return 0; };
  bed.wire().lose("connection refused");
  bed.runtime.advance(milliseconds{200});
  CHECK(bed.wires.connects == 6);
}

TEST_CASE("restart quarantine from INFO uptime counts U as U - 1 s, from the reply's arrival") {
  for (const long long up : {0LL, 1LL, 5LL, 11LL}) {
    CAPTURE(up);
    Bed bed;
    bed.info = "run_id:abc\r\nuptime_in_seconds:" + std::to_string(up) + "\r\n";
    bed.ready();
    const milliseconds period = quarantine_period(bed.options.max_ttl, bed.options.drift_factor);  // 10102 ms
    const milliseconds known{std::max(up - 1, 0LL) * 1000};
    const milliseconds left = known < period ? period - known : milliseconds{0};
    CHECK(bed.session->quarantine_left(bed.runtime.now()) == left);
    REQUIRE(bed.send(CommandId::set_nx));
    bed.serve();
    REQUIRE(bed.sink.events.size() == 1);
    CHECK(bed.sink.events[0].quarantined == (left.count() > 0));
    if (left.count() > 0) CHECK(bed.sink.events[0].text.starts_with("restarted recently"));
  }
}

TEST_CASE("a quarantined reply says why and the whole ms left as of that reply; an exclusion's text in between") {
  Bed bed;
  bed.info = "redis_version:7.0.0\r\nrun_id:abc\r\nuptime_in_seconds:0\r\n";
  bed.ready();  // restarted just now: sits out the whole 10102 ms
  const std::string first = "restarted recently; quarantined for another 10102 ms";
  const auto reply_text = [&bed](CommandId id) {
    REQUIRE(bed.send(id));
    bed.serve();
    REQUIRE(!bed.sink.events.empty());
    CHECK(bed.sink.events.back().quarantined);
    return bed.sink.events.back().text;
  };
  CHECK(reply_text(CommandId::set_nx) == first);
  CHECK(reply_text(CommandId::set_nx) == first);  // the same ms: the same text
  // Excluded meanwhile (the same server as another master): its own text;
  // then counted again within the same ms: the quarantine's text again.
  bed.session->set_duplicate_of("the same server as 10.0.0.2");
  CHECK(reply_text(CommandId::release) == "the same server as 10.0.0.2");
  bed.session->set_duplicate_of("");
  CHECK(reply_text(CommandId::set_nx) == first);
  for (int i = 0; i < 15; ++i) {  // 1.5 s on, answering the periodic marker checks
    bed.runtime.advance(milliseconds{100});
    bed.serve();
  }
  CHECK(reply_text(CommandId::set_nx) == "restarted recently; quarantined for another 8602 ms");
}

TEST_CASE("a clean start (the marker script says clean: this server started empty, unreached) is no restart") {
  const milliseconds period = quarantine_period(milliseconds{10000}, 0.01);  // the Bed's: 10102 ms
  Bed bed;
  bed.info = "redis_version:7.0.0\r\nrun_id:abc\r\nuptime_in_seconds:1\r\n";
  bed.marker_server = "abc";
  bed.marker_clean = true;
  SUBCASE("clean: counts at once, however young the server and its marker") {
    bed.marker_age = "0";
    bed.ready();
    CHECK(bed.session->quarantine_left(bed.runtime.now()).count() == 0);
    REQUIRE(bed.send(CommandId::set_nx));
    bed.serve();
    REQUIRE(bed.sink.events.size() == 1);
    CHECK_FALSE(bed.sink.events[0].quarantined);
  }
  SUBCASE("the same server found with an old marker but no clean start: the restart quarantine holds") {
    bed.marker_clean = false;
    bed.ready();
    CHECK(bed.session->quarantine_left(bed.runtime.now()) == period);
  }
  SUBCASE("restarted (another run id) with the clean marker kept (AOF): replaced, quarantined from now") {
    bed.ready();
    bed.info = "redis_version:7.0.0\r\nrun_id:def\r\nuptime_in_seconds:1\r\n";
    bed.reconnect();
    bed.expect_full_quarantine("another server");
  }
}

TEST_CASE("a marker lost (FLUSHALL) is seen by the periodic check and raises the quarantine") {
  Bed bed;
  bed.ready();
  CHECK(bed.session->quarantine_left(bed.runtime.now()).count() == 0);
  bed.marker.clear();  // FLUSHALL
  bed.runtime.advance(bed.options.data_check_interval);
  bed.serve();
  bed.expect_full_quarantine("lost its data (redlock-marker missing)");
}

// At the first contact a missing or young marker cannot tell a new master
// from one that lost its data: the reason says both, the new one first (a
// new bed's masters must not read as a data loss).
TEST_CASE("a master met without a marker, or with a young one: new, or lost its data") {
  SUBCASE("no marker: a whole period from now") {
    Bed bed;
    bed.start();  // no marker on the master
    bed.wire().connected();
    bed.serve();
    REQUIRE(bed.session->state() == NodeSession::State::ready);
    bed.expect_full_quarantine("new, or lost its data (no redlock-marker yet)");
  }
  SUBCASE("a marker written 3 s ago: what is left of the period since then") {
    Bed bed;
    bed.marker_age = "3000";
    bed.ready();
    const milliseconds period = quarantine_period(bed.options.max_ttl, bed.options.drift_factor);
    CHECK(bed.session->quarantine_left(bed.runtime.now()) == period - milliseconds{3000});
    REQUIRE(bed.send(CommandId::set_nx));
    bed.serve();
    REQUIRE(bed.sink.events.size() == 1);
    CHECK(bed.sink.events[0].quarantined);
    CHECK(bed.sink.events[0].text.starts_with("new, or lost its data (redlock-marker written 3000 ms ago)"));
  }
}

TEST_CASE("numbers from the server are range-checked before any arithmetic: no absurd value ends a quarantine") {
  const milliseconds period = quarantine_period(milliseconds{10000}, 0.01);  // the Bed's: 10102 ms
  SUBCASE("a marker declaring 9e18 ms, written just now: quarantined (for the most any client may declare)") {
    Bed bed;
    bed.marker_ms = "9000000000000000000";
    bed.marker_age = "0";
    bed.ready();
    CHECK(bed.session->quarantine_left(bed.runtime.now()) >= period);
    REQUIRE(bed.send(CommandId::set_nx));
    bed.serve();
    REQUIRE(bed.sink.events.size() == 1);
    CHECK(bed.sink.events[0].quarantined);
  }
  SUBCASE("a marker declaring more than a long long, or a signed, fractional or empty number: not believed") {
    for (const char* bad : {"99999999999999999999999", "-5", "1.5", "", "12abc"}) {
      CAPTURE(bad);
      Bed bed;
      bed.marker_age = bad;
      bed.marker = "e1";
      bed.start();
      bed.wire().connected();
      bed.serve();
      CHECK(bed.session->state() != NodeSession::State::ready);
      CHECK(bed.session->last_error().find("marker") != std::string::npos);
    }
  }
  SUBCASE("an INFO uptime too large for the arithmetic counts as unknown: just restarted") {
    for (const char* bad : {"9223372036854775807", "99999999999999999999", "-100", "x"}) {
      CAPTURE(bad);
      Bed bed;
      bed.info = std::string("run_id:abc\r\nuptime_in_seconds:") + bad + "\r\n";
      bed.ready();
      CHECK(bed.session->quarantine_left(bed.runtime.now()) == period);
    }
  }
}

TEST_CASE("another server behind the same address (its run id changed) sits out the quarantine from when it is seen") {
  Bed bed;
  bed.ready();
  CHECK(bed.session->quarantine_left(bed.runtime.now()).count() == 0);
  // A failover: the connection drops, the name now leads to the promoted
  // replica — a long uptime, the old marker, its own run id.
  bed.info = "redis_version:7.0.0\r\nrun_id:def\r\nuptime_in_seconds:100000\r\n";
  bed.marker_server.clear();  // what the client knew of the server must be enough
  bed.reconnect();
  bed.expect_full_quarantine("another server answers");
}

TEST_CASE("the same server with another replication history (demoted, resynced, promoted again) sits out the quarantine") {
  const std::string r1(40, 'a'), r2(40, 'b');
  SUBCASE("seen by this client at its reconnect: master_replid changed, run id the same") {
    Bed bed;
    bed.info = "redis_version:7.0.0\r\nrun_id:abc\r\nuptime_in_seconds:100000\r\nrole:master\r\nmaster_replid:" + r1 + "\r\n";
    bed.ready();
    CHECK(bed.session->quarantine_left(bed.runtime.now()).count() == 0);
    bed.info = "redis_version:7.0.0\r\nrun_id:abc\r\nuptime_in_seconds:100000\r\nrole:master\r\nmaster_replid:" + r2 + "\r\n";
    bed.marker_replid.clear();  // what the client knew of the server must be enough
    bed.reconnect();
    bed.expect_full_quarantine("its replication history changed");
  }
  SUBCASE("seen by a client that never met it: the marker names another replid") {
    Bed bed;
    bed.marker = "e1";
    bed.marker_server = "abc";
    bed.marker_replid = r1;
    bed.info = "redis_version:7.0.0\r\nrun_id:abc\r\nuptime_in_seconds:100000\r\nrole:master\r\nmaster_replid:" + r2 + "\r\n";
    bed.ready();
    CHECK(bed.marker_replid == r2);  // the script records the history it now has
    bed.expect_full_quarantine("another server now");
  }
  SUBCASE("a replid that is no replid (length, characters) is ignored, never compared") {
    Bed bed;
    bed.info = "redis_version:7.0.0\r\nrun_id:abc\r\nuptime_in_seconds:100000\r\nmaster_replid:" + r1 + "\r\n";
    bed.ready();
    bed.info = "redis_version:7.0.0\r\nrun_id:abc\r\nuptime_in_seconds:100000\r\nmaster_replid:zz\r\n";
    bed.reconnect();
    CHECK(bed.session->quarantine_left(bed.runtime.now()).count() == 0);
  }
}

TEST_CASE("a replica behind a member's address is never a voter: the handshake fails, naming its role") {
  Bed bed;
  bed.info = "redis_version:7.0.0\r\nrun_id:abc\r\nuptime_in_seconds:100000\r\nrole:slave\r\n";
  bed.start();
  REQUIRE(bed.send(CommandId::set_nx));
  bed.wire().connected();
  bed.serve();
  CHECK(bed.wires.live == nullptr);  // dropped
  REQUIRE(bed.sink.events.size() == 1);
  CHECK(bed.sink.events[0].kind == EventKind::failed);
  CHECK(bed.sink.events[0].text.find("is a replica (role:slave)") != std::string::npos);
  CHECK(bed.count("SET") == 0);
  CHECK(bed.session->state() == NodeSession::State::backing_off);
}

TEST_CASE("a marker written by another server (a promoted replica met for the first time) quarantines from now") {
  Bed bed;
  bed.marker_server = "primary-run-id";
  bed.ready();  // the Bed's server says run_id abc
  CHECK(bed.marker_server == "abc");
  bed.expect_full_quarantine("another server now");
}

TEST_CASE("a larger quarantine declared on any master lengthens a loss seen on another (no client shortens another's)") {
  // Client max_ttl 10 s; another client of the same masters declares 20 s.
  // Master a lost its data (its marker, and the declaration, are gone);
  // master b still declares 20 s. a sits out 20 s + drift, not 10 s.
  QuarantineShare share;
  Bed a, b;
  std::vector<NodeSession*> sessions;
  share.raised = [&] {
    for (NodeSession* s : sessions) s->reapply_quarantine();
  };
  a.start();
  b.start();
  a.session->share(&share);
  b.session->share(&share);
  sessions = {&*a.session, &*b.session};
  a.wire().connected();
  a.serve();  // a: no marker: created, quarantined for this client's period
  const milliseconds own = quarantine_period(a.options.max_ttl, a.options.drift_factor);
  CHECK(a.session->quarantine_left(a.runtime.now()) == own);
  b.marker = "e2";
  b.marker_ms = "20202";
  b.wire().connected();
  b.serve();  // b: found, declaring 20202 ms
  CHECK(share.largest == milliseconds{20202});
  CHECK(a.session->quarantine_left(a.runtime.now()) == milliseconds{20202});
  CHECK(b.session->quarantine_left(b.runtime.now()).count() == 0);  // b lost nothing
  // Later markers written by this client declare the larger period.
  a.marker.clear();
  a.runtime.advance(a.options.data_check_interval);
  a.serve();
  const std::string& marker_sha = a.shas[static_cast<std::size_t>(CommandId::marker)];
  auto check = std::find_if(a.wires.log.rbegin(), a.wires.log.rend(),
                            [&](const Command& c) { return c[0] == "EVALSHA" && c[1] == marker_sha; });
  REQUIRE(check != a.wires.log.rend());
  CHECK((*check)[7] == "20202");
}

TEST_CASE("the vote check behind a SET: a loss learnt in the same batch vetoes the held yes") {
  // One write: SET NX, the periodic marker check, the vote check. The
  // master lost its data before the SET: the marker check creates a new
  // epoch and the vote check then reads that epoch as if intact. The yes
  // must still arrive quarantined.
  Bed bed;
  bed.options.data_check_interval = milliseconds{10};  // before the SET's deadline
  bed.ready();
  bed.marker.clear();  // FLUSHALL, not yet seen
  REQUIRE(bed.send(CommandId::set_nx));
  bed.runtime.advance(milliseconds{10});  // the marker check joins the batch
  bed.wire().flush();
  const std::vector<Command>& sent = bed.wire().sent;
  REQUIRE(sent.size() >= 3);
  CHECK(sent[sent.size() - 3][0] == "SET");
  CHECK(sent[sent.size() - 2][0] == "EVALSHA");
  CHECK(sent[sent.size() - 1] == Command{"GET", "redlock-marker"});
  bed.serve();
  REQUIRE(bed.sink.events.size() == 1);
  CHECK(bed.sink.events[0].kind == EventKind::reply);
  CHECK(bed.sink.events[0].str == "OK");
  CHECK(bed.sink.events[0].quarantined);
}

TEST_CASE("a replicated member with wait_replicas: WAIT, INFO replication and the vote check behind its writes; short, the yes fails") {
  Bed bed;
  bed.address.replicated = true;
  bed.address.wait_replicas = 1;
  bed.address.wait_timeout = milliseconds{20};
  const std::string r1(40, 'a');
  bed.info = "redis_version:7.0.0\r\nrun_id:abc\r\nuptime_in_seconds:100000\r\nrole:master\r\nconnected_slaves:1\r\n"
             "master_replid:" + r1 + "\r\n";
  long long acked = 1;
  bed.script = [&](const Command& c) -> std::optional<Reply> {
    if (c[0] == "WAIT") return integer(acked);
    return c[0] == "EVALSHA" ? integer(1) : status();
  };
  bed.ready();
  // An acquire and an extension in one flush, a release in the next.
  REQUIRE(bed.send(CommandId::set_nx));
  REQUIRE(bed.send(CommandId::extend, "k", 1));
  bed.wire().flush();
  const std::vector<Command>& sent = bed.wire().sent;
  REQUIRE(sent.size() >= 5);
  CHECK(sent[sent.size() - 5][0] == "SET");
  CHECK(sent[sent.size() - 4][0] == "EVALSHA");
  CHECK(sent[sent.size() - 3] == Command{"WAIT", "1", "20"});
  CHECK(sent[sent.size() - 2] == Command{"INFO", "replication"});
  CHECK(sent[sent.size() - 1] == Command{"GET", "redlock-marker"});
  bed.serve();
  REQUIRE(bed.sink.events.size() == 2);
  CHECK(bed.sink.events[0].kind == EventKind::reply);
  CHECK(bed.sink.events[1].kind == EventKind::reply);
  CHECK(bed.sink.events[1].integer == 1);

  SUBCASE("WAIT short: every held answer of the flush fails, naming the replicas") {
    acked = 0;
    REQUIRE(bed.send(CommandId::set_nx));
    bed.serve();
    REQUIRE(bed.sink.events.size() == 3);
    CHECK(bed.sink.events[2].kind == EventKind::failed);
    CHECK(bed.sink.events[2].text == "written on 0 of 1 replicas within 20 ms (wait_replicas)");
  }
  SUBCASE("a release is not waited for") {
    const std::size_t before = bed.wire().sent.size();
    REQUIRE(bed.send(CommandId::release));
    bed.serve();
    CHECK(bed.wire().sent.size() == before + 1);
    REQUIRE(bed.sink.events.size() == 3);
    CHECK(bed.sink.events[2].kind == EventKind::reply);
  }
  SUBCASE("another replication id behind the writes: quarantined from now, the yes with it") {
    bed.info = "redis_version:7.0.0\r\nrun_id:abc\r\nrole:master\r\nconnected_slaves:1\r\nmaster_replid:" +
               std::string(40, 'b') + "\r\n";
    REQUIRE(bed.send(CommandId::set_nx));
    bed.serve();
    REQUIRE(bed.sink.events.size() == 3);
    CHECK(bed.sink.events[2].quarantined);
    CHECK(bed.sink.events[2].text.starts_with("its replication history changed (master_replid) while connected"));
  }
  SUBCASE("a replica now: the connection goes, and the held yes with it") {
    bed.info = "redis_version:7.0.0\r\nrun_id:abc\r\nrole:slave\r\n";
    REQUIRE(bed.send(CommandId::set_nx));
    bed.serve();
    REQUIRE(bed.sink.events.size() == 3);
    CHECK(bed.sink.events[2].kind == EventKind::failed);
    CHECK(bed.wires.live == nullptr);
  }
}

TEST_CASE("wait_replicas=all: WAIT for the replicas connected at the last reading; none connected, no vote") {
  Bed bed;
  bed.address.replicated = true;
  bed.address.wait_replicas = NodeAddress::all_replicas;
  bed.address.wait_timeout = milliseconds{20};
  bed.info = "redis_version:7.0.0\r\nrun_id:abc\r\nuptime_in_seconds:100000\r\nrole:master\r\nconnected_slaves:0\r\n";
  bed.script = [](const Command& c) -> std::optional<Reply> { return c[0] == "WAIT" ? integer(0) : status(); };
  bed.ready();
  REQUIRE(bed.send(CommandId::set_nx));
  bed.serve();
  REQUIRE(bed.sink.events.size() == 1);
  CHECK(bed.sink.events[0].kind == EventKind::failed);
  CHECK(bed.sink.events[0].text == "no replica connected to take the write (wait_replicas=all)");
  CHECK(std::count(bed.wires.log.begin(), bed.wires.log.end(), Command{"WAIT", "0", "20"}) == 1);
  // Two replicas now: the INFO behind the next writes learns it, the WAIT after asks for both.
  bed.info = "redis_version:7.0.0\r\nrun_id:abc\r\nrole:master\r\nconnected_slaves:2\r\n";
  REQUIRE(bed.send(CommandId::set_nx));
  bed.serve();
  REQUIRE(bed.send(CommandId::set_nx));
  bed.serve();
  CHECK(std::count(bed.wires.log.begin(), bed.wires.log.end(), Command{"WAIT", "2", "20"}) == 1);
  // A server that stops saying how many (a proxy hiding INFO fields): no vote, and why.
  bed.info = "redis_version:7.0.0\r\nrun_id:abc\r\nrole:master\r\n";
  REQUIRE(bed.send(CommandId::set_nx));
  bed.serve();
  REQUIRE(bed.send(CommandId::set_nx));
  bed.serve();
  CHECK(bed.sink.events.back().kind == EventKind::failed);
  CHECK(bed.sink.events.back().text.starts_with("the number of connected replicas is unknown"));
}

// The vote check reads the marker as the periodic check's script does
// (our epoch, the declared period): a client that acquires more often than
// data_check_interval sends no marker script; one that stops does again.
TEST_CASE("a vote check that finds the marker intact stands in for the periodic check: no marker script until it goes unread an interval") {
  Bed bed;
  bed.ready();
  const std::string& marker_sha = bed.shas[static_cast<std::size_t>(CommandId::marker)];
  const auto scripts = [&] {
    return std::count_if(bed.wires.log.begin(), bed.wires.log.end(),
                         [&](const Command& c) { return c[0] == "EVALSHA" && c[1] == marker_sha; });
  };
  const auto handshake = scripts();
  const milliseconds step = bed.options.data_check_interval / 2;
  for (int i = 0; i < 8; ++i) {  // an acquire every half interval, for four intervals
    bed.runtime.advance(step);
    REQUIRE(bed.send(CommandId::set_nx));
    bed.serve();
  }
  CHECK(bed.count("GET") == 8);
  CHECK(scripts() == handshake);
  // The acquires stop: the marker goes unread; one interval after the last
  // reading the script runs, and every interval from then on.
  bed.runtime.advance(bed.options.data_check_interval - milliseconds{1});
  bed.serve();
  CHECK(scripts() == handshake);
  bed.runtime.advance(milliseconds{1});
  bed.serve();
  CHECK(scripts() == handshake + 1);
  bed.runtime.advance(bed.options.data_check_interval);
  bed.serve();
  CHECK(scripts() == handshake + 2);
  // Meanwhile a loss the vote check sees still counts at once.
  bed.marker.clear();
  REQUIRE(bed.send(CommandId::set_nx));
  bed.serve();
  CHECK(bed.sink.events.back().quarantined);
}

TEST_CASE("a vote check teaches the period another client declared, as the marker script's answer does") {
  QuarantineShare share;
  Bed bed;
  bed.marker = "e1";
  bed.start();
  bed.session->share(&share);
  bed.wire().connected();
  bed.serve();
  CHECK(share.largest == milliseconds{10102});
  bed.marker_ms = "20202";  // a larger client met this master since
  REQUIRE(bed.send(CommandId::set_nx));
  bed.serve();
  CHECK(share.largest == milliseconds{20202});
  // A declaration that is no number teaches nothing, and the periodic
  // check stays due.
  bed.marker_ms = "x";
  bed.runtime.advance(bed.options.data_check_interval - milliseconds{1});
  REQUIRE(bed.send(CommandId::set_nx));
  bed.serve();
  CHECK(share.largest == milliseconds{20202});
  const std::size_t evalshas = bed.count("EVALSHA");
  bed.runtime.advance(milliseconds{1});
  bed.wire().flush();
  CHECK(bed.count("EVALSHA") == evalshas + 1);
}

TEST_CASE("a vote check that finds the marker gone vetoes the yes") {
  Bed bed;
  bed.ready();
  bed.script = [&](const Command& c) -> std::optional<Reply> {
    if (c[0] == "SET") bed.marker.clear();  // lost right after the SET ran
    return status();
  };
  REQUIRE(bed.send(CommandId::set_nx));
  bed.serve();
  REQUIRE(bed.sink.events.size() == 1);
  CHECK(bed.sink.events[0].quarantined);
}

TEST_CASE("close waits for the replies still due, then reports closed on a later turn") {
  Bed bed;
  bed.ready();
  bed.script = [](const Command&) -> std::optional<Reply> { return std::nullopt; };
  REQUIRE(bed.send(CommandId::release, "a", 0));
  bed.serve();
  bed.session->close();
  CHECK_FALSE(bed.send(CommandId::release, "b", 1));
  CHECK(bed.last_why == "client closed");
  bed.runtime.advance(milliseconds{100});
  CHECK(bed.closed == 0);
  CHECK(bed.wires.live != nullptr);
  bed.wire().answer(integer(1));
  REQUIRE(bed.sink.events.size() == 1);
  CHECK(bed.sink.events[0].kind == EventKind::reply);
  CHECK(bed.wires.live == nullptr);  // dropped once nothing is due
  CHECK(bed.closed == 0);            // never inside the event
  bed.runtime.advance(milliseconds{0});
  CHECK(bed.closed == 1);
  CHECK(bed.runtime.armed() == 0);
}

TEST_CASE("close gives up after connect_timeout + node_timeout") {
  Bed bed;
  bed.ready();
  bed.script = [](const Command&) -> std::optional<Reply> { return std::nullopt; };
  REQUIRE(bed.send(CommandId::release));
  bed.serve();
  bed.session->close();
  bed.runtime.advance(bed.options.connect_timeout + bed.options.node_timeout - milliseconds{1});
  CHECK(bed.sink.events.empty());
  bed.runtime.advance(milliseconds{1});
  REQUIRE(bed.sink.events.size() == 1);
  CHECK(bed.sink.events[0].kind == EventKind::failed);
  CHECK(bed.sink.events[0].text == "client closed");
  bed.runtime.advance(milliseconds{0});
  CHECK(bed.closed == 1);
}

TEST_CASE("an acquire's SET carries GET on Redis 7 and later; its answer reads as the plain form's") {
  for (const bool seven : {true, false}) {
    CAPTURE(seven);
    Bed bed;
    bed.info = std::string("redis_version:") + (seven ? "7.2.4" : "6.2.14") + "\r\nrun_id:abc\r\nuptime_in_seconds:100000\r\n";
    bed.start();
    REQUIRE(bed.send(CommandId::set_nx, "queued", 0));  // written only after the handshake
    bed.wire().connected();
    bed.marker = "e1";
    // Answers as a master of that version would: with GET, nil when it set
    // the key, the old value when another holds it; without, +OK and nil.
    bed.script = [seven](const Command& c) -> std::optional<Reply> {
      if (c[0] != "SET") return integer(1);
      const bool taken = c[1] == "taken";
      if (seven) return taken ? bulk("another") : nil();
      return taken ? nil() : status();
    };
    bed.serve();
    REQUIRE(bed.session->state() == NodeSession::State::ready);
    REQUIRE(bed.send(CommandId::set_nx, "taken", 1));
    REQUIRE(bed.send(CommandId::set_nx, "fresh", 2));
    bed.serve();
    std::size_t sets = 0;
    for (const Command& c : bed.wires.log) {
      if (c[0] != "SET") continue;
      ++sets;
      const Command plain{"SET", c[1], "v", "NX", "PX", "1000"};
      Command with_get = plain;
      with_get.push_back("GET");
      CHECK(c == (seven ? with_get : plain));
    }
    CHECK(sets == 3);
    REQUIRE(bed.sink.events.size() == 3);
    for (const Event& e : bed.sink.events) {
      CAPTURE(e.slot);
      CHECK(e.kind == EventKind::reply);
      if (e.slot == 1) {
        CHECK(e.type == WireReply::Type::nil);  // held, in either form
      } else {
        CHECK(e.type == WireReply::Type::status);  // set
        CHECK(e.str == "OK");
      }
    }
  }
}

TEST_CASE("a reply when no command waits for one ends the connection: nothing the server says after can be matched") {
  Bed bed;
  bed.ready();
  REQUIRE(bed.send(CommandId::extend, "k", 0));
  FakeWire& w = bed.wire();
  w.flush();
  w.answer(integer(1));  // the extend's
  REQUIRE(bed.sink.events.size() == 1);
  CHECK(bed.sink.events[0].kind == EventKind::reply);
  w.answer(status());  // nobody's
  CHECK(bed.session->state() == NodeSession::State::backing_off);
  CHECK(bed.wires.live == nullptr);
  CHECK(bed.session->last_error() == "unsolicited reply (no command was waiting for one); reconnecting");
  CHECK(bed.sink.events.size() == 1);
  // The next command is refused with that reason until the reconnect.
  CHECK_FALSE(bed.send(CommandId::extend, "k", 1));
  CHECK(bed.last_why == bed.session->last_error());
}

TEST_CASE("an idle connection to a master that stopped answering is dropped within stall_timeout: the periodic marker check is its keep-alive") {
  Bed bed;
  bed.ready();
  // Answered, the checks keep it up however long it idles.
  for (int i = 0; i < 12; ++i) {
    bed.runtime.advance(bed.options.data_check_interval);
    bed.serve();
  }
  CHECK(bed.session->state() == NodeSession::State::ready);
  // Then the master stops answering: the next check is never answered.
  const std::size_t checks = bed.count("EVALSHA");
  bed.runtime.advance(bed.options.data_check_interval);
  bed.wire().flush();
  REQUIRE(bed.count("EVALSHA") == checks + 1);
  bed.runtime.advance(bed.options.stall_timeout - milliseconds{1});
  CHECK(bed.session->state() == NodeSession::State::ready);
  bed.runtime.advance(milliseconds{1});
  CHECK(bed.session->state() == NodeSession::State::backing_off);
  CHECK(bed.session->last_error() == "no reply for 1000 ms (stalled); reconnecting");
}

TEST_CASE("a sentinel member dials nothing before a primary is named, follows every switch, and judges each new primary") {
  Bed bed;
  bed.options.quarantine = true;
  bed.address = NodeAddress{};
  bed.address.kind = NodeAddress::Kind::sentinel;
  bed.address.seeds = {{"10.0.0.9", 26379}};
  bed.address.master_name = "m1";
  bed.marker = "e1";
  std::vector<std::string> lost;
  bed.start();
  bed.session->on_lost([&](std::string_view why) { lost.emplace_back(why); });
  CHECK(bed.wires.connects == 0);
  // Taken, as during a handshake: a first round need not lose this vote.
  REQUIRE(bed.send(CommandId::set_nx, "early", 7));
  SUBCASE("no primary named within connect_timeout: what waited fails, saying so") {
    bed.runtime.advance(bed.options.connect_timeout);
    REQUIRE(bed.sink.events.size() == 1);
    CHECK(bed.sink.events[0].kind == EventKind::failed);
    CHECK(bed.sink.events[0].text == "no primary named by the sentinels within " +
                                         std::to_string(bed.options.connect_timeout.count()) + " ms");
    CHECK(bed.wires.connects == 0);
    return;
  }

  bed.session->retarget({"10.0.0.1", 6379});
  REQUIRE(bed.wires.dialled == std::vector<std::string>{"10.0.0.1:6379"});
  bed.wire().connected();
  bed.serve();
  REQUIRE(bed.session->state() == NodeSession::State::ready);
  // The command that waited was written once the handshake completed.
  REQUIRE(bed.sink.events.size() == 1);
  CHECK(bed.sink.events[0].slot == 7);
  CHECK(bed.sink.events[0].kind == EventKind::reply);
  bed.sink.events.clear();
  bed.runtime.advance(bed.options.connect_timeout);  // no stray failure from the wait
  CHECK(bed.sink.events.empty());
  CHECK(bed.session->serving().display() == "10.0.0.1:6379");
  CHECK(bed.session->quarantine_left(bed.runtime.now()).count() == 0);

  SUBCASE("named again: the same primary, the connection stays") {
    bed.session->retarget({"10.0.0.1", 6379});
    CHECK(bed.wires.connects == 1);
    CHECK(bed.session->state() == NodeSession::State::ready);
  }
  SUBCASE("another primary: what was written fails, the new one is dialled at once and judged by its run id") {
    REQUIRE(bed.send(CommandId::set_nx));
    bed.wire().flush();
    bed.info = "redis_version:7.0.0\r\nrun_id:def\r\nuptime_in_seconds:100000\r\nrole:master\r\n";
    bed.session->retarget({"10.0.0.2", 6380});
    REQUIRE(bed.sink.events.size() == 1);
    CHECK(bed.sink.events[0].kind == EventKind::failed);
    CHECK(bed.sink.events[0].text == "the sentinels name another primary, 10.0.0.2:6380");
    CHECK(lost.empty());  // a switch is no loss to report: the watch already knows
    REQUIRE(bed.wires.dialled.size() == 2);
    CHECK(bed.wires.dialled[1] == "10.0.0.2:6380");
    bed.wire().connected();
    bed.serve();
    bed.expect_full_quarantine("another server answers");
  }
  SUBCASE("the primary goes away: the loss is reported (the watch asks the next sentinel)") {
    bed.wire().lose("connection reset by peer");
    REQUIRE(lost.size() == 1);
    CHECK(lost[0] == "connection reset by peer");
  }
  SUBCASE("a demoted primary fails the handshake as a replica; that is reported too") {
    bed.info = "redis_version:7.0.0\r\nrun_id:abc\r\nuptime_in_seconds:100000\r\nrole:slave\r\n";
    bed.wire().lose("connection reset by peer");
    lost.clear();
    for (const int connects = bed.wires.connects; bed.wires.connects == connects;) bed.runtime.advance(milliseconds{1});
    bed.wire().connected();
    bed.serve();
    REQUIRE(lost.size() == 1);
    CHECK(lost[0].find("is a replica (role:slave)") != std::string::npos);
  }
}
