// redlock_failover.cpp — the failover scenario of redlock_bench (what it
// measures is in the header of redlock_bench.cpp and in bench/CONTRACT.md).
//
// A round: a leader process (this program again, `--scenario
// failover-leader`, started with uv_spawn) campaigns for the election and
// says "elected TERM" on its stdout; once the observer (an AsyncClient of
// this process watching the election) has been told that leader, the
// standby (another AsyncClient of this process) campaigns and waits; at a
// random moment within one TTL the leader is SIGKILLed (its lease's
// watchdog is at a random phase of its cycle then). The round ends when the
// standby is elected and the observer has been told so; the standby then
// resigns, and the next round starts a new leader.
//
// The floor of a round is what the dead leader's lock still had to live at
// the kill: once the child is reaped (every byte it sent is on the masters
// then), one leader() reading gives the lock's time to expiry on a majority
// (LeaderStatus::expires_in); floor = (mid-point of the reading − kill) +
// expires_in. No candidate can be elected before that (the lock is the
// election), so failover − floor is what the library adds: noticing the
// expiry, the attempt, the fence, the proclamation.
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "redlock/redlock.hpp"
#include "redlock_bench.hpp"

namespace redlock_bench {

namespace {

using clk = std::chrono::steady_clock;
using redlock::AsyncClient;
using redlock::LeaderStatus;
using redlock::Result;
using std::chrono::milliseconds;

// A phase (leader elected and told, standby elected and told, resigned)
// that takes longer than this fails the run.
constexpr milliseconds phase_limit{15000};
// The kill comes kill_min + uniform(0..TTL) after the standby's campaign
// began: after its first attempt (which finds the lock held), at a random
// phase of the leader's extension cycle.
constexpr milliseconds kill_min{20};

double ms_between(clk::time_point a, clk::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

struct Sample {
  double failover_ms = 0;  // kill → the standby's campaign returned elected
  double told_ms = 0;      // kill → the observer told the standby leads
  double floor_ms = 0;     // what the dead leader's lock still had to live at the kill
  std::optional<double> told_none_ms;  // kill → the observer told "no leader" (if it was, first)
  double rounds_after_kill = 0;  // the standby's acquire rounds from the kill to elected (the last one took it)
  double held_after_kill = 0;    // of those, the ones that found the lock held (a split vote counts here)
  double rounds_before_kill = 0;  // the standby's acquire rounds from its campaign's start to the kill
  double wake_ups = 0;            // the standby's wake-ups by a release notification in the round (Stats::wake_ups)
};

std::uint64_t all_rounds(const redlock::RoundCounts& c) {
  return c.ok + c.held + c.no_quorum + c.too_late + c.other;
}

class Failover {
 public:
  Failover(uv_loop_t* loop, AsyncClient& standby, AsyncClient& observer, std::string name,
           std::vector<std::string> child_args, milliseconds ttl, int rounds)
      : loop_(loop),
        standby_(standby),
        observer_(observer),
        name_(std::move(name)),
        child_args_(std::move(child_args)),
        ttl_(ttl),
        rounds_(rounds),
        rng_(std::random_device{}()) {
    uv_timer_init(loop, &kill_timer_);
    uv_timer_init(loop, &guard_);
    kill_timer_.data = guard_.data = this;
  }

  void run() {
    auto watch = observer_.observe(name_, [this](const Result<LeaderStatus>& r) { told(r); });
    if (!watch) die(1, "observe: " + watch.error().to_string());
    watch_ = std::move(*watch);
    t0_ = clk::now();
    start_round();
    while (!done_) {
      if (uv_run(loop_, UV_RUN_ONCE) == 0 && !done_) die(1, "internal: the loop ran out of work");
    }
    seconds_ = std::chrono::duration<double>(clk::now() - t0_).count();
    watch_.stop();
    uv_close(reinterpret_cast<uv_handle_t*>(&kill_timer_), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&guard_), nullptr);
    uv_run(loop_, UV_RUN_NOWAIT);
  }

  const std::vector<Sample>& samples() const { return samples_; }
  double seconds() const { return seconds_; }
  long long errors() const { return errors_; }

 private:
  enum class Phase { leader_starting, standing_by, killed, resigning, idle };

  void error(const std::string& what) {
    if (++errors_ <= 5) std::fprintf(stderr, "redlock_bench: failover: %s\n", what.c_str());
  }

  // fail ends the run: the leader, if one runs, is killed and reaped first
  // (by waitpid: fail runs inside a callback, where uv_run may not).
  [[noreturn]] void fail(const std::string& why) {
    if (child_running_ && uv_process_kill(&child_, SIGKILL) == 0) {
      while (waitpid(child_.pid, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
    die(1, "failover, round " + std::to_string(samples_.size() + 1) + ": " + why);
  }

  void guard(const char* what) {
    guard_what_ = what;
    uv_timer_start(
        &guard_,
        [](uv_timer_t* t) {
          auto* self = static_cast<Failover*>(t->data);
          self->fail(std::string("timed out: ") + self->guard_what_);
        },
        static_cast<std::uint64_t>(phase_limit.count()), 0);
  }

  // ---- the leader process

  void start_round() {
    phase_ = Phase::leader_starting;
    child_term_ = 0;
    round_ = Round{};
    line_.clear();
    if (handles_open_ != 0) fail("internal: the last leader's handles are still open");
    guard("the leader process was not elected, or the observer not told");
    std::vector<char*> argv;
    for (auto& a : child_args_) argv.push_back(a.data());
    argv.push_back(nullptr);
    uv_pipe_init(loop_, &out_, 0);
    out_.data = this;
    uv_stdio_container_t stdio[3];
    stdio[0].flags = UV_IGNORE;
    stdio[1].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
    stdio[1].data.stream = reinterpret_cast<uv_stream_t*>(&out_);
    stdio[2].flags = UV_INHERIT_FD;
    stdio[2].data.fd = 2;
    uv_process_options_t o{};
    o.file = argv[0];
    o.args = argv.data();
    o.stdio = stdio;
    o.stdio_count = 3;
    o.exit_cb = [](uv_process_t* p, int64_t status, int signal) {
      static_cast<Failover*>(p->data)->reaped(status, signal);
    };
    child_.data = this;
    if (const int rc = uv_spawn(loop_, &child_, &o); rc != 0) die(1, std::string("uv_spawn: ") + uv_strerror(rc));
    child_running_ = true;
    handles_open_ = 2;
    uv_read_start(
        reinterpret_cast<uv_stream_t*>(&out_),
        [](uv_handle_t*, size_t, uv_buf_t* buf) {
          static char chunk[256];
          *buf = uv_buf_init(chunk, sizeof chunk);
        },
        [](uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
          auto* self = static_cast<Failover*>(s->data);
          if (n > 0) return self->child_output(std::string(buf->base, static_cast<std::size_t>(n)));
          if (n < 0) uv_close(reinterpret_cast<uv_handle_t*>(s), closed);  // EOF: it died
        });
  }

  // closed: the close callback of the leader's process and pipe handles
  // (both are reused by the next round).
  static void closed(uv_handle_t* h) { --static_cast<Failover*>(h->data)->handles_open_; }

  void child_output(const std::string& bytes) {
    line_ += bytes;
    // It says one short line per election: more without a newline is not it.
    if (line_.size() > 4096 && line_.find('\n') == std::string::npos) fail("the leader wrote 4 KiB without a newline");
    for (std::size_t nl; (nl = line_.find('\n')) != std::string::npos; line_.erase(0, nl + 1)) {
      const std::string line = line_.substr(0, nl);
      unsigned long long term = 0;
      if (std::sscanf(line.c_str(), "elected %llu", &term) != 1 || term == 0) fail("the leader said: " + line);
      child_term_ = term;
      if (phase_ == Phase::leader_starting && told_term_ == child_term_) stand_by();
    }
  }

  void reaped(int64_t status, int signal) {
    child_running_ = false;
    uv_close(reinterpret_cast<uv_handle_t*>(&child_), closed);
    if (phase_ != Phase::killed || signal != SIGKILL) {
      fail("the leader process ended by itself (exit " + std::to_string(status) + ", signal " +
           std::to_string(signal) + ")");
    }
    // Dead and reaped: everything it sent is on the masters. Read what its
    // lock still has to live.
    const clk::time_point sent = clk::now();
    observer_.leader(name_, [this, sent](Result<LeaderStatus> r) {
      const clk::time_point mid = sent + (clk::now() - sent) / 2;
      if (!r) {
        error("leader() after the kill: " + r.error().to_string());
        round_.floor_ms = ms_between(round_.killed, mid);
      } else if (r->leader && r->leader->term == child_term_) {
        round_.floor_ms = ms_between(round_.killed, mid) + static_cast<double>(r->expires_in.count());
      } else {  // already gone (or taken): it had at most until the reading
        round_.floor_ms = ms_between(round_.killed, sent);
      }
      round_.floor_read = true;
      maybe_end_round();
    });
  }

  // ---- the standby and the kill

  void stand_by() {
    phase_ = Phase::standing_by;
    const redlock::Stats at_start = standby_.stats();
    round_.at_start = at_start.acquire_rounds;
    round_.wakes_at_start = at_start.wake_ups;
    guard("the standby was not elected, or the observer not told");
    redlock::CampaignOptions o;
    o.identity = "standby";
    o.ttl = ttl_;
    o.wait = phase_limit;
    standby_.campaign(name_, std::move(o), [this](Result<redlock::AsyncLeadership> r) {
      if (!r) fail("the standby's campaign: " + r.error().to_string());
      round_.elected = clk::now();
      round_.elected_seen = true;
      const redlock::Stats at_elected = standby_.stats();
      round_.at_elected = at_elected.acquire_rounds;
      round_.wakes_at_elected = at_elected.wake_ups;
      if (phase_ != Phase::killed) fail("the standby was elected before the leader was killed");
      if (r->term() <= child_term_) fail("the standby's term is not above the dead leader's");
      leadership_ = std::move(*r);
      maybe_end_round();
    });
    const auto spread = std::uniform_int_distribution<long long>(0, ttl_.count())(rng_);
    uv_timer_start(
        &kill_timer_, [](uv_timer_t* t) { static_cast<Failover*>(t->data)->kill(); },
        static_cast<std::uint64_t>(kill_min.count() + spread), 0);
  }

  void kill() {
    if (!child_running_) fail("the leader process was gone before the kill");
    phase_ = Phase::killed;
    round_.killed = clk::now();
    round_.at_kill = standby_.stats().acquire_rounds;
    if (const int rc = uv_process_kill(&child_, SIGKILL); rc != 0) fail(std::string("kill: ") + uv_strerror(rc));
  }

  // ---- the observer

  void told(const Result<LeaderStatus>& r) {
    const clk::time_point now = clk::now();
    if (!r) {
      if (r.error().code != redlock::Errc::closed) error("the observer was told an error: " + r.error().to_string());
      return;
    }
    told_term_ = r->leader ? r->leader->term : 0;
    switch (phase_) {
      case Phase::leader_starting:
        if (child_term_ != 0 && told_term_ == child_term_) stand_by();
        break;
      case Phase::standing_by:
        if (told_term_ != child_term_) error("the observer was told another leader before the kill");
        break;
      case Phase::killed:
        if (!r->leader) {
          if (!round_.told_none) round_.told_none = now;
        } else if (r->leader->term > child_term_ && !round_.told_seen) {
          if (r->leader->identity != "standby") error("the observer was told a leader that is not the standby");
          round_.told = now;
          round_.told_seen = true;
          maybe_end_round();
        }
        break;
      case Phase::resigning:
      case Phase::idle:
        break;
    }
  }

  // ---- the end of a round

  void maybe_end_round() {
    if (phase_ != Phase::killed || !round_.elected_seen || !round_.told_seen || !round_.floor_read) return;
    Sample s;
    s.failover_ms = ms_between(round_.killed, round_.elected);
    s.told_ms = ms_between(round_.killed, round_.told);
    s.floor_ms = round_.floor_ms;
    if (round_.told_none && *round_.told_none < round_.told) s.told_none_ms = ms_between(round_.killed, *round_.told_none);
    s.rounds_after_kill = static_cast<double>(all_rounds(round_.at_elected) - all_rounds(round_.at_kill));
    s.held_after_kill = static_cast<double>(round_.at_elected.held - round_.at_kill.held);
    s.rounds_before_kill = static_cast<double>(all_rounds(round_.at_kill) - all_rounds(round_.at_start));
    s.wake_ups = static_cast<double>(round_.wakes_at_elected - round_.wakes_at_start);
    samples_.push_back(s);
    char none[64] = "";
    if (s.told_none_ms) std::snprintf(none, sizeof none, ", told \"no leader\" at %.1f ms", *s.told_none_ms);
    std::fprintf(stderr,
                 "redlock_bench: failover %zu: floor %.1f ms, elected %.1f ms, observer told %.1f ms%s (TTL %lld ms; "
                 "the standby's acquire rounds: %.0f before the kill, %.0f after it, %.0f of them held; "
                 "%.0f woken by a notification)\n",
                 samples_.size(), s.floor_ms, s.failover_ms, s.told_ms, none, static_cast<long long>(ttl_.count()),
                 s.rounds_before_kill, s.rounds_after_kill, s.held_after_kill, s.wake_ups);
    phase_ = Phase::resigning;
    guard("the standby's resignation");
    leadership_.resign([this](Result<void> r) {
      if (!r) error("resign: " + r.error().to_string());
      leadership_ = redlock::AsyncLeadership{};
      if (static_cast<int>(samples_.size()) >= rounds_) {
        phase_ = Phase::idle;
        uv_timer_stop(&guard_);
        done_ = true;
        return;
      }
      start_round();
    });
  }

  struct Round {
    clk::time_point killed{}, elected{}, told{};
    std::optional<clk::time_point> told_none;
    redlock::RoundCounts at_start, at_kill, at_elected;  // the standby's acquire rounds
    std::uint64_t wakes_at_start = 0, wakes_at_elected = 0;
    bool elected_seen = false, told_seen = false, floor_read = false;
    double floor_ms = 0;
  };

  uv_loop_t* loop_;
  AsyncClient& standby_;
  AsyncClient& observer_;
  std::string name_;
  std::vector<std::string> child_args_;
  milliseconds ttl_;
  int rounds_;
  std::mt19937 rng_;
  uv_timer_t kill_timer_, guard_;
  const char* guard_what_ = "";
  uv_process_t child_{};
  uv_pipe_t out_{};
  bool child_running_ = false;
  int handles_open_ = 0;  // the leader's process and pipe handles not yet closed
  std::string line_;
  Phase phase_ = Phase::idle;
  std::uint64_t child_term_ = 0, told_term_ = 0;
  Round round_;
  redlock::LeaderWatch watch_;
  redlock::AsyncLeadership leadership_;
  std::vector<Sample> samples_;
  clk::time_point t0_{};
  double seconds_ = 0;
  long long errors_ = 0;
  bool done_ = false;
};

// quantiles: p50 and max of `v` (ms) under `name`_p50_ms / _max_ms.
void quantiles(Metrics& m, const std::string& name, std::vector<double> v, const char* unit = "_ms") {
  if (v.empty()) return;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::max<double>(std::ceil(0.5 * static_cast<double>(v.size())), 1));
  m[name + "_p50" + unit] = v[rank - 1];
  m[name + "_max" + unit] = v.back();
}

}  // namespace

Metrics run_failover(uv_loop_t* loop, AsyncClient& standby, AsyncClient& observer, const std::string& name,
                     std::vector<std::string> child_args, milliseconds ttl, int rounds,
                     std::vector<long long>& samples) {
  Failover f(loop, standby, observer, name, std::move(child_args), ttl, rounds);
  f.run();
  Metrics m{{"ops", static_cast<double>(f.samples().size())},
            {"seconds", f.seconds()},
            {"errors", static_cast<double>(f.errors())},
            {"ttl_ms", static_cast<double>(ttl.count())},
            {"failovers", static_cast<double>(f.samples().size())}};
  std::vector<double> failover, told, floor, overhead, told_overhead, ratio, ttl_ratio, told_after, told_none, rounds_after,
      held_after;
  for (const Sample& s : f.samples()) {
    samples.push_back(std::llround(s.failover_ms * 1000));
    failover.push_back(s.failover_ms);
    told.push_back(s.told_ms);
    floor.push_back(s.floor_ms);
    overhead.push_back(s.failover_ms - s.floor_ms);
    told_overhead.push_back(s.told_ms - s.floor_ms);
    told_after.push_back(s.told_ms - s.failover_ms);
    if (s.floor_ms > 0) ratio.push_back(s.failover_ms / s.floor_ms);
    ttl_ratio.push_back(s.failover_ms / static_cast<double>(ttl.count()));
    if (s.told_none_ms) told_none.push_back(*s.told_none_ms);
    rounds_after.push_back(s.rounds_after_kill);
    held_after.push_back(s.held_after_kill);
  }
  quantiles(m, "failover", failover);
  quantiles(m, "floor", floor);
  quantiles(m, "overhead", overhead);
  quantiles(m, "told", told);
  quantiles(m, "told_overhead", told_overhead);
  quantiles(m, "told_after_elected", told_after);
  quantiles(m, "told_none", told_none);
  quantiles(m, "failover_per_floor", ratio, "");
  quantiles(m, "failover_per_ttl", ttl_ratio, "");
  quantiles(m, "standby_rounds_after_kill", rounds_after, "");
  quantiles(m, "standby_held_after_kill", held_after, "");
  m["told_none_rounds"] = static_cast<double>(told_none.size());
  return m;
}

// run_failover_leader: the leader process of a failover round. It campaigns
// for `name`, says "elected TERM" on stdout, and leads (its lease's watchdog
// extending the lock) until it is killed. It dies with its parent
// (PR_SET_PDEATHSIG), so a runner that fails leaves no leader behind.
[[noreturn]] void run_failover_leader(uv_loop_t* loop, AsyncClient& client, const std::string& name,
                                      milliseconds ttl) {
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) die(1, std::string("prctl: ") + std::strerror(errno));
  if (getppid() == 1) die(1, "the runner is gone");
  redlock::CampaignOptions o;
  o.identity = "leader-" + std::to_string(getpid());
  o.ttl = ttl;
  o.wait = phase_limit;
  o.on_deposed = [](const redlock::Error& why) { die(1, "deposed: " + why.to_string()); };
  std::optional<redlock::AsyncLeadership> leadership;
  client.campaign(name, std::move(o), [&leadership](Result<redlock::AsyncLeadership> r) {
    if (!r) die(1, "campaign: " + r.error().to_string());
    std::printf("elected %llu\n", static_cast<unsigned long long>(r->term()));
    std::fflush(stdout);
    leadership = std::move(*r);
  });
  uv_run(loop, UV_RUN_DEFAULT);
  die(1, "internal: the leader's loop ran out of work");
}

}  // namespace redlock_bench
