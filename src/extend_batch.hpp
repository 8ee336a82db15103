// extend_batch.hpp — the leases' extensions, many keys per script call.
//
// ExtendBatcher is a Transport in front of the client's own: a lease
// watchdog's extension (src/lease.cpp) is an ordinary ExtendOperation with
// its own QuorumRound, and only its sends go through the batcher. A send of
// a one-key `extend` call is queued per node; once the window has passed
// (or a node's queue holds `max` calls) each node gets one `extend_batch`
// script call for up to `max` keys (src/scripts.hpp), and its answer — one
// flag per key — is handed back to every queued send as the integer reply
// `extend` would have given (1: extended, 0: not ours). Timeouts, failures,
// error replies, the quarantine flag and the answering server pass to every
// call of the batch unchanged. So each lease still counts its own majority,
// with its own validity and its own "refused for good": the rounds cannot
// tell a batched answer from a single one, and the safety argument of
// extend is unchanged (docs/design.md, "Batched extensions").
//
// Every other call, and every call when max is 1, goes straight through.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "runtime.hpp"
#include "transport.hpp"

namespace redlock::detail {

using std::chrono::milliseconds;

class ExtendBatcher final : public Transport {
 public:
  // Keeps references to both; they must outlive it. `window`: how long the
  // first queued call waits for others (0: the next loop turn).
  ExtendBatcher(Runtime& runtime, Transport& inner, milliseconds window, std::size_t max);
  ExtendBatcher(const ExtendBatcher&) = delete;
  ExtendBatcher& operator=(const ExtendBatcher&) = delete;
  // Calls still queued get their final event (`failed`, client closed).
  ~ExtendBatcher() override;

  std::size_t size() const override { return inner_.size(); }
  const std::string& address(std::size_t node) const override { return inner_.address(node); }
  // send queues a one-key extend (accepted; its events come once the batch
  // was sent and answered); anything else goes to the inner transport.
  bool send(std::size_t node, const Call& call, ReplySink* sink, std::size_t slot, std::string& why) override;
  WatchState watch(const std::string& channel, WakeListener* listener) override {
    return inner_.watch(channel, listener);
  }
  void unwatch(const std::string& channel, WakeListener* listener) override { inner_.unwatch(channel, listener); }
  Telemetry* telemetry() noexcept override { return inner_.telemetry(); }

  // queued: calls waiting for the next flush, over every node (tests).
  std::size_t queued() const noexcept;

  // Queued — one call waiting for its batch. `call` is the caller's (kept
  // alive until its final event, as the Transport contract says).
  struct Queued {
    const Call* call;
    ReplySink* sink;
    std::size_t slot;
  };

 private:
  void flush();

  Runtime& runtime_;
  Transport& inner_;
  milliseconds window_;
  std::size_t max_;
  std::vector<std::vector<Queued>> queues_;  // per node
  std::unique_ptr<Timer> timer_;
};

}  // namespace redlock::detail
