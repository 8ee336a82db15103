// poll_adapter.cpp — hiredis on a libuv loop. See poll_adapter.hpp.
#include "poll_adapter.hpp"

#include <fcntl.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>

#include <cerrno>
#include <ctime>
#include <utility>

namespace redlock::detail {

namespace {

// hiredis writes with write(2): a master that vanished while we write
// raises SIGPIPE, whose default action ends the whole program. Nothing of
// ours may do that to a host. A thread where SIGPIPE is already blocked
// (the blocking Client's loop thread blocks it for good) or a process that
// ignores it needs nothing: write() just fails with EPIPE. Otherwise each
// write is bracketed, as libpq does: SIGPIPE blocked, and one that our
// write raised is taken back before the old mask returns.
bool sigpipe_harmless() {
  sigset_t mask;
  struct sigaction sa {};
  const bool blocked = pthread_sigmask(SIG_BLOCK, nullptr, &mask) == 0 && sigismember(&mask, SIGPIPE) == 1;
  const bool ignored = sigaction(SIGPIPE, nullptr, &sa) == 0 && sa.sa_handler == SIG_IGN;
  return blocked || ignored;
}

// PollWatcher (below) decides sigpipe_harmless() once, on its first write
// (always on the loop thread), and passes it here.
void handle_write(redisAsyncContext* ac, bool harmless) {
  if (harmless) return redisAsyncHandleWrite(ac);
  sigset_t pipe_only, old, pending;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  // SIGPIPE is neither blocked nor ignored here, so none can be pending
  // from before: one that is pending after the write is ours.
  pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  redisAsyncHandleWrite(ac);
  if (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1) {
    const timespec now{0, 0};
    while (sigtimedwait(&pipe_only, nullptr, &now) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

// PollWatcher — our libuv adapter for one hiredis context (hiredis's own
// 0.14 adapter ignores poll errors, so a refused connect would never be
// noticed). It owns its poll and prepare handles and frees itself when both
// are closed.
//
// Writes are flushed once per loop turn, not on writability: a command
// queued on a connected context marks the watcher, and a prepare callback
// (libuv runs prepare handles right before it polls) writes the buffer
// straight to the socket. Only when the socket takes less than all of it
// does the watcher ask the poll for write interest. So a healthy connection
// keeps one fixed read interest and costs no epoll_ctl per command, and
// every command queued in one loop turn leaves in one write().
struct PollWatcher {
  uv_poll_t poll;
  uv_prepare_t flush;
  redisAsyncContext* ac;
  int events = 0;
  int open_handles = 2;
  bool flush_armed = false;
  bool flushing = false;
  signed char sigpipe_harmless = -1;  // decided on the first write
  BeforeWrite before_write = nullptr;
  void* before_write_data = nullptr;
};

void write_out(PollWatcher* w) {
  if (w->before_write != nullptr) w->before_write(w->before_write_data, w->ac);
  if (w->ac == nullptr) return;
  if (w->sigpipe_harmless < 0) w->sigpipe_harmless = sigpipe_harmless() ? 1 : 0;
  handle_write(w->ac, w->sigpipe_harmless == 1);
}

void on_poll(uv_poll_t* handle, int status, int events) {
  auto* w = static_cast<PollWatcher*>(handle->data);
  // On a poll error let hiredis find out what happened (getsockopt/read).
  const int ev = status < 0 ? w->events : events;
  // libuv has stopped the handle after an error: forget what it watched, so
  // the next add* starts it again.
  if (status < 0) w->events = 0;
  if (w->ac != nullptr && (ev & UV_READABLE)) redisAsyncHandleRead(w->ac);
  if (w->ac != nullptr && (ev & UV_WRITABLE)) write_out(w);
}

// update_poll touches the handle only when the set of events changes:
// hiredis asks to add read interest after every read, and each
// uv_poll_start costs epoll_ctl calls even when nothing changed.
void update_poll(PollWatcher* w, int add, int remove) {
  const int events = (w->events | add) & ~remove;
  if (events == w->events) return;
  w->events = events;
  if (events != 0) {
    uv_poll_start(&w->poll, events, on_poll);
  } else {
    uv_poll_stop(&w->poll);
  }
}

void on_flush(uv_prepare_t* handle) {
  auto* w = static_cast<PollWatcher*>(handle->data);
  uv_prepare_stop(handle);
  if (w->ac == nullptr) {
    w->flush_armed = false;
    return;
  }
  // A command queued by before_write finds the flush still armed: it goes
  // out in this write, without arming another.
  if (w->before_write != nullptr) w->before_write(w->before_write_data, w->ac);
  w->flush_armed = false;
  if (w->ac == nullptr) return;
  // hiredis writes what the socket takes, then calls delWrite (all written)
  // or addWrite (the rest waits for writability), then addRead.
  w->flushing = true;
  const BeforeWrite hook = std::exchange(w->before_write, nullptr);  // already ran
  write_out(w);
  w->before_write = hook;
  w->flushing = false;
}

void ev_add_read(void* p) { update_poll(static_cast<PollWatcher*>(p), UV_READABLE, 0); }
void ev_del_read(void* p) { update_poll(static_cast<PollWatcher*>(p), 0, UV_READABLE); }
void ev_add_write(void* p) {
  auto* w = static_cast<PollWatcher*>(p);
  // Connecting (the first writability means "connected"), a socket that was
  // full, or the rest of a flush: wait for the poll.
  if (w->flushing || (w->events & UV_WRITABLE) != 0 || w->ac == nullptr ||
      (w->ac->c.flags & REDIS_CONNECTED) == 0) {
    update_poll(w, UV_WRITABLE, 0);
    return;
  }
  if (!w->flush_armed) {
    w->flush_armed = true;
    uv_prepare_start(&w->flush, on_flush);
  }
}
void ev_del_write(void* p) { update_poll(static_cast<PollWatcher*>(p), 0, UV_WRITABLE); }
void ev_cleanup(void* p) {
  auto* w = static_cast<PollWatcher*>(p);
  w->ac = nullptr;
  auto closed = [](uv_handle_t* h) {
    auto* watcher = static_cast<PollWatcher*>(h->data);
    if (--watcher->open_handles == 0) delete watcher;
  };
  uv_close(reinterpret_cast<uv_handle_t*>(&w->poll), closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&w->flush), closed);
}

}  // namespace

bool attach_to_loop(redisAsyncContext* ac, uv_loop_t* loop, BeforeWrite before_write, void* data) {
  // hiredis opens its sockets without SOCK_CLOEXEC: a child the host
  // program starts (`redlock run`'s command) must not inherit connections
  // to the masters.
  const int flags = fcntl(ac->c.fd, F_GETFD);
  if (flags >= 0) fcntl(ac->c.fd, F_SETFD, flags | FD_CLOEXEC);
  auto* w = new PollWatcher;
  w->ac = ac;
  w->before_write = before_write;
  w->before_write_data = data;
  if (uv_poll_init(loop, &w->poll, ac->c.fd) != 0) {
    delete w;
    return false;
  }
  uv_prepare_init(loop, &w->flush);
  w->poll.data = w;
  w->flush.data = w;
  ac->ev.data = w;
  ac->ev.addRead = ev_add_read;
  ac->ev.delRead = ev_del_read;
  ac->ev.addWrite = ev_add_write;
  ac->ev.delWrite = ev_del_write;
  ac->ev.cleanup = ev_cleanup;
  return true;
}

}  // namespace redlock::detail
