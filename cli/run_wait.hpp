// run_wait.hpp — the waiting phase of `redlock run` (for the lock, or to be
// elected): the blocking call on a helper thread, while this thread reads
// the signals and says why a wait cannot make progress.
#pragma once

#include <functional>
#include <stop_token>
#include <string>

#include "run_shared.hpp"
#include "signal_watch.hpp"

namespace redlock::cli {

// WaitWatch — what a wait watches besides its call.
//   signals  every catchable signal (SignalWatch, before the client)
//   cancel   requested by a signal that ends the wait; the call's
//            cancellation token is its token
//   rounds   a wait that is one call (--fair, a campaign): its failed
//            rounds, said as StuckNotes decides; null: the call says them
//   client   asked, for a stuck round, why (stuck_note)
//   say      one waiting note
struct WaitWatch {
  SignalWatch& signals;
  std::stop_source& cancel;
  WaitRounds* rounds = nullptr;
  Client& client;
  std::function<void(const std::string&)> say;
};

// WaitEnd — how the wait ended: `interrupted`, the signal that cancelled
// it (0: none came); `stuck`, why it could not make progress as of the
// last failed round told by `rounds` (empty: none, or it could).
struct WaitEnd {
  int interrupted = 0;
  std::string stuck;
};

// wait_watching_signals runs `call` on a helper thread and returns once it
// has returned. Meanwhile: a signal whose default action ends a process
// (cancels_wait) requests `cancel` (the first one is the one reported);
// TSTP, TTIN and TTOU stop this process (there is no command yet); the
// rest are dropped. No busy waiting: one poll(2) on the signals, the
// call's end and the rounds.
WaitEnd wait_watching_signals(const WaitWatch& w, const std::function<void()>& call);

}  // namespace redlock::cli
