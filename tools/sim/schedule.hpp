// schedule.hpp — one simulated schedule (issue 13, docs/simulation.md): a
// seed fixes N masters, 3–6 clients (each an Engine over a NodeSet over a
// SimRuntime and the simulated network), a workload, a fault schedule, then
// a heal, a settle and a quiet tail; the checker judges the history on true
// time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "world.hpp"

namespace redlock::sim {

// Workload — what the clients do.
//   plain   contended acquire / hold (sometimes extend) / release of 1–3 resources
//   fenced  fenced acquires; each holder writes to a store that rejects stale fences
//   multi   acquire_many of 2–3 resources out of 3–4
//   lease   acquire, then the lease watchdog (src/lease_state.hpp) keeps the
//           lock extended for up to four TTLs; a lost lease ends the hold
//   all     swarm testing: one of the workloads below (plain, fenced, multi,
//           lease, leases, crowd, fair, mixed) per schedule and a random
//           subset of the fault kinds, all chosen by the seed
//   leases  2–3 leases on distinct resources taken at once with one TTL,
//           each with its own watchdog: their extensions fall due together
//           and share extend_batch calls (src/extend_batch.hpp); or (3 in
//           10) one lease of all of them (acquire_many), whose keys ride
//           the batch together. Not in
//           `all` (its seeds keep their schedules).
//   crowd   2–4 waiters per client side by side on 1–2 resources, so that a
//           client's waiters for one lock wait in line (docs/design.md, "A
//           crowd in one client waits in line"). Not in `all` either.
//   fair    2–4 actors per client on 1–2 resources doing fair acquires
//           (AcquireOptions::fair: the masters' queues, docs/design.md,
//           "Fair order"): long waits, short ones that give up in the
//           queue, cancelled ones, a few that are not fair. The quiet tail
//           also checks the ORDER of waiters that came one after another,
//           that a fair try takes a free lock once the place of a waiter
//           killed in its queue has lapsed (the lapse check), and that no
//           queue, expiry or turn key outlives the waits. Not in `all`
//           (its seeds keep their schedules).
//   mixed   the lease workload with clients of different max_ttl (1 s and
//           300 ms, each taking TTLs within its own), and three more faults
//           of its own: failovers to a lagging replica, a master flooding
//           its connections with unsolicited replies, and data loss on a
//           majority while the long-max_ttl holders are stopped. Not in
//           `all` (its seeds keep their schedules).
//   survey  the plain workload, and beside it each client's status and
//           nodes reports (src/survey.hpp) at random moments, each checked
//           against what the masters ran; one client is closed in the
//           middle of its operations (every callback must come exactly
//           once, and the close must complete); in the quiet tail each
//           holder's status must show its lock, its TTL within bounds.
//           Not in `all` (its seeds keep their schedules).
//   semaphore  the plain workload on semaphores of 1–3 permits
//           (AcquireOptions::permits, docs/design.md, "Semaphores"): the
//           checker counts the holders whose validity overlaps on true
//           time, at most P per semaphore, and holds each permit to mutual
//           exclusion. Not in `all` (its seeds keep their schedules).
//   rwlock  the plain workload with read locks: about 60 % of the
//           acquires are readers (AcquireOptions::shared, docs/design.md,
//           "Read-write locks"), 40 % of the grants held as leases; the
//           checker lets readers overlap one
//           another and nothing else: a writer's hold overlaps no other
//           hold on true time. Not in `all` (its seeds keep their
//           schedules).
//   election  every client campaigns for one of 1–3 names (detail::Campaign,
//           the library's own machine: a fenced lease, then the record),
//           leads for up to four TTLs (proclaiming a new value now and
//           then), resigns — or is deposed — and campaigns again; some
//           campaigns wait for ever, some are cancelled. Every client also
//           observes every name (a LeaderWatcher). The checker
//           (election_check.hpp): no two leaders of a name at one true
//           instant (a term is over at its deposed notice or resign), terms
//           strictly increasing, observers never told an older term and
//           agreeing on who led each term; the quiet tail: each client is
//           elected to each name within the tail's wait, and every
//           observer ends on "no leader". Not in `all` (its seeds keep
//           their schedules).
enum class Workload : std::uint8_t {
  plain, fenced, multi, lease, all, leases, crowd, fair, mixed, survey, semaphore, rwlock, election, cluster
};

const char* workload_name(Workload w);
bool parse_workload(const std::string& text, Workload& out);

struct ScheduleOptions {
  Workload workload = Workload::all;
  int clients = 0;  // 0: 3–6, chosen by the seed
  // beyond: faults outside the stated assumptions too (master clock steps
  // beyond the drift budget, data loss with detection off); they must show.
  bool beyond = false;
  // swarm: each schedule enables a random subset of the fault kinds (and,
  // with workload `all`, draws its workload among all of them), from a
  // stream of its own: rare combinations come up often. Always on with
  // `all`; `--swarm` turns it on for a named workload.
  bool swarm = false;
  bool record = false;          // keep a trace for printing (slower)
  bool hash = true;             // compute the trace hash (record computes it too)
  bool trace_commands = false;  // the printed trace shows every command
  Nanos fault_phase = ms(4000);
  // fair: in half of the order checks, up to this many waiters die once
  // they have queued (each alone on its client; one after another in the
  // queue when nobody else's waiter stands between them). 0: none.
  int order_dead = 2;
  // only_faults: when set, only the planned faults with these indices
  // (#k in the trace) happen. The plan is still drawn in full, so the rest
  // of the schedule keeps its place in the random streams (shrinking).
  bool restrict_faults = false;
  std::vector<std::size_t> only_faults;
};

// Violation — one thing the checker refused.
struct Violation {
  std::string kind;  // mutual_exclusion, fence_order, leak, liveness, order
  std::string what;
  Nanos at = 0;                     // true time it shows
  std::vector<std::string> tokens;  // the holders' values, for the trace
};

struct ScheduleResult {
  std::uint64_t seed = 0;
  Workload workload = Workload::plain;
  std::size_t masters = 0;
  std::size_t clients = 0;
  std::uint64_t rounds = 0;  // acquire attempts (quorum rounds)
  std::uint64_t grants = 0;
  std::uint64_t commands = 0;  // executed on masters
  bool wake_ups = false;       // waiters subscribed to release notifications
  std::uint64_t wakes = 0;     // release notifications delivered to subscribers
  // leases: extend_batch script calls the masters ran, the keys they
  // carried, and those whose answer differed between keys (some '1', some
  // '0': where a batcher that mixed up the answers would show).
  std::uint64_t extend_batches = 0;
  std::uint64_t extend_batch_keys = 0;
  std::uint64_t extend_batches_mixed = 0;
  // crowd: acquires that came while a waiter of their client stood in line
  // for the same lock (so they queued behind it), and those of them granted
  // before their wait ran out (the line moved on to them).
  std::uint64_t queued = 0;
  std::uint64_t queued_won = 0;
  // fair: fair acquires started and granted (all phases), and the waiters
  // whose grant order the quiet tail checked (0 when it could not run).
  std::uint64_t fair_acquires = 0;
  std::uint64_t fair_grants = 0;
  std::uint64_t order_checked = 0;
  // mixed: unsolicited replies (a flood's) that reached a client.
  std::uint64_t unsolicited = 0;
  // survey: status and nodes reports checked, and clients closed in the
  // middle of their operations (with the callbacks still out at the close).
  std::uint64_t statuses = 0;
  std::uint64_t node_reports = 0;
  std::uint64_t closes = 0;
  std::uint64_t closed_out = 0;
  // election: campaigns ended, of them elected (each a term), proclaims of
  // a new value that reached a majority, and readings the observers were
  // told.
  std::uint64_t campaigns = 0;
  std::uint64_t elections = 0;
  std::uint64_t proclaims = 0;
  std::uint64_t readings = 0;
  std::uint64_t trace_hash = 0;  // 0 unless ScheduleOptions::hash or record
  std::size_t faults_planned = 0;
  std::string swarm;  // with swarm: the fault kinds this schedule enabled
  std::vector<Violation> violations;
  std::string trace;  // with ScheduleOptions::record: faults and commands
};

ScheduleResult run_schedule(std::uint64_t seed, const ScheduleOptions& options);

}  // namespace redlock::sim
