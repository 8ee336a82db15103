// run_shared.hpp — what the threads and phases of `redlock run` share: an
// fd closed on scope exit, eventfd wake-ups, the lease's loss, the rounds of
// a wait that is one call (--fair, --campaign), and the report printed at
// the end.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common.hpp"

namespace redlock::cli {

// Fd — closes on scope exit.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

inline void notify(int efd) {
  const std::uint64_t one = 1;
  // A full counter cannot happen (at most a few writes); EAGAIN is harmless.
  [[maybe_unused]] const ssize_t n = ::write(efd, &one, sizeof one);
}

inline void drain(int efd) {
  std::uint64_t v = 0;
  [[maybe_unused]] const ssize_t n = ::read(efd, &v, sizeof v);
}

// Shared between the lease's loop thread (on_lost) and main; outlives both
// the lease and the client.
struct LostSignal {
  std::mutex mu;
  std::optional<std::string> reason;  // set once, when the lease was lost
  std::int64_t at_us = 0;
  int efd = -1;
};

// tell_loss: the on_lost (on_deposed) callback that records the loss in
// `lost`, once, and wakes its efd.
inline LostCallback tell_loss(std::shared_ptr<LostSignal> lost) {
  return [lost = std::move(lost)](const Error& e) {
    std::lock_guard<std::mutex> guard(lost->mu);
    if (lost->reason) return;
    lost->reason = e.to_string();
    lost->at_us = unix_us_now();
    notify(lost->efd);
  };
}

// WaitRounds — the failed acquire rounds of a wait that is one call (a
// --fair wait, a campaign), told by the client's observer: first_then_wait
// cannot look between calls. The main thread reads the last one when `efd`
// says so, and clears it before the next wait.
class WaitRounds final : public Observer {
 public:
  struct Round {
    Errc code = Errc::internal;
    std::vector<NodeOutcome> nodes;
  };
  explicit WaitRounds(int efd) : efd_(efd) {}
  int fd() const noexcept { return efd_; }
  void on_round(const RoundEvent& e) override {
    if (e.op != OpKind::acquire || e.ok || e.nodes == nullptr) return;
    {
      std::lock_guard<std::mutex> guard(mu_);
      last_ = Round{e.code, *e.nodes};
    }
    notify(efd_);
  }
  std::optional<Round> last() {
    std::lock_guard<std::mutex> guard(mu_);
    return last_;
  }
  void clear() {
    std::lock_guard<std::mutex> guard(mu_);
    last_.reset();
  }

 private:
  int efd_;
  std::mutex mu_;
  std::optional<Round> last_;
};

// Report — what the run did, printed once at the end: --report FILE appends
// it there; else --json puts it on stderr (stdout belongs to the command).
struct Report {
  json j;
  bool as_json = false;  // --json: no human messages
  int fd = -1;           // --report FILE, opened before anything was done
  void print() const {
    if (fd < 0 && !as_json) return;
    const std::string line = dump_json(j) + '\n';
    if (fd >= 0) {
      // One write: O_APPEND keeps concurrent runs' lines whole.
      if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
        std::cerr << "redlock: run: --report: cannot write: " << std::strerror(errno) << '\n';
    } else {
      std::cerr << line << std::flush;
    }
  }
  // human: messages for a person on stderr — not with --json.
  bool human() const noexcept { return !as_json; }
};

}  // namespace redlock::cli
