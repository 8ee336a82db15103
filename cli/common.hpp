// common.hpp — what every `redlock` command shares: the exit statuses, the
// usage error, argument checks, where the masters come from, and the two
// output forms (one JSON object, or a human table).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "arguments.hpp"
#include "redlock/redlock.hpp"

namespace redlock::cli {

using json = nlohmann::json;
using std::chrono::milliseconds;

constexpr int kExitOk = 0;
constexpr int kExitNotDone = 1;
constexpr int kExitUsage = 2;
// No quorum of usable masters (EX_UNAVAILABLE of sysexits.h): an outage,
// told apart from "held by another" (kExitNotDone).
constexpr int kExitUnavailable = 69;

// Global options, as given on the command line.
struct Globals {
  std::string nodes;        // --nodes
  std::string config_file;  // --config (else REDLOCK_CONFIG)
  bool no_quarantine = false;
  // --owner: the label every value this process draws carries after
  // host:pid (Options::owner); it wins over a config file's "owner".
  std::string owner;
  // TLS for rediss:// nodes: flags win over REDLOCK_TLS_CA / _CERT / _KEY,
  // which win over a --config file's tls_* keys.
  std::string tls_ca, tls_ca_dir, tls_cert, tls_key, tls_server_name;
  bool tls_insecure = false;
  // Credentials for nodes whose URLs carry none: --user / --password-file,
  // else REDLOCK_USER / REDLOCK_PASSWORD_FILE / REDLOCK_PASSWORD.
  std::string user, password_file;
  bool json = false;   // --json
  bool human = false;  // --human
};

void check_resource(const std::string& resource);
// owner_json: who a value names as its holder ({host, pid, label}), or null.
nlohmann::json owner_json(const std::optional<Owner>& owner);
// owner_text: "host:pid" or "host:pid:label", escaped for a terminal.
std::string owner_text(const Owner& owner);

// load_config reads the config file (--config, else REDLOCK_CONFIG) and
// picks the nodes: --nodes, else --config's, else REDLOCK_NODES, else
// REDLOCK_CONFIG's. Errors name the source.
Config load_config(const Globals& g);
std::unique_ptr<Client> make_client(const Globals& g);
// check_ttl: a TTL above the config's max_ttl is refused before any node is asked.
void check_ttl(const Client& client, milliseconds ttl);

// throw_if_usage: argument and config errors found by the library are usage errors.
void throw_if_usage(const Error& e);

// unavailable tells an outage from a conflict: true when a failure was not
// decided by other owners — no_quorum, validity_too_short, closed, internal,
// or a held / not_held / too_late round in which fewer than a majority of
// the masters could answer (refused, timed out, quarantined). False means
// another owner holds the resource (or our token is not there) as far as a
// majority of masters can tell.
bool unavailable(Errc code, const std::vector<NodeOutcome>& nodes);

// failure_status: 69 when the masters could not decide (an outage), 1 when
// they said no (held elsewhere, our token not there).
int failure_status(Errc code, const std::vector<NodeOutcome>& nodes);

// quarantine_note says why a failed round may succeed later without anyone
// releasing anything: when masters in restart quarantine are what keeps a
// majority from answering, "3 of 5 masters are in restart quarantine for
// another 58 s (see redlock nodes)", with the time until enough of them
// count again (asked of the masters: Client::nodes). Empty otherwise.
std::string quarantine_note(Client& client, const std::vector<NodeOutcome>& nodes);

// stuck_note says why a failed round cannot make progress by waiting for
// a release: masters in restart quarantine (quarantine_note), or too few
// masters answering — "1 of 3 masters answered, 2 needed (127.0.0.1:7001:
// connection refused; 127.0.0.1:7002: timed out)". Empty when the round
// was decided by other owners (a lock held by another: normal waiting).
std::string stuck_note(Client& client, Errc code, const std::vector<NodeOutcome>& nodes);

// How often a wait that cannot make progress says so again.
inline constexpr milliseconds kStuckNoteEvery{10000};

// StuckNotes — when a wait that cannot make progress speaks: at its first
// stuck round, then once per `every` for as long as it stays stuck
// ("…; waiting for 20 s").
class StuckNotes {
 public:
  explicit StuckNotes(milliseconds every = kStuckNoteEvery) : every_(every) {}
  // line: the line to say now for `note` (stuck_note's; empty: not stuck),
  // or empty when nothing is due.
  std::string line(const std::string& note) {
    if (note.empty() || !due()) return {};
    const auto now = BootClock::now();
    last_ = now;
    if (!said_) {
      said_ = true;
      return note;
    }
    return note + "; waiting for " +
           std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now - start_).count()) + " s";
  }
  // due: a stuck round now would be said (so its note is worth making).
  bool due() const { return !said_ || BootClock::now() - last_ >= every_; }

 private:
  milliseconds every_;
  BootClock::time_point start_ = BootClock::now(), last_{};
  bool said_ = false;
};

// Waited — what first_then_wait got: the last call's result, the acquire
// rounds of the calls before it, and `stuck`: the last stuck_note (empty
// when the last failed round was decided by other owners).
template <class T>
struct Waited {
  Result<T> result;
  int earlier_attempts = 0;
  std::string stuck;
};

// first_then_wait runs attempt(0 ms) — one round — and, when that fails and
// `wait` allows more, waits with attempt(what is left of `wait`), in calls
// of at most `every`. Whenever a call fails for a reason a release cannot
// cure (stuck_note), it tells `say` as StuckNotes decides: when the wait
// starts, then every `every`. A wait behind an ordinary holder says
// nothing; a lock taken at once costs nothing more. Not for a fair wait:
// its place in the queue is the one call's.
template <class T, class Attempt, class Say>
Waited<T> first_then_wait(Client& client, milliseconds wait, Attempt attempt, Say say,
                          milliseconds every = kStuckNoteEvery) {
  if (wait.count() <= 0) return {attempt(wait), 0, {}};
  const auto start = BootClock::now();
  StuckNotes notes(every);
  Waited<T> w{attempt(milliseconds{0}), 0, {}};
  for (;;) {
    if (w.result) return w;
    const Errc code = w.result.error().code;
    if (code == Errc::cancelled || code == Errc::invalid_argument || code == Errc::config || code == Errc::closed)
      return w;
    w.stuck = stuck_note(client, code, w.result.error().nodes);
    const auto spent = std::chrono::duration_cast<milliseconds>(BootClock::now() - start);
    if (spent >= wait) return w;  // the failure itself says why
    if (std::string line = notes.line(w.stuck); !line.empty()) say(line);
    const int attempts = w.result.error().attempts;
    Result<T> next = attempt(std::min(wait - spent, every));
    w.earlier_attempts += attempts;
    w.result = std::move(next);
  }
}

// --- output -------------------------------------------------------------------

// use_json: --json, --human, else the command's default.
bool use_json(const Globals& g, bool default_json);

// finish prints the JSON object or the human text and returns `status`.
int finish(bool as_json, const json& out, const std::string& human, int status);

// write_out writes all of `text` to stdout; false once stdout is closed
// (EPIPE: the watching commands block SIGPIPE) or fails.
bool write_out(std::string_view text);

// dump_json is the one line a command prints for `j`: strings that are not
// UTF-8 in their escaped form (escape.hpp), so that it never throws.
std::string dump_json(const json& j);

json nodes_json(const std::vector<NodeOutcome>& nodes);
void add_error(json& out, Errc code, const std::string& text);

// Table — left-aligned columns for the human form; the last column may be
// ragged (free text).
class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string render() const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

// Human renderings of amounts: "0.27 ms", "9,812 ms", "2h 03m 10s", and a
// token shortened to its first 8 bytes and "…" (escaped: a master's token
// may be any bytes).
std::string fmt_us(std::int64_t us);
std::string fmt_ms(std::int64_t ms);
std::string fmt_duration_s(std::int64_t seconds);
std::string short_token(const std::string& token);
std::string human_node_outcomes(const std::vector<NodeOutcome>& nodes);

// Wall-clock renderings of a steady-clock instant: unix microseconds, and
// ISO 8601 UTC ("2026-11-21T11:02:03.456Z").
std::int64_t unix_us(BootClock::time_point t);
// monotonic_us is `t` on CLOCK_MONOTONIC, in µs since its epoch.
std::int64_t monotonic_us(BootClock::time_point t);
std::int64_t unix_us_now();
std::string iso_utc(std::int64_t unix_us);

}  // namespace redlock::cli
