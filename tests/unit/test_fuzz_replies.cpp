// test_fuzz_replies.cpp — hostile servers, deterministically: seeded
// generators feed every place that reads a number or a shape from a
// server reply — the handshake (INFO, the data-loss marker script, the
// vote check), every script's reply through the real sessions, rounds and
// operations (acquire in each form, fenced, fair, extend, release, batched
// extensions), the status reply's text, the pub/sub messages, a
// sentinel's answers, and the RESP scanner — with wrong types, wrong arity, nested arrays, absurd integers,
// numbers as text with junk, and masters that stop answering. What is asserted is behaviour: a reply
// that is not a yes never counts as one; no quarantine comes out shorter
// than the honest reading (nor longer than the most any client declares);
// no reported TTL, counter or fence is out of its range; every operation
// completes exactly once.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "engine.hpp"
#include "extend_batch.hpp"
#include "fake_wire.hpp"
#include "node_session.hpp"
#include "node_set.hpp"
#include "quorum.hpp"
#include "resp.hpp"
#include "scripts.hpp"
#include "sentinel_watch.hpp"
#include "sha1.hpp"
#include "survey.hpp"
#include "test_runtime.hpp"
#include "validity.hpp"
#include "wake.hpp"

using namespace redlock;
using namespace redlock::detail;
using namespace redlock::test;
using std::chrono::milliseconds;

namespace {

constexpr long long two53 = 1LL << 53;
// The most a marker may declare (src/node_session.cpp: max_ttl and drift
// at their bounds), and the longest uptime believed (a century).
constexpr long long most_declared_ms = 2147483647LL + 1073741824LL + 2;
constexpr long long most_uptime_s = 100LL * 366 * 24 * 3600;
// The longest TTL a reply may report and be believed (src/quorum.hpp).
constexpr long long most_pttl_ms = most_server_ttl.count();

// Gen — the seeded source of hostile values.
struct Gen {
  std::mt19937_64 rng;
  explicit Gen(std::uint64_t seed) : rng(seed) {}
  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : rng() % n; }
  bool one_in(std::uint64_t n) { return below(n) == 0; }
  template <class T>
  T pick(std::initializer_list<T> v) {
    return *(v.begin() + static_cast<std::ptrdiff_t>(below(v.size())));
  }

  // number: an integer at an edge, anywhere, or small.
  long long number() {
    static constexpr long long edges[] = {0,          1,          -1,         -2,        2,
                                          LLONG_MIN,  LLONG_MIN + 1, LLONG_MAX, LLONG_MAX - 1, two53 - 1,
                                          two53,      two53 + 1,  -two53,     9'000'000'000'000'000'000LL,
                                          -9'000'000'000'000'000'000LL, INT32_MAX, 1LL + INT32_MAX, UINT32_MAX,
                                          most_uptime_s, most_uptime_s + 1, most_declared_ms, most_declared_ms + 1};
    switch (below(3)) {
      case 0: return edges[below(std::size(edges))];
      case 1: return static_cast<long long>(rng());
      default: return static_cast<long long>(below(200000)) - 100;
    }
  }
  // number_text: an integer as a server may spell it, junk included.
  std::string number_text() {
    switch (below(16)) {
      case 0: return std::to_string(number());
      case 1: return "";
      case 2: return " " + std::to_string(below(100));
      case 3: return std::to_string(below(100)) + " ";
      case 4: return "+" + std::to_string(below(100));
      case 5: return std::to_string(below(1000)) + "abc";
      case 6: return "1e9";
      case 7: return std::string(20 + below(400), static_cast<char>('1' + below(9)));
      case 8: return "0x1f";
      case 9: return "1.5";
      case 10: return "-0";
      case 11: return "000000000000000000000000000042";
      case 12: return "18446744073709551616";
      case 13: return "9223372036854775808";
      case 14: return std::to_string(below(1000)) + "\r\n";
      default: return std::to_string(below(1'000'000));
    }
  }
  // text: a string of any size and bytes.
  std::string text() {
    switch (below(8)) {
      case 0: return "";
      case 1: return std::string(one_in(8) ? (1u << 20) : 70000u, 'x');
      case 2:
      case 3: return number_text();
      case 4: {
        std::string s(below(64), '\0');
        for (char& c : s) c = static_cast<char>(below(256));
        return s;
      }
      case 5: return "OK";
      case 6: return "NOSCRIPT No matching script";
      default: return "ERR junk";
    }
  }
  // shape: any reply at all, arrays nested up to 3 deep.
  Reply shape(int depth = 0) {
    switch (below(depth >= 3 ? 5 : 7)) {
      case 0: return status(text());
      case 1: return bulk(text());
      case 2: return integer(number());
      case 3: return nil();
      case 4: return error(text());
      default: {
        Reply r{WireReply::Type::array, 0, {}, {}};
        for (std::uint64_t n = below(7); n > 0; --n) r.elements.push_back(shape(depth + 1));
        return r;
      }
    }
  }
};

Reply ints(std::vector<long long> items) {
  Reply r{WireReply::Type::array, 0, {}, {}};
  for (long long v : items) r.elements.push_back(integer(v));
  return r;
}

// digits_value: the oracle's own reading of a decimal: digits only, and
// fits a long long (leading zeros allowed).
std::optional<long long> digits_value(const std::string& text) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  const std::string s = text.substr(std::min(text.find_first_not_of('0'), text.size() - 1));
  if (s.size() > 19 || (s.size() == 19 && s > "9223372036854775807")) return std::nullopt;
  return std::stoll(s);
}

// show: a reply in a few words, for a failing check's log.
std::string show(const Reply& r) {
  switch (r.type) {
    case WireReply::Type::status: return "+" + r.str.substr(0, 40);
    case WireReply::Type::string: return "\"" + r.str.substr(0, 40) + "\"(" + std::to_string(r.str.size()) + ")";
    case WireReply::Type::integer: return ":" + std::to_string(r.integer);
    case WireReply::Type::nil: return "nil";
    case WireReply::Type::error: return "-" + r.str.substr(0, 40);
    case WireReply::Type::array: {
      std::string out = "[";
      for (const Reply& e : r.elements) out += show(e) + (&e == &r.elements.back() ? "" : ", ");
      return out + "]";
    }
  }
  return "?";
}

bool is_int_array(const Reply& r, std::size_t n) {
  return r.type == WireReply::Type::array && r.elements.size() == n &&
         std::all_of(r.elements.begin(), r.elements.end(),
                     [](const Reply& e) { return e.type == WireReply::Type::integer; });
}

// ---- the handshake ----------------------------------------------------------------

struct Outcome1 {
  Outcome outcome = Outcome::pending;
  bool quarantined = false;
  EventKind kind = EventKind::failed;
};

struct ClassifySink final : ReplySink {
  CommandId command = CommandId::set_nx;
  std::vector<Outcome1> events;
  void on_node_event(std::size_t, const NodeEvent& ev) override {
    NodeOutcome out;
    classify(command, ev, out);
    events.push_back({out.outcome, ev.quarantined, ev.kind});
  }
};

// ones: SCRIPT EXISTS's answer when the server has all `n` scripts.
Reply ones(std::size_t n) {
  Reply r{WireReply::Type::array, 0, {}, {}};
  r.elements.assign(n, integer(1));
  return r;
}

struct Handshake {
  ManualRuntime runtime;
  FakeWireFactory wires;
  Options options;
  NodeAddress address;
  std::array<std::string, script_count> shas;
  std::optional<NodeSession> session;
  Deep deep;

  Handshake() {
    options.max_ttl = milliseconds{10000};
    options.node_timeout = milliseconds{50};
    address.host = "10.0.0.1";
    for (std::size_t i = 0; i < script_count; ++i) shas[i] = "sha" + std::to_string(i);
    session.emplace(runtime, wires, address, options, shas.data(), [] {});
    session->start();
  }
  FakeWire& wire() {
    REQUIRE(wires.live != nullptr);
    return *wires.live;
  }
  void answer(const Reply& r) {
    FakeWire& w = wire();
    ++w.answered;
    w.events.on_reply(deep.of(r));
  }
};

// InfoPlan — the INFO a seed sends, and what an honest reading of it is.
struct InfoPlan {
  Reply reply;
  std::optional<long long> uptime;  // believed: digits, at most a century
  bool excluded = false;
};

InfoPlan plan_info(Gen& g) {
  std::vector<std::string> lines;
  InfoPlan plan;
  if (!g.one_in(6)) {
    const std::string up = g.one_in(3) ? std::to_string(g.pick<long long>({0, 1, 2, 5, 11, 100000, most_uptime_s,
                                                                           most_uptime_s + 1}))
                                       : g.number_text();
    if (up.find_first_of("\r\n") == std::string::npos) {
      lines.push_back("uptime_in_seconds:" + up);
      if (const auto v = digits_value(up); v && *v <= most_uptime_s) plan.uptime = v;
    }
  }
  if (g.one_in(3)) lines.push_back("xuptime_in_seconds:5");  // a decoy: not the field
  lines.push_back("run_id:" + g.pick<std::string>({std::string(40, 'a'), "", "not hex!", std::string(65, 'b'),
                                                   g.number_text()}));
  lines.push_back("redis_version:" + g.pick<std::string>({"7.2.0", "6.2.14", "", "99999999999999999999.1"}));
  const std::string maxmemory = g.pick<std::string>({"0", "", "100", "-1", "00"});
  const std::string policy = g.pick<std::string>({"noeviction", "allkeys-lru", "", "x"});
  lines.push_back("maxmemory:" + maxmemory);
  lines.push_back("maxmemory_policy:" + policy);
  plan.excluded = !maxmemory.empty() && maxmemory != "0" && !policy.empty() && policy != "noeviction";
  std::shuffle(lines.begin(), lines.end(), g.rng);
  std::string text = "# Server\r\n";
  for (const std::string& l : lines) text += l + (g.one_in(4) ? "\n" : "\r\n");
  plan.reply = g.one_in(8) ? g.shape() : bulk(text);
  if (plan.reply.type == WireReply::Type::error) return plan;
  if (plan.reply.str != text) {  // another shape: whatever text it carries is read, if any
    plan.uptime.reset();
    plan.excluded = false;
  }
  return plan;
}

// MarkerPlan — the marker script's reply, and its honest reading.
struct MarkerPlan {
  Reply reply;
  bool well_formed = false;
  std::string state, epoch;
  long long declared = 0, age = 0;
};

MarkerPlan plan_marker(Gen& g) {
  MarkerPlan plan;
  if (g.one_in(4)) {
    plan.reply = g.shape();
  } else {
    plan.state = g.pick<std::string>({"found", "found", "created", "replaced", "junk", ""});
    plan.epoch = g.pick<std::string>({"e1", "e1", "", "with space", std::string(300, 'e')});
    const std::string declared = g.one_in(2) ? g.pick<std::string>({"10102", "20202", "0", "1"}) : g.number_text();
    const std::string age = g.one_in(2) ? g.pick<std::string>({"0", "5000", "100000000", "10101"}) : g.number_text();
    plan.reply = strings({plan.state, plan.epoch, declared, age});
    if (g.one_in(5)) plan.reply.elements[g.below(4)] = g.shape(1);       // one element of another shape
    if (g.one_in(8)) plan.reply.elements.resize(g.pick<std::size_t>({0, 3, 5}));  // another arity
    const Reply& r = plan.reply;
    const auto d = r.elements.size() == 4 ? digits_value(r.elements[2].str) : std::nullopt;
    const auto a = r.elements.size() == 4 ? digits_value(r.elements[3].str) : std::nullopt;
    plan.well_formed = r.elements.size() == 4 && d && a &&
                       std::all_of(r.elements.begin(), r.elements.end(),
                                   [](const Reply& e) { return e.type == WireReply::Type::string; });
    plan.declared = d.value_or(0);
    plan.age = a.value_or(0);
  }
  if (!plan.well_formed) return plan;
  plan.state = plan.reply.elements[0].str;
  plan.epoch = plan.reply.elements[1].str;
  return plan;
}

// ---- a cluster of fake masters, honest or hostile ----------------------------------

// Conn — one connection as its master sees it; kept past its Wire.
struct Conn {
  std::size_t node = 0;
  WireEvents* events = nullptr;
  bool alive = true, up = false, pubsub = false;
  bool hung = false;  // answers nothing more (a paused master)
  std::vector<Command> queued, sent;
  std::size_t answered = 0;
  std::vector<std::string> channels;  // pub/sub: subscribed
};

class ClusterWire final : public Wire {
 public:
  explicit ClusterWire(std::shared_ptr<Conn> c) : c_(std::move(c)) {}
  ~ClusterWire() override { c_->alive = false; }
  bool write(std::span<const std::string_view> argv) override {
    c_->queued.emplace_back(argv.begin(), argv.end());
    return true;
  }
  void read_now() override {}

 private:
  std::shared_ptr<Conn> c_;
};

struct Cluster final : WireFactory {
  std::vector<std::shared_ptr<Conn>> conns;
  std::unique_ptr<Wire> connect(const NodeAddress& a, WireEvents& events) override {
    auto c = std::make_shared<Conn>();
    c->node = static_cast<std::size_t>(a.port - 7000);
    c->events = &events;
    conns.push_back(c);
    return std::make_unique<ClusterWire>(c);
  }
};

// Answer — what a master answered to one script call.
struct Answer {
  std::size_t node;
  CommandId id;
  Command argv;
  Reply reply;
};

// value_of: the value (token) a call carries: SET's, or a script's first ARGV.
std::string value_of(CommandId id, const Command& argv) {
  if (id == CommandId::set_nx) return argv.size() > 2 ? argv[2] : "";
  const std::size_t keys = argv.size() > 2 ? std::stoul(argv[2]) : 0;
  return argv.size() > 3 + keys ? argv[3 + keys] : "";
}

// yes_shaped: the oracle — a reply that says yes to `id`, read by the
// scripts' contracts (src/scripts.hpp), not by the library's parsers.
bool yes_shaped(CommandId id, const Command& argv, const Reply& r) {
  switch (id) {
    case CommandId::set_nx:
      return (r.type == WireReply::Type::status && r.str == "OK") ||
             (argv.back() == "GET" && r.type == WireReply::Type::nil);
    case CommandId::acquire:
    case CommandId::multi_acquire: return r.type == WireReply::Type::status && r.str == "OK";
    case CommandId::fenced_acquire: return is_int_array(r, 2) && r.elements[0].integer == 1;
    case CommandId::fair_acquire:
      return is_int_array(r, 4) && r.elements[0].integer == 1 && r.elements[1].integer >= 0 &&
             r.elements[1].integer < two53;
    default: return r.type == WireReply::Type::integer && r.integer == 1;
  }
}

struct Hostile {
  ManualRuntime runtime;
  Cluster cluster;
  Config config;
  std::array<std::string, script_count> shas;
  std::optional<NodeSet> nodes;
  std::optional<Engine> engine;
  Gen& g;
  std::vector<bool> hostile;
  std::vector<Answer> answers;
  Deep deep;
  std::size_t n;
  // absurd_pttl: every master answers an acquire "held", with this PTTL.
  std::optional<long long> absurd_pttl;

  Hostile(Gen& gen, std::size_t count) : g(gen), n(count) {
    for (std::size_t i = 0; i < script_count; ++i) shas[i] = sha1_hex(script_bodies[i]);
    for (std::size_t i = 0; i < n; ++i) {
      NodeAddress a;
      a.host = "10.0.0.1";
      a.port = static_cast<int>(7000 + i);
      config.nodes.push_back(a);
      hostile.push_back(g.one_in(2));
    }
    Options& o = config.options;
    o.max_ttl = milliseconds{10000};
    o.node_outcomes = true;
    o.wake_safety_net = milliseconds{100};
    o.fair_grace = milliseconds{20};
    nodes.emplace(runtime, cluster, config);
    engine.emplace(runtime, *nodes, config.options);
    nodes->start();
    for (int i = 0; i < 50; ++i) step();
    for (std::size_t i = 0; i < n; ++i) REQUIRE(nodes->node(i).state() == NodeSession::State::ready);
  }

  CommandId id_of(const Command& c) const {
    if (c[0] == "SET") return CommandId::set_nx;
    if (c[0] == "PING") return CommandId::ping;
    for (std::size_t i = 0; i < script_count; ++i) {
      if (c[1] == shas[i] || c[1] == script_bodies[i]) return static_cast<CommandId>(i);
    }
    FAIL("unknown command " << c[0]);
    return CommandId::ping;
  }

  Reply honest(CommandId id, const Command& c) {
    switch (id) {
      case CommandId::set_nx: return c.back() == "GET" ? nil() : status();
      case CommandId::acquire:
      case CommandId::multi_acquire: return status();
      case CommandId::fenced_acquire: return ints({1, 5});
      case CommandId::fair_acquire: return ints({1, std::stoll(c[3 + 4 + 3]), -2, 0});
      case CommandId::extend_batch: return bulk(std::string(std::stoul(c[2]), '1'));
      case CommandId::inspect: return bulk("-2 0");
      case CommandId::ping: return status("PONG");
      default: return integer(1);
    }
  }

  // lie: a reply near the honest one, its numbers or shape absurd.
  Reply lie(CommandId id, const Command& c) {
    switch (id) {
      case CommandId::set_nx:
      case CommandId::acquire:
      case CommandId::multi_acquire:
        return g.one_in(3) ? g.pick<Reply>({status("ok"), status("OK "), bulk("OK"), ints({1})})
                           : integer(g.number());  // held, with an absurd PTTL
      case CommandId::fenced_acquire: {
        Reply r = ints({g.pick<long long>({1, 0, 2, -1}), g.number(), g.number()});
        r.elements.resize(g.pick<std::size_t>({1, 2, 2, 3, 3, 4}), integer(g.number()));
        return r;
      }
      case CommandId::fair_acquire: {
        Reply r = ints({g.pick<long long>({1, 0, 0, -1}), g.number(), g.pick<long long>({-2, -1, g.number()}),
                        g.number()});
        if (g.one_in(4)) r.elements.resize(g.pick<std::size_t>({3, 5}), integer(g.number()));
        return r;
      }
      case CommandId::extend_batch: {
        std::string flags(std::stoul(c[2]), '1');
        switch (g.below(4)) {
          case 0: flags.push_back('1'); break;
          case 1: flags.pop_back(); break;
          case 2: flags[g.below(flags.size())] = static_cast<char>(g.pick<char>({'2', 'x', ' ', '\0'})); break;
          default: return integer(1);
        }
        return bulk(flags);
      }
      default: return g.one_in(2) ? integer(g.number()) : g.pick<Reply>({bulk("1"), status("1"), ints({1})});
    }
  }

  // master: what node `c.node` answers to one command.
  std::vector<Reply> master(Conn& c, const Command& cmd) {
    if (cmd[0] == "SUBSCRIBE" || cmd[0] == "UNSUBSCRIBE") {
      c.pubsub = true;
      std::vector<Reply> out;
      for (std::size_t i = 1; i < cmd.size(); ++i) {
        if (cmd[0] == "SUBSCRIBE") c.channels.push_back(cmd[i]);
        else std::erase(c.channels, cmd[i]);
        Reply r = strings({cmd[0] == "SUBSCRIBE" ? "subscribe" : "unsubscribe", cmd[i]});
        r.elements.push_back(integer(static_cast<long long>(c.channels.size())));
        out.push_back(r);
      }
      return out;
    }
    if (cmd[0] == "AUTH" || cmd[0] == "SELECT") return {status()};
    if (cmd[0] == "SCRIPT" && cmd[1] == "EXISTS") return {ones(cmd.size() - 2)};  // a warm cache
    if (cmd[0] == "SCRIPT") return {bulk(sha1_hex(cmd[2]))};
    if (cmd[0] == "INFO") {
      return {bulk("redis_version:7.2.0\r\nrun_id:" + std::string(39, 'a') + static_cast<char>('0' + c.node) +
                   "\r\nuptime_in_seconds:1000000\r\n")};
    }
    const std::string epoch = "epoch" + std::to_string(c.node);
    if (cmd[0] == "GET") return {bulk(epoch + " 10102 0")};
    const CommandId id = id_of(cmd);
    if (id == CommandId::marker) return {strings({"found", epoch, cmd[7], "100000000"})};
    Reply r = honest(id, cmd);
    if (absurd_pttl && is_acquire(id)) {
      r = id == CommandId::fair_acquire ? ints({0, 1, *absurd_pttl, 0}) : integer(*absurd_pttl);
      answers.push_back({c.node, id, cmd, r});
      return {r};
    }
    if (hostile[c.node] && g.one_in(40)) {
      c.hung = true;
      return {};
    }
    if (hostile[c.node]) {
      const std::uint64_t roll = g.below(10);
      if (roll < 4) r = g.shape();
      else if (roll < 8) r = lie(id, cmd);
    }
    answers.push_back({c.node, id, cmd, r});
    return {r};
  }

  // whisper: a hostile master's unsolicited push on its pub/sub connection.
  Reply whisper(const Conn& c) {
    const std::string channel = c.channels.empty() ? "x" : c.channels[g.below(c.channels.size())];
    switch (g.below(4)) {
      case 0: return g.shape();
      case 1: return strings({"message", channel, g.text()});
      case 2: return strings({"message", channel, "turn " + g.number_text() + " " + g.text()});
      default: {
        Reply r = strings({g.pick<std::string>({"subscribe", "unsubscribe", "message", "pmessage"}), channel});
        r.elements.push_back(g.shape(1));
        return r;
      }
    }
  }

  // step: one loop turn of every connection (connect, flush, answer),
  // then 1 ms.
  void step() {
    for (std::size_t i = 0; i < cluster.conns.size(); ++i) {
      const std::shared_ptr<Conn> c = cluster.conns[i];
      if (!c->alive) continue;
      if (!c->up) {
        c->up = true;
        c->events->on_connected();
        if (!c->alive) continue;
      }
      c->events->on_flush();
      if (!c->alive) continue;
      c->sent.insert(c->sent.end(), c->queued.begin(), c->queued.end());
      c->queued.clear();
      while (c->alive && !c->hung && c->answered < c->sent.size()) {
        const Command cmd = c->sent[c->answered++];
        for (const Reply& r : master(*c, cmd)) {
          if (c->alive) c->events->on_reply(deep.of(r));
        }
      }
      if (c->alive && c->pubsub && hostile[c->node] && g.one_in(20)) c->events->on_reply(deep.of(whisper(*c)));
    }
    deep.stores.clear();
    cluster.conns.erase(std::remove_if(cluster.conns.begin(), cluster.conns.end(),
                                       [](const std::shared_ptr<Conn>& c) { return !c->alive; }),
                        cluster.conns.end());
    runtime.advance(milliseconds{1});
  }

  // run steps until `done`, at most `ms` simulated milliseconds.
  template <class Done>
  void run(Done done, int ms) {
    for (int i = 0; i < ms && !done(); ++i) step();
  }

  // yes_nodes: the nodes whose answer to a call of `ids` carrying `value`
  // said yes (by the oracle).
  std::size_t yes_nodes(std::initializer_list<CommandId> ids, const std::string& value,
                        const std::string& arg = {}) const {
    std::vector<bool> yes(n, false);
    for (const Answer& a : answers) {
      if (std::find(ids.begin(), ids.end(), a.id) == ids.end() || value_of(a.id, a.argv) != value) continue;
      if (!arg.empty() && a.argv.back() != arg) continue;
      if (yes_shaped(a.id, a.argv, a.reply)) yes[a.node] = true;
    }
    return static_cast<std::size_t>(std::count(yes.begin(), yes.end(), true));
  }

  // close: the engine and the sessions go, every detached round with them.
  ~Hostile() {
    bool idle = false, closed = false;
    engine->shutdown([&] { idle = true; });
    run([&] { return idle; }, 5000);
    nodes->close([&] { closed = true; });
    run([&] { return closed; }, 5000);
    CHECK(idle);
    CHECK(closed);
    engine.reset();
    nodes.reset();
  }
};

// check_nodes: every per-node report is in range.
void check_nodes(const std::vector<NodeOutcome>& nodes) {
  for (const NodeOutcome& o : nodes) {
    CHECK(o.holder_ttl.count() >= -1);
    CHECK(o.holder_ttl.count() <= most_pttl_ms);
    CHECK(o.rtt.count() >= 0);
  }
}

// FuzzLease — a watchdog's side of a batched extension.
struct FuzzLease final : Extendee {
  std::string resource, token;
  TimePoint deadline;
  std::vector<Result<Extension>> verdicts;
  FuzzLease(std::string r, std::string t, TimePoint d) : resource(std::move(r)), token(std::move(t)), deadline(d) {}
  std::string_view extend_resource() const override { return resource; }
  std::string_view extend_token() const override { return token; }
  milliseconds extend_ttl() const override { return milliseconds{1000}; }
  TimePoint extend_deadline() const override { return deadline; }
};

// FuzzSink — the batcher's verdicts, back to each FuzzLease.
struct FuzzSink final : ExtendSink {
  void on_batch_extended(Extendee& lease, TimePoint, Result<Extension> r) override {
    static_cast<FuzzLease&>(lease).verdicts.push_back(std::move(r));
  }
};

constexpr std::uint64_t seeds = 400;

}  // namespace

TEST_CASE("fuzz: the handshake reads INFO, the marker and the vote check; no hostile number shortens a quarantine") {
  const milliseconds honest = quarantine_period(milliseconds{10000}, 0.01);  // 10102 ms
  for (std::uint64_t seed = 1; seed <= 4 * seeds; ++seed) {
    CAPTURE(seed);
    Gen g(seed);
    Handshake h;
    h.wire().connected();
    h.wire().flush();
    REQUIRE(h.wire().next()[0] == "INFO");
    const InfoPlan info = plan_info(g);
    INFO("INFO: " << show(info.reply));
    h.answer(info.reply);
    if (info.reply.type == WireReply::Type::error) {
      CHECK(h.session->state() != NodeSession::State::ready);
      CHECK(h.session->last_error().find("INFO") != std::string::npos);
      continue;
    }
    REQUIRE(h.wire().next()[1] == "EXISTS");
    h.answer(ones(script_count));  // every script cached: nothing to load
    h.wire().flush();
    REQUIRE(h.wire().next()[0] == "EVALSHA");
    REQUIRE(h.wire().next()[1] == h.shas[static_cast<std::size_t>(CommandId::marker)]);
    const MarkerPlan marker = plan_marker(g);
    INFO("marker: " << show(marker.reply));
    h.answer(marker.reply);
    if (!marker.well_formed) {
      CHECK(h.session->state() != NodeSession::State::ready);
      CHECK(h.session->last_error().find("marker") != std::string::npos);
      continue;
    }
    REQUIRE(h.session->state() == NodeSession::State::ready);
    const auto now = h.runtime.now();

    // The honest reading: the uptime (unknown: just restarted), the
    // marker's state and age, each with this client's own period.
    const milliseconds known_up{std::max(info.uptime.value_or(0) - 1, 0LL) * 1000};
    const milliseconds by_uptime = info.uptime ? std::max(honest - known_up, milliseconds{0}) : honest;
    const bool lost = marker.state == "created" || marker.state == "replaced";
    const milliseconds by_marker =
        lost ? honest : (marker.age < honest.count() ? honest - milliseconds{marker.age} : milliseconds{0});
    const milliseconds most = std::max(honest, milliseconds{std::min(marker.declared, most_declared_ms)});
    const milliseconds left = h.session->quarantine_left(now);
    CHECK(left >= std::max(by_uptime, by_marker));
    CHECK(left <= most);
    CHECK(h.session->uptime(now).count() == info.uptime.value_or(-1));
    CHECK(h.session->excluded().empty() == !info.excluded);
    const std::string& run_id = h.session->run_id();
    CHECK(run_id.size() <= 64);
    CHECK(run_id.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos);

    // An acquire and its vote check: a yes counts only with the marker intact.
    ClassifySink sink;
    Call call{.command = CommandId::set_nx, .key = "k", .arg1 = "v", .arg2 = "1000"};
    std::string why;
    REQUIRE(h.session->send(call, &sink, 0, why));
    h.wire().flush();
    REQUIRE(h.wire().next()[0] == "SET");
    const bool set_get = h.wire().next().back() == "GET";
    const Reply set = g.one_in(2) ? (set_get ? nil() : status()) : g.shape();
    const std::string& epoch = marker.epoch;
    const Reply vote = g.one_in(3) ? g.shape()
                                   : g.pick<Reply>({bulk(epoch + " 10102 0"), bulk(epoch), nil(), bulk(""),
                                                    bulk("x" + epoch), bulk(epoch + "x 1"), strings({epoch}),
                                                    error(epoch), status(epoch)});
    h.answer(set);
    REQUIRE(h.wire().next() == Command{"GET", "redlock-marker"});
    h.answer(vote);
    REQUIRE(sink.events.size() == 1);
    const bool intact = vote.type == WireReply::Type::string && !epoch.empty() &&
                        vote.str.substr(0, vote.str.find(' ')) == epoch;
    const bool yes = (set.type == WireReply::Type::status && set.str == "OK") ||
                     (set_get && set.type == WireReply::Type::nil);
    if (sink.events[0].outcome == Outcome::ok) {
      CHECK(intact);
      CHECK(yes);
      CHECK(left.count() == 0);
    }
    if (!intact || left.count() > 0) CHECK(sink.events[0].outcome != Outcome::ok);
  }
}

TEST_CASE("fuzz: script replies through sessions, rounds and operations; a lie never makes a yes") {
  for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
    CAPTURE(seed);
    Gen g(seed * 7919);
    const std::size_t n = g.one_in(2) ? 3 : 5;
    Hostile bed(g, n);
    const std::size_t quorum = n / 2 + 1;
    Engine& engine = *bed.engine;
    const int scenario = static_cast<int>(g.below(9));
    CAPTURE(scenario);
    int calls = 0;
    const auto start = bed.runtime.now();
    switch (scenario) {
      case 0:
      case 1:
      case 2:
      case 3: {  // acquire: plain, a caller's value, several resources, fenced
        AcquireOptions opts;
        opts.ttl = milliseconds{1000};
        opts.wait = g.one_in(2) ? milliseconds{0} : milliseconds{300};
        if (scenario == 1) opts.token = "caller-value";
        opts.fence = scenario == 3;
        std::optional<Result<Lock>> got;
        auto done = [&](Result<Lock> r) {
          ++calls;
          got.emplace(std::move(r));
        };
        if (scenario == 2) engine.acquire_many({"a", "b"}, opts, done);
        else engine.acquire("r", opts, done);
        bed.run([&] { return calls > 0; }, 3000);
        REQUIRE(calls == 1);
        CHECK(bed.runtime.now() - start <= opts.wait + milliseconds{500});
        if (!got->ok()) {
          check_nodes(got->error().nodes);
          break;
        }
        const Lock& lock = got->value();
        check_nodes(lock.nodes);
        CHECK(bed.yes_nodes({CommandId::set_nx, CommandId::acquire, CommandId::multi_acquire,
                             CommandId::fenced_acquire},
                            lock.token) >= quorum);
        CHECK(lock.validity <= lock.ttl);
        CHECK(lock.validity > milliseconds{0});
        if (scenario == 3) {
          CHECK(lock.fence >= 1);
          CHECK(lock.fence <= static_cast<std::uint64_t>(two53));
          CHECK(bed.yes_nodes({CommandId::fence_raise}, lock.token, std::to_string(lock.fence)) >= quorum);
          // F is above every counter the first phase read.
          for (const Answer& a : bed.answers) {
            if (a.id != CommandId::fenced_acquire || value_of(a.id, a.argv) != lock.token) continue;
            if (a.reply.type != WireReply::Type::array || a.reply.elements.size() < 2 ||
                a.reply.elements.size() > 4 || !is_int_array(a.reply, a.reply.elements.size())) {
              continue;
            }
            CHECK(static_cast<long long>(lock.fence) > a.reply.elements[1].integer);
          }
        } else {
          CHECK(lock.fence == 0);
        }
        break;
      }
      case 4: {  // fair
        AcquireOptions opts;
        opts.ttl = milliseconds{1000};
        opts.wait = g.one_in(2) ? milliseconds{0} : milliseconds{300};
        opts.fair = true;
        std::optional<Result<Lock>> got;
        engine.acquire("r", opts, [&](Result<Lock> r) {
          ++calls;
          got.emplace(std::move(r));
        });
        bed.run([&] { return calls > 0; }, 3000);
        REQUIRE(calls == 1);
        CHECK(bed.runtime.now() - start <= opts.wait + milliseconds{500});
        // Every ticket the waiter sends is one a master may hold exactly.
        for (const Answer& a : bed.answers) {
          if (a.id != CommandId::fair_acquire) continue;
          const long long ticket = std::stoll(a.argv[3 + 4 + 3]);
          CHECK(ticket >= 0);
          CHECK(ticket < two53);
        }
        if (!got->ok()) {
          check_nodes(got->error().nodes);
          break;
        }
        check_nodes(got->value().nodes);
        CHECK(bed.yes_nodes({CommandId::fair_acquire}, got->value().token) >= quorum);
        break;
      }
      case 5: {  // extend
        Lock lock;
        lock.resource = "r";
        lock.token = "held-value";
        lock.ttl = milliseconds{1000};
        lock.validity_deadline = bed.runtime.now() + milliseconds{900};
        std::optional<Result<Lock>> got;
        engine.extend(lock, milliseconds{1000}, [&](Result<Lock> r) {
          ++calls;
          got.emplace(std::move(r));
        });
        bed.run([&] { return calls > 0; }, 3000);
        REQUIRE(calls == 1);
        if (!got->ok()) {
          check_nodes(got->error().nodes);
          break;
        }
        CHECK(bed.yes_nodes({CommandId::extend}, lock.token) >= quorum);
        CHECK(got->value().validity <= milliseconds{1000});
        CHECK(got->value().validity_deadline <= bed.runtime.now() + milliseconds{1000});
        break;
      }
      case 6: {  // release
        std::optional<Result<ReleaseResult>> got;
        engine.release("r", "held-value", [&](Result<ReleaseResult> r) {
          ++calls;
          got.emplace(std::move(r));
        });
        bed.run([&] { return calls > 0; }, 3000);
        REQUIRE(calls == 1);
        if (!got->ok()) break;
        CHECK(got->value().released_nodes >= 0);
        CHECK(got->value().released_nodes <= static_cast<int>(n));
        // A master counted as released answered the release with 0 or 1.
        for (std::size_t i = 0; i < n; ++i) {
          if (got->value().nodes[i].outcome != Outcome::ok) continue;
          bool answered = false;
          for (const Answer& a : bed.answers) {
            answered = answered || (a.node == i && a.id == CommandId::release &&
                                    a.reply.type == WireReply::Type::integer &&
                                    (a.reply.integer == 0 || a.reply.integer == 1));
          }
          CHECK(answered);
        }
        break;
      }
      case 8: {  // waiters: every master says held, with an absurd PTTL
        bed.absurd_pttl = g.pick<long long>({LLONG_MAX, LLONG_MAX - 1, 9'000'000'000'000'000'000LL, two53,
                                             most_pttl_ms + 1});
        AcquireOptions opts;
        opts.ttl = milliseconds{1000};
        opts.wait = milliseconds{300};
        opts.fair = g.one_in(2);
        if (!opts.fair) opts.token = "caller-value";  // the acquire script, whose "held" is the PTTL
        std::fill(bed.hostile.begin(), bed.hostile.end(), false);
        std::optional<Result<Lock>> got;
        engine.acquire("r", opts, [&](Result<Lock> r) {
          ++calls;
          got.emplace(std::move(r));
        });
        bed.run([&] { return calls > 0; }, 3000);
        REQUIRE(calls == 1);
        REQUIRE_FALSE(got->ok());
        INFO(got->error().message);
        CHECK(got->error().code == Errc::held);
        check_nodes(got->error().nodes);
        // The wait is the safety net's (100 ms), not a PTTL's overflow: a
        // few attempts, not one per millisecond.
        CHECK(got->error().attempts <= 10);
        CHECK(bed.runtime.now() - start <= opts.wait + milliseconds{100});
        break;
      }
      default: {  // batched extensions: three leases in one round
        const TimePoint deadline = bed.runtime.now() + milliseconds{900};
        std::vector<std::unique_ptr<FuzzLease>> leases;
        FuzzSink sink;
        ExtendBatcher batcher(engine, engine.options().extend_batch_window, engine.options().extend_batch_max, sink);
        for (int i = 0; i < 3; ++i) {
          leases.push_back(std::make_unique<FuzzLease>("r" + std::to_string(i), "v" + std::to_string(i), deadline));
          batcher.submit(leases.back().get(), bed.runtime.now());
        }
        auto all_told = [&] {
          return std::all_of(leases.begin(), leases.end(), [](const auto& l) { return !l->verdicts.empty(); });
        };
        bed.run(all_told, 3000);
        for (const auto& l : leases) {
          CAPTURE(l->token);
          REQUIRE(l->verdicts.size() == 1);
          if (!l->verdicts[0].ok()) {
            check_nodes(l->verdicts[0].error().nodes);
            continue;
          }
          // Yes from a master: one flag per key, '1' at this lease's key.
          std::size_t yes = 0;
          std::vector<bool> counted(n, false);
          for (const Answer& a : bed.answers) {
            if (a.id != CommandId::extend_batch || counted[a.node]) continue;
            const std::size_t keys = std::stoul(a.argv[2]);
            const auto at = std::find(a.argv.begin() + 3 + static_cast<std::ptrdiff_t>(keys), a.argv.end(), l->token);
            const std::size_t key = static_cast<std::size_t>(at - a.argv.begin() - 3 - static_cast<long>(keys)) / 2;
            const Reply& r = a.reply;
            if (r.type == WireReply::Type::string && r.str.size() == keys &&
                r.str.find_first_not_of("01") == std::string::npos && r.str[key] == '1') {
              counted[a.node] = true;
              ++yes;
            }
          }
          CHECK(yes >= quorum);
          CHECK(l->verdicts[0].value().validity <= milliseconds{1000});
        }
        break;
      }
    }
  }
}

TEST_CASE("fuzz: the status reply's text; every field in range, or the master is unreachable") {
  Gen g(4242);
  for (int round = 0; round < 10000; ++round) {
    CAPTURE(round);
    std::string text;
    if (g.one_in(3)) text += "lapsed " + g.number_text() + " ";
    if (g.one_in(2)) text += "queue " + g.number_text() + " " + g.pick<std::string>({"w1", "", "?"}) + " ";
    switch (g.below(4)) {
      case 0: text += g.text(); break;
      case 1: text += "wrongtype " + g.pick<std::string>({"list", "", "unknown"}) + " " + g.text(); break;
      case 2: text += g.number_text() + " " + g.number_text(); break;
      default: text += g.number_text() + " " + g.number_text() + " " + g.text(); break;
    }
    NodeHolding h;
    const bool read = parse_inspect(text, h);
    if (!read) {
      CHECK(h.state == NodeHolding::State::unreachable);
      CHECK(h.queued == 0);
      CHECK(h.lapsed == 0);
      continue;
    }
    if (h.state == NodeHolding::State::held) {
      CHECK(h.ttl.count() >= -1);
      CHECK(h.ttl.count() <= most_pttl_ms);
    }
    CHECK(h.fence <= static_cast<std::uint64_t>(LLONG_MAX));
    CHECK(h.queued <= static_cast<std::size_t>(LLONG_MAX));
    CHECK(h.lapsed <= static_cast<std::size_t>(LLONG_MAX));
  }
  // summarize over masters reporting such values: the verdict is in range too.
  for (int round = 0; round < 2000; ++round) {
    ResourceStatus st;
    st.nodes.resize(g.pick<std::size_t>({1, 3, 5}));
    for (NodeHolding& h : st.nodes) {
      const std::string text = g.pick<std::string>({"", "queue 3 w1 "}) + std::to_string(g.number()) + " " +
                               std::to_string(g.below(10)) + " " + g.pick<std::string>({"tok", "other"});
      parse_inspect(text, h);
      h.quarantined = g.one_in(5);
    }
    summarize(st);
    CHECK(st.ttl.count() >= -1);
    CHECK(st.ttl.count() <= most_pttl_ms);
    CHECK(st.agreeing <= st.nodes.size());
  }
}

TEST_CASE("fuzz: pub/sub pushes wake only on a well-formed message; anything else ends the connection") {
  Gen g(77);
  for (int round = 0; round < 300; ++round) {
    CAPTURE(round);
    ManualRuntime runtime;
    FakeWireFactory wires;
    Options options;
    std::vector<NodeAddress> nodes(1);
    nodes[0].host = "10.0.0.1";
    WakeHub hub(runtime, wires, nodes, options);
    struct Counter final : WakeListener {
      int released = 0;
      void on_wake(Why why, std::string_view) override { released += why == Why::released ? 1 : 0; }
    } listener;
    REQUIRE(hub.watch("ch", &listener) == WatchState::pending);
    FakeWire* w = wires.live;
    w->connected();
    w->flush();
    Deep deep;
    auto push = [&](const Reply& r) { w->events.on_reply(deep.of(r)); };
    for (const char* channel : {"redlock:wake-anchor", "ch"}) {
      Reply confirm = strings({"subscribe", channel});
      confirm.elements.push_back(integer(1));
      push(confirm);
    }
    REQUIRE(wires.live == w);
    int expected = 0;
    for (int i = 0; i < 20 && wires.live == w; ++i) {
      Reply r = g.one_in(3) ? g.shape()
                            : strings({g.pick<std::string>({"message", "message", "subscribe", "unsubscribe", "pong"}),
                                       g.pick<std::string>({"ch", "other", ""}), g.text()});
      if (g.one_in(6)) r.elements.resize(g.pick<std::size_t>({0, 2, 4}), nil());
      const bool pushed = r.type == WireReply::Type::array && r.elements.size() == 3 &&
                          r.elements[0].type == WireReply::Type::string;
      const std::string kind = pushed ? r.elements[0].str : "";
      const bool message = kind == "message" && r.elements[1].str == "ch";
      const bool legal = kind == "message" || kind == "subscribe" || kind == "unsubscribe";
      expected += message ? 1 : 0;
      push(r);
      CHECK(listener.released == expected);
      if (!legal) CHECK(wires.live == nullptr);  // dropped: it reconnects after its backoff
    }
    hub.unwatch("ch", &listener);
    bool closed = false;
    hub.close([&] { closed = true; });
    runtime.advance(milliseconds{10});
    CHECK(closed);
  }
}

TEST_CASE("fuzz: a sentinel's answers name only a host:port in range, and anything else moves on to the next sentinel") {
  Gen g(34);
  const auto valid = [](const Endpoint& e) {
    if (e.host.empty() || e.host.size() > 255 || e.port < 1 || e.port > 65535) return false;
    return std::none_of(e.host.begin(), e.host.end(), [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; });
  };
  std::size_t named_total = 0;  // the well-formed answers among them did name a primary
  for (int round = 0; round < 300; ++round) {
    CAPTURE(round);
    ManualRuntime runtime;
    FakeWireFactory wires;
    Options options;
    NodeAddress member;
    member.kind = NodeAddress::Kind::sentinel;
    member.seeds = {{"10.0.0.1", 26379}, {"10.0.0.2", 26379}};
    member.master_name = "m1";
    std::vector<Endpoint> named;
    bool closed = false;
    SentinelWatch watch(runtime, wires, member, options, [&](const Endpoint& e) { named.push_back(e); },
                        [&] { closed = true; });
    watch.start();
    Deep deep;
    for (int step = 0; step < 30; ++step) {
      CAPTURE(step);
      // The next sentinel, after the back-off.
      for (int ms = 0; wires.live == nullptr && ms < 10000; ++ms) runtime.advance(milliseconds{1});
      FakeWire* w = wires.live;
      REQUIRE(w != nullptr);
      if (w->answered == 0 && w->sent.empty()) {
        w->connected();
        w->flush();
      }
      const std::string port = g.pick<std::string>({"6379", "0", "65536", g.number_text(), ""});
      Reply r = g.one_in(3)   ? g.shape()
                : g.one_in(2) ? strings({g.pick<std::string>({"127.0.0.1", "", "h o", g.text()}), port})
                              : strings({g.pick<std::string>({"message", "subscribe", "pong"}), "+switch-master",
                                         g.pick<std::string>({"m1 a 1 127.0.0.1 " + port, "m2 a 1 b 2", g.text()})});
      const std::size_t before = named.size();
      w->events.on_reply(deep.of(r));
      for (std::size_t i = before; i < named.size(); ++i) CHECK(valid(named[i]));
      CHECK(named.size() <= before + 1);
    }
    named_total += named.size();
    watch.close();
    runtime.advance(milliseconds{10});
    CHECK(closed);
  }
  CHECK(named_total > 100);
}

TEST_CASE("fuzz: the RESP scanner reads any byte stream the same whatever its split into reads") {
  Gen g(99);
  for (int round = 0; round < 3000; ++round) {
    CAPTURE(round);
    std::string bytes;
    for (std::uint64_t parts = 1 + g.below(6); parts > 0; --parts) {
      switch (g.below(8)) {
        case 0: bytes += "+" + g.text() + "\r\n"; break;
        case 1: bytes += ":" + g.number_text() + "\r\n"; break;
        case 2: {
          const std::string s = g.text();
          bytes += "$" + (g.one_in(4) ? g.number_text() : std::to_string(s.size())) + "\r\n" + s + "\r\n";
          break;
        }
        case 3: bytes += "*" + g.number_text() + "\r\n"; break;
        case 4: bytes += "$-1\r\n"; break;
        case 5: bytes += "*" + std::to_string(g.below(5)) + "\r\n"; break;
        case 6: bytes += g.text(); break;
        default: bytes += "-ERR " + g.text() + "\r\n"; break;
      }
    }
    resp::ReplyScanner whole(resp::reply_limits), pieces(resp::reply_limits);
    std::string why_whole, why_pieces;
    const bool ok_whole = whole.scan(bytes, why_whole);
    bool ok_pieces = true;
    for (std::size_t at = 0; at < bytes.size() && ok_pieces;) {
      const std::size_t len = std::min<std::size_t>(bytes.size() - at, 1 + g.below(g.one_in(2) ? 9 : 4096));
      ok_pieces = pieces.scan(std::string_view(bytes).substr(at, len), why_pieces);
      at += len;
    }
    CHECK(ok_whole == ok_pieces);
    CHECK(why_whole == why_pieces);
    if (ok_whole) CHECK(whole.ready() == pieces.ready());
  }
}
