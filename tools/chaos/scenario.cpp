// scenario.cpp — the scenario catalogue. Times are fractions of the run, so
// the same schedule works for the short CI runs and the long ones.
#include "scenario.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include "redis_cluster.hpp"
#include "redlock/options.hpp"

namespace redlock::chaos {

namespace {

int at(int duration_ms, double fraction) { return static_cast<int>(duration_ms * fraction); }

// pause_for pauses masters `nodes` at `start` for `length` ms.
void pause_for(std::vector<Action>& plan, std::vector<std::size_t> nodes, int start, int length) {
  plan.push_back({start, [nodes](Stage& s) {
                    for (auto i : nodes) s.bed.pause(i);
                  }});
  plan.push_back({start + length, [nodes](Stage& s) {
                    for (auto i : nodes) s.bed.resume(i);
                  }});
}

std::vector<Action> no_faults(int, std::mt19937&) { return {}; }

// proxy_for sets `settings` on the proxies of `nodes` for `listener` ("0":
// client group 0, "1": group 1, "*": both) from `start` to `end`.
void proxy_for(std::vector<Action>& plan, std::vector<std::size_t> nodes, std::string listener,
               std::string settings, int start, int end) {
  plan.push_back({start, [=](Stage& s) {
                    for (auto i : nodes) s.bed.proxy(i, listener, settings);
                  }});
  plan.push_back({end, [=](Stage& s) {
                    for (auto i : nodes) s.bed.unproxy(i, listener);
                  }});
}

// slow_replies: every reply to client group 0 arrives 250 ms late, while its
// SETs land at once. A client that does not subtract the time its round
// took believes its lock valid up to 250 ms after the masters expired it;
// group 1, unhindered, gets in then. (TTL 600 ms, node timeout 300 ms.)
std::vector<Action> slow_replies(int d, std::mt19937&) {
  std::vector<Action> plan;
  proxy_for(plan, {0, 1, 2, 3, 4}, "0", "delay_down=250", at(d, 0.02), at(d, 0.98));
  return plan;
}

// paired: a scenario that exists twice, with the real client (safe) and
// with a broken one (`sabotage`, which must show a violation).
Scenario paired(std::string name, std::string about, std::string sabotage) {
  Scenario s;
  s.name = std::move(name);
  s.about = std::move(about);
  s.expect = sabotage.empty() ? Expect::safe : Expect::violation;
  s.sabotage = std::move(sabotage);
  return s;
}

// slow_replies_scenario: the settings every slow-reply run shares (TTL
// 600 ms, node timeout 300 ms, greedy holders resting 200-600 ms, group 1
// of two workers unhindered, at least 8 s); with `sabotage` the broken
// client, which must be caught (three in group 1, at least 20 s).
Scenario slow_replies_scenario(std::string name, std::string about, std::string sabotage = "",
                               double worker_clock_rate = 1.0) {
  Scenario s = paired(std::move(name), std::move(about), std::move(sabotage));
  s.ttl_ms = 600;
  s.node_timeout_ms = 300;
  s.greedy = true;
  s.rest_ms = "200:600";
  s.nemesis = slow_replies;
  s.proxied = true;
  s.group_b = 2;
  s.worker_clock_rate = worker_clock_rate;
  s.min_seconds = 8;
  if (!s.sabotage.empty()) {
    // Caught only when a group-1 client, not another slow group-0 one, wins
    // the race at the broken holder's key expiry: more of them, and more
    // handoffs, so that a run without a catch is vanishingly rare. They
    // poll: a waiter woken by the TTL it was told races the slow group in
    // lockstep and rarely lands in the broken holder's extra time.
    s.group_b = 3;
    s.min_seconds = 20;
    s.polling = true;
  }
  return s;
}

// group_0_loses_4_5: masters 4 and 5 blackholed for client group 0 from
// 20 % to 70 % of the run (the semaphore and read-write partitions).
std::vector<Action> group_0_loses_4_5(int d, std::mt19937&) {
  std::vector<Action> plan;
  proxy_for(plan, {3, 4}, "0", "blackhole=1", at(d, 0.2), at(d, 0.7));
  return plan;
}

// stale_bytes: bytes sent on a connection the client has since dropped
// still reach the master, after everything sent on its replacement (issue
// 12). Client group 0 never reaches masters 4 and 5 (blackholed), and
// reaches master 1 through a path that, once a second, delays what it
// carries by 700 ms for 150 ms. Group 0's attempts then fail (masters 2
// and 3 are all it has), and each one's rollback on master 1 queues behind
// its delayed SET; the workers' stall timeout (200 ms) drops that
// connection; its replacement, made after the delay was lifted, is fast,
// so a retry wins masters 1, 2 and 3 — and then the old connection's
// delayed bytes land on master 1: the SET of a failed attempt and the
// rollback behind it (the proxies keep bytes in flight after the client
// closed: ChaosBed). A client that wrote one value for every attempt of a
// call (the first design) deletes its own winning key with that rollback,
// and group 1, which reaches every master directly and polls, takes
// masters 1, 4 and 5 while the first lock is valid. The stale bytes land
// within 850 ms of a cycle's start, before the next one.
std::vector<Action> stale_bytes(int d, std::mt19937&) {
  std::vector<Action> plan;
  proxy_for(plan, {3, 4}, "0", "blackhole=1", at(d, 0.02), at(d, 0.95));
  for (int t = at(d, 0.02) + 100; t + 900 < at(d, 0.95); t += 1000) {
    proxy_for(plan, {0}, "0", "delay_up=700", t, t + 150);
  }
  return plan;
}

// stale_bytes_scenario: the settings the stale-bytes runs share: greedy
// holders with TTL 600 ms (a lock taken after the lift is still held when
// the stale rollback lands, and handoffs are frequent enough that the lock
// is free in most cycles' window), polling (group 1 tries while it is
// held: nothing is published then), rests of 100-400 ms (a releaser does
// not take the lock straight back), node timeout 50 ms, stall timeout
// 200 ms, five workers in group 0 and one in group 1 (so that group 0 wins
// most free moments). With `sabotage` the broken client, which must be
// caught every run: at least 8 s, about seven cycles, of which about three
// in four show an overlap.
// crossing_rounds_scenario: a broken client whose violation needs attempts
// that cross on the masters: twelve contenders, no rest, no faults, at
// least 8 s.
Scenario crossing_rounds_scenario(std::string name, std::string about, std::string sabotage) {
  return {.name = std::move(name),
          .about = std::move(about),
          .expect = Expect::violation,
          .sabotage = std::move(sabotage),
          .workers = 12,
          .hold_ms = "0:2",
          .rest_ms = "0:0",
          .nemesis = no_faults,
          .min_seconds = 8};
}

Scenario stale_bytes_scenario(std::string name, std::string about, std::string sabotage = "") {
  Scenario s = paired(std::move(name), std::move(about), std::move(sabotage));
  s.ttl_ms = 600;
  s.stall_timeout_ms = 200;
  s.greedy = true;
  s.rest_ms = "100:400";
  s.polling = true;
  s.nemesis = stale_bytes;
  s.proxied = true;
  s.group_b = 1;
  s.min_seconds = 6;
  if (!s.sabotage.empty()) s.min_seconds = 8;
  return s;
}

// flush_rounds: FLUSHALL on three masters at once, `rounds` times spread
// over the run, alternating masters 1-3 and 3-5: data lost without a
// restart, under greedy holders. The holder's key survives on two masters;
// the three flushed ones would make a new majority for the next contender
// unless the client sees the loss (the data-loss marker is gone with the
// rest) and lets them sit out max_ttl + drift.
std::vector<Action> flush_rounds(int d, int rounds) {
  std::vector<Action> plan;
  for (int r = 0; r < rounds; ++r) {
    const std::vector<std::size_t> nodes = r % 2 == 0 ? std::vector<std::size_t>{0, 1, 2} : std::vector<std::size_t>{2, 3, 4};
    plan.push_back({at(d, 0.15 + 0.75 * r / rounds), [nodes](Stage& s) {
                      for (auto i : nodes) s.bed.flushall(i);
                    }});
  }
  return plan;
}

// flushall_scenario: quarantine on, greedy holders, polling contenders (a
// contender must try while the holder holds: nothing is published then).
// The real client sits the flushed masters out; the broken one
// (`no_data_check`) must be caught every run.
Scenario flushall_scenario(std::string name, std::string about, std::string sabotage = "") {
  Scenario s = paired(std::move(name), std::move(about), std::move(sabotage));
  s.quarantine = true;
  s.greedy = true;
  s.polling = true;
  s.min_seconds = 6;
  // Three flushed masters sit out 2 s, and nobody can lock meanwhile: two
  // rounds leave the real client time to work; the broken one gets five.
  const int rounds = s.sabotage.empty() ? 2 : 5;
  s.nemesis = [rounds](int d, std::mt19937&) { return flush_rounds(d, rounds); };
  return s;
}

// The Sentinel scenarios: members 1-3 are Sentinel-managed pairs (a
// primary, its replica, a sentinel), members 4 and 5 lone masters, so
// failing the three over at once changes the server behind a majority.
// SENTINEL FAILOVER promotes the replica at once, while the old primary
// keeps answering until its clients hear +switch-master (up to a second:
// the sentinel waits for the promoted one's next INFO): every lock key and
// release written on the old primaries meanwhile is missing on the new
// ones — a replica that lags by a window, as any async replica can. (A
// replica stopped with SIGSTOP lags nothing: what the primary sent waits
// in its socket buffer and is applied once it runs, even after the primary
// was killed.) A greedy holder that won in that window on all three still
// holds a valid lock when the clients move; the new primaries lack its key
// and, once the key of the holder before (replicated, its release not)
// expires, a polling contender wins members 1-3: two holders, unless the
// client sees the new servers (another run id and replid) and lets them
// sit out the quarantine. Each failover takes about 2 s.
constexpr std::size_t kSentinelMembers = 3;

// sentinel_failovers: the safe run's schedule — members 1-3 failed over
// at once (SENTINEL FAILOVER); then the primaries of members 1 and 2
// killed at once (kill -9: the sentinels promote the replicas after
// down-after, 1 s) and rejoined as replicas, wiped; then members 1-3 once
// more, two of them now promoting a server that rejoined without data.
std::vector<Action> sentinel_failovers(int d, std::mt19937&) {
  return {{at(d, 0.05), [](Stage& s) { s.bed.fail_over({0, 1, 2}); }},
          {at(d, 0.35), [](Stage& s) { s.bed.kill_primary({0, 1}); }},
          {at(d, 0.7), [](Stage& s) { s.bed.fail_over({0, 1, 2}); }}};
}

// sentinel_failover_rounds: members 1-3 failed over at once, round after
// round, from 5 % to 85 % of the run: each round is one chance for the
// broken client (a greedy acquisition inside the rounds' common window).
std::vector<Action> sentinel_failover_rounds(int d, std::mt19937&) {
  const int from = at(d, 0.05), to = at(d, 0.85);
  return {{from, [length = to - from](Stage& s) {
             const std::int64_t end = monotonic_ns() + std::int64_t{length} * 1'000'000;
             while (monotonic_ns() < end) s.bed.fail_over({0, 1, 2});
           }}};
}

// sentinel_scenario: quarantine on, greedy holders, polling contenders (a
// contender must try while a holder holds: nothing is published then).
// The real client quarantines every new primary; the broken one
// (`no_failover_check`) counts it at once.
Scenario sentinel_scenario(std::string name, std::string about, std::string sabotage = "") {
  Scenario s = paired(std::move(name), std::move(about), std::move(sabotage));
  s.quarantine = true;
  s.greedy = true;
  s.polling = true;
  s.sentinel_members = static_cast<int>(kSentinelMembers);
  // Three locks (six workers, each turn on one drawn at random): a round's
  // window catches a greedy acquisition of any of them.
  s.crews = {Crew{.workers = 6, .resource = "chaos", .resources = 3}};
  s.min_seconds = 8;
  s.nemesis = s.sabotage.empty() ? sentinel_failovers : sentinel_failover_rounds;
  return s;
}

// The Cluster scenarios: members 1-3 are Redis Clusters (three shards of a
// primary and its replica each), members 4 and 5 lone masters, so a fault
// of the three clusters at once takes the lock's keys from a majority. The
// faults hit only the shards that own the locks' slots: the loss is
// partial — a member that lost one slot's keys still has every other slot,
// its shards the same servers, their run ids and replids unchanged — and
// only the slot's own data-loss marker (redlock-marker{T}, in that slot)
// tells it. A greedy holder whose keys went from members 1-3 still holds a
// valid lock; a polling contender wins members 1-3 again (SET NX on a
// slot that is empty now) unless the client sees the slot's marker gone,
// or written by another server, and lets the slot sit out the quarantine.
constexpr std::size_t kClusterMembers = 3;

// lock_slots: the hash slots of the lock keys of the crew's resources, as
// the workers name them (R, or R-0 … R-(n-1)): Options::prefix + "{R}:lock"
// (src/keys.hpp), whose hash tag is the resource.
std::vector<int> lock_slots(const Crew& crew) {
  std::vector<int> slots;
  for (int r = 0; r < crew.resources; ++r) {
    const std::string resource = crew.resources > 1 ? crew.resource + "-" + std::to_string(r) : crew.resource;
    const int slot = test::ClusterBed::hash_slot(redlock::Options{}.prefix + "{" + resource + "}:lock");
    if (std::find(slots.begin(), slots.end(), slot) == slots.end()) slots.push_back(slot);
  }
  return slots;
}

// cluster_reassigns: the safe run's schedule — every lock's slot handed,
// without its keys, to another shard on members 1-3 at once; then on
// members 2 and 3 only (member 1, 4 and 5 keep a majority that still
// votes); then migrated the standard way on members 1-3 (keys and marker
// move; the marker names the old shard's server: replaced); then reassigned
// on members 1-3 once more.
std::vector<Action> cluster_reassigns(int d, const std::vector<int>& slots) {
  return {{at(d, 0.05), [slots](Stage& s) { s.bed.cluster_reassign({0, 1, 2}, slots); }},
          {at(d, 0.3), [slots](Stage& s) { s.bed.cluster_reassign({1, 2}, slots); }},
          {at(d, 0.5), [slots](Stage& s) { s.bed.cluster_migrate({0, 1, 2}, slots); }},
          {at(d, 0.65), [slots](Stage& s) { s.bed.cluster_reassign({0, 1, 2}, slots); }}};
}

// cluster_reassign_rounds: every lock's slot reassigned without its keys
// on members 1-3 at once, round after round, from 5 % to 85 % of the run:
// each round is one chance for the broken client (a greedy holder whose
// keys on members 1-3 vanish while it holds). 300 ms between rounds: the
// clusters' gossip settles (epochs, UPDATE messages) before the next
// SETSLOT; back to back, one reassignment in about 240 did not converge.
std::vector<Action> cluster_reassign_rounds(int d, const std::vector<int>& slots) {
  const int from = at(d, 0.05), to = at(d, 0.85);
  return {{from, [slots, length = to - from](Stage& s) {
             const std::int64_t end = monotonic_ns() + std::int64_t{length} * 1'000'000;
             while (monotonic_ns() < end) {
               s.bed.cluster_reassign({0, 1, 2}, slots);
               std::this_thread::sleep_for(std::chrono::milliseconds{300});
             }
           }}};
}

// cluster_failovers: the primary of the first lock's shard killed on
// members 1-3 at once (the clusters promote the replicas after
// cluster-node-timeout, 1 s), the killed servers rejoining, empty, as
// replicas; then the last lock's shard on members 1 and 2; then the first
// lock's shard on members 1-3 again (promoting the servers that rejoined).
// A promoted replica has the keys it was sent, not always all of them,
// and another run id: the slot's marker names the server that wrote it.
std::vector<Action> cluster_failovers(int d, const std::vector<int>& slots) {
  const int first = slots.front(), last = slots.back();
  return {{at(d, 0.05), [first](Stage& s) { s.bed.cluster_failover({0, 1, 2}, first); }},
          {at(d, 0.3), [last](Stage& s) { s.bed.cluster_failover({0, 1}, last); }},
          {at(d, 0.55), [first](Stage& s) { s.bed.cluster_failover({0, 1, 2}, first); }}};
}

// cluster_scenario: quarantine on, greedy holders, polling contenders (a
// contender must try while a holder holds: nothing is published then) on
// three locks, at least 12 s (each fault takes 1-3 s, and the slots sit
// out 2 s after it; the last fault's recovery must fall in the run);
// `schedule` gets the locks' slots. The real
// client quarantines a slot that lost its keys; the broken one
// (`any_shard_votes`) counts a shard's yes at once.
Scenario cluster_scenario(std::string name, std::string about,
                          std::vector<Action> (*schedule)(int, const std::vector<int>&), std::string sabotage = "") {
  Scenario s = paired(std::move(name), std::move(about), std::move(sabotage));
  s.quarantine = true;
  s.greedy = true;
  s.polling = true;
  s.cluster_members = static_cast<int>(kClusterMembers);
  s.crews = {Crew{.workers = 6, .resource = "chaos", .resources = 3}};
  s.min_seconds = 12;
  const std::vector<int> slots = lock_slots(s.crews.front());
  s.nemesis = [schedule, slots](int d, std::mt19937&) { return schedule(d, slots); };
  return s;
}

std::vector<Action> kill_and_restart(std::vector<std::size_t> nodes, int d) {
  return {{at(d, 0.3), [nodes](Stage& s) {
             for (auto i : nodes) s.bed.kill(i);
           }},
          {at(d, 0.6), [nodes](Stage& s) {
             for (auto i : nodes) s.bed.restart(i, false);
           }}};
}

// Three masters lose their data one after another while greedy holders keep
// the lock: after the third wipe the current holder's key survives on only
// two masters, and three empty ones make a new majority unless quarantined.
// The three wipes of a triple are 90 ms apart whatever the run's length, so
// one greedy hold (~1 s) spans them. `rounds` triples are spread over the
// run (more rounds, more chances for a broken client to be caught).
std::vector<Action> rolling_wipes(int d, int rounds) {
  std::vector<Action> plan;
  for (int r = 0; r < rounds; ++r) {
    const int base = at(d, 0.25 + 0.6 * r / rounds);
    for (std::size_t i = 0; i < 3; ++i) {
      plan.push_back({base + 90 * static_cast<int>(i), [i](Stage& s) { s.bed.restart(i, true); }});
    }
  }
  return plan;
}

std::vector<Action> one_wipe_round(int d, std::mt19937&) { return rolling_wipes(d, 1); }
std::vector<Action> three_wipe_rounds(int d, std::mt19937&) { return rolling_wipes(d, 3); }

std::vector<Action> repeated_short_pauses(int d, std::mt19937&) {
  std::vector<Action> plan;
  for (int t = at(d, 0.1); t < at(d, 0.9); t += 250) pause_for(plan, {1, 2}, t, 20);
  return plan;
}

// Each worker in turn is stopped (SIGSTOP) for 1.5 TTL at a random moment:
// in the middle of an acquire round, while waiting, or inside its critical
// section.
std::vector<Action> client_pauses(int d, long ttl_ms) {
  std::vector<Action> plan;
  const int length = static_cast<int>(ttl_ms * 3 / 2);
  for (int k = 0; k < 4; ++k) {
    const int start = at(d, 0.1 + 0.2 * k);
    plan.push_back({start, [k, length](Stage& s) {
                      auto& worker = *s.workers[static_cast<std::size_t>(k) % s.workers.size()];
                      s.bed.pause_process(worker, "pause client " + std::to_string(k));
                    }});
    plan.push_back({start + length, [k](Stage& s) {
                      s.bed.resume_process(*s.workers[static_cast<std::size_t>(k) % s.workers.size()]);
                    }});
  }
  return plan;
}

// crowd_faults: crowd-64's schedule — master 0 killed and restarted with
// its data, masters 1 and 2 paused for half the TTL meanwhile (no majority
// for those 500 ms), and four client processes paused for 1.5 x the TTL.
std::vector<Action> crowd_faults(int d, std::mt19937&) {
  std::vector<Action> plan = kill_and_restart({0}, d);
  pause_for(plan, {1, 2}, at(d, 0.45), 500);
  for (Action& a : client_pauses(d, 1000)) plan.push_back(std::move(a));
  return plan;
}

// SoakMix — how the soak nemesis draws its faults.
struct SoakMix {
  double from = 0.05, to = 0.85;  // the part of the run with faults
  // settle_ms: how long a master stays out after a kill, a wiped restart or
  // a pause has ended (its quarantine, the clients' reconnect); it counts
  // as faulty meanwhile.
  int settle_ms = 0;
  bool delays = false;  // also delay and jitter a master's traffic (the bed needs its proxies)
  int clients = 6;      // client pauses stop one of the first `clients` workers
  int client_pause_max_ms = 1500;
};

// soak mixes every master fault at random — kill and restart with data,
// restart with data wiped, pauses from 10 ms to 1.5 TTL, and with
// `mix.delays` delays of 1-20 ms plus 0-20 ms jitter each way — with never
// more than two masters faulty at once, plus client pauses. A new fault
// starts every 100-500 ms unless two masters are faulty then.
std::vector<Action> soak(int d, std::mt19937& rng, const SoakMix& mix) {
  struct Busy {
    std::size_t node;
    int from, to;
  };
  std::vector<Busy> busy;
  std::vector<Action> plan;
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int t = at(d, mix.from); t < at(d, mix.to); t += uniform(100, 500)) {
    const int length = uniform(10, 1500);
    // Faults are drawn in time order: every busy one started at or before t.
    auto overlapping = [&](const Busy& b) { return b.from < t + length + 100 && t < b.to + 100; };
    if (std::count_if(busy.begin(), busy.end(), overlapping) >= 2) continue;
    std::size_t node = static_cast<std::size_t>(uniform(0, 4));
    while (std::any_of(busy.begin(), busy.end(), [&](const Busy& b) { return b.node == node && overlapping(b); })) {
      node = (node + 1) % 5;
    }
    busy.push_back({node, t, t + length + mix.settle_ms});
    switch (uniform(0, mix.delays ? 4 : 3)) {
      case 0:  // kill -9, back with its data
        plan.push_back({t, [node](Stage& s) { s.bed.kill(node); }});
        plan.push_back({t + length, [node](Stage& s) { s.bed.restart(node, false); }});
        break;
      case 1:  // back without its data: the quarantine must keep it out
        plan.push_back({t, [node](Stage& s) { s.bed.restart(node, true); }});
        break;
      case 2:
        pause_for(plan, {node}, t, length);
        break;
      case 4: {  // slow, not out: nothing to settle
        const int delay = uniform(1, 20), jitter = uniform(0, 20);
        const std::string each_way = "delay_up=" + std::to_string(delay) + " jitter_up=" + std::to_string(jitter) +
                                     " delay_down=" + std::to_string(delay) + " jitter_down=" + std::to_string(jitter);
        proxy_for(plan, {node}, "*", each_way, t, t + length);
        busy.back().to = t + length;
        break;
      }
      default: {  // a client instead
        const int k = uniform(0, mix.clients - 1);
        const int pause = std::min(length, mix.client_pause_max_ms);
        plan.push_back({t, [k](Stage& s) {
                          s.bed.pause_process(*s.workers[static_cast<std::size_t>(k) % s.workers.size()],
                                              "pause client " + std::to_string(k));
                        }});
        plan.push_back({t + pause, [k](Stage& s) {
                          s.bed.resume_process(*s.workers[static_cast<std::size_t>(k) % s.workers.size()]);
                        }});
        busy.pop_back();
      }
    }
  }
  return plan;
}

// leader_faults: the nemesis of the election scenarios, against whoever
// leads at the moment (the masters' reading): every 1.25 s the leader is
// killed (SIGKILL; a fresh worker takes its place), and 450 ms later the
// leader then — elected after the kill — is stopped (SIGSTOP) for 700 ms,
// over twice the TTL of 300 ms: its lease runs out while it is stopped, a
// new leader is elected and beats, and the stopped one, mostly stopped in
// its work between its leading() check and its write, writes late once it
// runs again. A 3 s run has two kills and two pauses.
std::vector<Action> leader_faults(int d, std::mt19937&) {
  constexpr int kPauseAfter = 450, kPause = 700, kCycle = 1250;
  constexpr std::chrono::milliseconds kWithin{2000};
  std::vector<Action> plan;
  for (int t = at(d, 0.05); t + kPauseAfter + kPause < at(d, 0.95); t += kCycle) {
    plan.push_back({t, [kWithin](Stage& s) {
                      const int k = s.await_leader(kWithin);
                      if (k >= 0) s.replace(static_cast<std::size_t>(k), "kill client " + std::to_string(k) + " (leader)");
                    }});
    auto paused = std::make_shared<int>(-1);
    plan.push_back({t + kPauseAfter, [kWithin, paused](Stage& s) {
                      *paused = s.await_leader(kWithin);
                      if (*paused < 0) return;
                      s.bed.pause_process(*s.workers[static_cast<std::size_t>(*paused)],
                                          "pause client " + std::to_string(*paused) + " (leader)");
                    }});
    plan.push_back({t + kPauseAfter + kPause, [paused](Stage& s) {
                      if (*paused >= 0) s.bed.resume_process(*s.workers[static_cast<std::size_t>(*paused)]);
                    }});
  }
  return plan;
}

std::vector<Scenario> build() {
  std::vector<Scenario> all;
  auto add = [&](Scenario s) { all.push_back(std::move(s)); };

  add({.name = "baseline", .about = "six client processes contend for one lock, no faults", .nemesis = no_faults});
  add({.name = "threads",
       .about = "three processes of three client threads each (one shared Client per process), no faults",
       .workers = 3,
       .threads = 3,
       .nemesis = no_faults});
  add({.name = "kill-1-restart",
       .about = "kill -9 one master, restart it with its data (appendfsync always)",
       .appendfsync_always = true,
       .nemesis = [](int d, std::mt19937&) { return kill_and_restart({0}, d); }});
  add({.name = "kill-2-restart",
       .about = "kill -9 two masters, restart them with their data (appendfsync always)",
       .appendfsync_always = true,
       .nemesis = [](int d, std::mt19937&) { return kill_and_restart({0, 1}, d); }});
  add({.name = "kill-3",
       .about = "kill -9 three of five: no acquisition may succeed until they are back; "
                "each attempt fails within wait + node timeout",
       .appendfsync_always = true,
       .wait_ms = 200,
       .nemesis = [](int d, std::mt19937&) { return kill_and_restart({0, 1, 2}, d); },
       .majority_down = true});
  add({.name = "wipe-quarantine",
       .about = "three masters restart without their data one after another; quarantine keeps them out",
       .quarantine = true,
       .greedy = true,
       .nemesis = one_wipe_round});
  add(flushall_scenario("flushall",
                        "FLUSHALL on three masters at once, twice, under greedy holders; the lost marker makes them sit out"));
  add({.name = "wipe-no-quarantine",
       .about = "the same without quarantine: breaks the persistence assumption; must show overlaps",
       .expect = Expect::violation,
       .greedy = true,
       .nemesis = three_wipe_rounds,
       .min_seconds = 6});
  add({.name = "pause-short",
       .about = "SIGSTOP two masters for 20 ms (< node timeout), every 250 ms",
       .nemesis = repeated_short_pauses});
  add({.name = "pause-half-ttl",
       .about = "SIGSTOP two masters for half the TTL",
       .nemesis = [](int d, std::mt19937&) {
         std::vector<Action> plan;
         pause_for(plan, {1, 2}, at(d, 0.3), 500);
         return plan;
       }});
  add({.name = "pause-beyond-ttl",
       .about = "SIGSTOP two masters for 1.5 x the TTL",
       .nemesis = [](int d, std::mt19937&) {
         std::vector<Action> plan;
         pause_for(plan, {1, 2}, at(d, 0.2), 1500);
         return plan;
       }});
  add({.name = "client-pause",
       .about = "SIGSTOP clients for 1.5 x TTL at random moments (mid-round, waiting, holding)",
       .greedy = true,
       .nemesis = [](int d, std::mt19937&) { return client_pauses(d, 1000); }});
  add({.name = "crowd-64",
       .about = "64 waiters (8 processes of 8 client threads) on one lock, holding 1-5 ms: a master killed and "
                "restarted with its data, two paused for half the TTL, client processes paused",
       .appendfsync_always = true,
       .workers = 8,
       .threads = 8,
       .hold_ms = "1:5",
       .nemesis = crowd_faults,
       .min_seconds = 6});
  {
    // The same crowd and faults, every acquire fair (AcquireOptions::fair):
    // the 64 waiters queue on every master and are served in arrival order.
    // A paused process leaves up to eight waiters in the queue that cannot
    // come (fair waiters do not wait in their client's line), and they are
    // next to one another: a process's threads join together and FIFO keeps
    // them together. Liveness bound: grants never stop for 3 s = the client
    // pause (1.5 s; once it ends its waiters come) + the TTL (1 s: a
    // holder, or an attempt that set the key, paused with it) + 2 x
    // fair_grace (0.5 s: one head that does not come). Runs only when named
    // (docs/chaos.md, "crowd-64-fair"): it passes only when each of the 64
    // clients was served, which a 6 s run under ASan on a loaded machine
    // (about 100 grants in a normal build) does not always reach.
    Scenario s;
    s.name = "crowd-64-fair";
    s.about = "crowd-64 with every acquire fair (arrival order across processes): the same faults; "
              "no overlap, and no stall of the grants beyond the bound";
    s.appendfsync_always = true;
    s.workers = 8;
    s.threads = 8;
    s.hold_ms = "1:5";
    s.nemesis = crowd_faults;
    s.min_seconds = 6;
    s.fair = true;
    s.max_grant_gap_ms = 3000;
    s.on_demand = true;
    add(std::move(s));
  }
  add({.name = "many-leases",
       .about = "six processes hold 200 leases each (TTL 2 s, extended by their watchdogs) for the run: a master "
                "killed and restarted with its data, then two paused for a third of the TTL; no lease may be lost",
       .appendfsync_always = true,
       .ttl_ms = 2000,
       .nemesis = [](int d, std::mt19937&) {
         std::vector<Action> plan = kill_and_restart({0}, d);
         pause_for(plan, {1, 2}, at(d, 0.75), 600);
         return plan;
       },
       .min_seconds = 6,
       .leases = 200});
  add({.name = "soak",
       .about = "random mix of kills, wiped restarts, pauses (<= 2 masters at once) and client pauses",
       .appendfsync_always = true,
       .quarantine = true,
       .nemesis = [](int d, std::mt19937& rng) { return soak(d, rng, SoakMix{}); }});
  {
    // A million acquisitions in under an hour (issue 16), on a 2-core
    // machine: crowds on two hot locks, clients spread over forty, and
    // leases, under the soak's faults for the whole run. TTL 2 s; client
    // pauses last at most half of it, so a holder stopped with its lock
    // still holds it when it runs on — a holder that overstays its validity
    // (the pause problem of design.md §4, `client-pause`) would, over a
    // million acquisitions, now and then overwrite a newer increment, which
    // no lock can prevent. A master that was killed, wiped or paused counts
    // as faulty until its quarantine (max_ttl + drift, read up to 1 s
    // short) and the clients' reconnect (up to 1 s) are over. The leases are
    // held 4-8 s at a time (six to twelve extensions each), then taken anew:
    // held for the whole run, every one would sooner or later lose its key
    // on three masters to the faults (Scenario::leases_may_fall).
    Scenario s;
    s.name = "soak-1m";
    s.about = "1,000,000 acquisitions under the soak's faults for up to 55 min: 16 clients on 2 hot locks, "
              "24 spread over 40, 200 leases; kills, wipes, pauses, delays, client pauses";
    s.appendfsync_always = true;
    s.quarantine = true;
    s.ttl_ms = 2000;
    s.proxied = true;
    s.crews = {{.workers = 2, .threads = 8, .resource = "hot", .resources = 2, .hold_ms = "1:5", .rest_ms = "0:2"},
               {.workers = 4, .threads = 6, .resource = "cold", .resources = 40},
               {.workers = 2, .resource = "lease", .leases = 100, .lease_hold_ms = "4000:8000"}};
    s.settle_ms = static_cast<int>(s.max_ttl_ms) + 2500;
    s.leases_may_fall = true;
    SoakMix mix;
    mix.from = 0.02;
    mix.to = 0.9;
    mix.settle_ms = s.settle_ms;
    mix.delays = true;
    // The crowd and the spread: a paused lease holder's watchdog stops too.
    mix.clients = s.crews[0].workers + s.crews[1].workers;
    mix.client_pause_max_ms = static_cast<int>(s.ttl_ms / 2);
    s.nemesis = [mix](int d, std::mt19937& rng) { return soak(d, rng, mix); };
    s.seconds = 55 * 60;
    s.target_acquisitions = 1'000'000;
    s.writes_in_time = true;
    s.on_demand = true;
    add(std::move(s));
  }
  add(sentinel_scenario("sentinel-failover",
                        "members 1-3 are Sentinel pairs: failed over three at once (SENTINEL FAILOVER), then two "
                        "primaries killed, then three at once again; each new primary sits out the quarantine"));
  add(cluster_scenario("cluster-reassign",
                       "members 1-3 are Redis Clusters: the locks' slots reassigned without their keys on three at "
                       "once, then on two, migrated on three, reassigned on three again; each slot sits out the "
                       "quarantine",
                       cluster_reassigns));
  {
    // Each failover takes 2-3 s (cluster-node-timeout 1 s, the election,
    // the maps agreeing), on a loaded machine up to 6: 14 s leave the last
    // one's recovery inside the run.
    Scenario s = cluster_scenario("cluster-failover",
                                  "members 1-3 are Redis Clusters: the primary of a lock's shard killed on three at "
                                  "once, then on two, then three again (replicas promoted, the killed rejoining "
                                  "empty); each promoted shard's slot sits out the quarantine",
                                  cluster_failovers);
    s.min_seconds = 14;
    add(std::move(s));
  }
  add({.name = "clock-rate-skew",
       .about = "two masters' clocks run 0.5 % fast and slow (within the 1 % drift budget), greedy holders",
       .greedy = true,
       .nemesis = [](int d, std::mt19937&) {
         return std::vector<Action>{{at(d, 0.1), [](Stage& s) {
                                       s.bed.skew(0, 0, 1.005);
                                       s.bed.skew(1, 0, 0.995);
                                     }}};
       },
       .skew = true});
  add({.name = "clock-jump-majority",
       .about = "three masters' clocks jump 1.5 TTL ahead: beyond the drift budget; must show overlaps",
       .expect = Expect::violation,
       .greedy = true,
       .nemesis = [](int d, std::mt19937&) {
         std::vector<Action> plan;
         // Each forward jump is one chance: it breaks only the holder of that
         // moment, and only if a contender polls before that holder's
         // validity ends (about 2 in 3 per jump). Five jumps make a run
         // that misses every one unlikely (about 1 in 250).
         for (double f : {0.15, 0.3, 0.45, 0.6, 0.75}) {
           plan.push_back({at(d, f), [](Stage& s) {
                             for (std::size_t i = 0; i < 3; ++i) s.bed.skew(i, 1500, 1.0);
                           }});
           plan.push_back({at(d, f + 0.07), [](Stage& s) {
                             for (std::size_t i = 0; i < 3; ++i) s.bed.unskew(i);
                           }});
         }
         return plan;
       },
       .skew = true,
       // Keys vanish early on the jumped masters and no release is published:
       // only a contender that polls tries in that window.
       .polling = true});
  add({.name = "delay-jitter",
       .about = "two masters answer 5 ms + 0-10 ms late each way (proxy)",
       .nemesis = [](int d, std::mt19937&) {
         std::vector<Action> plan;
         proxy_for(plan, {0, 1}, "*", "delay_up=5 jitter_up=10 delay_down=5 jitter_down=10", at(d, 0.2), at(d, 0.8));
         return plan;
       },
       .proxied = true});
  add({.name = "blackhole-minority",
       .about = "two masters accept but never answer (proxy blackhole)",
       .nemesis = [](int d, std::mt19937&) {
         std::vector<Action> plan;
         proxy_for(plan, {3, 4}, "*", "blackhole=1", at(d, 0.2), at(d, 0.7));
         return plan;
       },
       .proxied = true});
  add({.name = "partition-groups",
       .about = "two client groups see different majorities: {1,2,3} and {3,4,5}",
       .nemesis = [](int d, std::mt19937&) {
         std::vector<Action> plan;
         proxy_for(plan, {3, 4}, "0", "blackhole=1", at(d, 0.2), at(d, 0.7));
         proxy_for(plan, {0, 1}, "1", "blackhole=1", at(d, 0.2), at(d, 0.7));
         return plan;
       },
       .proxied = true,
       .group_b = 3});
  add({.name = "one-way-loss",
       .about = "group 0 loses the replies of three masters while its SETs land (one-way partition)",
       .nemesis = [](int d, std::mt19937&) {
         std::vector<Action> plan;
         proxy_for(plan, {0, 1, 2}, "0", "drop_down=1", at(d, 0.2), at(d, 0.6));
         return plan;
       },
       .proxied = true,
       .group_b = 3});
  add(stale_bytes_scenario("stale-bytes",
                           "group 0's rollbacks on master 1 arrive 700 ms late on a connection it dropped, after a "
                           "retry won on the new one; every attempt has a value of its own, so they delete nothing"));
  add(slow_replies_scenario("slow-replies",
                            "replies to group 0 arrive 250 ms late while its SETs land; validity subtracts that time"));
  {
    Scenario s = slow_replies_scenario("client-pause-mid-round",
                                       "replies to group 0 come 250 ms late and its clients are stopped for 700 ms: "
                                       "mid-round, between sending the SETs and reading the replies");
    s.nemesis = [](int d, std::mt19937& rng) {
      std::vector<Action> plan = slow_replies(d, rng);
      for (int t = at(d, 0.1); t + 700 < at(d, 0.9); t += 1100) {
        const std::size_t k = static_cast<std::size_t>(std::uniform_int_distribution<int>(0, 3)(rng));
        plan.push_back({t, [k](Stage& st) { st.bed.pause_process(*st.workers[k], "pause client " + std::to_string(k)); }});
        plan.push_back({t + 700, [k](Stage& st) { st.bed.resume_process(*st.workers[k]); }});
      }
      return plan;
    };
    add(std::move(s));
  }
  add({.name = "semaphore-kill-1-restart",
       .about = "a semaphore of 2 permits among six processes (each permit a lock of its own), kill -9 one master "
                "and restart it with its data",
       .appendfsync_always = true,
       .nemesis = [](int d, std::mt19937&) { return kill_and_restart({0}, d); },
       .permits = 2});
  add({.name = "semaphore-fair-kill-1-restart",
       .about = "semaphore-kill-1-restart with every acquire in fair order (one queue for both permits; a taken "
                "permit names the next waiter where the other is free)",
       .appendfsync_always = true,
       .nemesis = [](int d, std::mt19937&) { return kill_and_restart({0}, d); },
       .fair = true,
       .permits = 2});
  add({.name = "semaphore-partition",
       .about = "a semaphore of 3 permits among eight processes; masters 4 and 5 cut off from half the clients",
       .workers = 8,
       .nemesis = group_0_loses_4_5,
       .proxied = true,
       .group_b = 4,
       .permits = 3});
  add({.name = "rwlock-kill-1-restart",
       .about = "a read-write lock among six processes, 60 % of turns readers (readers share, a writer alone), "
                "kill -9 one master and restart it with its data",
       .appendfsync_always = true,
       .nemesis = [](int d, std::mt19937&) { return kill_and_restart({0}, d); },
       .shared_pct = 60});
  add({.name = "rwlock-partition",
       .about = "a read-write lock among eight processes, 60 % of turns readers; masters 4 and 5 cut off from "
                "half the clients",
       .workers = 8,
       .nemesis = group_0_loses_4_5,
       .proxied = true,
       .group_b = 4,
       .shared_pct = 60});
  add({.name = "election-kill-pause",
       .about = "four candidates for one leader (lease TTL 300 ms) beating into a fenced store: the leader killed "
                "(a fresh candidate replaces it), then the next one stopped past its TTL, twice; one leader at a "
                "time, terms increasing, the paused one's late write refused",
       .workers = 4,
       .ttl_ms = 300,
       .hold_ms = "10:30",
       .rest_ms = "0:0",  // all work: a pause lands between a leading() check and its write
       .nemesis = leader_faults,
       .election = true,
       .min_failovers = 3,
       .late_write_refused = true});
  add(slow_replies_scenario("broken-no-elapsed",
                            "broken client: validity ignores the round's duration; slow replies must show overlaps",
                            "no_elapsed"));
  add(slow_replies_scenario("broken-wall-clock",
                            "broken client: times rounds on its wall clock, which runs at 10 %; must show overlaps",
                            "wall_clock", 0.1));
  // Two rounds must overlap in time and split the masters 2:2 for
  // an overlap to show: many contenders, no rest, and at least 8 s.
  add(crossing_rounds_scenario("broken-small-quorum", "broken client: counts 2 of 5 as a majority; must show overlaps",
                               "small_quorum"));
  add({.name = "broken-no-rollback",
       .about = "broken client: does not release failed attempts; must leave keys behind",
       .expect = Expect::violation,
       .sabotage = "no_rollback",
       .ttl_ms = 120000,  // longer than any run: a leaked key stays to be found
       .max_ttl_ms = 120000,
       .wait_ms = 0,  // every failed call abandons its token: nothing refreshes it away
       .nemesis = [](int d, std::mt19937&) {
         // Attempts during a majority pause fail by timeout; unreleased, their
         // keys must still be there when the run ends.
         std::vector<Action> plan;
         pause_for(plan, {0, 1, 2}, at(d, 0.3), 200);
         return plan;
       }});
  add(stale_bytes_scenario("broken-reused-value",
                           "broken client: one value for every attempt of a call; a stale rollback deletes the "
                           "retry's key (stale-bytes schedule); must show overlaps",
                           "reused_value"));
  add(flushall_scenario("broken-no-data-check",
                        "broken client: does not see a master lose its data (flushall schedule, five rounds); "
                        "must show overlaps",
                        "no_data_check"));
  add(sentinel_scenario("sentinel-failover-blind",
                        "broken client: ignores run id and replid; members 1-3 (Sentinel pairs) failed over three at "
                        "once, round after round; the promoted replicas lack the keys written meanwhile; must show "
                        "overlaps",
                        "no_failover_check"));
  add(cluster_scenario("cluster-reassign-blind",
                       "broken client: counts a shard's yes without its slot's marker or ownership; members 1-3 "
                       "(Redis Clusters) have the locks' slots reassigned without their keys, round after round; "
                       "must show overlaps",
                       cluster_reassign_rounds, "any_shard_votes"));
  // Votes split between permits when attempts cross on the masters.
  Scenario permit_majority = crossing_rounds_scenario(
      "broken-permit-majority",
      "broken client: a semaphore that counts a master's yes for any permit (per-master counts); "
      "must show two holders of one permit",
      "permit_majority");
  permit_majority.permits = 2;
  add(std::move(permit_majority));
  add({.name = "broken-read-ignores-writer",
       .about = "broken client: a reader checks and marks a lock key of its own, never meeting a writer; half the "
                "turns readers, no faults; must show readers and writers at once and torn reads",
       .expect = Expect::violation,
       .sabotage = "read_ignores_writer",
       .nemesis = no_faults,
       .shared_pct = 50});
  add({.name = "broken-no-quarantine",
       .about = "broken client: ignores the restart quarantine; must show overlaps",
       .expect = Expect::violation,
       .quarantine = true,
       .sabotage = "no_quarantine",
       .greedy = true,
       .nemesis = three_wipe_rounds,
       .min_seconds = 6});
  return all;
}

}  // namespace

std::vector<Crew> crews_of(const Scenario& s) {
  if (!s.crews.empty()) return s.crews;
  return {Crew{
      .workers = s.workers, .threads = s.threads, .hold_ms = s.hold_ms, .rest_ms = s.rest_ms, .leases = s.leases}};
}

const std::vector<Scenario>& all_scenarios() {
  static const std::vector<Scenario> all = build();
  return all;
}

}  // namespace redlock::chaos
