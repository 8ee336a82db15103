// sentinel_watch.hpp — where a sentinel member's primary is
// (redis+sentinel://s1,s2/NAME). One connection to one sentinel at a time:
// it asks `SENTINEL get-master-addr-by-name NAME`, then, on the same
// connection, SUBSCRIBEs to +switch-master and acts on each switch of NAME
// as it is announced. The member's NodeSession (and its wake-up
// subscriber) are retargeted to every primary named; the session's
// handshake then judges the server as it judges any (role:master, run id,
// replication id, the data-loss marker: docs/design.md §5, "Sentinel
// members"), so a sentinel that is wrong, stale or lying costs a vote, not
// a lock.
//
// The next sentinel of the list is asked whenever this one fails (refused,
// no answer, does not know NAME, a reply of the wrong shape) and whenever
// the member asks again (refresh(): its primary went away or is not a
// primary any more). A sentinel that answers nil for NAME (it does not
// monitor it) is skipped like one that is down.
//
// Loop thread only; no I/O of its own (a Connection on the WireFactory),
// so the simulator could run it too.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "redlock/config.hpp"
#include "connection.hpp"
#include "runtime.hpp"
#include "wire.hpp"

namespace redlock::detail {

// serving_address: what a member's data connection dials. A sentinel
// member's is the primary last named (kind tcp, the member's credentials
// and TLS; no host until one is named); every other kind's is the member
// itself.
NodeAddress serving_address(const NodeAddress& member);

// has_target: the address can be dialled (a sentinel member's primary has
// been named).
inline bool has_target(const NodeAddress& serving) noexcept {
  return serving.kind != NodeAddress::Kind::tcp || !serving.host.empty();
}

// parse_switch_master: the primary a +switch-master message names for
// `name` ("NAME old-ip old-port new-ip new-port"); nullopt when the message
// is about another name or is not of that shape (a port outside 1–65535, a
// host over 255 bytes or holding a control byte).
std::optional<Endpoint> parse_switch_master(std::string_view payload, std::string_view name);

// parse_master_addr: the answer to SENTINEL get-master-addr-by-name
// ([host, port]); nullopt with `why` set for anything else (nil: the
// sentinel does not monitor the name).
std::optional<Endpoint> parse_master_addr(const WireReply& reply, std::string& why);

class SentinelWatch final : private ConnectionOwner {
 public:
  // on_named runs for each primary named (also the same one again);
  // on_closed once, on a later loop turn than close(). The watch keeps
  // `runtime`, `wires` and `options`; they must outlive it.
  SentinelWatch(Runtime& runtime, WireFactory& wires, const NodeAddress& member, const Options& options,
                std::function<void(const Endpoint&)> on_named, std::function<void()> on_closed);
  SentinelWatch(const SentinelWatch&) = delete;
  SentinelWatch& operator=(const SentinelWatch&) = delete;

  void start();
  // refresh: ask the next sentinel now (the member's primary went away, or
  // failed its handshake as not a primary). `why` is kept for reports.
  void refresh(std::string_view why);
  void close();

  // primary: the last primary named (nullopt before the first answer).
  const std::optional<Endpoint>& primary() const noexcept { return primary_; }
  // last_error: why the last sentinel connection went, naming the
  // sentinel ("" when none has).
  const std::string& last_error() const noexcept { return last_error_; }

 private:
  // asking: the get-master-addr-by-name answer is due; subscribing: the
  // SUBSCRIBE confirmation; listening: +switch-master messages.
  enum class Phase : std::uint8_t { asking, subscribing, listening };

  // ConnectionOwner
  bool on_open() override;
  void on_reply(const WireReply& reply) override;
  void on_down(std::string_view why) override;

  void named(const Endpoint& primary);

  std::string name_;
  std::vector<Endpoint> seeds_;
  std::size_t next_ = 0;       // the seed the next connection dials
  NodeAddress sentinel_;       // the one dialled now (the Connection reads it at each open)
  Phase phase_ = Phase::asking;
  std::optional<Endpoint> primary_;
  std::string last_error_;
  std::function<void(const Endpoint&)> on_named_;
  Connection conn_;  // last: destroyed first
};

}  // namespace redlock::detail
