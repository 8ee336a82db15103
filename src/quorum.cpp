// quorum.cpp — the decision rule and the fan-out round.
#include "quorum.hpp"

#include <algorithm>
#include <string>
#include <utility>

namespace redlock::detail {

QuorumTally::QuorumTally(std::size_t nodes, RoundMode mode) noexcept : nodes_(nodes), mode_(mode) {}

bool QuorumTally::record(Outcome first) noexcept {
  ++answered_;
  if (first == Outcome::ok) ++ok_;
  if (first == Outcome::held) ++held_;
  if (decided_) return false;

  const std::size_t unanswered = nodes_ - answered_;
  if (mode_ == RoundMode::majority) {
    if (ok_ >= quorum()) {
      decided_ = success_ = true;
    } else if (ok_ + unanswered < quorum()) {
      decided_ = true;
    }
  } else if (unanswered == 0 || ok_ + held_ >= quorum()) {
    decided_ = true;
  }
  return decided_;
}

bool QuorumTally::success() const noexcept {
  if (mode_ == RoundMode::majority) return success_;
  const std::size_t unconfirmed = nodes_ - ok_ - held_;
  return ok_ >= 1 && unconfirmed < quorum();
}

QuorumTally tally_of(const std::vector<NodeOutcome>& nodes, RoundMode mode) noexcept {
  QuorumTally tally(nodes.size(), mode);
  for (const NodeOutcome& n : nodes) {
    if (n.outcome != Outcome::pending) tally.record(n.outcome);
  }
  return tally;
}

bool refused_for_good(const std::vector<NodeOutcome>& nodes) noexcept {
  const auto held = static_cast<std::size_t>(
      std::count_if(nodes.begin(), nodes.end(), [](const NodeOutcome& n) { return n.outcome == Outcome::held; }));
  return !nodes.empty() && held > nodes.size() - majority_of(nodes.size());
}

long long QuorumRound::majority_rank() const {
  std::vector<long long> told;
  for (const FairPlace& p : places_) {
    if (p.rank >= 0) told.push_back(p.rank);
  }
  const std::size_t quorum = majority_of(outcomes_.size());
  if (told.size() < quorum) return -1;
  std::nth_element(told.begin(), told.begin() + static_cast<std::ptrdiff_t>(quorum - 1), told.end());
  return told[quorum - 1];
}

bool QuorumRound::tickets_agree() const {
  return !places_.empty() && std::all_of(places_.begin(), places_.end(), [this](const FairPlace& p) {
           return p.ticket < 0 || p.ticket == max_counter_;
         });
}

std::optional<std::chrono::milliseconds> majority_free_in(const std::vector<NodeOutcome>& nodes) {
  std::vector<long long> free_in;
  for (const NodeOutcome& n : nodes) {
    if (n.outcome == Outcome::ok) free_in.push_back(0);
    if (n.outcome == Outcome::held && n.holder_ttl.count() >= 0) free_in.push_back(n.holder_ttl.count());
  }
  const std::size_t quorum = majority_of(nodes.size());
  if (free_in.size() < quorum) return std::nullopt;
  std::nth_element(free_in.begin(), free_in.begin() + static_cast<std::ptrdiff_t>(quorum - 1), free_in.end());
  return std::chrono::milliseconds{free_in[quorum - 1]};
}

namespace {

std::string reply_text(const ReplyView& r) {
  switch (r.type) {
    case ReplyView::Type::integer: return "integer " + std::to_string(r.integer);
    case ReplyView::Type::nil: return "nil";
    case ReplyView::Type::array: return "array";
    default: return std::string(r.str);
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

// fair_reply: a fair acquire's [taken, ticket, pttl, rank] with a ticket a
// master holds exactly (below 2^53, as fences); any other ticket is no
// answer, and no waiter carries it to the other masters' queues.
bool fair_reply(const ReplyView& r) {
  return r.type == ReplyView::Type::array && r.item_count == 4 && r.items[1] >= 0 &&
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
    out.error = std::string(r.str);
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
  } else if (is_acquire(command)) {
    if (r.type == ReplyView::Type::status && r.str == "OK") {
      out.outcome = Outcome::ok;
    } else if (command == CommandId::set_nx && r.type == ReplyView::Type::nil) {
      out.outcome = Outcome::held;  // SET NX says only "not set"
      out.error = "held by another token";
    } else if ((command == CommandId::acquire || command == CommandId::multi_acquire) &&
               r.type == ReplyView::Type::integer) {
      held_by_another(r.integer, out);
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

QuorumRound::QuorumRound(Transport& transport, Call call, RoundMode mode, RoundListener* listener)
    : call_(std::move(call)), tally_(transport.size(), mode), listener_(listener) {
  outcomes_.resize(transport.size());
  for (std::size_t i = 0; i < outcomes_.size(); ++i) outcomes_[i].address = transport.address(i);
}

QuorumRound* QuorumRound::launch(Transport& transport, Call call, RoundMode mode, RoundListener* listener,
                                 const std::vector<bool>& skip) {
  auto* round = new QuorumRound(transport, std::move(call), mode, listener);
  std::string why;
  for (std::size_t i = 0; i < transport.size(); ++i) {
    if (i < skip.size() && skip[i]) {
      round->outcomes_[i].outcome = Outcome::held;
      round->outcomes_[i].error = "not sent";
      round->tally_.record(Outcome::held);
      ++round->finals_;
    } else if (!transport.send(i, round->call_, round, i, why)) {
      round->outcomes_[i].outcome = Outcome::error;
      round->outcomes_[i].error = why;
      round->tally_.record(Outcome::error);
      ++round->finals_;
    }
  }
  round->launching_ = false;
  return round;
}

void QuorumRound::record_first(std::size_t slot) {
  const bool decided_now = tally_.record(outcomes_[slot].outcome);
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
    if (out.outcome == Outcome::ok && event.server != 0) {
      if (std::find(yes_servers_.begin(), yes_servers_.end(), event.server) != yes_servers_.end()) {
        out.outcome = Outcome::error;
        out.error = "the same server as another master that already said yes (run id): one server, one vote";
      } else {
        yes_servers_.push_back(event.server);
      }
    }
    record_first(slot);
  }
  maybe_free();
}

void QuorumRound::detach() noexcept {
  listener_ = nullptr;
  detached_ = true;
  maybe_free();
}

void QuorumRound::maybe_free() noexcept {
  if (detached_ && finals_ == outcomes_.size()) delete this;
}

}  // namespace redlock::detail
