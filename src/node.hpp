// node.hpp — one master: one hiredis async connection on the caller's uv
// loop, with what hiredis 0.14 lacks: a connect timeout, a deadline on every
// command, reconnect with capped exponential backoff and jitter, and the
// restart quarantine read from INFO on every (re)connect.
//
// Commands are accepted while the connection is being set up: hiredis
// buffers them behind the handshake (AUTH, SELECT, SCRIPT LOAD, INFO
// server), so the
// first acquire of a new client does not wait for a separate connect step,
// and the INFO reply always arrives before the reply it must judge.
#pragma once

#include <uv.h>

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <string>

#include "redlock/config.hpp"
#include "transport.hpp"

struct redisAsyncContext;
struct redisReply;

namespace redlock::detail {

class Node {
 public:
  using clock = std::chrono::steady_clock;
  enum class State : std::uint8_t { disconnected, connecting, ready, closed };

  // Node keeps references to `options` and `shas` (owned by the client,
  // which outlives it). on_closed runs once, from the last close callback,
  // after close(); the owner may free the Node inside it.
  Node(uv_loop_t* loop, NodeAddress address, const Options& options, const std::string* shas,
       std::function<void()> on_closed);
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  ~Node();

  void start();
  // send: see Transport::send.
  bool send(const Call& call, ReplySink* sink, std::size_t slot, std::string& why);
  // close refuses new commands, lets the ones already queued reach the
  // server and waits for their replies (at most connect_timeout +
  // node_timeout), then fails
  // what is left ("client closed") and closes the connection and both timers.
  void close();

  const std::string& address() const noexcept { return display_; }
  State state() const noexcept { return state_; }
  const std::string& last_error() const noexcept { return last_error_; }
  clock::time_point quarantined_until() const noexcept { return quarantine_until_; }
  const std::string& server_version() const noexcept { return version_; }
  const std::string& run_id() const noexcept { return run_id_; }
  // uptime: the server's uptime now, from INFO server at the last
  // handshake plus the time since; -1 s when INFO was never read.
  std::chrono::seconds uptime(clock::time_point now) const noexcept;
  // quarantine_left: how long the node still sits out of majorities (zero
  // when it counts, or when quarantine is off).
  std::chrono::milliseconds quarantine_left(clock::time_point now) const noexcept;

  // Called by the hiredis callbacks (C linkage trampolines in node.cpp).
  void handle_reply(redisAsyncContext* ac, redisReply* reply);
  void connection_lost(const redisAsyncContext* ac, std::string reason);

 private:
  enum class Kind : std::uint8_t { script, handshake, info };
  struct Pending {
    Kind kind = Kind::script;
    bool timed_out = false;
    bool retried = false;  // already re-sent as EVAL after NOSCRIPT
    ReplySink* sink = nullptr;
    std::size_t slot = 0;
    const Call* call = nullptr;
    clock::time_point sent{};
    clock::time_point deadline{};
  };

  void connect();
  bool queue_handshake();
  bool queue_raw(Kind kind, int argc, const char** argv, const std::size_t* lens);
  bool queue_call(const Call& call, bool as_eval);
  void drop_connection(std::string reason);
  void connection_gone();
  void finish_close();
  void schedule_reconnect();
  void handle_info(redisReply* reply, clock::time_point now);
  void deliver(const Pending& p, redisAsyncContext* ac, redisReply* reply, clock::time_point now);
  void on_deadline();
  void on_conn_timer();
  void rearm();
  bool quarantined(clock::time_point now);

  uv_loop_t* loop_;
  NodeAddress address_;
  std::string display_;
  const Options& options_;
  const std::string* shas_;
  std::function<void()> on_closed_;

  redisAsyncContext* ac_ = nullptr;
  State state_ = State::disconnected;
  bool closing_ = false;
  bool handles_closing_ = false;
  int open_handles_ = 0;
  unsigned failures_ = 0;
  std::string last_error_ = "not connected yet";

  // A command passed its deadline unanswered and no reply has come since:
  // new acquire and extend commands fail at once instead of piling up behind
  // it (a paused or blackholed master then costs no write and no memory).
  // Releases are still queued — one may have to delete a SET queued before
  // it. Any reply clears it, and so does a completed handshake; a new
  // connection to a node that had stopped answering does not (its
  // handshake may hang just the same), so a paused master costs nothing
  // across reconnects either.
  bool unresponsive_ = false;
  clock::time_point unresponsive_since_{};  // the sent time of the command that timed out
  std::string wire_;  // the command being queued, in RESP (reused)
  std::deque<Pending> pending_;
  std::size_t scanned_ = 0;  // pending_[0, scanned_) need no deadline check
  clock::time_point armed_due_{};
  bool armed_ = false;

  clock::time_point quarantine_until_{};
  std::string quarantine_text_;
  std::string version_, run_id_;
  long long info_uptime_s_ = -1;  // uptime_in_seconds of the last INFO server
  clock::time_point info_at_{};   // when that reply came

  uv_timer_t deadline_timer_;  // per-command deadlines and stall detection
  uv_timer_t conn_timer_;      // reconnect backoff, and connect timeout while connecting
};

}  // namespace redlock::detail
