// client_close.hpp — the order in which a client's core closes, and when
// it is closed: the same code closes an AsyncClient on its uv loop and a
// client of the simulator (tools/sim).
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "engine.hpp"
#include "node_set.hpp"
#include "runtime.hpp"
#include "survey.hpp"

namespace redlock::detail {

// ClientClose — close() stops the reports first (from then on they answer
// Errc::closed), then the leases (`stop_leases`), then shuts the engine
// down (every operation completes with Errc::closed) and closes the nodes
// (each session gracefully). The client is closed once all of them are
// idle and `busy` (what its owner still has out) says no: then, on a
// later loop turn of its own (never inside a node's callback), the
// `on_closed` callbacks run in the order they came, then `finished` (in
// which the owner may free itself, and this with it). A close() once
// closed runs its callback at once. Loop thread only; the runtime, engine,
// nodes and reports must outlive it.
class ClientClose {
 public:
  ClientClose(Runtime& runtime, Engine& engine, NodeSet& nodes, Reports& reports)
      : runtime_(runtime), engine_(engine), nodes_(nodes), reports_(reports) {
    reports_.on_idle = [this] { maybe_finish(); };
  }
  ClientClose(const ClientClose&) = delete;
  ClientClose& operator=(const ClientClose&) = delete;

  std::function<void()> stop_leases;
  std::function<bool()> busy;
  std::function<void()> finished;

  void close(std::function<void()> on_closed) {
    if (on_closed) callbacks_.push_back(std::move(on_closed));
    if (closed_) return run_callbacks();
    if (closing_) return;
    closing_ = true;
    reports_.close();
    if (stop_leases) stop_leases();
    engine_.shutdown([this] {
      engine_idle_ = true;
      maybe_finish();
    });
    nodes_.close([this] {
      nodes_closed_ = true;
      maybe_finish();
    });
  }

  // maybe_finish: the owner calls it when busy() may have turned false.
  void maybe_finish() {
    if (!engine_idle_ || !nodes_closed_ || reports_.live() != 0 || (busy && busy()) || finishing_) return;
    finishing_ = true;
    runtime_.post([this] {
      closed_ = true;
      finishing_callbacks_ = true;
      run_callbacks();  // an owner going in one of them waits for `finished` (can_free)
      finishing_callbacks_ = false;
      if (auto f = std::exchange(finished, nullptr)) f();  // a local: it may free this
    });
  }

  bool closing() const noexcept { return closing_; }
  bool closed() const noexcept { return closed_; }
  // can_free: closed, and not inside the on_closed callbacks of the close's
  // end (`finished` still runs after them): the owner may free this now.
  bool can_free() const noexcept { return closed_ && !finishing_callbacks_; }

 private:
  void run_callbacks() {
    auto callbacks = std::exchange(callbacks_, {});
    for (auto& cb : callbacks) cb();
  }

  Runtime& runtime_;
  Engine& engine_;
  NodeSet& nodes_;
  Reports& reports_;
  std::vector<std::function<void()>> callbacks_;
  bool closing_ = false, engine_idle_ = false, nodes_closed_ = false, finishing_ = false, closed_ = false;
  bool finishing_callbacks_ = false;
};

}  // namespace redlock::detail
