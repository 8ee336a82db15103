// history.hpp — what a chaos run records, and what the checker reads.
//
// Every worker (a process or a thread) appends one JSON object per line to
// its own history file (JSONL). All timestamps are CLOCK_BOOTTIME
// nanoseconds: every process on one machine shares that clock, so histories
// of different processes can be merged and compared directly. On Linux
// redlock::BootClock is CLOCK_BOOTTIME, so a Lock's
// validity_deadline.time_since_epoch() is on the same scale.
//
// Lines (fields in addition to "type", "client", "t"):
//   {"type":"invoke", "client":3, "t":…, "resource":"r"}
//   {"type":"ok",     "client":3, "t":…, "resource":"r", "token":"…",
//        "deadline":…, "latency_us":812}         acquired; deadline = validity deadline (ns)
//        a read lock's (AcquireOptions::shared) also carries "shared":true;
//        without the key the lock is a writer's (a plain lock)
//   {"type":"fail",   "client":3, "t":…, "resource":"r", "latency_us":…,
//        "code":"redlock.no_quorum", "error":"…", "outcomes":["ok","timeout",…]}
//   {"type":"write",  "client":3, "t":…, "resource":"r", "read":41, "wrote":42}
//        the read-modify-write on the resource's shared counter, made while
//        holding its lock (t: just before the write is sent)
//   {"type":"read",   "client":3, "t":…, "resource":"r", "read":41, "reread":41}
//        a reader's look at the resource's counter: read at the start of its
//        hold, reread at its end while Lock::valid() (t: just after the
//        reread returned, so both reads happened before t); it never writes
//   {"type":"release","client":3, "t":…, "resource":"r", "released":true}
//        t is taken just before the release is sent: the hold window ends there
//   {"type":"lost",   "client":3, "t":…, "resource":"r", "error":"…"}
//        a lease's watchdog gave it up (its on_lost ran); leases scenarios
// Elections (the resource is the election's name; election scenarios):
//   {"type":"elected", "client":3, "t":…, "resource":"e", "term":7, "deadline":…}
//        campaign() returned: leader with this term (its lease's fence);
//        deadline = the lease's validity deadline then (ns)
//   {"type":"deposed", "client":3, "t":…, "resource":"e", "term":7, "deadline":…, "error":"…"}
//        on_deposed was told (t: stamped in the callback); deadline = the
//        lease's last validity deadline
//   {"type":"resigned","client":3, "t":…, "resource":"e", "term":7, "deadline":…}
//        t is taken just before resign() is called
//   {"type":"fenced",  "client":3, "t":…, "resource":"e", "term":7, "beat":12,
//        "checked":…, "replied":…, "accepted":true, "highest":7, "error":"…"}
//        a leader's write to the fenced store (FencedStore::write, key
//        "E:beat", fence = term): checked = when leading() last said true
//        before it, t = just before the write was sent, replied = just after
//        its answer; highest = the store's answer (our term when accepted,
//        the newer one that refused us); "error" (no answer: it may have
//        been applied) instead of accepted/highest
// The runner adds its own file of fault intervals:
//   {"type":"fault", "t":…, "end":…, "what":"pause node 2"}
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace redlock::chaos {

enum class EventType : std::uint8_t { invoke, ok, fail, write, release, fault, lost, read, elected, deposed, resigned, fenced };

struct Event {
  EventType type = EventType::invoke;
  int client = -1;
  std::int64_t t = 0;         // CLOCK_BOOTTIME ns
  std::string resource;
  std::string token;          // ok
  std::int64_t deadline = 0;  // ok: validity deadline, ns; fault: end, ns
  std::int64_t latency_us = 0;
  std::string code;           // fail
  std::string error;          // fail, lost; fault: what
  std::vector<std::string> outcomes;  // fail
  bool shared = false;        // ok: a read lock
  std::int64_t read = 0;      // write, read
  std::int64_t wrote = 0;     // write
  std::int64_t reread = 0;    // read
  bool released = false;      // release
  std::int64_t term = 0;      // elected, deposed, resigned, fenced (the deadline: elected, deposed, resigned)
  std::int64_t beat = 0;      // fenced: the leader's k-th write of its term
  std::int64_t checked = 0;   // fenced: when leading() last said true before it, ns
  std::int64_t replied = 0;   // fenced: when its answer came, ns (0: none came, see error)
  bool accepted = false;      // fenced
  std::int64_t highest = 0;   // fenced: the store's highest fence in its answer
};

// to_json_line renders one event as a single JSON line (no newline).
std::string to_json_line(const Event& e);

// parse_history reads JSONL text; a malformed line is an error naming the
// line number (returned through `error`, with an empty result).
std::vector<Event> parse_history(const std::string& text, std::string& error);

// monotonic_ns is CLOCK_BOOTTIME now (a monotonic clock that counts suspend).
std::int64_t monotonic_ns() noexcept;

}  // namespace redlock::chaos
