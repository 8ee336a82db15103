// redlock/options.hpp — the knobs, as plain structs. Each field's comment
// says what it means, its default and why; zero means what it says there.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stop_token>
#include <string>

#include "redlock/export.hpp"

namespace redlock {

using std::chrono::milliseconds;

class Observer;  // redlock/observer.hpp

// Options — per-client settings, shared by every lock the client takes.
// Validated by validate_config() (config.hpp); Client::create and
// AsyncClient::create refuse an invalid set with Errc::config.
struct REDLOCK_API Options {
  // Key prefix: the lock key is prefix + resource. Default "redlock:".
  std::string prefix = "redlock:";
  // Owner label: every value this client draws names its holder after the
  // token, "~host:pid" or, with a label, "~host:pid:label" (host from
  // gethostname, bytes outside [0-9A-Za-z._-] as '_'), so that `redlock
  // status` (ResourceStatus::owner, owner_of) tells which machine's job
  // holds a lock. 0–64 printable ASCII characters without blanks. It is
  // not a secret and not an identity check: anyone who can write the keys
  // can write any owner. Not the reentrancy owner of LeaseOptions. A
  // caller-given AcquireOptions::token is written exactly as given.
  std::string owner;

  // TTL used when an acquire names none. 10 s: long enough that one node
  // timeout and the drift allowance are a small fraction of it.
  milliseconds default_ttl{10000};

  // The largest TTL any acquire or extend may ask for. It also sets the
  // restart quarantine (a restarted node sits out max_ttl plus drift), so
  // keep it as small as your longest lock. Default 60 s.
  milliseconds max_ttl{60000};

  // Clock drift allowance as a fraction of the TTL. validity = ttl − elapsed −
  // (ceil(ttl · drift_factor) ms + 2 ms). Default 0.01, the Redlock paper's figure.
  double drift_factor = 0.01;

  // A round that reaches a majority succeeds only if the validity left is
  // above this. Default 1 ms (validity must be positive with a margin).
  milliseconds min_validity{1};

  // Deadline for one command on one node, from its write. A node that has
  // not answered by then counts as `timeout` for the round (its late answer
  // is still processed). A command that waits for the connection's
  // handshake is written when it completes; that wait is bounded by
  // connect_timeout. Must be well below the TTL. Default 50 ms.
  milliseconds node_timeout{50};

  // Deadline for a TCP/unix connect plus the handshake. Default 200 ms.
  milliseconds connect_timeout{200};

  // Reconnect backoff: first delay, doubled per failure up to the cap, each
  // delay jittered to 50–100 % of its value. Defaults 20 ms and 1 s.
  milliseconds reconnect_min{20};
  milliseconds reconnect_max{1000};

  // Acquire retries (while the wait deadline allows): wait retry_delay plus a
  // uniformly random 0..retry_jitter between rounds. Defaults 50 ms + 0–50 ms.
  milliseconds retry_delay{50};
  milliseconds retry_jitter{50};

  // Once a release's outcome is certain (a majority confirmed our token is
  // gone), wait at most this long for the other nodes' answers so that
  // released_nodes counts them too. A slow or hung minority costs up to this
  // on every release, so the default is zero: a release completes at the
  // majority, like an acquire, and nodes still unanswered read `pending`
  // (their answers are processed when they come). The CLI, a one-shot tool,
  // uses node_timeout so its count is complete.
  milliseconds release_settle{0};

  // A release after which our value may still be on a majority of the
  // masters (so many timed out or failed that the lock is not free) is sent
  // again to those masters, up to this many times, retry_delay + jitter
  // apart. Deleting our own value is idempotent: a retry cannot free anyone
  // else's lock, and a lock left to its TTL blocks every waiter. A hung
  // majority costs each release up to release_retries × (node_timeout +
  // release_settle + retry_delay + retry_jitter) more. 0: one round only.
  // Default 2.
  int release_retries = 2;

  // A connection whose oldest command has gone unanswered this long is closed
  // and reconnected (a paused or blackholed master). Must exceed
  // node_timeout. Default 1 s.
  milliseconds stall_timeout{1000};

  // At most this many commands in flight per node; beyond it a send fails at
  // once with `error` (backpressure against a hung master). Default 65536.
  std::size_t max_pending = 65536;

  // Restart quarantine: a node whose uptime (INFO server, read on every
  // connect) is below max_ttl + drift does not count toward a majority until
  // it has been up that long. Switch off only for masters that run with
  // appendfsync always. Default on.
  bool quarantine = true;
  // Data loss without a restart. Every master carries a marker (one key,
  // `redlock-marker`, written at first contact, never expiring): a master
  // that lost its data (FLUSHALL, an emptying resync, eviction) lost it
  // too. It is checked at every handshake, behind every acquire, and once
  // it has gone unread for data_check_interval (a client that acquires
  // more often sends no separate check); a master seen to have lost it
  // sits out the quarantine period (max_ttl + drift, or the largest any
  // client declared on that master) from that moment. Part of the
  // quarantine: `quarantine = false` switches it off. Default 250 ms.
  milliseconds data_check_interval{250};
  // A master whose maxmemory-policy may evict lock keys (any allkeys-* or
  // volatile-* policy with maxmemory set) does not count toward a majority:
  // eviction hands a lock to the next client. Set this to count such
  // masters anyway (the risk is yours). Default off.
  bool accept_eviction = false;

  // Waiting without polling. An acquire that has to wait subscribes (one
  // pub/sub connection per master, shared by every resource the client
  // waits on) to the releases of its resource and retries when one is
  // published — at once while it has lost no race for the lock; once a
  // woken attempt of it lost to another waiter, after a random delay of
  // 0–(wake_jitter + 1 ms), doubling per race lost, so that a crowd of
  // waiters does not stampede; when the holder's TTL (reported by the
  // masters) runs out; and, as a safety net for a lost notification, every
  // wake_safety_net. retry_delay and retry_jitter then only space retries
  // of attempts that failed for other reasons (no quorum). The waiters of
  // one client for one resource wait in line (arrival order): only the
  // first listens and tries, the next when it leaves (docs/design.md). Off:
  // waiters poll every retry_delay + jitter, and no line forms.
  bool wake_ups = true;
  milliseconds wake_jitter{2};
  milliseconds wake_safety_net{1000};
  // Fair order (AcquireOptions::fair): how long the head of a resource's
  // queue has to take the lock once it is free before the next waiter may
  // take it out of the queue (it died, or is paused). Behind a head that
  // does not come the others wait about two of these. Too short and a slow
  // but live head loses its place now and then (never the lock's safety).
  // Default 250 ms.
  milliseconds fair_grace{250};

  // Batched lease extensions. The watchdogs' extensions that fall due
  // within extend_batch_window of one another go to each master as one
  // script call of up to extend_batch_max keys; every key is still checked
  // against its own lease's value and every lease counts its own majority,
  // exactly as an extension of its own would (docs/design.md, "Batched
  // extensions"). A lease's extension waits at most the window, which its
  // validity pays (so keep it far below the TTL). Only the watchdogs'
  // extensions are batched: extend() and extend_many() go out at once.
  // Window 0: only the extensions due in the same loop turn share a call.
  // extend_batch_max 1: one script call per lease per master (no batching).
  // With both on, a lease's next extension is also planned on a grid, up to
  // 1/16 of its period (at most 1,024 ms) sooner than extend_at says, so
  // that leases falling due apart share rounds — at most extend_batch_max
  // keys per grid point (docs/design.md).
  // Defaults 10 ms and 512 keys (the masters run one call's keys without
  // serving anyone else: a few µs each, about 2 ms for 512).
  milliseconds extend_batch_window{10};
  std::size_t extend_batch_max = 512;

  // Fill Lock::nodes (the per-node outcomes of the round that took or
  // extended the lock). Off by default: they cost about 100 bytes per node
  // on every Lock value, a program holding many locks pays that per lock,
  // and a lock that was taken rarely needs them. Failures always carry them
  // (Error::nodes), and so do releases (ReleaseResult::nodes). The CLI
  // switches them on.
  bool node_outcomes = false;

  // Told, on the loop thread, of connection changes, quarantines, rounds,
  // leases extended and lost, and wake-ups (redlock/observer.hpp states
  // the contract: it must not block). Empty (the default): no event is
  // built. Counters (stats()) are kept either way.
  std::shared_ptr<Observer> observer;
};

// AcquireOptions — per-call settings for an acquire.
struct REDLOCK_API AcquireOptions {
  // Lock TTL; zero means Options::default_ttl. At most Options::max_ttl.
  milliseconds ttl{0};
  // How long to keep retrying (rounds spaced by retry_delay + jitter). Zero
  // means one round only (try-lock).
  milliseconds wait{0};
  // The token to use; empty (the default) means a fresh 128-bit random
  // value (hex) for every attempt, so that a late rollback of one attempt
  // can never delete what a later one took; Lock::token is the winning
  // attempt's. A given token (1–128 characters of [0-9A-Za-z_-]) means "a
  // lock I may already hold under this value": every attempt writes it,
  // and where it is already set its TTL is refreshed. A failed attempt
  // with a given token is not rolled back (that could delete the lock you
  // hold); what it set expires by its TTL.
  std::string token;
  // Fencing: also obtain a fencing token (Lock::fence), strictly greater
  // than the fence of every earlier holder of this resource (of each of the
  // resources, for acquire_many: one fence for the set) that also used
  // fencing. Costs one more round trip (docs/design.md, "Fencing tokens").
  // Fences are exact integers from 1 to 2^53 (Lock::fence): a master whose
  // counter is at or above 2^53 answers with an error reply (never a
  // rounded fence); when too many do, the acquire fails with no_quorum,
  // saying so.
  bool fence = false;
  // Fair order: waiters get the lock in the order they came, across
  // clients and processes (docs/design.md, "Fair order" states the
  // guarantee and its limits). Each waits in a queue on every master; a
  // release wakes only the next one. Behind a waiter that died or was
  // paused the queue moves on after about 2 × Options::fair_grace. Needs a
  // value drawn by the library (no `token`), one resource (not
  // acquire_many) and no `fence`; those fail with invalid_argument. Waiters
  // that are not fair are not ordered: they may take a free lock ahead of
  // the queue. With `wait` 0 it is a try: it takes the lock only when
  // nobody queues, and joins no queue. Lock::token of a fair lock starts
  // with 'Q'.
  bool fair = false;
  // A counting semaphore: with permits P (1 to 100), `resource` names a
  // semaphore of P permits and the acquire takes one of them (Lock::permit
  // says which); at most P holders at once, whose validity windows
  // overlap, under the mutex's assumptions and with as many failed masters
  // (docs/design.md, "Semaphores"). Every client of one name must give the
  // same P: the masters keep it, and an acquire that gives another fails
  // with invalid_argument naming both. 0 (the default): a lock. A permit
  // is extended and released as a lock is (the Lock carries its permit),
  // also as a Lease (not a reentrant one). With `fence`, each permit has a
  // fence counter of its own: Lock::fence is strictly above that of every
  // earlier fenced holder of the same permit (a store behind permit i
  // rejects a stale holder of i by it). With `fair`, waiters get permits
  // in the order they came (one queue per semaphore; not with `fence`, as
  // for a lock). Not with `token`, nor for acquire_many
  // (invalid_argument). A semaphore's names are its own: a lock of the
  // same name is another thing (its fair queue too).
  std::uint32_t permits = 0;
  // A read lock: `resource`'s readers share it, and hold it with no
  // writer — a writer being any lock of that name (acquire without
  // `shared`: plain, fenced, fair, a Lease, one of acquire_many's), which
  // the readers keep out as a holder does, and which keeps them out. On
  // true time no writer's validity overlaps any reader's, under the
  // mutex's assumptions and with as many failed masters (docs/design.md,
  // "Read-write locks"). Each reader has its own expiry on each master.
  // Writer preference: a writer of this one name that waits (wait > 0, a
  // value drawn by the library; plain, fenced or fair) and finds readers
  // stamps its intent on the masters from its second attempt on, and no
  // new reader joins while it is there (it
  // lapses about 2 × max(wake_safety_net, 4 × fair_grace) after the
  // writer's last attempt). Extend and release act on the reader's entry
  // (Lock::shared), also as a Lease (not a reentrant one). Not with
  // `token`, `fence`, `fair` or `permits`, nor for acquire_many
  // (invalid_argument).
  bool shared = false;
  // Cancellation: once stop is requested (from any thread), a waiting
  // acquire ends with Errc::cancelled; an attempt on its way is finished
  // first and rolled back (a lock it took is released).
  std::stop_token cancel;
};

}  // namespace redlock
