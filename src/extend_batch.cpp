// extend_batch.cpp — see extend_batch.hpp.
#include "extend_batch.hpp"

#include <algorithm>
#include <charconv>
#include <iterator>
#include <limits>
#include <utility>

#include "engine.hpp"
#include "keys.hpp"
#include "operation.hpp"
#include "quorum.hpp"
#include "sabotage.hpp"
#include "telemetry.hpp"
#include "timer_queue.hpp"
#include "validity.hpp"

namespace redlock::detail {

using std::chrono::duration_cast;

namespace {

// kind_of: what a lease is, for the telemetry.
LockKind kind_of(const Extendee& lease) {
  if (lease.extend_shared()) return LockKind::read_lock;
  return lease.extend_permit() != no_permit ? LockKind::permit : LockKind::lock;
}

// key_suffix: what follows a lease's "{resource}" in its key — a lock's
// constant suffix, or a permit's made in `scratch` (the batch's hot path
// builds no string for a lock).
std::string_view key_suffix(const Extendee& l, std::string& scratch) {
  if (l.extend_permit() == no_permit) return lock_suffix;
  scratch = permit_suffix(l.extend_permit());
  return scratch;
}

}  // namespace

// ExtendRound — one round of up to `max` leases: one Call to every master,
// each lease decided on its own tally. Frees itself once every lease got
// its verdict and every master it was sent to gave its final event.
class ExtendRound final : public ReplySink {
 public:
  struct Member {
    Extendee* lease;
    TimePoint submitted;
    std::uint32_t first_key = 0;  // its keys' flags: [first_key, first_key + keys)
    std::uint32_t keys = 1;
    QuorumTally votes{0, lock_rule(RoundMode::majority, 0)};  // its own, from every master's flags
    bool decided = false;
  };

  ExtendRound(Engine& engine, std::shared_ptr<ExtendBatcher::Flow> flow) : engine_(engine), flow_(std::move(flow)) {
    nodes_.resize(engine_.transport().size());
    deliver_ = engine_.timers().timer([this] { deliver(); });
  }

  // members: the leases of the round, filled by the batcher before launch.
  // A round is used again once over (ExtendBatcher::recycle): its buffers
  // (the leases, the Call's keys and values, the masters' flags) keep
  // their room, so a busy batcher allocates nothing per lease.
  std::vector<Member>& members() noexcept { return members_; }

  // reset: ready for another round (every event of this one came).
  void reset() {
    members_.clear();
    keys_ = 0;
    for (Node& n : nodes_) {
      n.outcome = Outcome::pending;
      n.text.clear();
      n.flags.clear();
      n.rtt = std::chrono::microseconds{0};
      n.final = n.sent = false;
    }
    servers_.clear();
    ready_ = 0;
    launching_ = true;
    closed_ = false;
  }

  // launch sends the round to every master, now or once it can take it
  // (ExtendBatcher::send); `closed`: the client closes, nothing is sent
  // and every lease fails with Errc::closed.
  void launch(bool closed) {
    t1_ = engine_.runtime().now();
    keys_ = 0;
    const RoundRule rule = lock_rule(RoundMode::majority, nodes_.size());
    for (Member& m : members_) {
      m.votes = QuorumTally(nodes_.size(), rule);
      m.first_key = static_cast<std::uint32_t>(keys_);
      m.keys = static_cast<std::uint32_t>(1 + m.lease->extend_more().size());
      keys_ += m.keys;
    }
    if (closed) {
      closed_ = true;
      for (Node& n : nodes_) {
        n = Node{Outcome::error, "the client was closed", {}, {}, true, false};
        count(n);
      }
    } else {
      build_call();
      for (std::size_t node = 0; node < nodes_.size(); ++node) flow_->owner->send(this, node);
    }
    launching_ = false;
    decide_all();  // every send refused at once, or closed
    maybe_free();
  }

  // keys: the keys of the round (a lease of several resources has one per
  // resource): what it weighs in the flow control.
  std::size_t keys() const noexcept { return keys_; }

  // transmit: the batcher sends the round to `node` now (at launch, or
  // later from the node's queue).
  void transmit(std::size_t node) {
    std::string why;
    if (engine_.transport().send(node, call_, this, node, why)) {
      nodes_[node].sent = true;
      flow_->in_flight[node] += keys();
      return;
    }
    refuse(node, why);
  }

  // refuse: `node` will never get the round: an error for every lease.
  void refuse(std::size_t node, std::string why) {
    Node& n = nodes_[node];
    n.outcome = Outcome::error;
    n.text = std::move(why);
    n.final = true;
    count(n);
    if (launching_) return;  // launch decides once every node was tried
    decide_all();
    maybe_free();
  }

  void on_node_event(std::size_t node, const NodeEvent& event) override {
    Node& n = nodes_[node];
    if (event.kind != EventKind::timeout) {
      n.final = true;
      flow_->in_flight[node] -= keys();
      if (flow_->owner != nullptr) flow_->owner->node_done(node);
    }
    if (n.outcome == Outcome::pending) {
      record(node, event);
      count(n);
      decide_all();
    }
    maybe_free();
  }

 private:
  struct Node {
    Outcome outcome = Outcome::pending;  // the master's first event, for the round as a whole
    std::string text;                    // why it is not a reply of flags
    std::string flags;                   // outcome ok: one '0'/'1' per key
    std::chrono::microseconds rtt{0};
    bool final = false;  // no event will come (final event, refused, or not sent at all)
    bool sent = false;
  };

  // build_call: a round of one lease of one resource sends the plain
  // extend; any other the extend_batch script, its keys and arguments
  // encoded here once (RESP) and written as they are to every master.
  void build_call() {
    const std::string& prefix = engine_.options().prefix;
    const std::size_t n = keys_;
    char digits[24];
    auto ttl_text = [&digits](const Extendee& l) {
      return std::string_view(digits, std::to_chars(std::begin(digits), std::end(digits), l.extend_ttl().count()).ptr);
    };
    if (n == 1) {
      const Extendee& l = *members_[0].lease;
      call_.command = l.extend_shared() ? CommandId::read_extend : CommandId::extend;
      call_.encoded_key_count = call_.encoded_arg_count = 0;
      std::string scratch;
      assign_resource_name(call_.key, prefix, l.extend_resource(), key_suffix(l, scratch));
      call_.more_keys.clear();
      if (l.extend_shared()) call_.more_keys.push_back(readers_key_of(call_.key));
      call_.arg1.assign(l.extend_token());
      call_.arg2.assign(ttl_text(l));
      return;
    }
    call_.command = CommandId::extend_batch;
    call_.encoded_keys.clear();
    call_.encoded_args.clear();
    std::string scratch;
    for (const Member& m : members_) {
      const Extendee& l = *m.lease;
      const std::string_view ttl = ttl_text(l);
      append_resource_name_bulk(call_.encoded_keys, prefix, l.extend_resource(), key_suffix(l, scratch));
      resp::append_bulk(call_.encoded_args, l.extend_token());
      resp::append_bulk(call_.encoded_args, ttl);
      for (const std::string& more : l.extend_more()) {
        append_resource_name_bulk(call_.encoded_keys, prefix, more, lock_suffix);
        resp::append_bulk(call_.encoded_args, l.extend_token());
        resp::append_bulk(call_.encoded_args, ttl);
      }
    }
    call_.encoded_key_count = n;
    call_.encoded_arg_count = 2 * n;
  }

  // record: a master's first event, for every lease of the round. Only a
  // reply of exactly one flag per lease counts; a master in restart
  // quarantine, or a server that already answered under another name,
  // gives no yes at all.
  void record(std::size_t node, const NodeEvent& event) {
    Node& n = nodes_[node];
    n.rtt = event.rtt;
    NodeOutcome one;
    classify(CommandId::extend, event, one);  // timeouts, failures, error replies: their text
    if (event.kind != EventKind::reply || event.reply.type == ReplyView::Type::error) {
      n.outcome = one.outcome;
      n.text = std::move(one.error);
      return;
    }
    const ReplyView& r = event.reply;
    if (call_.command == CommandId::extend || call_.command == CommandId::read_extend) {
      if (r.type == ReplyView::Type::integer && (r.integer == 0 || r.integer == 1)) n.flags = r.integer == 1 ? "1" : "0";
    } else if (r.type == ReplyView::Type::string && r.str.size() == keys_ &&
               r.str.find_first_not_of("01") == std::string_view::npos) {
      n.flags = std::string(r.str);
    }
    if (n.flags.empty()) {
      n.outcome = Outcome::error;
      n.text = "unexpected answer to " + std::string(call_.command == CommandId::extend ? "extend" : "extend_batch") +
               " (expected " + std::to_string(keys_) + " flag(s) 0/1, got " +
               (r.type == ReplyView::Type::string ? std::to_string(r.str.size()) + " characters" : "another type") + ")";
      return;
    }
    if (sabotage().batch_first_flag) n.flags.assign(n.flags.size(), n.flags[0]);
    if (event.quarantined) {
      n.outcome = Outcome::quarantined;
      n.text = std::string(event.text);
      return;
    }
    if (!one_vote(servers_, event.server)) {
      n.outcome = Outcome::error;
      n.text = std::string(same_server_text);
      return;
    }
    n.outcome = Outcome::ok;
  }

  // count: a master's first event, as every lease's vote.
  void count(const Node& n) {
    for (Member& m : members_) m.votes.record(vote_of(n, m));
  }

  // vote_of: what master `n` said for lease `m` — as an extend round of
  // its own would have recorded it. A 0 is "not ours" also from a master
  // in quarantine (only its yes is void).
  static Outcome vote_of(const Node& n, const Member& m) {
    if ((n.outcome == Outcome::ok || n.outcome == Outcome::quarantined) && !all_ours(n.flags, m)) return Outcome::held;
    return n.outcome;
  }

  // all_ours: the master extended every key of the lease (a lease of
  // several resources is ours there only if all of them are).
  static bool all_ours(std::string_view flags, const Member& m) {
    return flags.substr(m.first_key, m.keys).find('0') == std::string_view::npos;
  }

  // decide_all: every lease whose outcome is now certain gets its verdict
  // on the next loop turn.
  void decide_all() {
    bool any = false;
    for (Member& m : members_) {
      if (m.decided || !m.votes.decided()) continue;
      m.decided = true;
      ++ready_;
      any = true;
    }
    if (any && !deliver_->active()) deliver_->start(milliseconds{0});
  }

  // outcomes_of: what every master said for lease i, as an extend round
  // of its own would have recorded it.
  std::vector<NodeOutcome> outcomes_of(std::size_t i) const {
    std::vector<NodeOutcome> out(nodes_.size());
    Transport& transport = engine_.transport();
    for (std::size_t node = 0; node < nodes_.size(); ++node) {
      const Node& n = nodes_[node];
      NodeOutcome& o = out[node];
      o.address = transport.address(node);
      o.rtt = n.rtt;
      o.outcome = vote_of(n, members_[i]);
      o.error = o.outcome == n.outcome ? n.text : std::string(token_absent_text);
    }
    return out;
  }

  void deliver() {
    const TimePoint at = engine_.runtime().now();
    const auto elapsed = duration_cast<microseconds>(at - t1_);
    const Options& options = engine_.options();
    Telemetry* t = engine_.telemetry();
    static const std::vector<NodeOutcome> none;
    // Verdicts may free this round's leases' watchdogs but never the
    // round: it frees itself below, once every lease was told.
    for (std::size_t i = 0; i < members_.size(); ++i) {
      Member& m = members_[i];
      if (!m.decided || m.lease == nullptr) continue;
      Extendee* lease = std::exchange(m.lease, nullptr);
      --ready_;
      ExtendSink* sink = flow_->sink;
      if (sink == nullptr) continue;  // silenced: the lease may be gone
      const microseconds latency = duration_cast<microseconds>(at - m.submitted);
      if (closed_) {
        if (t != nullptr) t->finished(OpKind::extend, latency);
        sink->on_batch_extended(*lease, at, make_error(Errc::closed, "the client was closed"));
        continue;
      }
      const TimePoint deadline = lease->extend_deadline();
      const RoundClock clock{.validity = validity_left(lease->extend_ttl(), elapsed, options.drift_factor),
                             .min_validity = options.min_validity,
                             .in_time = deadline == TimePoint{} || at < deadline};
      const Verdict verdict = decide(m.votes, &clock);
      if (verdict == Verdict::yes) {
        if (t != nullptr) {
          if (t->observed()) {
            t->round(OpKind::extend, kind_of(*lease), lease->extend_resource(), nullptr, 1, elapsed, outcomes_of(i));
          } else {
            t->round(OpKind::extend, kind_of(*lease), lease->extend_resource(), nullptr, 1, elapsed, none);
          }
          t->finished(OpKind::extend, latency);
        }
        sink->on_batch_extended(*lease, at, Extension{at + clock.validity, duration_cast<milliseconds>(clock.validity)});
        continue;
      }
      std::vector<NodeOutcome> nodes = outcomes_of(i);
      Error e = round_error(verdict, m.votes, nodes, clock, true);
      if (t != nullptr) {
        t->round(OpKind::extend, kind_of(*lease), lease->extend_resource(), &e, 1, elapsed, nodes);
        t->finished(OpKind::extend, latency);
      }
      e.nodes = std::move(nodes);
      e.attempts = 1;
      e.elapsed = elapsed;
      sink->on_batch_extended(*lease, at, std::move(e));
    }
    maybe_free();
  }

  void maybe_free() {
    if (launching_ || ready_ != 0 || deliver_->active()) return;
    if (std::any_of(members_.begin(), members_.end(), [](const Member& m) { return !m.decided; })) return;
    if (std::any_of(nodes_.begin(), nodes_.end(), [](const Node& n) { return !n.final; })) return;
    if (flow_->owner != nullptr) return flow_->owner->recycle(this);
    delete this;
  }

  Engine& engine_;
  std::shared_ptr<ExtendBatcher::Flow> flow_;
  std::vector<Member> members_;
  std::size_t keys_ = 0;  // keys of the round, every lease's resources
  std::vector<Node> nodes_;
  std::vector<std::uint64_t> servers_;  // the servers that answered with flags (NodeEvent::server)
  Call call_;
  TimePoint t1_{};
  std::unique_ptr<Timer> deliver_;
  std::size_t ready_ = 0;     // leases decided and not yet told
  bool launching_ = true;
  bool closed_ = false;
};

ExtendBatcher::ExtendBatcher(Engine& engine, milliseconds window, std::size_t max, ExtendSink& sink)
    : engine_(engine), window_(window), max_(std::max<std::size_t>(max, 1)) {
  waiting_.resize(engine_.transport().size());
  flow_ = std::make_shared<Flow>(Flow{this, &sink, std::vector<std::size_t>(engine_.transport().size(), 0)});
  timer_ = engine_.timers().timer([this] { flush(); });
  drain_ = engine_.timers().timer([this] { drain(); });
}

ExtendBatcher::~ExtendBatcher() {
  flow_->owner = nullptr;  // rounds still in flight finish without us
  for (ExtendRound* round : spare_) delete round;
  spare_.clear();
  timer_.reset();
  drain_.reset();
  std::deque<Extendee*> queue;
  queue.swap(queue_);
  submitted_.clear();
  queued_keys_ = 0;
  const TimePoint now = engine_.runtime().now();
  if (ExtendSink* sink = flow_->sink) {
    for (Extendee* lease : queue) sink->on_batch_extended(*lease, now, make_error(Errc::closed, "the client was closed"));
  }
  std::vector<std::deque<ExtendRound*>> waiting;
  waiting.swap(waiting_);
  for (std::size_t node = 0; node < waiting.size(); ++node) {
    for (ExtendRound* round : waiting[node]) round->refuse(node, "the client was closed");
  }
}

std::size_t ExtendBatcher::in_flight(std::size_t node) const noexcept { return flow_->in_flight[node]; }

void ExtendBatcher::submit(Extendee* lease, TimePoint now) {
  queue_.push_back(lease);
  submitted_.push_back(now);
  queued_keys_ += 1 + lease->extend_more().size();
  if (queued_keys_ >= max_) {
    timer_->start(milliseconds{0});  // a full round can go: on the next loop turn
  } else if (!timer_->active()) {
    timer_->start(window_);
  }
}

bool ExtendBatcher::can_take(std::size_t node, std::size_t keys) const noexcept {
  const std::size_t load = flow_->in_flight[node];
  return waiting_[node].empty() && (load == 0 || load + keys <= keys_in_flight);
}

void ExtendBatcher::send(ExtendRound* round, std::size_t node) {
  if (can_take(node, round->keys())) return round->transmit(node);
  if (waiting_[node].size() >= rounds_waiting) {
    return round->refuse(node, "not sent: " + std::to_string(rounds_waiting) +
                                   " extension rounds already wait for this master");
  }
  waiting_[node].push_back(round);
}

void ExtendBatcher::node_done(std::size_t /*node*/) {
  if (!drain_->active()) drain_->start(milliseconds{0});
}

void ExtendBatcher::drain() {
  for (std::size_t node = 0; node < waiting_.size(); ++node) {
    std::deque<ExtendRound*>& q = waiting_[node];
    while (!q.empty()) {
      const std::size_t load = flow_->in_flight[node];
      if (load != 0 && load + q.front()->keys() > keys_in_flight) break;
      ExtendRound* round = q.front();
      q.pop_front();
      round->transmit(node);
    }
  }
  // Leases held back for want of masters: their round may go now (unless
  // the window still runs; it flushes them).
  if (!queue_.empty() && !timer_->active()) flush();
}

void ExtendBatcher::recycle(ExtendRound* round) {
  if (spare_.size() >= spare_rounds) {
    delete round;
    return;
  }
  round->reset();
  spare_.push_back(round);
}

void ExtendBatcher::flush() {
  const RoundRule rule = lock_rule(RoundMode::majority, waiting_.size());
  while (!queue_.empty()) {
    // The round: leases from the front up to max_ keys (at least one lease,
    // whatever its keys); a read lock's lease goes alone.
    std::size_t n = 0, keys = 0;
    while (n < queue_.size()) {
      const std::size_t k = 1 + queue_[n]->extend_more().size();
      if (n > 0 && (keys + k > max_ || queue_[n]->extend_shared())) break;
      keys += k;
      ++n;
      if (queue_[n - 1]->extend_shared()) break;
    }
    const bool closed = engine_.closing();
    // Could the round win now, if every master that can take it said yes?
    QuorumTally ready(waiting_.size(), rule);
    for (std::size_t node = 0; node < waiting_.size(); ++node) {
      ready.record(can_take(node, keys) ? Outcome::ok : Outcome::timeout);
    }
    // A round is made only when a majority of masters can take it at once:
    // the rest wait here, as pointers, and T1 is taken when they can go.
    // (Making every round at once was a loop turn of tens of ms for 100,000
    // leases falling due together: the masters' answers then sat unread
    // past node_timeout, and a third of the rounds failed.)
    if (!closed && !ready.success()) return;  // node_done brings us back
    ExtendRound* round = nullptr;
    if (spare_.empty()) {
      round = new ExtendRound(engine_, flow_);
    } else {
      round = spare_.back();
      spare_.pop_back();
    }
    std::vector<ExtendRound::Member>& members = round->members();
    members.reserve(n);
    for (std::size_t i = 0; i < n; ++i) members.push_back({queue_[i], submitted_[i]});
    queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
    queued_keys_ -= keys;
    submitted_.erase(submitted_.begin(), submitted_.begin() + static_cast<std::ptrdiff_t>(n));
    round->launch(closed);
  }
}

}  // namespace redlock::detail
