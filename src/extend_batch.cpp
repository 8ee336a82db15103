// extend_batch.cpp — see extend_batch.hpp.
#include "extend_batch.hpp"

#include <algorithm>
#include <utility>

#include "sabotage.hpp"

namespace redlock::detail {

namespace {

void fail_one(const ExtendBatcher::Queued& q, std::string_view why) {
  NodeEvent event;
  event.kind = EventKind::failed;
  event.text = why;
  q.sink->on_node_event(q.slot, event);
}

// Batch — one extend_batch call on one node: the sink of its events, which
// it hands on to every call it carries; frees itself after the final one.
class Batch final : public ReplySink {
 public:
  Batch(std::shared_ptr<const Call> call, std::vector<ExtendBatcher::Queued> members,
        std::shared_ptr<ExtendBatcher::Flow> flow, std::size_t node)
      : call_(std::move(call)), members_(std::move(members)), flow_(std::move(flow)), node_(node) {}

  const Call& call() const noexcept { return *call_; }

  void on_node_event(std::size_t /*slot*/, const NodeEvent& event) override {
    if (event.kind == EventKind::reply && event.reply.type != ReplyView::Type::error) {
      split(event);
    } else {
      for (const ExtendBatcher::Queued& m : members_) m.sink->on_node_event(m.slot, event);
    }
    if (event.kind == EventKind::timeout) return;
    // Final: the node has one batch fewer in flight (the batcher, if it
    // still lives, sends what waits for that).
    --flow_->in_flight[node_];
    if (flow_->owner != nullptr) flow_->owner->batch_done(node_);
    delete this;
  }

  // refused: the inner transport did not take the call; every member fails.
  void refused(std::string_view why) {
    for (const ExtendBatcher::Queued& m : members_) fail_one(m, why);
    delete this;
  }

 private:
  ~Batch() = default;

  // split: the answer is one flag per key, in order; each call gets the
  // integer `extend` answers with (1 extended, 0 not ours). Anything else
  // is an error reply for every call, saying what came.
  void split(const NodeEvent& event) {
    const std::string_view flags =
        event.reply.type == ReplyView::Type::string ? event.reply.str : std::string_view();
    NodeEvent each = event;
    each.reply = ReplyView{};
    if (flags.size() != members_.size() || flags.find_first_not_of("01") != std::string_view::npos) {
      const std::string text = "ERR unexpected answer to extend_batch (expected " + std::to_string(members_.size()) +
                               " flags 0/1, got " +
                               (event.reply.type == ReplyView::Type::string
                                    ? std::to_string(flags.size()) + " characters"
                                    : std::string("another type")) +
                               ")";
      each.reply.type = ReplyView::Type::error;
      each.reply.str = text;
      for (const ExtendBatcher::Queued& m : members_) m.sink->on_node_event(m.slot, each);
      return;
    }
    each.reply.type = ReplyView::Type::integer;
    for (std::size_t i = 0; i < members_.size(); ++i) {
      each.reply.integer = flags[sabotage().batch_first_flag ? 0 : i] == '1' ? 1 : 0;
      members_[i].sink->on_node_event(members_[i].slot, each);
    }
  }

  std::shared_ptr<const Call> call_;
  std::vector<ExtendBatcher::Queued> members_;
  std::shared_ptr<ExtendBatcher::Flow> flow_;
  std::size_t node_;
};

// batch_call: one extend_batch call for `n` queued one-key extends.
std::shared_ptr<const Call> batch_call(const ExtendBatcher::Queued* q, std::size_t n) {
  auto call = std::make_shared<Call>();
  call->command = CommandId::extend_batch;
  call->key = q[0].call->key;
  call->arg1 = q[0].call->arg1;
  call->arg2 = q[0].call->arg2;
  call->more_keys.reserve(n - 1);
  call->more_args.reserve(2 * (n - 1));
  for (std::size_t i = 1; i < n; ++i) {
    call->more_keys.push_back(q[i].call->key);
    call->more_args.push_back(q[i].call->arg1);
    call->more_args.push_back(q[i].call->arg2);
  }
  return call;
}

}  // namespace

ExtendBatcher::ExtendBatcher(Runtime& runtime, Transport& inner, milliseconds window, std::size_t max)
    : runtime_(runtime), inner_(inner), window_(window), max_(std::max<std::size_t>(max, 1)) {
  queues_.resize(inner_.size());
  flow_ = std::make_shared<Flow>(Flow{this, std::vector<std::size_t>(inner_.size(), 0)});
  timer_ = runtime_.timer([this] { flush(); });
}

ExtendBatcher::~ExtendBatcher() {
  flow_->owner = nullptr;  // batches still in flight finish without us
  timer_.reset();
  std::vector<std::deque<Queued>> queues;
  queues.swap(queues_);
  for (const std::deque<Queued>& q : queues) {
    for (const Queued& one : q) fail_one(one, "the client was closed");
  }
}

std::size_t ExtendBatcher::queued() const noexcept {
  std::size_t n = 0;
  for (const std::deque<Queued>& q : queues_) n += q.size();
  return n;
}

std::size_t ExtendBatcher::in_flight(std::size_t node) const noexcept { return flow_->in_flight[node]; }

bool ExtendBatcher::send(std::size_t node, const Call& call, ReplySink* sink, std::size_t slot, std::string& why) {
  if (max_ <= 1 || call.command != CommandId::extend) return inner_.send(node, call, sink, slot, why);
  std::deque<Queued>& q = queues_[node];
  q.push_back({&call, sink, slot});
  if (q.size() >= max_ && flow_->in_flight[node] < batches_in_flight) {
    timer_->start(milliseconds{0});  // a full batch can go: on the next loop turn
  } else if (!timer_->active()) {
    timer_->start(window_);
  }
  return true;
}

void ExtendBatcher::batch_done(std::size_t node) {
  if (!queues_[node].empty() && !timer_->active()) timer_->start(milliseconds{0});
}

void ExtendBatcher::flush() {
  // A round sends to every node in one go, so the nodes' queues usually
  // hold the same calls in the same order: their chunks share one Call.
  struct Shared {
    std::vector<const Call*> calls;
    std::shared_ptr<const Call> call;
  };
  std::vector<Shared> shared;
  std::string why;
  for (std::size_t node = 0; node < queues_.size(); ++node) {
    std::deque<Queued>& q = queues_[node];
    for (std::size_t chunk = 0; !q.empty() && flow_->in_flight[node] < batches_in_flight; ++chunk) {
      const std::size_t n = std::min(max_, q.size());
      std::vector<Queued> members(q.begin(), q.begin() + static_cast<std::ptrdiff_t>(n));
      q.erase(q.begin(), q.begin() + static_cast<std::ptrdiff_t>(n));
      if (n == 1) {  // alone: the plain extend, as sent
        why.clear();
        if (!inner_.send(node, *members[0].call, members[0].sink, members[0].slot, why)) fail_one(members[0], why);
        continue;
      }
      std::vector<const Call*> calls(n);
      for (std::size_t i = 0; i < n; ++i) calls[i] = members[i].call;
      if (chunk >= shared.size()) shared.resize(chunk + 1);
      Shared& s = shared[chunk];
      if (s.call == nullptr || s.calls != calls) s = {std::move(calls), batch_call(members.data(), n)};
      auto* batch = new Batch(s.call, std::move(members), flow_, node);
      why.clear();
      if (inner_.send(node, batch->call(), batch, 0, why)) {
        ++flow_->in_flight[node];
      } else {
        batch->refused(why);
      }
    }
  }
  // What is left waits for a batch of its node to come back (batch_done).
}

}  // namespace redlock::detail
