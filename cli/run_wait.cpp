// run_wait.cpp — see run_wait.hpp.
#include "run_wait.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <thread>

#include "run_child.hpp"

namespace redlock::cli {

WaitEnd wait_watching_signals(const WaitWatch& w, const std::function<void()>& call) {
  Fd done_efd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (done_efd.fd < 0) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
  if (w.rounds != nullptr) w.rounds->clear();
  WaitEnd end;
  StuckNotes notes;
  std::thread helper([&] {
    call();
    notify(done_efd.fd);
  });
  for (bool done = false; !done;) {
    const int rounds_fd = w.rounds != nullptr ? w.rounds->fd() : -1;  // -1: poll(2) skips it
    pollfd fds[3] = {{w.signals.fd(), POLLIN, 0}, {done_efd.fd, POLLIN, 0}, {rounds_fd, POLLIN, 0}};
    if (::poll(fds, 3, -1) < 0 && errno != EINTR) break;
    if ((fds[2].revents & POLLIN) != 0) {
      drain(w.rounds->fd());
      // Only when a note would be said: with masters in quarantine, making
      // one asks every master.
      if (std::optional<WaitRounds::Round> r = w.rounds->last(); r && notes.due() && end.interrupted == 0) {
        end.stuck = stuck_note(w.client, r->code, r->nodes);
        if (std::string line = notes.line(end.stuck); !line.empty()) w.say(line);
      }
    }
    for (int sig = w.signals.next(); sig != 0; sig = w.signals.next()) {
      if (cancels_wait(sig) && end.interrupted == 0) {
        end.interrupted = sig;
        w.cancel.request_stop();
      }
      if (is_job_stop(sig)) ::raise(SIGSTOP);  // no command yet: only we stop
    }
    if ((fds[1].revents & POLLIN) != 0) done = true;
  }
  helper.join();
  if (end.interrupted != 0 && w.rounds != nullptr) {
    // Why the wait was stuck, if it was, as of its last round.
    if (std::optional<WaitRounds::Round> r = w.rounds->last()) end.stuck = stuck_note(w.client, r->code, r->nodes);
  }
  return end;
}

}  // namespace redlock::cli
