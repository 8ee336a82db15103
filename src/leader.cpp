// leader.cpp — see leader.hpp; and Reports' election rounds (survey.hpp).
#include "leader.hpp"

#include <charconv>
#include <map>

#include "keys.hpp"
#include "leader_watch.hpp"
#include "quorum.hpp"
#include "scripts.hpp"
#include "survey.hpp"

namespace redlock::detail {

namespace {

// take_number: a decimal number and the blank after it, from the front of
// `text`, within [low, high].
bool take_number(std::string_view& text, long long low, long long high, long long& out) {
  const std::size_t sp = text.find(' ');
  if (sp == std::string_view::npos || sp == 0) return false;
  const char* end = text.data() + sp;
  auto [p, ec] = std::from_chars(text.data(), end, out);
  if (ec != std::errc() || p != end || out < low || out > high) return false;
  text.remove_prefix(sp + 1);
  return true;
}

constexpr long long max_term = static_cast<long long>(max_fence);
constexpr long long max_length = 1LL << 40;

}  // namespace

std::optional<LeaderRecord> parse_leader_record(std::string_view text) {
  long long term = 0, rev = 0, since = 0, token_size = 0, identity_size = 0;
  if (!take_number(text, 0, max_term, term) || !take_number(text, 0, max_term, rev) ||
      !take_number(text, 0, max_term, since) || !take_number(text, 0, max_length, token_size) ||
      !take_number(text, 0, max_length, identity_size)) {
    return std::nullopt;
  }
  const auto tokens = static_cast<std::size_t>(token_size), identities = static_cast<std::size_t>(identity_size);
  if (tokens > text.size() || identities > text.size() - tokens) return std::nullopt;
  LeaderRecord r;
  r.term = static_cast<std::uint64_t>(term);
  r.rev = static_cast<std::uint64_t>(rev);
  r.token = text.substr(0, tokens);
  r.identity = text.substr(tokens, identities);
  r.value = text.substr(tokens + identities);
  return r;
}

std::optional<LeaderAnswer> parse_leader_read(std::string_view text) {
  long long pttl = 0, led = 0, lock_size = 0, record_size = 0;
  const long long most_ttl = most_server_ttl.count();
  if (!take_number(text, -2, most_ttl, pttl) || !take_number(text, -1, max_term, led) ||
      !take_number(text, 0, max_length, lock_size) || !take_number(text, 0, max_length, record_size)) {
    return std::nullopt;
  }
  const auto locks = static_cast<std::size_t>(lock_size), records = static_cast<std::size_t>(record_size);
  if (locks > text.size() || records != text.size() - locks) return std::nullopt;
  LeaderAnswer a;
  a.pttl = pttl;
  a.led_ms = led;
  a.lock = text.substr(0, locks);
  if (records > 0) a.record = parse_leader_record(text.substr(locks));
  return a;
}

LeaderStatus leader_verdict(std::string name, const std::vector<std::optional<LeaderAnswer>>& answers,
                            std::size_t quorum) {
  LeaderStatus st;
  st.name = std::move(name);
  st.quorum = quorum;
  // Per token: the answers that hold it in the lock and name it.
  std::map<std::string_view, std::vector<const LeaderAnswer*>> backing;
  const LeaderAnswer* newest = nullptr;
  for (const std::optional<LeaderAnswer>& a : answers) {
    if (!a) continue;
    ++st.answered;
    if (!a->record) continue;
    const LeaderRecord& r = *a->record;
    if (newest == nullptr || std::pair(r.term, r.rev) > std::pair(newest->record->term, newest->record->rev)) {
      newest = &*a;
    }
    if (a->pttl != -2 && a->lock == r.token) backing[r.token].push_back(&*a);
  }
  const auto info = [](const LeaderAnswer& a) {
    const LeaderRecord& r = *a.record;
    return LeaderInfo{.identity = r.identity,
                      .term = r.term,
                      .value = r.value,
                      .led_for = std::chrono::milliseconds{std::max(a.led_ms, 0LL)},
                      .token = r.token};
  };
  for (const auto& [token, held] : backing) {
    if (!quorum_says(held.size(), answers.size(), quorum)) continue;
    const LeaderAnswer* best = held.front();
    std::vector<long long> ttls;
    for (const LeaderAnswer* a : held) {
      if (a->record->rev > best->record->rev) best = a;
      ttls.push_back(a->pttl < 0 ? most_server_ttl.count() : a->pttl);
    }
    st.leader = info(*best);
    st.expires_in = std::chrono::milliseconds{quorum_at_least(ttls, quorum).value_or(0)};
    return st;
  }
  if (newest != nullptr) st.last = info(*newest);
  return st;
}

std::string leader_problem(std::string_view identity, std::string_view value) {
  if (identity.size() > max_identity_size) {
    return "identity of " + std::to_string(identity.size()) + " bytes: at most " + std::to_string(max_identity_size);
  }
  if (value.size() > max_leader_value_size) {
    return "value of " + std::to_string(value.size()) + " bytes: at most " + std::to_string(max_leader_value_size);
  }
  return {};
}

// ---- Reports' election rounds ------------------------------------------------

void Reports::leader(std::string resource, LeaderDone done) {
  if (closing_) return answer_closed(std::move(done));
  std::string key = lock_key(prefix_, resource);
  std::vector<std::string> more{leader_key_of(key)};
  Call call{.command = CommandId::leader_read, .key = std::move(key), .more_keys = std::move(more)};
  survey(std::move(call), [this, resource = std::move(resource), done = std::move(done)](
                              std::vector<SurveyAnswer> answers) mutable {
    if (closing_) return answer_closed(std::move(done));
    std::vector<std::optional<LeaderAnswer>> parsed(answers.size());
    std::string why;
    for (std::size_t i = 0; i < answers.size(); ++i) {
      const SurveyAnswer& a = answers[i];
      if (a.answered && !a.quarantined && a.reply_type == ReplyView::Type::string) parsed[i] = parse_leader_read(a.text);
      if (!parsed[i] && why.empty()) {
        why = nodes_.address(i) + ": " +
              (!a.answered                                 ? a.text
               : a.quarantined                             ? std::string("quarantined")
               : a.reply_type == ReplyView::Type::error    ? "error reply: " + resp::server_text(a.text)
                                                           : std::string("unexpected reply to the leader_read script"));
      }
    }
    const std::size_t quorum = majority_of(answers.size());
    LeaderStatus st = leader_verdict(std::move(resource), parsed, quorum);
    if (st.answered < quorum) {
      return done(make_error(Errc::no_quorum, "leader of " + st.name + " unknown: " + std::to_string(st.answered) +
                                                  " of " + std::to_string(answers.size()) + " masters answered, " +
                                                  std::to_string(quorum) + " needed (" + why + ")"));
    }
    done(std::move(st));
  });
}

void Reports::proclaim(Proclaim p, VoidDone done) {
  if (closing_) return answer_closed(std::move(done));
  std::string key = lock_key(prefix_, p.resource);
  std::string channel = leader_channel_of(key);
  std::vector<std::string> more{leader_key_of(key)};
  Call call{.command = CommandId::leader_proclaim,
            .key = std::move(key),
            .arg1 = std::move(p.token),
            .arg2 = std::to_string(p.term),
            .more_keys = std::move(more),
            .more_args = {std::to_string(p.rev), std::move(p.identity), std::move(p.value), std::move(channel)}};
  survey(std::move(call), [this, resource = std::move(p.resource), done = std::move(done)](
                              std::vector<SurveyAnswer> answers) mutable {
    if (closing_) return answer_closed(std::move(done));
    std::size_t yes = 0;
    std::string why;
    for (std::size_t i = 0; i < answers.size(); ++i) {
      const SurveyAnswer& a = answers[i];
      const bool ok = a.answered && !a.quarantined && a.reply_type == ReplyView::Type::integer && a.integer == 1;
      yes += ok ? 1 : 0;
      if (!ok && why.empty()) {
        why = nodes_.address(i) + ": " +
              (!a.answered                              ? a.text
               : a.quarantined                          ? std::string("quarantined")
               : a.reply_type == ReplyView::Type::error ? "error reply: " + resp::server_text(a.text)
               : a.reply_type == ReplyView::Type::integer && a.integer == 0
                   ? std::string("the lock is not this leader's there")
                   : std::string("unexpected reply to the leader_proclaim script"));
      }
    }
    const std::size_t quorum = majority_of(answers.size());
    if (quorum_says(yes, answers.size(), quorum)) return done(Result<void>{});
    done(make_error(Errc::no_quorum, "leader record of " + resource + " written on " + std::to_string(yes) + " of " +
                                         std::to_string(answers.size()) + " masters, " + std::to_string(quorum) +
                                         " needed (" + why + ")"));
  });
}

void Reports::resign(std::string resource, std::string token, VoidDone done) {
  if (closing_) return answer_closed(std::move(done));
  std::string key = lock_key(prefix_, resource);
  Call call{.command = CommandId::leader_resign,
            .key = leader_key_of(key),
            .arg1 = std::move(token),
            .arg2 = leader_channel_of(key)};
  survey(std::move(call), [this, done = std::move(done)](std::vector<SurveyAnswer>) mutable {
    if (closing_) return answer_closed(std::move(done));
    done(Result<void>{});
  });
}

std::uint64_t Reports::observe(std::string resource, std::chrono::milliseconds retry,
                               std::chrono::milliseconds safety_net, std::shared_ptr<WatchLink> link,
                               LeaderWatchCallback callback) {
  const std::uint64_t id = ++next_watch_;
  std::string channel = leader_channel_of(lock_key(prefix_, resource));
  auto w = std::make_shared<LeaderWatcher>(*this, id, runtime_, nodes_, std::move(resource), std::move(channel), retry,
                                           safety_net, std::move(link), std::move(callback));
  watchers_.emplace(id, w);
  if (closing_) {
    // (as every call after close(): Errc::closed, on a later loop turn)
    ++live_;
    runtime_.post([this, id] {
      unobserve(id, true);
      one_less();
    });
    return id;
  }
  w->start();
  return id;
}

void Reports::unobserve(std::uint64_t id, bool closed) {
  const auto it = watchers_.find(id);
  if (it == watchers_.end()) return;
  std::shared_ptr<LeaderWatcher> w = std::move(it->second);
  watchers_.erase(it);
  w->end(closed);
}

void Reports::close() {
  closing_ = true;
  auto watchers = std::exchange(watchers_, {});
  for (auto& [id, w] : watchers) w->end(true);
}

}  // namespace redlock::detail
