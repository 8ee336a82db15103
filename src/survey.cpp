// survey.cpp — see survey.hpp.
#include "survey.hpp"

#include <algorithm>
#include <charconv>
#include <map>

#include "keys.hpp"
#include "sabotage.hpp"
#include "scripts.hpp"

namespace redlock::detail {

void Survey::launch(Runtime& runtime, Transport& transport, Call call, Done done, std::function<void()> on_freed) {
  auto* s = new Survey(runtime, std::move(call), std::move(done), std::move(on_freed), transport.size());
  for (std::size_t i = 0; i < transport.size(); ++i) {
    std::string why;
    if (transport.send(i, s->call_, s, i, why)) {
      ++s->expected_finals_;
    } else {
      s->answers_[i].text = std::move(why);
      s->have_first_[i] = true;
      ++s->firsts_;
    }
  }
  s->launching_ = false;
  // Every send was refused: finish on the loop, not on the caller's stack.
  if (s->firsts_ == s->answers_.size()) s->later_->start(std::chrono::milliseconds{0});
}

Survey::Survey(Runtime& runtime, Call call, Done done, std::function<void()> on_freed, std::size_t nodes)
    : call_(std::move(call)),
      done_(std::move(done)),
      on_freed_(std::move(on_freed)),
      answers_(nodes),
      have_first_(nodes, false),
      later_(runtime.timer([this] { on_later(); })) {}

void Survey::on_node_event(std::size_t slot, const NodeEvent& event) {
  if (event.kind != EventKind::timeout) ++finals_;
  if (!have_first_[slot]) {
    have_first_[slot] = true;
    SurveyAnswer& a = answers_[slot];
    a.rtt = event.rtt;
    switch (event.kind) {
      case EventKind::reply:
        a.answered = true;
        a.reply_type = event.reply.type;
        a.integer = event.reply.integer;
        a.text.assign(event.reply.str);
        a.quarantined = event.quarantined;
        break;
      case EventKind::timeout:
        a.text = "no answer within " + std::to_string((event.rtt.count() + 500) / 1000) + " ms";
        break;
      case EventKind::failed: a.text.assign(event.text); break;
    }
    first_in();
  }
  maybe_free();
}

void Survey::first_in() {
  if (++firsts_ == answers_.size() && !launching_) finish();
}

void Survey::finish() {
  if (done_called_) return;
  done_called_ = true;
  Done done = std::move(done_);
  done(std::move(answers_));
  maybe_free();
}

void Survey::maybe_free() {
  if (!done_called_ || finals_ != expected_finals_ || freeing_) return;
  freeing_ = true;
  later_->start(std::chrono::milliseconds{0});
}

void Survey::on_later() {
  if (!freeing_) return finish();  // finish() may start the timer again to free
  std::function<void()> freed = std::move(on_freed_);
  delete this;  // destroys later_ inside its own fire: allowed (src/runtime.hpp)
  if (freed) freed();
}

namespace {

Error closed_error() { return make_error(Errc::closed, "the client was closed"); }

}  // namespace

void Reports::survey(Call call, Survey::Done done) {
  ++live_;
  Survey::launch(runtime_, nodes_, std::move(call), std::move(done), [this] { one_less(); });
}

void Reports::one_less() {
  if (--live_ == 0 && on_idle) on_idle();
}

// holdings: each node's inspect answer, as a ResourceStatus of `resource`
// (summarized).
ResourceStatus Reports::holdings(std::string resource, std::vector<SurveyAnswer>& answers) const {
  ResourceStatus st;
  st.resource = std::move(resource);
  st.nodes.resize(answers.size());
  for (std::size_t i = 0; i < answers.size(); ++i) {
    NodeHolding& h = st.nodes[i];
    SurveyAnswer& a = answers[sabotage().survey_slots ? (i + 1) % answers.size() : i];
    h.address = nodes_.address(i);
    h.rtt = a.rtt;
    h.quarantined = a.quarantined;
    if (!a.answered) {
      h.error = std::move(a.text);
    } else if (a.reply_type == ReplyView::Type::error) {
      h.error = "error reply: " + a.text;
    } else if (a.reply_type != ReplyView::Type::string) {
      h.error = "unexpected reply to the inspect script";
    } else {
      parse_inspect(a.text, h);
    }
  }
  summarize(st);
  return st;
}

void Reports::status(std::string resource, StatusDone done) {
  if (closing_) return answer_closed(std::move(done));
  std::string key = lock_key(prefix_, resource);
  std::string permits = permits_key(prefix_, resource);
  std::string permits_queue = queue_key_of(permits);
  std::string permits_expiry = expiry_key_of(permits);
  std::vector<std::string> more{fence_key_of(key),   queue_key_of(key),   expiry_key_of(key),
                                readers_key_of(key), writers_key_of(key), std::move(permits),
                                std::move(permits_queue), std::move(permits_expiry)};
  Call call{.command = CommandId::inspect, .key = std::move(key), .more_keys = std::move(more)};
  survey(std::move(call), [this, resource = std::move(resource), done = std::move(done)](
                              std::vector<SurveyAnswer> answers) mutable {
    if (closing_) return done(closed_error());
    ResourceStatus st = holdings(resource, answers);
    if (st.permits == 0) return done(std::move(st));
    permits_status(std::move(st), std::move(done));
  });
}

// permits_status: a semaphore's status — each of its permits surveyed as
// a lock of its own (its key and fence counter), all at once; done once
// the last is in (or at once with Errc::closed if the client closes
// meanwhile).
void Reports::permits_status(ResourceStatus st, StatusDone done) {
  struct Pending {
    ResourceStatus st;
    StatusDone done;
    std::size_t left;
    bool answered = false;
  };
  const std::size_t p = st.permits;
  auto pending = std::make_shared<Pending>(Pending{std::move(st), std::move(done), p});
  pending->st.permit_status.resize(p);
  for (std::size_t i = 0; i < p; ++i) {
    std::string key = permit_key(prefix_, pending->st.resource, i);
    std::vector<std::string> more{fence_key_of(key)};
    survey(Call{.command = CommandId::inspect, .key = std::move(key), .more_keys = std::move(more)},
           [this, pending, i](std::vector<SurveyAnswer> answers) {
             if (pending->answered) return;
             if (closing_) {
               pending->answered = true;
               return pending->done(closed_error());
             }
             pending->st.permit_status[i] = holdings(pending->st.resource, answers);
             if (--pending->left > 0) return;
             pending->answered = true;
             pending->done(std::move(pending->st));
           });
  }
}

void Reports::nodes(NodesDone done) {
  if (closing_) return answer_closed(std::move(done));
  survey(Call{.command = CommandId::ping}, [this, done = std::move(done)](std::vector<SurveyAnswer> answers) {
    if (closing_) return done(closed_error());
    NodesReport report;
    report.quorum = majority_of(nodes_.size());
    report.nodes.resize(answers.size());
    const auto now = runtime_.now();
    for (std::size_t i = 0; i < answers.size(); ++i) {
      NodeHealth& h = report.nodes[i];
      SurveyAnswer& a = answers[i];
      const ClusterMember* cluster = nodes_.cluster(i);
      const SentinelWatch* watch = nodes_.sentinel_watch(i);
      std::string why_not;  // what the member's own parts say of an unanswered PING
      if (cluster != nullptr) {
        cluster->health(now, h);
        why_not = std::move(h.error);
        h.error.clear();
      } else {
        const NodeSession& node = nodes_.node(i);
        h.address = node.address();
        h.version = node.server_version();
        h.run_id = node.run_id();
        h.replicas = static_cast<int>(node.replicas());
        if (watch != nullptr && watch->primary()) h.primary = node.serving().display();
        h.uptime = node.uptime(now);
        h.quarantine_left = node.quarantine_left(now);
        h.excluded = node.excluded();
        // No primary yet: why the sentinels have not named one.
        if (watch != nullptr && !watch->primary()) why_not = watch->last_error();
      }
      h.quarantined = h.quarantine_left.count() > 0 || !h.excluded.empty();
      if (a.answered && a.reply_type == ReplyView::Type::status) {
        h.reachable = true;
        h.rtt = a.rtt;
      } else if (a.answered) {
        h.error = "error reply to PING: " + a.text;
      } else {
        h.error = std::move(a.text);
        if (!why_not.empty()) h.error += " (" + why_not + ")";
      }
    }
    done(std::move(report));
  });
}

namespace {

bool parse_int(std::string_view text, long long& v) {
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  return ec == std::errc() && p == end;
}

}  // namespace

// take_count: "NAME COUNT " at the start of `text` → COUNT (> 0) into
// `out`, and `text` past it; absent → true, `out` untouched; malformed →
// false.
bool take_count(std::string_view& text, std::string_view name, std::size_t& out) {
  if (!text.starts_with(name) || text.size() == name.size() || text[name.size()] != ' ') return true;
  const std::string_view rest = text.substr(name.size() + 1);
  const std::size_t sp = rest.find(' ');
  long long count = 0;
  if (sp == std::string_view::npos || !parse_int(rest.substr(0, sp), count) || count <= 0) return false;
  out = static_cast<std::size_t>(count);
  text = rest.substr(sp + 1);
  return true;
}

bool parse_inspect(std::string_view text, NodeHolding& out) {
  out.queued = 0;
  out.lapsed = 0;
  out.readers = 0;
  out.writers_waiting = 0;
  out.permits = 0;
  out.queue_head.clear();
  const std::string_view all = text;
  auto unexpected = [&] {
    out.state = NodeHolding::State::unreachable;
    out.error = "unexpected reply to the inspect script: " + std::string(all.substr(0, 80));
    out.queued = 0;
    out.lapsed = 0;
    out.readers = 0;
    out.writers_waiting = 0;
    out.permits = 0;
    out.queue_head.clear();
    return false;
  };
  // "permits P " (a semaphore's), "readers COUNT ", "writers COUNT " (read
  // locks, writers waiting on them), then "lapsed COUNT " (waiters whose place lapsed, still in the
  // fair queue), each only when there are any.
  if (!take_count(text, "permits", out.permits) || !take_count(text, "readers", out.readers) ||
      !take_count(text, "writers", out.writers_waiting) || !take_count(text, "lapsed", out.lapsed)) {
    return unexpected();
  }
  if (text.starts_with("queue ")) {
    // "queue COUNT HEAD " before the holding (a fair queue with live waiters).
    text.remove_prefix(std::string_view("queue ").size());
    const std::size_t sp1 = text.find(' ');
    const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : text.find(' ', sp1 + 1);
    long long count = 0;
    if (sp2 == std::string_view::npos || sp2 == sp1 + 1 || !parse_int(text.substr(0, sp1), count) || count <= 0) {
      return unexpected();
    }
    out.queued = static_cast<std::size_t>(count);
    out.queue_head.assign(text.substr(sp1 + 1, sp2 - sp1 - 1));
    text.remove_prefix(sp2 + 1);
  }
  if (text.starts_with("wrongtype ")) {
    const std::string_view rest = text.substr(std::string_view("wrongtype ").size());
    const std::size_t sp = rest.find(' ');
    if (sp != std::string_view::npos && sp > 0 && sp + 1 < rest.size()) {
      const std::string_view kind = rest.substr(0, sp), key = rest.substr(sp + 1);
      out.state = NodeHolding::State::wrong_type;
      out.error = "WRONGTYPE: the key " + std::string(key) + " holds " +
                  (kind == "unknown" ? std::string("a value of another type") : "a " + std::string(kind)) +
                  (key.ends_with(":fence")   ? ", not a fence counter"
                   : key.ends_with(":queue") ? ", not a fair queue"
                   : key.ends_with(":expiry") ? ", not a fair queue's expiry set"
                   : key.ends_with(":readers") ? ", not a read-write lock's readers"
                   : key.ends_with(":writers") ? ", not a read-write lock's waiting writers"
                                             : ", not a lock");
      return true;
    }
  }
  const std::size_t sp1 = text.find(' ');
  long long pttl = 0, fence = 0;
  bool ok = sp1 != std::string_view::npos && parse_int(text.substr(0, sp1), pttl);
  std::string_view rest = ok ? text.substr(sp1 + 1) : std::string_view();
  const std::size_t sp2 = rest.find(' ');
  ok = ok && parse_int(rest.substr(0, sp2), fence) && fence >= 0;
  if (ok && pttl == -2 && sp2 == std::string_view::npos) {
    out.state = NodeHolding::State::free;
    out.fence = static_cast<std::uint64_t>(fence);
    return true;
  }
  if (ok && pttl >= -1 && pttl <= most_server_ttl.count() && sp2 != std::string_view::npos) {
    out.ttl = milliseconds{pttl};
    out.fence = static_cast<std::uint64_t>(fence);
    const std::string_view value = rest.substr(sp2 + 1);
    if (value == readers_mark) {  // held by readers: no token (none is ever the mark)
      out.state = NodeHolding::State::shared;
      out.token.clear();
      out.owner.reset();
      return true;
    }
    out.state = NodeHolding::State::held;
    out.token.assign(value);
    out.owner = owner_of(out.token);
    return true;
  }
  return unexpected();
}

namespace {

// quorum_reports: the count a quorum of counted masters reports at least
// (the quorum-th largest, 0 for a master that did not say); 0 when fewer
// than a quorum are counted.
std::size_t quorum_reports(const ResourceStatus& status, std::size_t NodeHolding::*count) {
  std::vector<long long> counts;
  for (const NodeHolding& n : status.nodes) {
    if (!n.quarantined) counts.push_back(static_cast<long long>(n.*count));
  }
  return static_cast<std::size_t>(quorum_at_least(counts, status.quorum).value_or(0));
}

// summarize_queue: the fair queue's live length and its lapsed waiters as
// a quorum reports them at least, and the head a quorum names.
void summarize_queue(ResourceStatus& status) {
  status.queue_head.clear();
  status.queued = quorum_reports(status, &NodeHolding::queued);
  status.lapsed = quorum_reports(status, &NodeHolding::lapsed);
  status.readers = quorum_reports(status, &NodeHolding::readers);
  status.writers_waiting = quorum_reports(status, &NodeHolding::writers_waiting);
  // A semaphore's P: one a majority says (no master may make a report
  // survey more permits than a semaphore may have).
  std::map<std::size_t, std::size_t> permits;
  for (const NodeHolding& n : status.nodes) {
    if (!n.quarantined && n.permits > 0) ++permits[n.permits];
  }
  status.permits = 0;
  for (const auto& [p, count] : permits) {
    if (p <= max_permits && quorum_says(count, status.nodes.size(), status.quorum)) status.permits = p;
  }
  std::map<std::string_view, std::size_t> heads;
  for (const NodeHolding& n : status.nodes) {
    if (!n.quarantined && n.queued > 0 && !n.queue_head.empty()) ++heads[n.queue_head];
  }
  for (const auto& [head, count] : heads) {
    if (quorum_says(count, status.nodes.size(), status.quorum)) status.queue_head = std::string(head);
  }
}

}  // namespace

void summarize(ResourceStatus& status) {
  status.quorum = majority_of(status.nodes.size());
  status.token.clear();
  status.owner.reset();
  status.agreeing = 0;
  status.free_nodes = 0;
  std::map<std::string_view, std::size_t> counts;
  std::size_t shared = 0;
  for (const NodeHolding& n : status.nodes) {
    if (n.quarantined) continue;
    if (n.state == NodeHolding::State::free) ++status.free_nodes;
    if (n.state == NodeHolding::State::held) ++counts[n.token];
    if (n.state == NodeHolding::State::shared) ++shared;
  }
  for (const auto& [token, count] : counts) {
    if (count > status.agreeing) {
      status.agreeing = count;
      status.token = std::string(token);
    }
  }
  status.owner = owner_of(status.token);
  summarize_queue(status);
  status.held = quorum_says(status.agreeing, status.nodes.size(), status.quorum);
  status.shared = quorum_says(shared, status.nodes.size(), status.quorum);
  status.ttl = milliseconds{0};
  if (status.held || status.shared) {
    // How long a majority still holds it: the quorum-th longest TTL (no
    // expiry counts as longest) of the holder's, or of the readers' mark.
    std::vector<long long> ttls;
    for (const NodeHolding& n : status.nodes) {
      const bool counts = status.held ? n.state == NodeHolding::State::held && n.token == status.token
                                      : n.state == NodeHolding::State::shared;
      if (!n.quarantined && counts) {
        ttls.push_back(n.ttl.count() < 0 ? std::numeric_limits<long long>::max() : n.ttl.count());
      }
    }
    const long long t = quorum_at_least(ttls, status.quorum).value_or(0);
    status.ttl = milliseconds{t == std::numeric_limits<long long>::max() ? -1 : t};
  }
}

}  // namespace redlock::detail
