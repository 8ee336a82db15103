// fake_transport.hpp — a Transport with no network, for unit tests. Each
// send is answered by a scripted Response after a delay, via a uv timer on
// the test's loop; or held back for the test to answer by hand.
#pragma once

#include <uv.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "transport.hpp"

namespace redlock::test {

using detail::EventKind;
using detail::ReplyView;
using detail::Call;
using detail::CommandId;

struct Response {
  EventKind kind = EventKind::reply;
  ReplyView::Type type = ReplyView::Type::status;
  long long integer = 0;
  std::string text = "OK";  // status / error reply text
  std::string why;          // failure reason, or quarantine text
  int delay_ms = 0;
  bool quarantined = false;
  bool manual = false;  // keep it for the test to deliver
  std::vector<long long> items;  // array replies of integers
  std::uint64_t server = 0;      // NodeEvent::server (0: unknown)
};

inline Response ok_reply() { return {}; }
// array_reply: an array of integers (the fenced acquire's [1, c] / [0, c, pttl]).
inline Response array_reply(std::vector<long long> items) {
  Response r;
  r.type = ReplyView::Type::array;
  r.text.clear();
  r.items = std::move(items);
  return r;
}
inline Response int_reply(long long v) { Response r; r.type = ReplyView::Type::integer; r.integer = v; r.text.clear(); return r; }
inline Response failed(std::string why) {
  Response r;
  r.kind = EventKind::failed;
  r.why = std::move(why);
  return r;
}

struct Sent {
  std::size_t node;
  Call call;
  detail::ReplySink* sink;
  std::size_t slot;
};

class FakeTransport final : public detail::Transport {
 public:
  using Policy = std::function<Response(std::size_t node, const Call& call)>;

  FakeTransport(uv_loop_t* loop, std::size_t n, Policy policy) : loop_(loop), policy_(std::move(policy)) {
    for (std::size_t i = 0; i < n; ++i) addresses_.push_back("10.0.0." + std::to_string(i + 1) + ":6379");
  }

  std::size_t size() const override { return addresses_.size(); }
  const std::string& address(std::size_t i) const override { return addresses_[i]; }

  // watch answers with watch_result (unavailable: the waiter polls); the
  // listeners are kept until unwatch, for a test to wake.
  detail::WatchState watch_result = detail::WatchState::unavailable;
  std::vector<detail::WakeListener*> watchers;
  detail::WatchState watch(const std::string&, detail::WakeListener* listener) override {
    if (watch_result != detail::WatchState::unavailable) watchers.push_back(listener);
    return watch_result;
  }
  void unwatch(const std::string&, detail::WakeListener* listener) override {
    std::erase(watchers, listener);
  }
  // heard answers heard_result for every channel (none: not confirmed).
  std::optional<std::uint64_t> heard_result;
  std::optional<std::uint64_t> heard(const std::string&) const override { return heard_result; }

  // refuse[i] makes sends to node i fail at once.
  std::vector<bool> refuse = std::vector<bool>(16, false);
  std::vector<Sent> sent;  // every accepted send, in order
  std::vector<std::pair<Sent, Response>> held_back;

  bool send(std::size_t node, const Call& call, detail::ReplySink* sink, std::size_t slot,
            std::string& why) override {
    if (refuse[node]) {
      why = "connection refused";
      return false;
    }
    sent.push_back({node, call, sink, slot});
    Response r = policy_(node, call);
    if (r.manual) {
      held_back.emplace_back(sent.back(), r);
      return true;
    }
    auto* t = new Timer{{}, sent.back(), r};
    uv_timer_init(loop_, &t->timer);
    t->timer.data = t;
    uv_timer_start(&t->timer, [](uv_timer_t* h) {
      auto* self = static_cast<Timer*>(h->data);
      deliver(self->sent, self->response);
      uv_close(reinterpret_cast<uv_handle_t*>(h), [](uv_handle_t* c) { delete static_cast<Timer*>(c->data); });
    }, static_cast<std::uint64_t>(r.delay_ms), 0);
    return true;
  }

  static void deliver(const Sent& s, const Response& r) {
    detail::NodeEvent ev;
    ev.kind = r.kind;
    ev.reply.type = r.type;
    ev.reply.integer = r.integer;
    ev.reply.str = r.text;
    if (r.items.size() <= ev.reply.items.size()) {
      for (std::size_t i = 0; i < r.items.size(); ++i) ev.reply.items[i] = r.items[i];
      ev.reply.item_count = static_cast<std::uint8_t>(r.items.size());
    }
    ev.quarantined = r.quarantined;
    ev.server = r.server;
    ev.text = r.why;
    ev.rtt = std::chrono::milliseconds{r.delay_ms};
    s.sink->on_node_event(s.slot, ev);
  }

  std::size_t count(CommandId id) const {
    std::size_t n = 0;
    for (const Sent& s : sent) n += s.call.command == id ? 1 : 0;
    return n;
  }

 private:
  struct Timer {
    uv_timer_t timer;
    Sent sent;
    Response response;
  };
  uv_loop_t* loop_;
  Policy policy_;
  std::vector<std::string> addresses_;
};

// run_loop runs the loop until it has nothing left, then checks it closes.
inline int run_and_close(uv_loop_t* loop) {
  uv_run(loop, UV_RUN_DEFAULT);
  return uv_loop_close(loop);
}

}  // namespace redlock::test
