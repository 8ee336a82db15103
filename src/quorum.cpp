// quorum.cpp — the decision rule and the fan-out round.
#include "quorum.hpp"

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
    return;
  }
  if (is_acquire(command)) {
    if (r.type == ReplyView::Type::status && r.str == "OK") {
      out.outcome = Outcome::ok;
    } else if (command == CommandId::set_nx && r.type == ReplyView::Type::nil) {
      out.outcome = Outcome::held;  // SET NX says only "not set"
      out.error = "held by another token";
    } else if (command == CommandId::acquire && r.type == ReplyView::Type::integer) {
      out.outcome = Outcome::held;
      out.holder_ttl = std::chrono::milliseconds{r.integer};
      out.error = r.integer >= 0 ? "held by another token (expires in " + std::to_string(r.integer) + " ms)"
                                 : "held by another token (no expiry)";
    } else {
      unexpected(event, out);
    }
  } else if (r.type == ReplyView::Type::integer && (r.integer == 0 || r.integer == 1)) {
    out.outcome = r.integer == 1 ? Outcome::ok : Outcome::held;
    if (r.integer == 0) out.error = "token not present (expired, released, or another holder)";
  } else {
    unexpected(event, out);
  }
  if (out.outcome == Outcome::ok && event.quarantined && command != CommandId::release) {
    out.outcome = Outcome::quarantined;
    out.error = std::string(event.text);
  }
}

QuorumRound::QuorumRound(Transport& transport, Call call, RoundMode mode, RoundListener* listener)
    : call_(std::move(call)), tally_(transport.size(), mode), listener_(listener) {
  outcomes_.resize(transport.size());
  for (std::size_t i = 0; i < outcomes_.size(); ++i) outcomes_[i].address = transport.address(i);
}

QuorumRound* QuorumRound::launch(Transport& transport, Call call, RoundMode mode,
                                 RoundListener* listener) {
  auto* round = new QuorumRound(transport, std::move(call), mode, listener);
  std::string why;
  for (std::size_t i = 0; i < transport.size(); ++i) {
    if (!transport.send(i, round->call_, round, i, why)) {
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
  NodeOutcome& out = outcomes_[slot];
  const bool first = out.outcome == Outcome::pending;
  if (event.kind != EventKind::timeout) ++finals_;
  if (first) {
    classify(call_.command, event, out);
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
