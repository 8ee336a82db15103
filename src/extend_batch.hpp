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
//
// Flow control: at most batches_in_flight batch calls are outstanding per
// node; the rest wait in the queue and go as answers come back. A burst of
// 100,000 leases falling due together was 200 calls of 512 keys queued in
// each master at once: the last of them missed node_timeout behind the
// others, the node was marked not answering, every lease's retry then
// failed at once, and the retries saturated the client (all 100,000
// lost). Waiting in the queue costs a lease nothing but validity it has
// plenty of (T1 was taken before), and no node timeout.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
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
  // in_flight: batch calls sent to `node` and not yet finally answered.
  std::size_t in_flight(std::size_t node) const noexcept;

  static constexpr std::size_t batches_in_flight = 4;  // per node
  // batch_done: a batch call to `node` got its final event (from the batch).
  void batch_done(std::size_t node);

  // Queued — one call waiting for its batch. `call` is the caller's (kept
  // alive until its final event, as the Transport contract says).
  struct Queued {
    const Call* call;
    ReplySink* sink;
    std::size_t slot;
  };

  // Flow — what the batcher shares with its batches in flight, which may
  // outlive it: the count per node, and the batcher while it lives.
  struct Flow {
    ExtendBatcher* owner;
    std::vector<std::size_t> in_flight;
  };

 private:
  void flush();

  Runtime& runtime_;
  Transport& inner_;
  milliseconds window_;
  std::size_t max_;
  std::vector<std::deque<Queued>> queues_;  // per node
  std::shared_ptr<Flow> flow_;
  std::unique_ptr<Timer> timer_;
};

}  // namespace redlock::detail
