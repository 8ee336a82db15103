// leader.cpp — `redlock leader NAME [--watch]`: who leads the election NAME
// (identity, term, value, how long it has led), and with --watch each change
// as the masters publish it, one line each.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>

#include "commands.hpp"
#include "signal_watch.hpp"

namespace redlock::cli {
namespace {

json info_json(const LeaderInfo& l) {
  return {{"identity", l.identity}, {"term", l.term},   {"value", l.value},
          {"led_ms", l.led_for.count()}, {"token", l.token}, {"owner", owner_json(owner_of(l.token))}};
}

// LeaderView — one reading, in both forms, and its exit status: 0 a
// leader, 1 none, 69 unknown (too few masters answered).
struct LeaderView {
  json out;
  std::string human;
  int status = kExitOk;
};

LeaderView view(const std::string& name, const Result<LeaderStatus>& r) {
  LeaderView v;
  if (!r) {
    v.out = {{"name", name}, {"leader", nullptr}, {"known", false}};
    add_error(v.out, r.error().code, r.error().message);
    v.human = quote(name) + ": leader unknown: " + escaped(r.error().message) + "\n";
    v.status = r.error().code == Errc::no_quorum ? kExitUnavailable : kExitNotDone;
    return v;
  }
  const LeaderStatus& st = *r;
  v.out = {{"name", name},
           {"known", true},
           {"leader", st.leader ? info_json(*st.leader) : json(nullptr)},
           {"last", st.last ? info_json(*st.last) : json(nullptr)},
           {"expires_in_ms", st.leader ? json(st.expires_in.count()) : json(nullptr)},
           {"quorum", st.quorum},
           {"answered", st.answered}};
  if (st.leader) {
    const LeaderInfo& l = *st.leader;
    v.human = quote(name) + ": led by " + quote(l.identity) + ", term " + std::to_string(l.term) + ", for " +
              fmt_duration_s(l.led_for.count() / 1000) + "; value " + quote(l.value) + "\n";
  } else {
    v.human = quote(name) + ": no leader" +
              (st.last ? " (last: " + quote(st.last->identity) + ", term " + std::to_string(st.last->term) + ")" : "") +
              "\n";
    v.status = kExitNotDone;
  }
  return v;
}

// watch: each reading the library tells (the first, then every change) as
// one line, until SIGINT or SIGTERM or stdout closing (exit 0).
int watch(const Globals& g, const std::string& name) {
  SignalWatch signals{SIGINT, SIGTERM, SIGPIPE};
  int wake[2];
  if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  struct Closer {
    int* fds;
    ~Closer() {
      ::close(fds[0]);
      ::close(fds[1]);
    }
  } closer{wake};
  std::mutex mu;
  std::deque<Result<LeaderStatus>> readings;  // (mu)
  auto client = make_client(g);
  const bool as_json = use_json(g, false);
  auto w = client->observe(name, [&](const Result<LeaderStatus>& r) {
    {
      std::lock_guard<std::mutex> lock(mu);
      readings.push_back(r);
    }
    (void)!::write(wake[1], "x", 1);
  });
  if (!w) throw std::runtime_error(w.error().to_string());
  for (;;) {
    pollfd fds[3] = {{signals.fd(), POLLIN, 0}, {wake[0], POLLIN, 0}, {STDOUT_FILENO, 0, 0}};
    const int n = ::poll(fds, 3, -1);
    if (n < 0 && errno != EINTR) throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
    if (n <= 0) continue;
    if (fds[0].revents != 0 && signals.next() != 0) return kExitOk;
    if ((fds[2].revents & (POLLERR | POLLHUP)) != 0) return kExitOk;
    char drain[64];
    while (::read(wake[0], drain, sizeof drain) > 0) {
    }
    std::deque<Result<LeaderStatus>> batch;
    {
      std::lock_guard<std::mutex> lock(mu);
      batch.swap(readings);
    }
    for (const Result<LeaderStatus>& r : batch) {
      LeaderView v = view(name, r);
      v.out["at"] = iso_utc(unix_us_now());
      const std::string line = as_json ? dump_json(v.out) + "\n" : iso_utc(unix_us_now()).substr(11, 8) + "Z " + v.human;
      if (!write_out(line)) return kExitOk;
      if (!r && r.error().code == Errc::closed) return kExitOk;
    }
  }
}

}  // namespace

int run_leader(const Args& a) {
  check_resource(a.resource);
  if (!a.interval.empty()) throw UsageError("--interval is for nodes --watch; leader --watch is told each change");
  if (a.watch) return watch(a.g, a.resource);
  auto client = make_client(a.g);
  auto r = client->leader(a.resource);
  if (!r) throw_if_usage(r.error());
  const LeaderView v = view(a.resource, r);
  return finish(use_json(a.g, false), v.out, v.human, v.status);
}

}  // namespace redlock::cli
