// test_extend_batch.cpp — the lease extensions' batcher (src/extend_batch):
// what it sends, when, and how one answer becomes each lease's own.
#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "extend_batch.hpp"
#include "test_runtime.hpp"

using namespace redlock::detail;
using redlock::test::ManualRuntime;
using std::chrono::milliseconds;

namespace {

// Inner — the transport behind the batcher: records every send; the test
// answers by hand.
struct Inner final : Transport {
  struct Sent {
    std::size_t node;
    const Call* call;
    ReplySink* sink;
    std::size_t slot;
  };
  std::vector<std::string> addresses{"a:1", "b:1", "c:1"};
  std::vector<Sent> sent;
  bool refuse = false;

  std::size_t size() const override { return addresses.size(); }
  const std::string& address(std::size_t node) const override { return addresses[node]; }
  bool send(std::size_t node, const Call& call, ReplySink* sink, std::size_t slot, std::string& why) override {
    if (refuse) {
      why = "not connected";
      return false;
    }
    sent.push_back({node, &call, sink, slot});
    return true;
  }
};

// Sink — one lease's round on one node: every event it was given.
struct Sink final : ReplySink {
  struct Got {
    std::size_t slot;
    EventKind kind;
    ReplyView::Type type;
    long long integer;
    std::string text;
    bool quarantined;
    std::uint64_t server;
  };
  std::vector<Got> got;
  void on_node_event(std::size_t slot, const NodeEvent& e) override {
    got.push_back({slot, e.kind, e.reply.type, e.reply.integer,
                   std::string(e.kind == EventKind::failed ? e.text : e.reply.str), e.quarantined, e.server});
  }
};

Call extend_call(const std::string& resource, const std::string& value, const std::string& ttl = "30000") {
  return Call{CommandId::extend, "redlock:{" + resource + "}", value, ttl, {}, {}};
}

NodeEvent reply_string(std::string_view flags) {
  NodeEvent e;
  e.kind = EventKind::reply;
  e.reply.type = ReplyView::Type::string;
  e.reply.str = flags;
  return e;
}

struct Bed {
  ManualRuntime runtime;
  Inner inner;
  std::vector<Call> calls;
  std::vector<Sink> sinks;
  std::unique_ptr<ExtendBatcher> batcher;

  Bed(std::size_t leases, milliseconds window, std::size_t max) : calls(), sinks(leases) {
    for (std::size_t i = 0; i < leases; ++i) calls.push_back(extend_call("r" + std::to_string(i), "v" + std::to_string(i)));
    batcher = std::make_unique<ExtendBatcher>(runtime, inner, window, max);
  }
  // send_all: every lease's round sends to every node, as QuorumRound does.
  void send_all() {
    std::string why;
    for (std::size_t i = 0; i < calls.size(); ++i) {
      for (std::size_t node = 0; node < inner.size(); ++node) {
        REQUIRE(batcher->send(node, calls[i], &sinks[i], node, why));
      }
    }
  }
};

}  // namespace

TEST_CASE("extensions due within the window go to each node as one extend_batch call, values and TTLs in order") {
  Bed bed(3, milliseconds{10}, 512);
  bed.calls[2].arg2 = "5000";  // each lease keeps its own ttl
  bed.send_all();
  CHECK(bed.inner.sent.empty());  // nothing before the window has passed
  CHECK(bed.batcher->queued() == 9);
  bed.runtime.advance(milliseconds{9});
  CHECK(bed.inner.sent.empty());
  bed.runtime.advance(milliseconds{1});
  REQUIRE(bed.inner.sent.size() == 3);  // one per node
  for (std::size_t node = 0; node < 3; ++node) {
    const Call& c = *bed.inner.sent[node].call;
    CHECK(bed.inner.sent[node].node == node);
    CHECK(c.command == CommandId::extend_batch);
    CHECK(c.key == "redlock:{r0}");
    CHECK(c.arg1 == "v0");
    CHECK(c.arg2 == "30000");
    CHECK(c.more_keys == std::vector<std::string>{"redlock:{r1}", "redlock:{r2}"});
    CHECK(c.more_args == std::vector<std::string>{"v1", "30000", "v2", "5000"});
  }
  // The nodes' queues held the same calls: one Call serves them all.
  CHECK(bed.inner.sent[0].call == bed.inner.sent[1].call);
  CHECK(bed.inner.sent[1].call == bed.inner.sent[2].call);
  CHECK(bed.batcher->queued() == 0);
  for (auto& s : bed.inner.sent) s.sink->on_node_event(0, reply_string("111"));
}

TEST_CASE("one answer becomes each lease's own: flag i is lease i's 1 or 0, with the node's server, rtt and quarantine") {
  Bed bed(3, milliseconds{0}, 512);
  bed.send_all();
  bed.runtime.advance(milliseconds{0});
  REQUIRE(bed.inner.sent.size() == 3);
  NodeEvent e = reply_string("101");
  e.server = 77;
  e.quarantined = true;
  e.text = "quarantined until T";
  bed.inner.sent[1].sink->on_node_event(0, e);
  for (std::size_t i = 0; i < 3; ++i) {
    REQUIRE(bed.sinks[i].got.size() == 1);
    const Sink::Got& g = bed.sinks[i].got[0];
    CHECK(g.slot == 1);  // the slot the lease's round sent to node 1 with
    CHECK(g.kind == EventKind::reply);
    CHECK(g.type == ReplyView::Type::integer);
    CHECK(g.integer == (i == 1 ? 0 : 1));
    CHECK(g.server == 77);
    CHECK(g.quarantined);
  }
  bed.inner.sent[0].sink->on_node_event(0, reply_string("111"));
  bed.inner.sent[2].sink->on_node_event(0, reply_string("000"));
  for (std::size_t i = 0; i < 3; ++i) CHECK(bed.sinks[i].got.size() == 3);
}

TEST_CASE("a timeout, then the late answer, reach every lease of the batch; so do a failure and an error reply") {
  Bed bed(2, milliseconds{0}, 512);
  bed.send_all();
  bed.runtime.advance(milliseconds{0});
  REQUIRE(bed.inner.sent.size() == 3);
  NodeEvent timeout;
  timeout.kind = EventKind::timeout;
  bed.inner.sent[0].sink->on_node_event(0, timeout);
  bed.inner.sent[0].sink->on_node_event(0, reply_string("11"));
  NodeEvent failed;
  failed.kind = EventKind::failed;
  failed.text = "connection lost";
  bed.inner.sent[1].sink->on_node_event(0, failed);
  NodeEvent error;
  error.kind = EventKind::reply;
  error.reply.type = ReplyView::Type::error;
  error.reply.str = "NOPERM this user has no permissions to run the 'evalsha' command";
  bed.inner.sent[2].sink->on_node_event(0, error);
  for (Sink& s : bed.sinks) {
    REQUIRE(s.got.size() == 4);
    CHECK(s.got[0].kind == EventKind::timeout);
    CHECK(s.got[1].kind == EventKind::reply);
    CHECK(s.got[1].integer == 1);
    CHECK(s.got[2].kind == EventKind::failed);
    CHECK(s.got[2].text == "connection lost");
    CHECK(s.got[3].type == ReplyView::Type::error);
    CHECK(s.got[3].text.starts_with("NOPERM"));
  }
}

TEST_CASE("an answer that is not one flag per key is an error for every lease, never a guess") {
  Bed bed(3, milliseconds{0}, 512);
  bed.send_all();
  bed.runtime.advance(milliseconds{0});
  bed.inner.sent[0].sink->on_node_event(0, reply_string("11"));   // a flag short
  bed.inner.sent[1].sink->on_node_event(0, reply_string("1x1"));  // not a flag
  NodeEvent integer;
  integer.kind = EventKind::reply;
  integer.reply.type = ReplyView::Type::integer;
  integer.reply.integer = 1;
  bed.inner.sent[2].sink->on_node_event(0, integer);
  for (Sink& s : bed.sinks) {
    REQUIRE(s.got.size() == 3);
    for (const Sink::Got& g : s.got) {
      CHECK(g.type == ReplyView::Type::error);
      CHECK(g.text.find("unexpected answer to extend_batch (expected 3 flags") != std::string::npos);
    }
  }
}

TEST_CASE("a full queue goes on the next loop turn, in chunks of max keys; a lone call goes as the plain extend") {
  Bed bed(5, milliseconds{10}, 2);
  bed.send_all();
  bed.runtime.advance(milliseconds{0});  // full: no wait for the window
  REQUIRE(bed.inner.sent.size() == 9);   // per node: 2 + 2 + 1
  std::size_t batches = 0, plain = 0;
  for (const Inner::Sent& s : bed.inner.sent) {
    if (s.call->command == CommandId::extend_batch) {
      ++batches;
      CHECK(s.call->more_keys.size() == 1);
    } else {
      ++plain;
      CHECK(s.call == &bed.calls[4]);  // the caller's own call and sink
      CHECK(s.sink == &bed.sinks[4]);
      CHECK(s.slot == s.node);
    }
  }
  CHECK(batches == 6);
  CHECK(plain == 3);
  for (const Inner::Sent& s : bed.inner.sent) {
    NodeEvent e = s.call->command == CommandId::extend_batch ? reply_string("11") : NodeEvent{};
    if (s.call->command != CommandId::extend_batch) {
      e.kind = EventKind::reply;
      e.reply.type = ReplyView::Type::integer;
      e.reply.integer = 1;
    }
    s.sink->on_node_event(s.slot, e);
  }
  for (Sink& s : bed.sinks) CHECK(s.got.size() == 3);
}

TEST_CASE("a batch the inner transport refuses fails every lease of it, on the flush, never inside send") {
  Bed bed(2, milliseconds{0}, 512);
  bed.inner.refuse = true;
  bed.send_all();  // accepted: the batcher has queued them
  for (Sink& s : bed.sinks) CHECK(s.got.empty());
  bed.runtime.advance(milliseconds{0});
  for (Sink& s : bed.sinks) {
    REQUIRE(s.got.size() == 3);
    for (const Sink::Got& g : s.got) {
      CHECK(g.kind == EventKind::failed);
      CHECK(g.text == "not connected");
    }
  }
}

TEST_CASE("other calls, and every call when max is 1, go straight through") {
  Bed bed(1, milliseconds{10}, 512);
  std::string why;
  Sink sink;
  const Call release{CommandId::release, "redlock:{x}", "v", "", {}, {}};
  const Call multi{CommandId::multi_extend, "redlock:{x}", "v", "100", {"redlock:{y}"}, {}};
  REQUIRE(bed.batcher->send(0, release, &sink, 0, why));
  REQUIRE(bed.batcher->send(0, multi, &sink, 0, why));
  REQUIRE(bed.inner.sent.size() == 2);
  CHECK(bed.inner.sent[0].call == &release);
  CHECK(bed.inner.sent[1].call == &multi);

  ManualRuntime runtime;
  Inner inner;
  ExtendBatcher unbatched(runtime, inner, milliseconds{10}, 1);
  const Call one = extend_call("r", "v");
  REQUIRE(unbatched.send(2, one, &sink, 2, why));
  REQUIRE(inner.sent.size() == 1);
  CHECK(inner.sent[0].call == &one);
  inner.refuse = true;
  CHECK_FALSE(unbatched.send(2, one, &sink, 2, why));  // refused at once, as the inner transport says
  CHECK(why == "not connected");
}

TEST_CASE("calls still queued when the batcher goes get their final event: failed, client closed") {
  Bed bed(2, milliseconds{10}, 512);
  bed.send_all();
  bed.batcher.reset();
  for (Sink& s : bed.sinks) {
    REQUIRE(s.got.size() == 3);
    CHECK(s.got[0].kind == EventKind::failed);
    CHECK(s.got[0].text == "the client was closed");
  }
  CHECK(bed.inner.sent.empty());
}

TEST_CASE("at most batches_in_flight batch calls per node; the rest go as answers come back") {
  static_assert(ExtendBatcher::batches_in_flight == 4);
  Bed bed(12, milliseconds{0}, 2);  // 6 batches of 2 per node
  bed.send_all();
  bed.runtime.advance(milliseconds{0});
  REQUIRE(bed.inner.sent.size() == 12);  // 4 per node
  for (std::size_t node = 0; node < 3; ++node) CHECK(bed.batcher->in_flight(node) == 4);
  CHECK(bed.batcher->queued() == 12);  // 2 batches × 2 calls × 3 nodes wait
  // A timeout is not an answer: nothing more goes.
  NodeEvent timeout;
  timeout.kind = EventKind::timeout;
  bed.inner.sent[0].sink->on_node_event(0, timeout);
  bed.runtime.advance(milliseconds{0});
  CHECK(bed.inner.sent.size() == 12);
  // Node 0's first batch is answered: one more batch goes to node 0 only.
  const std::size_t node0 = bed.inner.sent[0].node;
  bed.inner.sent[0].sink->on_node_event(0, reply_string("11"));
  CHECK(bed.batcher->in_flight(node0) == 3);
  bed.runtime.advance(milliseconds{0});
  REQUIRE(bed.inner.sent.size() == 13);
  CHECK(bed.inner.sent[12].node == node0);
  CHECK(bed.batcher->in_flight(node0) == 4);
  CHECK(bed.batcher->queued() == 10);
  // Answer everything, as it goes out, until nothing is left.
  for (std::size_t i = 1; i < bed.inner.sent.size(); ++i) {
    bed.inner.sent[i].sink->on_node_event(0, reply_string("11"));
    bed.runtime.advance(milliseconds{0});
  }
  CHECK(bed.inner.sent.size() == 18);  // 6 per node
  CHECK(bed.batcher->queued() == 0);
  for (std::size_t node = 0; node < 3; ++node) CHECK(bed.batcher->in_flight(node) == 0);
  for (Sink& s : bed.sinks) CHECK(s.got.size() == (&s == &bed.sinks[0] || &s == &bed.sinks[1] ? 4 : 3));
}

TEST_CASE("batches still in flight when the batcher goes are answered without it") {
  Bed bed(4, milliseconds{0}, 512);
  bed.send_all();
  bed.runtime.advance(milliseconds{0});
  REQUIRE(bed.inner.sent.size() == 3);
  bed.batcher.reset();
  for (const Inner::Sent& s : bed.inner.sent) s.sink->on_node_event(0, reply_string("1010"));
  CHECK(bed.sinks[0].got.size() == 3);
  CHECK(bed.sinks[1].got.back().integer == 0);
}
