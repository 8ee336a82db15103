// fake_wire.hpp — a Wire with no network, for unit tests: it records what
// its owner writes, and the test plays the connection's events (connected,
// flush, replies, loss) by hand.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "transport.hpp"
#include "wire.hpp"

namespace redlock::test {

using detail::Wire;
using detail::WireEvents;
using detail::WireFactory;
using detail::WireReply;

using Command = std::vector<std::string>;

// Reply — an owned reply, handed to the session as a WireReply.
struct Reply {
  WireReply::Type type = WireReply::Type::status;
  long long integer = 0;
  std::string str = "OK";
  std::vector<Reply> elements;
};
inline Reply status(std::string s = "OK") { return {WireReply::Type::status, 0, std::move(s), {}}; }
inline Reply bulk(std::string s) { return {WireReply::Type::string, 0, std::move(s), {}}; }
inline Reply nil() { return {WireReply::Type::nil, 0, {}, {}}; }
inline Reply integer(long long v) { return {WireReply::Type::integer, v, {}, {}}; }
inline Reply error(std::string s) { return {WireReply::Type::error, 0, std::move(s), {}}; }
inline Reply strings(std::vector<std::string> items) {
  Reply r{WireReply::Type::array, 0, {}, {}};
  for (std::string& s : items) r.elements.push_back(bulk(std::move(s)));
  return r;
}

// Deep — a Reply as the WireReply tree a Wire hands over, arrays at every
// depth; the tree lives as long as the Deep.
struct Deep {
  std::vector<std::unique_ptr<std::vector<WireReply>>> stores;
  WireReply of(const Reply& r) {
    WireReply w{r.type, r.integer, r.str, {}};
    if (!r.elements.empty()) {
      auto store = std::make_unique<std::vector<WireReply>>();
      store->reserve(r.elements.size());
      for (const Reply& e : r.elements) store->push_back(of(e));
      w.elements = std::span<const WireReply>(store->data(), store->size());
      stores.push_back(std::move(store));
    }
    return w;
  }
};

// kept_call: a Call (EVALSHA of `id` on `key`, ARGV "v" "1000") kept in
// `calls` for as long as the test runs (a session reads it until its
// final event).
inline const detail::Call& kept_call(std::vector<std::unique_ptr<detail::Call>>& calls, detail::CommandId id,
                                     std::string key) {
  auto call = std::make_unique<detail::Call>();
  call->command = id;
  call->key = std::move(key);
  call->arg1 = "v";
  call->arg2 = "1000";
  calls.push_back(std::move(call));
  return *calls.back();
}

class FakeWireFactory;

// FakeWire — what the session wrote, and a handle for the test to play
// the connection's events. Commands go from `queued` to `sent` at flush().
class FakeWire final : public Wire {
 public:
  FakeWire(FakeWireFactory& factory, WireEvents& events);
  ~FakeWire() override;
  bool write(std::span<const std::string_view> argv) override;
  void read_now() override { ++reads; }

  void connected() { events.on_connected(); }
  void flush() {
    events.on_flush();
    sent.insert(sent.end(), queued.begin(), queued.end());
    queued.clear();
  }
  void answer(const Reply& r) {
    Deep deep;
    ++answered;
    events.on_reply(deep.of(r));
  }
  void lose(std::string why) { events.on_lost(why); }
  const Command& next() const { return sent.at(answered); }

  FakeWireFactory& factory;
  WireEvents& events;
  std::vector<Command> queued, sent;
  std::size_t answered = 0;
  int reads = 0;
  bool refuse = false;
};

class FakeWireFactory final : public WireFactory {
 public:
  std::unique_ptr<Wire> connect(const NodeAddress& address, WireEvents& events) override {
    ++connects;
    dialled.push_back(address.display());
    return std::make_unique<FakeWire>(*this, events);
  }
  int connects = 0;
  std::vector<std::string> dialled;  // each connection's address (NodeAddress::display)
  FakeWire* live = nullptr;   // the current connection, null once dropped
  std::vector<Command> log;   // everything ever written, on any connection
};

inline FakeWire::FakeWire(FakeWireFactory& f, WireEvents& e) : factory(f), events(e) { factory.live = this; }
inline FakeWire::~FakeWire() {
  if (factory.live == this) factory.live = nullptr;
}
inline bool FakeWire::write(std::span<const std::string_view> argv) {
  if (refuse) return false;
  Command c(argv.begin(), argv.end());
  queued.push_back(c);
  factory.log.push_back(std::move(c));
  return true;
}

}  // namespace redlock::test
