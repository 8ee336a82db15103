// run_campaign.cpp — `redlock run --campaign NAME -- CMD`: a leader-elected
// daemon in one line. CMD runs while this process leads the election NAME
// (Client::campaign; `redlock leader NAME` shows it), with the term in
// REDLOCK_FENCE; a lost leadership ends CMD's group as a lost lock does
// (run_supervise.hpp: the same kill schedule, the same guard), and once the
// group is empty redlock campaigns again and starts CMD again when
// re-elected. CMD exiting by itself ends the run: the leadership is
// resigned and CMD's status is redlock's. It is not a supervisor that
// restarts a failing command: a command that should run again after it
// exits loops itself (or runs under systemd's Restart=).
//
// CampaignRun — the run's states (one enum, one step):
//   campaigning  waiting to be elected (run_wait.hpp): the first election
//                bounded by -w / -n (default forever), every later one
//                without end; a signal that ends a process cancels it
//   leading      CMD's group runs under the leadership (supervise_group)
//   resigning    the group is empty, or CMD could not start: the
//                leadership is resigned (a lost one too: its record and
//                what is left of its lock go)
//   ended        the run is over; status() is redlock's exit status
// Events:
//   elected        campaigning → leading
//   not_elected    campaigning → ended: the wait ran out (the conflict or
//                  unavailable code), a signal (128+N), a signal just as
//                  elected (resigned at once: 128+N)
//   not_started    leading → resigning → ended: CMD could not be run
//                  (126, 127), or the guard is gone (1)
//   group_empty    leading → resigning, then campaigning again when the
//                  leadership was lost while CMD ran (which the loss then
//                  stopped) and no SIGINT or SIGTERM was passed on to it in
//                  this term; else ended: 128+N after such a signal, the
//                  lost code when the loss came only after CMD had exited
//                  by itself (what it left in its group held on, or redlock
//                  was stopped past the deadline), else CMD's status
//   resigned       resigning → campaigning or ended; a resign that fails
//                  turns CMD's 0 into 125, as a failed release does
#include "run.hpp"
#include "run_child.hpp"
#include "run_guard.hpp"
#include "run_shared.hpp"
#include "run_supervise.hpp"
#include "run_wait.hpp"
#include "signal_watch.hpp"

#include <signal.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <stop_token>

namespace redlock::cli {

namespace {

using clock = redlock::BootClock;

class CampaignRun {
 public:
  enum class State { campaigning, leading, resigning, ended };
  struct Event {
    enum class Kind { elected, not_elected, not_started, group_empty, resigned } kind;
    int status = 0;        // not_elected, not_started: the exit status; group_empty: CMD's (128+N: signal N)
    bool lost = false;     // group_empty: the leadership was lost (Held::lost)
    bool deposed = false;  // group_empty: lost while CMD ran, which it stopped (Held::lost_while_cmd_ran)
    int stop_signal = 0;   // group_empty: SIGINT or SIGTERM was passed on (Held::stop_signal)
    bool ok = true;        // resigned: the leadership was resigned (the lock freed)
  };

  explicit CampaignRun(int lost_code) : lost_code_(lost_code) {}
  State state() const noexcept { return state_; }
  int status() const noexcept { return status_; }
  // first: no election was won yet (-w bounds this one).
  bool first() const noexcept { return !elected_once_; }

  void step(const Event& e) {
    using K = Event::Kind;
    switch (state_) {
      case State::campaigning:
        if (e.kind == K::elected) {
          elected_once_ = true;
          state_ = State::leading;
          return;
        }
        if (e.kind == K::not_elected) return end(e.status);
        break;
      case State::leading:
        if (e.kind == K::not_started) {
          status_ = e.status;
          after_ = State::ended;
          state_ = State::resigning;
          return;
        }
        if (e.kind == K::group_empty) {
          after_ = State::ended;
          own_status_ = false;
          if (e.deposed && e.stop_signal != 0) {
            status_ = 128 + e.stop_signal;
          } else if (e.deposed) {
            after_ = State::campaigning;
          } else if (e.lost) {
            status_ = lost_code_;
          } else {
            status_ = e.status;
            own_status_ = true;
          }
          state_ = State::resigning;
          return;
        }
        break;
      case State::resigning:
        if (e.kind == K::resigned) {
          if (after_ == State::ended && own_status_ && !e.ok && status_ == 0) status_ = kRunReleaseFailed;
          state_ = after_;
          return;
        }
        break;
      case State::ended:
        break;
    }
    throw std::logic_error("run --campaign: event " + std::to_string(static_cast<int>(e.kind)) + " in state " +
                           std::to_string(static_cast<int>(state_)));
  }

 private:
  void end(int status) {
    status_ = status;
    state_ = State::ended;
  }
  int lost_code_;
  State state_ = State::campaigning;
  State after_ = State::ended;  // resigning: where the resign leads
  int status_ = 0;
  bool own_status_ = false;  // status_ is CMD's own exit (a failed resign turns 0 into 125)
  bool elected_once_ = false;
};

using Event = CampaignRun::Event;
using Kind = CampaignRun::Event::Kind;

// refuse_with_campaign: the options a leadership has no use for.
void refuse_with_campaign(const RunArgs& a) {
  const auto refuse = [](const std::string& option, const std::string& why) {
    throw UsageError("--campaign and " + option + ": give only one of them (" + why + ")");
  };
  if (!a.permits.empty()) refuse("--permits", "an election has one leader, not P permits");
  if (a.shared) refuse("--shared", "a leader holds its election alone");
  if (a.fair) refuse("--fair", "candidates are not elected in the order they came");
  if (!a.max_hold.empty()) refuse("--max-hold", "a leadership is held until it is lost or resigned");
  if (a.identity.size() > max_identity_size)
    throw UsageError("--identity: " + std::to_string(a.identity.size()) + " bytes: at most " +
                     std::to_string(max_identity_size));
  if (a.value.size() > max_leader_value_size)
    throw UsageError("--value: " + std::to_string(a.value.size()) + " bytes: at most " +
                     std::to_string(max_leader_value_size));
}

}  // namespace

int campaign_command(const Globals& g, const RunArgs& a, const RunSettings& s) {
  refuse_with_campaign(a);
  std::unique_ptr<RunReport> reporting = open_report(g, a);
  Report& report = reporting->report;
  const std::int64_t started_us = unix_us_now();
  const auto say = [&](const std::string& text) {
    if (report.human()) std::cerr << terminal_safe("redlock: run: " + text) << '\n' << std::flush;
  };
  const auto say_waiting = [&](const std::string& note) {
    // Not with --json alone: stderr is then the report's.
    if (report.human() || report.fd >= 0) std::cerr << "redlock: run: waiting: " << note << '\n' << std::flush;
  };

  // Signals first: the client's loop thread inherits the blocked mask.
  SignalWatch signals(SignalWatch::catchable_unignored());
  Fd lost_efd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  Fd rounds_efd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (lost_efd.fd < 0 || rounds_efd.fd < 0) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
  Config config = load_config(g);
  auto rounds = std::make_shared<WaitRounds>(rounds_efd.fd);  // a campaign is one call: its rounds say why it waits
  config.options.observer = rounds;
  const KillTimes times = kill_times(a, s, s.ttl.count() > 0 ? s.ttl : config.options.default_ttl);

  Guard guard;  // forked now: no thread exists yet
  Result<std::unique_ptr<Client>> created = Client::create(std::move(config));
  if (!created) throw UsageError(created.error().message);
  std::unique_ptr<Client> client = std::move(*created);
  check_ttl(*client, times.ttl);
  // As for a lock's run: the group's orphans are ours to reap (run.cpp).
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  Terminal terminal(a.foreground);

  const std::string name = quote(a.resource);
  CampaignRun run(s.lost_code);
  std::optional<Leadership> lead;      // leading, resigning
  std::shared_ptr<LostSignal> lost;    // the current term's (a late on_deposed of an earlier term is not its)
  json term;                           // this term's report (or the failed election's)
  const auto new_report = [&] {
    term = {{"command", "run"}, {"campaign", true}};
    put_name(term, "resource", a.resource);
    term["started_at_us"] = started_us;
  };
  const auto print_report = [&] {
    term["exit_status"] = run.state() == CampaignRun::State::ended ? json(run.status()) : json(nullptr);
    report.j = term;
    report.print();
  };

  // ---- campaigning ----------------------------------------------------------
  const auto campaign = [&]() -> Event {
    new_report();
    lost = std::make_shared<LostSignal>();
    lost->efd = lost_efd.fd;
    std::stop_source cancel;
    CampaignOptions co;
    co.identity = a.identity;
    co.value = a.value;
    co.ttl = s.ttl;
    co.wait = !run.first() || s.wait_forever ? CampaignOptions::forever : s.wait;
    co.cancel = cancel.get_token();
    co.on_deposed = tell_loss(lost);
    const auto began = clock::now();
    std::optional<Result<Leadership>> got;
    const WaitEnd end = wait_watching_signals({signals, cancel, rounds.get(), *client, say_waiting},
                                              [&] { got.emplace(client->campaign(a.resource, co)); });
    const auto now = clock::now();
    term["campaign_us"] = std::chrono::duration_cast<std::chrono::microseconds>(now - began).count();
    Result<Leadership>& r = *got;
    if (r) {
      lead.emplace(std::move(*r));
      term["elected"] = true;
      term["identity"] = lead->identity();
      term["term"] = lead->term();
      term["token"] = lead->lease().token();
      term["elected_at_us"] = unix_us(now);
      term["attempts"] = lead->lease().attempts();
      for (const char* field : {"deposed", "child_pid", "child_status", "child_signal"}) term[field] = nullptr;
      if (end.interrupted == 0) return {Kind::elected};
      // A signal came just as the election was won: the command is not run.
      const bool resigned = lead->resign().ok();
      lead.reset();
      term["resigned"] = resigned;
      say("interrupted by " + signal_name(end.interrupted) + "; the command was not run");
      return {Kind::not_elected, 128 + end.interrupted};
    }
    const Error& e = r.error();
    throw_if_usage(e);
    const bool outage = end.interrupted == 0 && unavailable(e.code, e.nodes);
    const int status = end.interrupted != 0 ? 128 + end.interrupted : outage ? s.unavailable_code : s.conflict_code;
    term["elected"] = false;
    term["term"] = nullptr;
    term["token"] = nullptr;
    term["attempts"] = e.attempts;
    add_error(term, e.code, e.to_string());
    term["unavailable"] = outage;
    if (end.interrupted != 0) {
      say("interrupted by " + signal_name(end.interrupted) + " while campaigning for " + name + "; the command " +
          (run.first() ? "was not run" : "is not running") +
          (end.stuck.empty() ? "" : "; the wait could not make progress: " + end.stuck));
    } else if (outage || !(a.quiet || (a.no_wait && s.conflict_code == 0))) {
      say(name + " not elected" +
          (a.no_wait || s.wait_forever || !run.first() ? "" : " within " + format_duration(s.wait)) +
          (outage ? " (no quorum of usable masters)" : "") + ": " + escaped(e.to_string()));
    }
    return {Kind::not_elected, status};
  };

  // ---- leading --------------------------------------------------------------
  const auto lead_term = [&]() -> Event {
    const std::string term_text = "term " + std::to_string(lead->term());
    if (!guard.alive()) {
      term["error"] = "the guard process is gone: the command is not started without it";
      say(term["error"].get<std::string>());
      return {Kind::not_started, kExitNotDone};
    }
    Spawn child = spawn_command(a.command, child_environment(lead->lease(), true), signals.set(), terminal.fd());
    if (child.pid < 0) {
      term["error"] = "cannot run " + quote(a.command.front()) + ": " + std::strerror(child.error);
      say(term["error"].get<std::string>());
      return {Kind::not_started, child.error == ENOENT ? kRunNotFound : kRunCannotExec};
    }
    term["child_pid"] = child.pid;
    say("elected leader of " + name + " (" + term_text + "); started the command (pid " + std::to_string(child.pid) +
        ")");
    const Held held = supervise_group({.lease = lead->lease(),
                                       .lost = lost,
                                       .signals = signals,
                                       .guard = guard,
                                       .terminal = terminal,
                                       .times = times,
                                       .term_signal = s.term_signal,
                                       .noun = "the leadership",
                                       .what = "the leadership of " + name,
                                       .tell = say},
                                      child.pid);
    // The guard stays for the next term; one that does not answer is gone
    // (alive() false): no command is started without one.
    if (!guard.unwatch()) say("the guard process did not answer (it is gone, or was stopped: it is killed)");
    terminal.take_back();
    const bool by_signal = WIFSIGNALED(held.wstatus);
    term["child_status"] = by_signal ? json(nullptr) : json(WEXITSTATUS(held.wstatus));
    term["child_signal"] = by_signal ? json(WTERMSIG(held.wstatus)) : json(nullptr);
    term["deposed"] = held.lost ? json(*held.lost) : json(nullptr);
    if (held.lost) term["killed"] = held.killed.empty() ? json(nullptr) : json(held.killed);
    term["deadline_at_us"] = unix_us(lead->lease().deadline());
    term["extensions"] = lead->lease().extensions();
    Event e{Kind::group_empty, by_signal ? 128 + WTERMSIG(held.wstatus) : WEXITSTATUS(held.wstatus)};
    e.lost = held.lost.has_value();
    e.deposed = held.lost_while_cmd_ran;
    e.stop_signal = held.stop_signal;
    return e;
  };

  // ---- resigning ------------------------------------------------------------
  const auto resign = [&]() -> Event {
    const bool was_lost = lead->deposed().has_value();
    term["resigned_at_us"] = unix_us_now();
    // An error also when the release freed the lock on no majority (an
    // ACL refused the script, say): it leads until its TTL then.
    Result<void> r = lead->resign();
    lead.reset();
    std::optional<std::string> failed;
    if (!r) failed = r.error().to_string();
    term["resigned"] = !failed.has_value();
    // A lost leadership's lock is expected to be gone or another's; any
    // other resign that failed leaves the lock until its TTL.
    if (failed && !was_lost) {
      term["resign_error"] = *failed;
      std::cerr << "redlock: run: the leadership of " << name << " was not resigned (it stays until its TTL, "
                << fmt_ms(times.ttl.count()) << " at most): " << escaped(*failed) << '\n'
                << std::flush;
    }
    return {.kind = Kind::resigned, .ok = !failed || was_lost};
  };

  while (run.state() != CampaignRun::State::ended) {
    switch (run.state()) {
      case CampaignRun::State::campaigning: {
        run.step(campaign());
        if (run.state() == CampaignRun::State::ended) print_report();
        break;
      }
      case CampaignRun::State::leading:
        run.step(lead_term());
        break;
      case CampaignRun::State::resigning: {
        const bool deposed = !term["deposed"].is_null();
        run.step(resign());
        print_report();
        if (run.state() == CampaignRun::State::campaigning && deposed)
          say("the command stopped (the leadership of " + name + " was lost); campaigning again");
        break;
      }
      case CampaignRun::State::ended:
        break;
    }
  }
  return run.status();
}

}  // namespace redlock::cli
