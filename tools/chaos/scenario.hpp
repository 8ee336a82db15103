// scenario.hpp — the named, repeatable chaos runs and their pass criteria.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "bed.hpp"

namespace redlock::chaos {

// What a scenario must show. `safe`: its assumptions hold, so it must show
// 0 overlaps, 0 lost updates, 0 stale writes and 0 leaked keys. `violation`:
// it breaks a stated assumption or runs a broken variant of the client on
// purpose, and the checker must catch it (a violation > 0).
enum class Expect { safe, violation };

// Stage — what the nemesis may touch while a scenario runs. workers[k] is
// the process of client k.
struct Stage {
  ChaosBed& bed;
  std::vector<std::unique_ptr<support::Process>> workers;
  std::mt19937& rng;
  // Elections only: await_leader returns the client that leads the
  // scenario's election now, as the masters say (Client::leader), waiting
  // up to `within` for one (-1: none came); replace kills client k's
  // process (SIGKILL, recorded as "kill client K …") and starts a fresh
  // worker in its place, with the next client number. `killed`: the
  // workers so ended, not waited for at the run's end.
  std::function<int(std::chrono::milliseconds within)> await_leader;
  std::function<void(std::size_t k, const std::string& what)> replace;
  std::set<std::size_t> killed;
};

struct Action {
  int at_ms;                            // since the workload started
  std::function<void(Stage&)> run;
};

// Crew — worker processes that all run alike: `workers` processes of
// `threads` clients, each turn locking `resource`, or with `resources` > 1
// one of resource-0 … resource-(n-1) drawn at random; or, with `leases`,
// each process holding that many leases (Client::lock, kept extended by
// their watchdogs) on resources of its own, resource-P-0 …, for the whole
// run or `lease_hold_ms` at a time.
struct Crew {
  int workers = 6;
  int threads = 1;
  std::string resource = "chaos";
  int resources = 1;
  std::string hold_ms = "1:10";  // MIN:MAX work inside the lock
  std::string rest_ms = "0:5";   // MIN:MAX pause after each release
  int leases = 0;
  std::string lease_hold_ms;     // MIN:MAX the leases are held, then taken anew; empty: the whole run
};

struct Scenario {
  std::string name;
  std::string about;  // one line: what it does and why it is (un)safe
  Expect expect = Expect::safe;
  bool appendfsync_always = false;
  bool quarantine = false;
  std::string sabotage;  // REDLOCK_SABOTAGE for the workers; empty: the real client
  // The workers: `workers` processes of `threads` clients, sharing one
  // redlock::Client per process, on the resource "chaos" with `hold_ms`,
  // `rest_ms` and `leases` below — unless `crews` lists them instead.
  int workers = 6;
  int threads = 1;
  long ttl_ms = 1000;
  long max_ttl_ms = 2000;
  long wait_ms = 2000;
  long node_timeout_ms = 50;
  // stall_timeout_ms: the workers' Options::stall_timeout (a connection whose
  // oldest command went unanswered this long is dropped and replaced); 0:
  // the worker's default, max(1 s, 4 node timeouts).
  long stall_timeout_ms = 0;
  std::string hold_ms = "1:10";  // MIN:MAX work inside the lock
  bool greedy = false;           // hold until just before the validity ends
  std::string rest_ms = "0:5";   // MIN:MAX pause after each release
  // nemesis builds the fault schedule for a run of `duration_ms`; a random
  // schedule draws from `rng` (seeded by the runner, so a run repeats).
  std::function<std::vector<Action>(int duration_ms, std::mt19937& rng)> nemesis;
  // skew: the masters run under the clock-skew shim (ChaosBed::skew).
  bool skew = false;
  // proxied: every master sits behind a fault proxy; the last `group_b`
  // workers reach the masters through the proxies' second listener.
  bool proxied = false;
  int group_b = 0;
  // polling: the workers retry every retry_delay instead of waiting for
  // release notifications. For the scenarios whose violation shows only if
  // a contender tries while keys vanish early or late (no release is
  // published then, and a waiter sleeps until the TTL it was told).
  bool polling = false;
  // worker_clock_rate: the workers' own wall clocks run at this rate (the
  // clock-skew shim in the worker processes); 1: untouched.
  double worker_clock_rate = 1.0;
  // min_seconds: run at least this long even in the short suite (for
  // scenarios that need many handoffs to show what they test).
  int min_seconds = 0;
  // majority_down: the schedule takes a majority of masters down for a
  // while: no acquisition may succeed then, and failures must come back
  // within wait + node timeout.
  bool majority_down = false;
  // leases: each worker holds this many leases (Client::lock, TTL ttl_ms)
  // on resources of its own for the whole run instead of the counter loop;
  // it passes only if no lease is lost (the faults leave a majority
  // healthy) and every lease was taken.
  int leases = 0;
  // settle_ms: how long a master stays out after its fault ended (the
  // clients' quarantine after a restart, their reconnect): it still counts
  // as faulty then, for the soak's budget of two and for lease losses.
  int settle_ms = 0;
  // leases_may_fall: a lease may be lost once three different masters (N −
  // quorum + 1) were faulty during its life, settle included: extend never
  // recreates a key a master lost (wiped, or expired while it was down,
  // paused or slow), so a lease outlives the faults of at most two of its
  // masters, however healthy the majority stays at every moment. Any other
  // loss fails the run. Off: no lease may be lost.
  bool leases_may_fall = false;
  // crews: workers of several kinds at once, in this order (worker numbers
  // count on from one crew to the next); `workers`, `threads`, `hold_ms`,
  // `rest_ms` and `leases` above are then unused. The lease criteria hold
  // for every lease of every crew.
  std::vector<Crew> crews;
  // seconds: the run's length (or its time limit, with a target) unless
  // --seconds is given; 0: the suite's, 3 s (60 s with --long).
  int seconds = 0;
  // target_acquisitions: run until the history holds this many
  // acquisitions (or the time is up), and pass only if it does; 0: run for
  // the time. --acquisitions overrides it.
  long target_acquisitions = 0;
  // writes_in_time: the schedule never lets a holder overstay its validity
  // (client pauses shorter than it), so a stale write is a violation too.
  bool writes_in_time = false;
  // fair: every acquire of the counter loop waits in fair order
  // (AcquireOptions::fair): one queue per master, served in arrival order.
  bool fair = false;
  // permits: > 0, the resource is a semaphore of that many permits
  // (AcquireOptions::permits); each permit is checked as a lock of its own
  // ("R/permit<i>": its windows, its counter), so more than P holders at
  // once show as overlaps.
  int permits = 0;
  // shared_pct: each turn of the counter loop takes a read lock
  // (AcquireOptions::shared) with this probability (%), else a write lock
  // of the same name. Readers may hold together, never with a writer: a
  // reader-writer overlap is an overlap, and a reader that sees the counter
  // change during its hold a torn read. A safe scenario with readers passes
  // only if some readers did share (shared_overlaps > 0): else it proved
  // nothing about read locks. Not with `permits` or `fair`.
  int shared_pct = 0;
  // max_grant_gap_ms: liveness — the longest time without a grant of any
  // lock (between consecutive "ok" events, from the first grant to the
  // stop) must stay below this, and every client must get the lock at
  // least once. 0: not checked. The runner reports these figures, and the
  // longest gap after the last fault ended, for every scenario.
  long max_grant_gap_ms = 0;
  // election: the workers are candidates for leader of the election
  // `chaos` (worker --election): the elected one beats into the fenced
  // store; the verdict is the election checker's (election_check.hpp). A
  // safe one passes only with at least `min_failovers` failovers and, with
  // `late_write_refused`, a paused ex-leader's late write refused.
  bool election = false;
  int min_failovers = 0;
  bool late_write_refused = false;
  // on_demand: runs only when named (--scenario); never in the suite, short
  // or long (an hour's soak has no place in CI).
  bool on_demand = false;
  // sentinel_members: the first this many of the five members are
  // Sentinel-managed pairs (ChaosBed, BedOptions::sentinel_members): the
  // workers follow their primaries through the sentinel, and the nemesis
  // may fail them over (ChaosBed::fail_over, kill_primary).
  int sentinel_members = 0;
  // cluster_members: the first this many of the five members are Redis
  // Clusters (ChaosBed, BedOptions::cluster_members): the workers route each
  // lock to the shard of its slot, and the nemesis may reassign, migrate or
  // fail over the shards of the locks' slots (ChaosBed::cluster_reassign,
  // cluster_migrate, cluster_failover). The runner lets every lock's slot
  // pass its first quarantine before the workers start.
  int cluster_members = 0;
};

// crews_of: the scenario's workers as crews (`crews`, or the one crew its
// plain fields describe).
std::vector<Crew> crews_of(const Scenario& s);

// all_scenarios lists every scenario, in a stable order.
const std::vector<Scenario>& all_scenarios();

}  // namespace redlock::chaos
