// cluster_member.cpp — a Redis Cluster as one member. See cluster_member.hpp.
#include "cluster_member.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <set>
#include <utility>

#include "keys.hpp"
#include "resp.hpp"
#include "sabotage.hpp"
#include "scripts.hpp"
#include "slot.hpp"
#include "validity.hpp"

namespace redlock::detail {

namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

std::string endpoint_key(std::string_view host, int port) { return std::string(host) + ':' + std::to_string(port); }

// MarkerAnswer: a shard's marker answer as NodeSession::deliver_marker
// delivers it, "STATE EPOCH DECLARED_MS AGE_MS".
struct MarkerAnswer {
  std::string_view state;
  std::string_view epoch;
  long long age_ms = 0;
};

std::optional<MarkerAnswer> read_answer(std::string_view text) {
  std::string_view word[4];
  for (std::string_view& w : word) {
    const std::size_t space = text.find(' ');
    w = text.substr(0, space);
    text = space == std::string_view::npos ? std::string_view() : text.substr(space + 1);
  }
  MarkerAnswer a{word[0], word[1], 0};
  const auto [end, ec] = std::from_chars(word[3].data(), word[3].data() + word[3].size(), a.age_ms);
  if (a.state.empty() || a.epoch.empty() || ec != std::errc{} || end != word[3].data() + word[3].size()) {
    return std::nullopt;
  }
  return a;
}

}  // namespace

// Part — one command on its way through the member: to the slot's owner,
// again after a redirect (attempt counts them; each attempt's events carry
// it in their tag, so a late event of an earlier one is told apart), and
// for an acquire followed by its slot's marker (tag + 1).
struct ClusterMember::Part final : ReplySink {
  ClusterMember* member = nullptr;
  const Call* call = nullptr;  // the engine's, or a Gather's part
  ReplySink* sink = nullptr;   // the engine's (null: a Gather's part)
  std::size_t tag = 0;
  Gather* gather = nullptr;
  std::size_t index = 0;  // in the gather
  std::size_t at = 0;     // in live_
  int slot = 0;
  bool guarded = false;  // an acquire: its marker follows it
  unsigned attempt = 0;
  unsigned redirects = 0;
  unsigned outstanding = 0;  // accepted sends whose final event is still to come
  NodeSession* session = nullptr;
  bool asking = false;
  bool unguarded = false;  // the marker could not be sent behind it
  bool timeout_sent = false;
  bool done = false;
  bool held = false;
  NodeEvent held_ev;
  std::string held_text;   // held_ev.reply.str's bytes
  std::string held_why;    // held_ev.text's (a session's text changes as time passes)
  std::string text;  // a final event's text
  Clock::time_point sent{};

  void on_node_event(std::size_t t, const NodeEvent& ev) override { member->on_event(*this, t, ev); }
};

// Gather — an extend_batch whose keys lie in several slots: one batch per
// slot, answered as one string of flags in the caller's order.
struct ClusterMember::Gather {
  ReplySink* sink = nullptr;
  std::size_t tag = 0;
  std::vector<Call> calls;                      // one per slot
  std::vector<std::vector<std::size_t>> where;  // each call's keys' places in the caller's batch
  std::size_t left = 0;                         // parts not yet answered
  std::size_t alive = 0;                        // parts not yet released
  bool timeout_sent = false;
  bool failed = false;
  bool quarantined = false;
  std::uint64_t server = 0;
  std::string text;
  std::string flags;
  Clock::time_point sent{};
};

ClusterMember::ClusterMember(Runtime& runtime, WireFactory& wires, WireFactory& map_wires,
                             const NodeAddress& address, const Options& options, const std::string* shas,
                             QuarantineShare* share, std::function<void()> on_closed)
    : runtime_(runtime),
      wires_(wires),
      address_(address),
      display_(address.display()),
      options_(options),
      shas_(shas),
      share_(share),
      on_closed_(std::move(on_closed)),
      owner_(slot_count, nullptr),
      topology_(
          runtime, map_wires, address, options, [this](const SlotMap& map) { on_map(map); },
          [this] { part_closed(); }) {
  parts_open_ = 1;  // the topology
}

ClusterMember::~ClusterMember() = default;

void ClusterMember::start() { topology_.start(); }

void ClusterMember::close() {
  if (closing_) return;
  closing_ = true;
  if (map_timer_) map_timer_->stop();
  // Never sent: each fails, on a later turn (close() may be called from a
  // sink's event).
  for (Part* p : awaiting_map_) p->text = "client closed";
  if (!awaiting_map_.empty()) {
    close_hold_ = true;  // closed once they have failed
    ++parts_open_;
  }
  fail_later(awaiting_map_);
  awaiting_map_.clear();
  for (auto& [name, session] : sessions_) session->close();
  topology_.close();
}

// fail_later: these parts fail on the next loop turn, each with its text
// (never inside send() or close()).
void ClusterMember::fail_later(const std::vector<Part*>& parts) {
  if (parts.empty()) return;
  to_fail_.insert(to_fail_.end(), parts.begin(), parts.end());
  if (fail_timer_ == nullptr) {
    fail_timer_ = runtime_.timer([this] {
      std::vector<Part*> failing;
      failing.swap(to_fail_);
      for (Part* p : failing) {
        NodeEvent ev;
        ev.kind = EventKind::failed;
        ev.text = p->text;
        finish(*p, ev);
      }
      if (close_hold_) {
        close_hold_ = false;
        part_closed();
      }
    });
  }
  if (!fail_timer_->active()) fail_timer_->start(milliseconds{0});
}

void ClusterMember::part_closed() {
  if (parts_open_ > 0) --parts_open_;
  if (parts_open_ > 0 || closed_reported_) return;
  closed_reported_ = true;
  if (on_closed_) on_closed_();
}

void ClusterMember::reapply_quarantine() {
  for (auto& [name, session] : sessions_) session->reapply_quarantine();
}

NodeSession* ClusterMember::session_for(const std::string& host, int port) {
  const std::string key = endpoint_key(host, port);
  if (auto it = sessions_.find(key); it != sessions_.end()) return it->second.get();
  if (closing_ || sessions_.size() >= max_shards) return nullptr;
  NodeAddress shard = address_;
  shard.kind = NodeAddress::Kind::tcp;
  shard.host = host;
  shard.port = port;
  shard.seeds.clear();
  auto session = std::make_unique<NodeSession>(runtime_, wires_, shard, options_, shas_, [this] { part_closed(); });
  session->as_shard();
  session->share(share_);
  session->observe(telemetry_, index_);
  NodeSession* raw = session.get();
  sessions_.emplace(key, std::move(session));
  ++parts_open_;
  raw->start();
  return raw;
}

void ClusterMember::on_map(const SlotMap& map) {
  if (closing_) return;
  if (!map_ || patched_ || !(*map_ == map)) {
    patched_ = false;
    std::vector<NodeSession*> by_shard;
    for (const ClusterShard& shard : map.shards) by_shard.push_back(session_for(shard.host, shard.port));
    for (int s = 0; s < slot_count; ++s) {
      const std::uint16_t i = map.owners[static_cast<std::size_t>(s)];
      owner_[static_cast<std::size_t>(s)] = i == SlotMap::no_shard ? nullptr : by_shard[i];
    }
    map_ = map;
  }
  if (map_timer_) map_timer_->stop();
  if (on_map_read_) on_map_read_(map);
  std::vector<Part*> waiting;
  waiting.swap(awaiting_map_);
  for (Part* p : waiting) {
    if (!dispatch(*p, p->text)) {
      NodeEvent ev;
      ev.kind = EventKind::failed;
      ev.text = p->text;
      finish(*p, ev);
    }
  }
}

void ClusterMember::on_map_timer() {
  std::vector<Part*> waiting;
  waiting.swap(awaiting_map_);
  for (Part* p : waiting) {
    p->text = "no slot map from the cluster within " + std::to_string(options_.connect_timeout.count()) + " ms";
    if (!topology_.last_error().empty()) p->text += " (" + topology_.last_error() + ")";
    NodeEvent ev;
    ev.kind = EventKind::failed;
    ev.text = p->text;
    finish(*p, ev);
  }
}

ClusterMember::SlotState& ClusterMember::slot_state(int slot) {
  auto [it, fresh] = slots_.try_emplace(slot);
  if (fresh) {
    Call& m = it->second.marker;
    m.command = CommandId::marker;
    m.key = slot_marker_key(slot);
    m.more_keys = {slot_marker_server_key(slot), slot_marker_replid_key(slot)};
  }
  return it->second;
}

bool ClusterMember::send(const Call& call, ReplySink* sink, std::size_t tag, std::string& why) {
  if (closing_) {
    why = "client closed";
    return false;
  }
  const Clock::time_point now = runtime_.now();
  auto make_part = [&](const Call* c, int slot) {
    auto part = std::make_unique<Part>();
    part->member = this;
    part->call = c;
    part->slot = slot;
    part->guarded = is_acquire(c->command);
    part->sent = now;
    part->at = live_.size();
    Part* raw = part.get();
    live_.push_back(std::move(part));
    return raw;
  };
  // One slot (every call but a batch across slots): one part, and no
  // allocation for the keys.
  auto send_one = [&](int slot) {
    if (map_ && owner_[static_cast<std::size_t>(slot)] == nullptr) {
      why = "slot " + std::to_string(slot) + " of cluster " + display_ + " is served by no primary";
      return false;
    }
    Part* part = make_part(&call, slot);
    part->sink = sink;
    part->tag = tag;
    if (!map_) {
      await_map(part);
      return true;
    }
    if (dispatch(*part, why)) return true;
    live_.pop_back();
    return false;
  };
  auto refuse_slots = [&](const std::vector<int>& slots) {
    why = "keys in " + std::to_string(std::set<int>(slots.begin(), slots.end()).size()) + " hash slots of cluster " +
          display_ + " in one call (a call of several resources needs them in one slot)";
    return false;
  };
  if (call.encoded_key_count == 0) {
    const int slot = hash_slot(call.key);
    for (const std::string& k : call.more_keys) {
      if (hash_slot(k) == slot) continue;
      std::vector<int> slots{slot};
      for (const std::string& other : call.more_keys) slots.push_back(hash_slot(other));
      return refuse_slots(slots);
    }
    return send_one(slot);
  }
  // A batch: its keys' slots, in the caller's order.
  std::vector<std::string_view> keys;
  if (!resp::split_bulks(call.encoded_keys, call.encoded_key_count, keys)) {
    why = "a batch's keys do not read back";
    return false;
  }
  std::vector<int> slots;
  slots.reserve(keys.size());
  for (std::string_view k : keys) slots.push_back(hash_slot(k));
  if (std::all_of(slots.begin(), slots.end(), [&](int s) { return s == slots.front(); })) return send_one(slots.front());
  if (call.command != CommandId::extend_batch) return refuse_slots(slots);
  if (map_) {
    for (int s : slots) {
      if (owner_[static_cast<std::size_t>(s)] == nullptr) {
        why = "slot " + std::to_string(s) + " of cluster " + display_ + " is served by no primary";
        return false;
      }
    }
  }
  // An extend_batch over several slots: one batch per slot.
  std::vector<std::string_view> args;
  if (!resp::split_bulks(call.encoded_args, call.encoded_arg_count, args) || args.size() != 2 * keys.size()) {
    why = "a batch's arguments do not read back";
    return false;
  }
  auto gather = std::make_unique<Gather>();
  Gather& g = *gather;
  g.sink = sink;
  g.tag = tag;
  g.sent = now;
  g.flags.assign(keys.size(), '0');
  std::map<int, std::size_t> by_slot;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    auto [it, fresh] = by_slot.try_emplace(slots[i], g.calls.size());
    if (fresh) {
      g.calls.emplace_back().command = CommandId::extend_batch;
      g.where.emplace_back();
    }
    Call& c = g.calls[it->second];
    resp::append_bulk(c.encoded_keys, keys[i]);
    resp::append_bulk(c.encoded_args, args[2 * i]);
    resp::append_bulk(c.encoded_args, args[2 * i + 1]);
    ++c.encoded_key_count;
    c.encoded_arg_count += 2;
    g.where[it->second].push_back(i);
  }
  g.left = g.alive = g.calls.size();
  std::vector<Part*> parts;
  for (std::size_t i = 0; i < g.calls.size(); ++i) {
    Part* part = make_part(&g.calls[i], hash_slot(keys[g.where[i].front()]));
    part->gather = &g;
    part->index = i;
    parts.push_back(part);
  }
  gathers_.push_back(std::move(gather));
  // Some parts may go and others not: the batch has taken, and its failure
  // is reported as an event, on a later turn (never inside send).
  std::vector<Part*> refused;
  for (Part* part : parts) {
    if (!map_) {
      await_map(part);
    } else if (!dispatch(*part, part->text)) {
      refused.push_back(part);
    }
  }
  fail_later(refused);
  return true;
}

// await_map: the part waits for the first map, at most connect_timeout.
void ClusterMember::await_map(Part* part) {
  awaiting_map_.push_back(part);
  if (map_timer_ == nullptr) map_timer_ = runtime_.timer([this] { on_map_timer(); });
  if (!map_timer_->active()) map_timer_->start(options_.connect_timeout);
}

// dispatch sends the part's current attempt: to the slot's owner, or after
// an ASK to the node it names (part.asking, part.session set).
bool ClusterMember::dispatch(Part& part, std::string& why) {
  if (!part.asking) part.session = owner_[static_cast<std::size_t>(part.slot)];
  if (part.session == nullptr) {
    why = "slot " + std::to_string(part.slot) + " of cluster " + display_ + " is served by no primary";
    return false;
  }
  const std::size_t tag = 2 * static_cast<std::size_t>(part.attempt);
  if (!part.session->send(*part.call, &part, tag, why, part.asking)) return false;
  ++part.outstanding;
  part.unguarded = false;
  if (part.guarded) {
    SlotState& st = slot_state(part.slot);
    // A fresh epoch until the marker was met intact, and after each loss:
    // a marker written again after a loss never carries an epoch that a
    // client met before it.
    if (st.marker.arg1.empty() || !st.met || st.renew) {
      if (Result<std::string> epoch = runtime_.random_token()) {
        st.marker.arg1 = *epoch;
        st.renew = false;
      }
    }
    st.marker.arg2 = std::to_string(part.session->period().count());
    std::string ignored;
    if (!st.marker.arg1.empty() && part.session->send(st.marker, &part, tag + 1, ignored, part.asking)) {
      ++part.outstanding;
    } else {
      part.unguarded = true;  // its yes cannot count
    }
  }
  return true;
}

void ClusterMember::on_event(Part& part, std::size_t t, const NodeEvent& ev) {
  if (ev.kind != EventKind::timeout && part.outstanding > 0) --part.outstanding;
  const bool current = t / 2 == part.attempt;
  const bool is_marker = t % 2 == 1;
  const Clock::time_point now = runtime_.now();
  if (!current || part.done) {
    // An earlier attempt's marker, or one behind a command already final:
    // it still teaches the slot's state.
    if (is_marker && ev.kind == EventKind::reply && current) judge_marker(part, ev, now);
    if (part.done && part.outstanding == 0) release(part);
    return;
  }
  if (ev.kind == EventKind::timeout) {
    if (is_marker || part.timeout_sent) return;
    part.timeout_sent = true;
    if (part.gather != nullptr) return gather(*part.gather, part.index, ev);
    part.sink->on_node_event(part.tag, ev);
    return;
  }
  if (!is_marker) {
    if (ev.kind == EventKind::reply && ev.reply.type == ReplyView::Type::error) {
      const std::optional<Redirect> r = parse_redirect(ev.reply.str, part.session->serving().host);
      if (r && (r->kind == Redirect::Kind::moved || r->kind == Redirect::Kind::ask)) {
        if (part.redirects >= max_redirects) {
          part.text = "slot " + std::to_string(part.slot) + " of cluster " + display_ + ": more than " +
                      std::to_string(max_redirects) + " redirects";
          NodeEvent failed;
          failed.kind = EventKind::failed;
          failed.text = part.text;
          return finish(part, failed);
        }
        ++part.redirects;
        ++part.attempt;
        // A redirect names the slot it is about: another slot's is no
        // answer to this command (a broken or lying node).
        NodeSession* to = r->slot == part.slot ? session_for(r->to.host, r->to.port) : nullptr;
        if (r->kind == Redirect::Kind::moved) {
          // The slot is served there now: so the map says until the next
          // reading, asked for at once.
          if (to != nullptr) {
            owner_[static_cast<std::size_t>(r->slot)] = to;
            patched_ = true;
          }
          topology_.refresh("MOVED");
          part.asking = false;
        } else {
          part.asking = true;
          part.session = to;
        }
        if (to == nullptr || !dispatch(part, part.text)) {
          if (to == nullptr) {
            part.text = r->slot != part.slot ? "a redirect for slot " + std::to_string(r->slot) + " answered a command of slot " +
                                                   std::to_string(part.slot)
                                             : "cannot open a connection to " + endpoint_key(r->to.host, r->to.port);
          }
          NodeEvent failed;
          failed.kind = EventKind::failed;
          failed.text = part.text;
          return finish(part, failed);
        }
        return;
      }
      if (r && r->kind == Redirect::Kind::down) topology_.refresh("CLUSTERDOWN");
    }
    if (ev.kind == EventKind::failed || !part.guarded) return finish(part, ev);
    if (part.unguarded) {
      part.text = "the data-loss check of slot " + std::to_string(part.slot) + " could not be sent";
      NodeEvent failed;
      failed.kind = EventKind::failed;
      failed.text = part.text;
      return finish(part, failed);
    }
    // Held until the slot's marker, written right behind it, answers.
    part.held = true;
    part.held_ev = ev;
    part.held_text.assign(ev.reply.str);
    part.held_ev.reply.str = part.held_text;
    part.held_why.assign(ev.text);
    part.held_ev.text = part.held_why;
    return;
  }
  // The marker behind an acquire.
  if (!part.held) return;  // the acquire itself failed: nothing waits
  if (ev.kind == EventKind::failed) {
    part.text = "connection lost before the data check";
    NodeEvent failed;
    failed.kind = EventKind::failed;
    failed.rtt = ev.rtt;
    failed.text = part.text;
    return finish(part, failed);
  }
  judge_marker(part, ev, now);
  NodeEvent out = part.held_ev;
  out.rtt = duration_cast<std::chrono::microseconds>(now - part.sent);
  std::string_view why;
  if (out.quarantined) {
    part.text.assign(out.text);
  } else if (ev.reply.type != ReplyView::Type::string) {
    out.quarantined = true;
    part.text = "slot " + std::to_string(part.slot) + ": the data-loss check answered " +
                (ev.reply.type == ReplyView::Type::error ? resp::server_text(ev.reply.str) : std::string("no string")) +
                " (the slot may have moved during the round)";
  } else if (part.session->vote_blocked(now, why)) {
    out.quarantined = true;
    part.text.assign(why);
  } else if (slot_blocked(part.slot, now, part.text)) {
    out.quarantined = true;
  } else if (!part.asking && owner_[static_cast<std::size_t>(part.slot)] != part.session &&
             !sabotage().any_shard_votes) {
    out.quarantined = true;
    part.text = "slot " + std::to_string(part.slot) + " moved to another shard during the round";
  }
  if (out.quarantined) out.text = part.text;
  finish(part, out);
}

// judge_marker: a slot's marker as its owner had it right after an
// acquire ran (see NodeSession::handle_marker, whose judgement this is,
// per slot): created, replaced, another epoch than the one known, or
// younger than the quarantine period: the slot may have lost keys, and
// sits out the period from then.
void ClusterMember::judge_marker(Part& part, const NodeEvent& ev, Clock::time_point now) {
  if (ev.reply.type != ReplyView::Type::string) return;  // a redirect: it judged nothing
  const std::optional<MarkerAnswer> a = read_answer(ev.reply.str);
  if (!a) return;
  SlotState& st = slot_state(part.slot);
  const bool seen_before = st.met;
  const bool lost = a->state == "created" || a->state == "replaced" || (!st.epoch.empty() && a->epoch != st.epoch);
  st.epoch.assign(a->epoch);
  st.met = true;
  const bool clean = a->state == "clean" && !lost;
  if (sabotage().no_data_check || sabotage().any_shard_votes) return;
  const milliseconds period = part.session->period();
  const std::string name = "slot " + std::to_string(part.slot);
  if (lost) {
    note_slot_loss(part.slot, now,
                   a->state == "replaced" ? name + ": another server now (its marker was written by another run_id)"
                   : !seen_before         ? name + ": new, or lost its keys (no marker yet)"
                   : a->state == "created" ? name + ": lost its keys (marker missing)"
                                           : name + ": lost its keys (marker replaced)");
  } else if (!clean && milliseconds{a->age_ms} < period) {
    note_slot_loss(part.slot, now - milliseconds{a->age_ms},
                   name + ": new, or lost its keys (marker written " + std::to_string(a->age_ms) + " ms ago)");
  }
}

void ClusterMember::note_slot_loss(int slot, Clock::time_point at, std::string reason) {
  SlotState& st = slot_state(slot);
  st.renew = true;
  if (!st.last_loss || at > *st.last_loss) {
    st.last_loss = at;
    st.reason = std::move(reason);
  }
}

bool ClusterMember::slot_blocked(int slot, Clock::time_point now, std::string& why) const {
  const milliseconds left = slot_quarantine_left(slot, now);
  if (left.count() == 0) return false;
  why = slots_.at(slot).reason + "; quarantined for another " + std::to_string(left.count()) + " ms";
  return true;
}

milliseconds ClusterMember::slot_quarantine_left(int slot, Clock::time_point now) const {
  if (!options_.quarantine || sabotage().no_quarantine) return milliseconds{0};
  const auto it = slots_.find(slot);
  if (it == slots_.end() || !it->second.last_loss) return milliseconds{0};
  const Clock::time_point until = *it->second.last_loss + loss_period(options_, *share_);
  return now < until ? std::chrono::ceil<milliseconds>(until - now) : milliseconds{0};
}

void ClusterMember::finish(Part& part, const NodeEvent& ev) {
  part.done = true;
  if (part.gather != nullptr) {
    gather(*part.gather, part.index, ev);
  } else {
    part.sink->on_node_event(part.tag, ev);
  }
  if (part.outstanding == 0) release(part);
}

void ClusterMember::gather(Gather& g, std::size_t index, const NodeEvent& ev) {
  if (ev.kind == EventKind::timeout) {
    if (g.timeout_sent) return;
    g.timeout_sent = true;
    g.sink->on_node_event(g.tag, ev);
    return;
  }
  if (g.left == 0) return;
  --g.left;
  const std::vector<std::size_t>& where = g.where[index];
  if (ev.kind == EventKind::failed) {
    if (!g.failed) g.text = "slot batch " + std::to_string(index) + ": " + std::string(ev.text);
    g.failed = true;
  } else if (ev.reply.type != ReplyView::Type::string || ev.reply.str.size() != where.size()) {
    if (!g.failed) {
      g.text = "slot batch " + std::to_string(index) + " answered " +
               (ev.reply.type == ReplyView::Type::error ? resp::server_text(ev.reply.str)
                                                          : std::string("no string of one flag per key"));
    }
    g.failed = true;
  } else {
    for (std::size_t i = 0; i < where.size(); ++i) g.flags[where[i]] = ev.reply.str[i];
    if (g.server == 0) g.server = ev.server;
    if (ev.quarantined && !g.quarantined) {
      g.quarantined = true;
      if (g.text.empty()) g.text.assign(ev.text);
    }
  }
  if (g.left > 0) return;
  NodeEvent out;
  out.rtt = duration_cast<std::chrono::microseconds>(runtime_.now() - g.sent);
  if (g.failed) {
    out.kind = EventKind::failed;
    out.text = g.text;
  } else {
    out.kind = EventKind::reply;
    out.reply.type = ReplyView::Type::string;
    out.reply.str = g.flags;
    out.server = g.server;
    out.quarantined = g.quarantined;
    if (g.quarantined) out.text = g.text;
  }
  g.sink->on_node_event(g.tag, out);
}

void ClusterMember::release(Part& part) {
  Gather* g = part.gather;
  const std::size_t at = part.at;  // O(1): the part knows its place
  std::swap(live_[at], live_.back());
  live_[at]->at = at;
  live_.pop_back();  // `part` is gone
  if (g != nullptr && --g->alive == 0) {
    std::erase_if(gathers_, [g](const std::unique_ptr<Gather>& x) { return x.get() == g; });
  }
}

void ClusterMember::health(Clock::time_point now, NodeHealth& out) const {
  out.address = display_;
  out.primary.clear();
  if (map_) {
    for (const ClusterShard& shard : map_->shards) {
      if (!out.primary.empty()) out.primary += ' ';
      out.primary += endpoint_key(shard.host, shard.port);
    }
  }
  out.replicas = -1;
  for (const auto& [name, session] : sessions_) {
    const std::string& version = session->server_version();
    if (!version.empty() && (out.version.empty() || version < out.version)) out.version = version;
    const std::chrono::seconds up = session->uptime(now);
    if (up.count() >= 0 && (out.uptime.count() < 0 || up < out.uptime)) out.uptime = up;
    out.quarantine_left = std::max(out.quarantine_left, session->quarantine_left(now));
    if (out.excluded.empty() && !session->excluded().empty()) out.excluded = name + ": " + session->excluded();
  }
  if (!map_ && !topology_.last_error().empty()) out.error = topology_.last_error();
}

}  // namespace redlock::detail
