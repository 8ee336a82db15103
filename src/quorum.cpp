// quorum.cpp — the decision rule and the fan-out round.
#include "quorum.hpp"
#include "keys.hpp"
#include "resp.hpp"

#include <algorithm>
#include <functional>
#include <string>
#include <utility>

namespace redlock::detail {

QuorumTally::QuorumTally(std::size_t nodes, RoundRule rule) noexcept
    : nodes_(static_cast<std::uint8_t>(nodes)), quorum_(static_cast<std::uint8_t>(rule.quorum)), mode_(rule.mode) {}

bool QuorumTally::record(Outcome first) noexcept {
  if (answered_ == nodes_) return false;
  ++answered_;
  if (first == Outcome::ok) ++ok_;
  if (first == Outcome::held) ++held_;
  if (decided_ || decide(*this) == Verdict::open) return false;
  return decided_ = true;
}

bool QuorumTally::success() const noexcept { return decide(*this) == Verdict::yes; }

Verdict decide(const QuorumTally& t, const RoundClock* clock) noexcept {
  const std::size_t unanswered = t.nodes() - t.answered();
  if (t.mode() == RoundMode::majority) {
    if (t.ok() >= t.quorum()) {
      if (clock == nullptr) return Verdict::yes;
      if (!clock->in_time) return Verdict::too_late;
      if (clock->validity <= clock->min_validity) return Verdict::too_short;
      return Verdict::yes;
    }
    if (t.ok() + unanswered >= t.quorum()) return Verdict::open;
    return t.held() > 0 ? Verdict::refused : Verdict::no_quorum;
  }
  // Release: certain once every node answered, or once a quorum confirmed
  // our value is gone from them; then it may remain on the unconfirmed.
  if (unanswered > 0 && t.ok() + t.held() < t.quorum()) return Verdict::open;
  const std::size_t unconfirmed = t.nodes() - t.ok() - t.held();
  if (unconfirmed >= t.quorum()) return Verdict::no_quorum;
  return t.ok() >= 1 ? Verdict::yes : Verdict::refused;
}

QuorumTally tally_of(const std::vector<NodeOutcome>& nodes, RoundRule rule) noexcept {
  QuorumTally tally(nodes.size(), rule);
  for (const NodeOutcome& n : nodes) tally.record(n.outcome == Outcome::pending ? Outcome::timeout : n.outcome);
  return tally;
}

bool refused_for_good(const std::vector<NodeOutcome>& nodes, RoundRule rule) noexcept {
  QuorumTally best(nodes.size(), rule);
  for (const NodeOutcome& n : nodes) best.record(n.outcome == Outcome::held ? Outcome::held : Outcome::ok);
  return !nodes.empty() && decide(best) != Verdict::yes;
}

std::optional<long long> quorum_at_most(std::vector<long long>& values, std::size_t quorum) {
  if (quorum == 0 || values.size() < quorum) return std::nullopt;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(quorum - 1), values.end());
  return values[quorum - 1];
}

std::optional<long long> quorum_at_least(std::vector<long long>& values, std::size_t quorum) {
  if (quorum == 0 || values.size() < quorum) return std::nullopt;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(quorum - 1), values.end(),
                   std::greater<>());
  return values[quorum - 1];
}

bool quorum_says(std::size_t yes, std::size_t nodes, std::size_t quorum) noexcept {
  QuorumTally tally(nodes, {RoundMode::majority, quorum});
  for (std::size_t i = 0; i < nodes; ++i) tally.record(i < yes ? Outcome::ok : Outcome::error);
  return decide(tally) == Verdict::yes;
}

bool one_vote(std::vector<std::uint64_t>& yes_servers, std::uint64_t server) {
  if (server == 0) return true;
  if (std::find(yes_servers.begin(), yes_servers.end(), server) != yes_servers.end()) return false;
  yes_servers.push_back(server);
  return true;
}

long long QuorumRound::quorum_rank() const {
  std::vector<long long> told;
  for (const FairPlace& p : places_) {
    if (p.rank >= 0) told.push_back(p.rank);
  }
  return quorum_at_most(told, tally_.quorum()).value_or(-1);
}

bool QuorumRound::tickets_agree() const {
  return !places_.empty() && std::all_of(places_.begin(), places_.end(), [this](const FairPlace& p) {
           return p.ticket < 0 || p.ticket == max_counter_;
         });
}

std::optional<std::chrono::milliseconds> quorum_free_in(const std::vector<NodeOutcome>& nodes, std::size_t quorum) {
  std::vector<long long> free_in;
  for (const NodeOutcome& n : nodes) {
    if (n.outcome == Outcome::ok) free_in.push_back(0);
    if (n.outcome == Outcome::held && n.holder_ttl.count() >= 0) free_in.push_back(n.holder_ttl.count());
  }
  const std::optional<long long> at = quorum_at_most(free_in, quorum);
  if (!at) return std::nullopt;
  return std::chrono::milliseconds{*at};
}

namespace {

std::string reply_text(const ReplyView& r) {
  switch (r.type) {
    case ReplyView::Type::integer: return "integer " + std::to_string(r.integer);
    case ReplyView::Type::nil: return "nil";
    case ReplyView::Type::array: return "array";
    default: return resp::server_text(r.str);
  }
}

void unexpected(const NodeEvent& event, NodeOutcome& out) {
  out.outcome = Outcome::error;
  out.error = "unexpected reply: " + reply_text(event.reply);
}

// held_by_another: an acquire found another token; `pttl` is its remaining
// TTL in ms (-1: no expiry). Outside [-1, most_server_ttl] it is the
// server's nonsense: unknown (-1), never a wait's length.
void held_by_another(long long pttl, NodeOutcome& out) {
  out.outcome = Outcome::held;
  const bool known = pttl >= 0 && pttl <= most_server_ttl.count();
  out.holder_ttl = std::chrono::milliseconds{known ? pttl : -1};
  out.error = known        ? "held by another token (expires in " + std::to_string(pttl) + " ms)"
              : pttl == -1 ? "held by another token (no expiry)"
                           : "held by another token (PTTL " + std::to_string(pttl) + " ms: expiry unknown)";
}

// fair_reply: a fair acquire's [taken, ticket, pttl, rank] (a semaphore's:
// and the permit taken) with a ticket a master holds exactly (below 2^53,
// as fences); any other ticket is no answer, and no waiter carries it to
// the other masters' queues. (Whether the permit is there, and in range,
// the round checks: it knows whether it asked for one.)
bool fair_reply(const ReplyView& r) {
  return r.type == ReplyView::Type::array && (r.item_count == 4 || r.item_count == 5) && r.items[1] >= 0 &&
         static_cast<std::uint64_t>(r.items[1]) < max_fence;
}

}  // namespace

void classify(CommandId command, const NodeEvent& event, NodeOutcome& out) {
  out.rtt = event.rtt;
  if (event.kind == EventKind::timeout) {
    out.outcome = Outcome::timeout;
    out.error = "timeout after " + std::to_string((event.rtt.count() + 500) / 1000) + " ms";
    return;
  }
  if (event.kind == EventKind::failed) {
    out.outcome = Outcome::error;
    out.error = std::string(event.text);
    return;
  }
  const ReplyView& r = event.reply;
  if (r.type == ReplyView::Type::error) {
    out.outcome = Outcome::error;
    out.error = resp::server_text(r.str);
    // Another program keeps a list, hash… under the lock key's name (our
    // own commands only ever write strings there).
    if (r.str.starts_with("WRONGTYPE")) out.error += " (the lock key is not a lock: `redlock status` names its type)";
    // A script calling a command the user's ACL denies: Redis 7 says "can't
    // run this command" without naming it, so say which script it was.
    if (is_script(command) && (r.str.starts_with("NOPERM") || r.str.find("can't run this command") != std::string_view::npos)) {
      out.error += " (the ACL user may not run a command of the " +
                   std::string(script_names[static_cast<std::size_t>(command)]) +
                   " script: docs/security.md has the rule)";
    }
    return;
  }
  if (command == CommandId::fenced_acquire) {
    if (r.type == ReplyView::Type::array && r.item_count == 2 && r.items[0] == 1) {
      out.outcome = Outcome::ok;
    } else if (r.type == ReplyView::Type::array && r.item_count == 3 && r.items[0] == 0) {
      held_by_another(r.items[2], out);
    } else {
      unexpected(event, out);
    }
  } else if (command == CommandId::fair_acquire) {
    if (fair_reply(r) && r.items[0] == 1) {
      out.outcome = Outcome::ok;
    } else if (fair_reply(r) && r.items[0] == 0 && r.items[2] >= -1) {
      held_by_another(r.items[2], out);
    } else if (fair_reply(r) && r.items[0] == 0) {
      // Free, but another waiter's turn (or, on a first round, queued ones
      // come first): nothing was written but the queue.
      out.outcome = Outcome::held;
      out.holder_ttl = std::chrono::milliseconds{0};
      out.error = r.items[3] >= 0 ? "free, but " + std::to_string(r.items[3]) + " waiter(s) ahead in the fair queue"
                                  : "free, but waiters are queued (fair order)";
    } else {
      unexpected(event, out);
    }
  } else if (command == CommandId::sem_acquire) {
    // [1, permit] (range-checked by the round, which knows P), fenced
    // [1, permit, its fence counter], or [0, soonest PTTL]: every permit
    // held.
    if (r.type == ReplyView::Type::array && (r.item_count == 2 || r.item_count == 3) && r.items[0] == 1) {
      out.outcome = Outcome::ok;
    } else if (r.type == ReplyView::Type::array && r.item_count == 2 && r.items[0] == 0) {
      held_by_another(r.items[1], out);
      out.error = "every permit held" + out.error.substr(std::string_view("held by another token").size());
    } else {
      unexpected(event, out);
    }
  } else if (is_acquire(command)) {
    if (r.type == ReplyView::Type::status && r.str == "OK") {
      out.outcome = Outcome::ok;
    } else if (command == CommandId::set_nx && r.type == ReplyView::Type::nil) {
      out.outcome = Outcome::held;  // SET NX says only "not set" (with GET, also whether readers hold it)
      out.error = r.str == readers_mark ? readers_held_text : "held by another token";
    } else if (command == CommandId::read_acquire && r.type == ReplyView::Type::integer) {
      // A writer holds it, or waits for the readers (its intent).
      held_by_another(r.integer, out);
      out.error = "held by a writer, or a writer waits" + out.error.substr(std::string_view("held by another token").size());
    } else if ((command == CommandId::acquire || command == CommandId::multi_acquire ||
                command == CommandId::write_acquire) &&
               r.type == ReplyView::Type::integer) {
      held_by_another(r.integer, out);
    } else if (command == CommandId::write_acquire && r.type == ReplyView::Type::array && r.item_count == 2 &&
               r.items[1] == 1) {
      held_by_another(r.items[0], out);  // its intent stamped there
    } else {
      unexpected(event, out);
    }
  } else if (r.type == ReplyView::Type::integer && (r.integer == 0 || r.integer == 1)) {
    out.outcome = r.integer == 1 ? Outcome::ok : Outcome::held;
    if (r.integer == 0) {
      out.error = command == CommandId::fence_raise
                      ? "fence not raised (token not present, or the counter already at the fence or above)"
                      : std::string(token_absent_text);
    }
  } else {
    unexpected(event, out);
  }
  if (out.outcome == Outcome::ok && event.quarantined && !is_release(command)) {
    out.outcome = Outcome::quarantined;
    out.error = std::string(event.text);
  }
}

QuorumRound::QuorumRound(Transport& transport, Call call, RoundRule rule, RoundListener* listener)
    : call_(std::move(call)), tally_(transport.size(), rule), listener_(listener) {
  if (call_.command == CommandId::sem_acquire) {
    // P permit keys, then the permits key: KEYS[1] and the more_keys; a
    // fenced acquire's P fence counters after them.
    const bool fenced = call_.more_args.size() > 2;
    permits_.assign(fenced ? call_.more_keys.size() / 2 : call_.more_keys.size(), tally_);
    votes_.assign(transport.size(), -1);
    if (fenced) counters_.assign(transport.size(), 0);
  } else if (call_.command == CommandId::fair_acquire && call_.more_args.size() > fair_lock_args) {
    // A semaphore's fair acquire: the permits key, the queue's three keys,
    // then the P permit keys (src/scripts.hpp, fair_permits).
    permits_.assign(call_.more_keys.size() - 3, tally_);
    votes_.assign(transport.size(), -1);
  }
  outcomes_.resize(transport.size());
  for (std::size_t i = 0; i < outcomes_.size(); ++i) outcomes_[i].address = transport.address(i);
}

long long QuorumRound::permit_counter(std::size_t permit) const noexcept {
  long long counter = 0;
  for (std::size_t i = 0; i < votes_.size() && i < counters_.size(); ++i) {
    if (votes_[i] >= 0 && static_cast<std::size_t>(votes_[i]) == permit) counter = std::max(counter, counters_[i]);
  }
  return counter;
}

QuorumRound* QuorumRound::launch(Transport& transport, Call call, RoundRule rule, RoundListener* listener,
                                 const std::vector<bool>& skip) {
  auto* round = new QuorumRound(transport, std::move(call), rule, listener);
  std::string why;
  for (std::size_t i = 0; i < transport.size(); ++i) {
    if (i < skip.size() && skip[i]) {
      round->outcomes_[i].outcome = Outcome::held;
      round->outcomes_[i].error = "not sent";
      round->record(i, Outcome::held);
      ++round->finals_;
    } else if (!transport.send(i, round->call_, round, i, why)) {
      round->outcomes_[i].outcome = Outcome::error;
      round->outcomes_[i].error = why;
      round->record(i, Outcome::error);
      ++round->finals_;
    }
  }
  round->launching_ = false;
  return round;
}

bool QuorumRound::record(std::size_t slot, Outcome first) noexcept {
  const bool was = decided();
  const bool decided_now = tally_.record(first);
  if (permits_.empty()) return decided_now;
  const long long vote = first == Outcome::ok ? votes_[slot] : -1;
  for (std::size_t p = 0; p < permits_.size(); ++p) {
    permits_[p].record(first != Outcome::ok ? first : static_cast<long long>(p) == vote ? Outcome::ok : Outcome::held);
  }
  if (vote >= 0 && permits_[static_cast<std::size_t>(vote)].ok() > permits_[leading_].ok()) {
    leading_ = static_cast<std::size_t>(vote);
  }
  return !was && decided();
}

void QuorumRound::record_first(std::size_t slot) {
  const bool decided_now = record(slot, outcomes_[slot].outcome);
  if (listener_ == nullptr || launching_) return;
  if (decided_now) listener_->on_round_decided();
  if (listener_ != nullptr && settled()) listener_->on_round_settled();
}

void QuorumRound::on_node_event(std::size_t slot, const NodeEvent& event) {
  if (detached_) {
    // Nobody reads the outcomes any more: only wait for the finals. (A
    // paused master's late timeouts and failures cost no text then.)
    if (event.kind != EventKind::timeout) ++finals_;
    return maybe_free();
  }
  NodeOutcome& out = outcomes_[slot];
  // Phase 1 of a fenced acquire: every counter read counts, yes or no; so
  // does every ticket of a fair acquire, and the rank it reports.
  if (call_.command == CommandId::fenced_acquire && event.kind == EventKind::reply &&
      event.reply.type == ReplyView::Type::array && event.reply.item_count >= 2) {
    max_counter_ = std::max(max_counter_, event.reply.items[1]);
  }
  if (call_.command == CommandId::fair_acquire && event.kind == EventKind::reply && fair_reply(event.reply)) {
    max_counter_ = std::max(max_counter_, event.reply.items[1]);
    if (places_.empty()) places_.resize(outcomes_.size());
    places_[slot] = {.ticket = event.reply.items[1], .rank = event.reply.items[3]};
  }
  const bool first = out.outcome == Outcome::pending;
  if (event.kind != EventKind::timeout) ++finals_;
  if (first) {
    classify(call_.command, event, out);
    if (!permits_.empty() && out.outcome == Outcome::ok) {
      const bool fair = call_.command == CommandId::fair_acquire;
      const long long permit = fair ? (event.reply.item_count == 5 ? event.reply.items[4] : -1) : event.reply.items[1];
      if (permit < 0 || static_cast<std::size_t>(permit) >= permits_.size()) {
        out.outcome = Outcome::error;
        out.error = "unexpected reply: permit " + std::to_string(permit) + " of " + std::to_string(permits_.size());
      } else if (!counters_.empty() && (event.reply.item_count != 3 || event.reply.items[2] < 0)) {
        out.outcome = Outcome::error;  // a fenced permit without its counter: no fence can be drawn from it
        out.error = "unexpected reply: permit " + std::to_string(permit) + " without its fence counter";
      } else {
        votes_[slot] = static_cast<std::int16_t>(permit);
        if (!counters_.empty()) counters_[slot] = event.reply.items[2];
      }
    }
    if (out.outcome == Outcome::ok && !one_vote(yes_servers_, event.server)) {
      out.outcome = Outcome::error;
      out.error = std::string(same_server_text);
    }
    record_first(slot);
  }
  maybe_free();
}

std::vector<NodeOutcome> QuorumRound::take_outcomes() noexcept {
  std::vector<NodeOutcome> out = std::move(outcomes_);
  detach();  // nothing reads outcomes_ once detached
  return out;
}

void QuorumRound::detach() noexcept {
  listener_ = nullptr;
  detached_ = true;
  maybe_free();
}

void QuorumRound::maybe_free() noexcept {
  if (detached_ && finals_ == tally_.nodes()) delete this;
}

}  // namespace redlock::detail

std::size_t redlock::quorum_of(std::size_t nodes) noexcept { return detail::majority_of(nodes); }
