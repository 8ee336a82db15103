// test_skewclock.cpp — libskewclock.so (tools/skewclock): the settings
// format and Control, the skewed clocks as a preloaded process sees them
// (skewclock_probe), settings changed while it runs, translated deadlines,
// and redis-server under the shim (TIME, expiry at rate 2, an offset jump,
// load, fork, jemalloc's background thread).
//
// Environment (set by meson): SKEWCLOCK_LIB, SKEWCLOCK_PROBE, SKEWCLOCK_SET.
// Every child process is a support::Process (PR_SET_PDEATHSIG, killed by
// pid); redis-server is the fixture's RedisServer.
#include <doctest/doctest.h>
#include <hiredis/hiredis.h>

#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "redis_server.hpp"
#include "skewclock.hpp"
#include "support/process.hpp"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using redlock::test::Reply;
namespace support = redlock::support;

constexpr std::int64_t kMs = 1000000;  // ns per ms
constexpr std::int64_t kSec = 1000 * kMs;

std::string env_path(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0')
    throw std::runtime_error(std::string(name) + " is not set (run this through meson test)");
  return v;
}
std::string lib_path() { return env_path("SKEWCLOCK_LIB"); }

// The real clocks, whatever is preloaded here (nothing is, normally).
std::int64_t real_ns(clockid_t c) {
  struct timespec ts{};
  ::syscall(SYS_clock_gettime, static_cast<long>(c), &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * kSec + ts.tv_nsec;
}
std::int64_t mono_ns() { return real_ns(CLOCK_MONOTONIC); }

// sleep_until_mono: wait until the real monotonic clock reaches t (ns).
void sleep_until_mono(std::int64_t t) {
  for (std::int64_t now = mono_ns(); now < t; now = mono_ns())
    std::this_thread::sleep_for(std::chrono::nanoseconds(t - now));
}

struct TempDir {
  std::string path;
  TempDir() {
    std::string tmpl = "/tmp/skewclock-test-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// parse_kv: "a=1 b=2" -> {a:1, b:2} (integers only).
std::map<std::string, long long> parse_kv(const std::string& line) {
  std::map<std::string, long long> out;
  std::istringstream ss(line);
  std::string tok;
  while (ss >> tok) {
    auto eq = tok.find('=');
    if (eq == std::string::npos) continue;
    out[tok.substr(0, eq)] = std::atoll(tok.c_str() + eq + 1);
  }
  return out;
}

// ---- child processes ---------------------------------------------------------

// shim_environment: ours without LD_PRELOAD and SKEWCLOCK_* (nothing the
// caller runs under may leak in), with the shim preloaded and EXTRA
// ("NAME=value" each) on top.
support::Environment shim_environment(const std::vector<std::string>& extra) {
  support::Environment env = support::current_environment();
  std::erase_if(env, [](const auto& kv) { return kv.first == "LD_PRELOAD" || kv.first.rfind("SKEWCLOCK_", 0) == 0; });
  env["LD_PRELOAD"] = lib_path();
  for (const auto& x : extra) env[x.substr(0, x.find('='))] = x.substr(x.find('=') + 1);
  return env;
}

// Probe — skewclock_probe under the shim, asked over its stdin and stdout;
// its stderr goes to LOG.
class Probe {
 public:
  explicit Probe(const std::vector<std::string>& env, const std::string& log = "/dev/null")
      : process_(options(env, log)) {
    std::string hello = next_line(10s);
    REQUIRE_MESSAGE(hello.rfind("ready", 0) == 0, "probe said: " << hello);
  }
  pid_t pid() const { return process_.pid(); }
  std::map<std::string, long long> now() { return parse_kv(request("now")); }
  std::string request(const std::string& line, std::chrono::milliseconds timeout = 10s) {
    process_.write_input(line + "\n");
    return next_line(timeout);
  }

 private:
  static support::ProcessOptions options(const std::vector<std::string>& env, const std::string& log) {
    support::ProcessOptions o;
    o.argv = {env_path("SKEWCLOCK_PROBE")};
    o.env = shim_environment(env);
    o.in = support::Stream::pipe();
    o.out = support::Stream::pipe();
    o.err = support::Stream::file(log);
    return o;
  }
  std::string next_line(std::chrono::milliseconds timeout) {
    std::optional<std::string> line = process_.read_line(timeout);
    if (!line)
      throw std::runtime_error(process_.output_ended() ? "probe: stdout closed (did it crash?)"
                                                       : "probe: no reply line within the timeout");
    return *line;
  }

  support::Process process_;
};

// applied_by: wait until the probe acknowledged the last version written by
// ctl. The shim looks at its file only when the process reads a clock, and
// an idle probe reads none: each round asks it for the time.
bool applied_by(const skewclock::Control& ctl, Probe& p) {
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < deadline) {
    p.now();
    if (ctl.wait_applied(2ms, 0, p.pid())) return true;
  }
  return false;
}

// rate_between: how fast clock key ran against the real clock real_key.
double rate_between(const std::map<std::string, long long>& a, const std::map<std::string, long long>& b,
                    const std::string& key, const std::string& real_key, const std::string& real_after_key) {
  double fake = static_cast<double>(b.at(key) - a.at(key));
  // Midpoints of the real brackets around each skewed reading.
  double ra = (static_cast<double>(a.at(real_key)) + static_cast<double>(a.at(real_after_key))) / 2;
  double rb = (static_cast<double>(b.at(real_key)) + static_cast<double>(b.at(real_after_key))) / 2;
  return fake / (rb - ra);
}

// ---- redis-server under the shim -----------------------------------------------

struct ContextDeleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
using ContextPtr = std::unique_ptr<redisContext, ContextDeleter>;

Reply copy_reply(const redisReply* r) {
  Reply out;
  out.type = r->type;
  out.integer = r->integer;
  if (r->str != nullptr) out.str.assign(r->str, r->len);
  for (std::size_t i = 0; i < r->elements; ++i) out.elements.push_back(copy_reply(r->element[i]));
  return out;
}

// SkewedRedis — the fixture's redis-server under the shim, reading its
// settings from SETTINGS_FILE, with DEBUG allowed; commands go over one
// kept connection (5 s timeout).
class SkewedRedis : public redlock::test::RedisServer {
 public:
  explicit SkewedRedis(const std::string& settings_file) : RedisServer(options(settings_file)) {}

  Reply command(const std::vector<std::string>& argv) const { return pipeline({argv}).front(); }

  // pipeline sends every command, then reads every reply.
  std::vector<Reply> pipeline(const std::vector<std::vector<std::string>>& cmds) const {
    redisContext* c = conn();
    for (const auto& argv : cmds) {
      std::vector<const char*> p;
      std::vector<std::size_t> l;
      for (const auto& a : argv) {
        p.push_back(a.data());
        l.push_back(a.size());
      }
      if (redisAppendCommandArgv(c, static_cast<int>(argv.size()), p.data(), l.data()) != REDIS_OK)
        throw std::runtime_error(std::string("redis: ") + c->errstr);
    }
    std::vector<Reply> out;
    out.reserve(cmds.size());
    for (std::size_t i = 0; i < cmds.size(); ++i) {
      void* r = nullptr;
      if (redisGetReply(c, &r) != REDIS_OK || r == nullptr)
        throw std::runtime_error(std::string("redis: ") + c->errstr);
      out.push_back(copy_reply(static_cast<redisReply*>(r)));
      freeReplyObject(r);
    }
    return out;
  }

  // info_field: an integer field of INFO <section> (-1 when absent).
  long long info_field(const std::string& section, const std::string& field) const {
    Reply r = command({"INFO", section});
    std::string key = "\n" + field + ":";
    auto p = ("\n" + r.str).find(key);
    if (p == std::string::npos) return -1;
    return std::atoll(r.str.c_str() + p + key.size() - 1);
  }
  std::string info_text(const std::string& section, const std::string& field) const {
    Reply r = command({"INFO", section});
    std::string s = "\n" + r.str;
    auto p = s.find("\n" + field + ":");
    if (p == std::string::npos) return "";
    p += field.size() + 2;
    return s.substr(p, s.find_first_of("\r\n", p) - p);
  }

  // time_us: the server's TIME, in µs.
  std::int64_t time_us() const {
    Reply r = command({"TIME"});
    REQUIRE(r.elements.size() == 2);
    return std::atoll(r.elements[0].str.c_str()) * 1000000LL + std::atoll(r.elements[1].str.c_str());
  }

 private:
  static redlock::test::ServerOptions options(const std::string& settings_file) {
    redlock::test::ServerOptions o;
    o.env = {{"LD_PRELOAD", lib_path()}, {"SKEWCLOCK_FILE", settings_file}};
    o.extra_args = {"--enable-debug-command", "yes"};
    return o;
  }
  redisContext* conn() const {
    if (!conn_ || conn_->err) {
      struct timeval tv{5, 0};
      conn_.reset(redisConnectWithTimeout("127.0.0.1", port(), tv));
      if (!conn_ || conn_->err)
        throw std::runtime_error("redis: connect failed: " + std::string(conn_ ? conn_->errstr : "alloc"));
      redisSetTimeout(conn_.get(), tv);
    }
    return conn_.get();
  }

  mutable ContextPtr conn_;
};

}  // namespace

// ==== settings format, Control, skewclock-set ====================================

TEST_CASE("settings: parse, format round trip, errors name the problem") {
  skewclock::Settings s = skewclock::parse("offset_ms=-1500 rate=1.02 monotonic=1 version=7\n");
  CHECK(s.offset_ms == -1500);
  CHECK(s.rate == 1.02);
  CHECK(s.monotonic);
  CHECK(s.version == 7);

  // Comments, blank lines, partial files keep the base's other keys.
  skewclock::Settings base{250, 0.5, true, 3};
  s = skewclock::parse("# a comment\n\n  rate=2   # trailing\n", base);
  CHECK(s.offset_ms == 250);
  CHECK(s.rate == 2.0);
  CHECK(s.monotonic);
  CHECK(skewclock::parse("rate=5e-1").rate == 0.5);
  CHECK(skewclock::parse("rate=.25").rate == 0.25);

  // Every rate written by format() reads back bit for bit (the shim parses
  // with its own allocation-free parser; this is the same code).
  for (double r : {0.001, 1.0 / 3.0, 1.05, 0.95, 2.0, 999.999, 1000.0, 1.0000001, 0.123456789012345}) {
    CAPTURE(r);
    skewclock::Settings w{-42, r, false, 9};
    CHECK(skewclock::parse(skewclock::format(w)) == w);
  }

  for (const char* bad : {"rate=0", "rate=1001", "rate=abc", "rate=", "rate=-1", "offset_ms=1.5",
                          "offset_ms=99999999999999", "monotonic=2", "foo=1", "rate", "version=-1"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(skewclock::parse(bad), std::invalid_argument);
  }
  try {
    skewclock::parse("offset_ms=1 rate=fast");
    FAIL("no exception");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("byte 12: rate") != std::string::npos);
  }
}

TEST_CASE("Control writes atomically with increasing versions; skewclock-set merges keys") {
  TempDir d;
  const std::string file = d / "skew";
  skewclock::Control c(file);
  CHECK(c.current() == skewclock::Settings{});
  CHECK(c.set({1500, 1.02, false, 0}) == 1);
  struct stat first{};
  REQUIRE(::stat(file.c_str(), &first) == 0);
  CHECK(c.set_rate(0.5) == 2);
  struct stat second{};
  REQUIRE(::stat(file.c_str(), &second) == 0);
  CHECK(first.st_ino != second.st_ino);  // a new file, renamed over the old one
  CHECK(skewclock::parse(slurp(file)) == skewclock::Settings{1500, 0.5, false, 2});
  // Only the file itself is left: no temp files.
  int entries = 0;
  for (const auto& e : fs::directory_iterator(d.path)) {
    (void)e;
    ++entries;
  }
  CHECK(entries == 1);
  CHECK_FALSE(c.ack().has_value());
  CHECK_FALSE(c.wait_applied(20ms));  // nobody runs under the shim

  // A second Control picks the file up.
  skewclock::Control again(file);
  CHECK(again.current() == c.current());

  const std::string set = env_path("SKEWCLOCK_SET");
  auto run = [&](const std::vector<std::string>& args) {
    support::ProcessOptions o;
    o.argv = {set};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    return support::run(std::move(o), 10s).exit_code;
  };
  CHECK(run({file, "offset_ms=-250"}) == 0);
  CHECK(skewclock::parse(slurp(file)) == skewclock::Settings{-250, 0.5, false, 3});
  CHECK(run({file, "rate=1.25", "monotonic=1"}) == 0);
  CHECK(skewclock::parse(slurp(file)) == skewclock::Settings{-250, 1.25, true, 4});
  CHECK(run({d / "new", "rate=2"}) == 0);  // a new file: defaults for the rest
  CHECK(skewclock::parse(slurp(d / "new")) == skewclock::Settings{0, 2.0, false, 1});
  CHECK(run({file, "--show"}) == 0);
  CHECK(run({file, "rate=0"}) == 2);
  CHECK(run({file, "speed=2"}) == 2);
  CHECK(run({file}) == 2);
  CHECK(run({}) == 2);
  CHECK(run({"--help"}) == 0);
  CHECK(run({file, "--show", "rate=2"}) == 2);  // --show takes no settings, nor --wait
  CHECK(run({file, "--show", "--wait", "20"}) == 2);
  CHECK(run({file, "rate=2", "--wait", "-1"}) == 2);
  CHECK(run({file, "pid=7"}) == 2);  // the shim's keys are not ours to set
  CHECK(run({file, "rate=2", "--wait", "20"}) == 3);  // written, never acknowledged
  CHECK(skewclock::parse(slurp(file)).rate == 2.0);
  CHECK(run({d / "no-such-dir/skew", "rate=2"}) == 1);
}

// ==== a preloaded process ==========================================================

TEST_CASE("probe: every wall-clock interface is offset and runs at the rate; monotonic only on request") {
  for (bool vdso : {true, false}) {
    CAPTURE(vdso);
    std::vector<std::string> env = {"SKEWCLOCK_OFFSET_MS=5000", "SKEWCLOCK_RATE=1.5"};
    if (!vdso) env.push_back("SKEWCLOCK_NO_VDSO=1");
    const std::int64_t spawned = real_ns(CLOCK_REALTIME);
    Probe p(env);
    auto a = p.now();
    std::this_thread::sleep_for(200ms);
    auto b = p.now();
    for (const auto* s : {&a, &b}) {
      const auto& x = *s;
      // fake(t) = t + 5 s + (t - start) * 0.5, read between real_rt and real_rt_after.
      CHECK(x.at("rt") >= x.at("real_rt") + 5 * kSec);
      CHECK(x.at("rt") <= x.at("real_rt_after") + 5 * kSec + (x.at("real_rt_after") - spawned) / 2 + kMs);
      CHECK(std::llabs(x.at("gtod_us") * 1000 - x.at("rt")) < kMs);
      CHECK(x.at("time") >= x.at("rt") / kSec);
      CHECK(x.at("time") <= x.at("rt") / kSec + 1);
      CHECK(std::llabs(x.at("rt_coarse") - x.at("rt")) < 50 * kMs);  // a tick or so
      // Monotonic clocks untouched.
      CHECK(x.at("mono") >= x.at("real_mono"));
      CHECK(x.at("mono") <= x.at("real_mono_after"));
    }
    CHECK(rate_between(a, b, "rt", "real_rt", "real_rt_after") == doctest::Approx(1.5).epsilon(0.01));
    CHECK(rate_between(a, b, "gtod_us", "real_rt", "real_rt_after") * 1000 ==
          doctest::Approx(1.5).epsilon(0.01));
    CHECK(rate_between(a, b, "mono", "real_mono", "real_mono_after") == doctest::Approx(1.0).epsilon(0.01));
  }

  SUBCASE("monotonic=1: the monotonic clocks run at the rate, never offset") {
    const std::int64_t spawned = real_ns(CLOCK_MONOTONIC);
    Probe p({"SKEWCLOCK_OFFSET_MS=5000", "SKEWCLOCK_RATE=1.5", "SKEWCLOCK_MONOTONIC=1"});
    auto a = p.now();
    std::this_thread::sleep_for(200ms);
    auto b = p.now();
    CHECK(b.at("mono") >= b.at("real_mono"));
    CHECK(b.at("mono") <= b.at("real_mono_after") + (b.at("real_mono_after") - spawned) / 2 + kMs);
    for (const char* k : {"mono", "mono_coarse", "mono_raw", "boot", "rt"}) {
      CAPTURE(k);
      CHECK(rate_between(a, b, k, "real_mono", "real_mono_after") == doctest::Approx(1.5).epsilon(0.05));
    }
  }
}

TEST_CASE("probe: settings changed while it runs; rate changes never step a clock back") {
  TempDir d;
  skewclock::Control ctl(d / "probe.skew");
  ctl.set({});
  Probe p({"SKEWCLOCK_FILE=" + ctl.path()}, d / "probe.log");
  REQUIRE(ctl.wait_applied(5s, 0, p.pid()));  // applied at start-up
  REQUIRE(p.request("hammer 3").rfind("hammering", 0) == 0);

  struct Step {
    double rate;
    bool monotonic;
  };
  for (Step s : {Step{2.0, false}, Step{2.0, true}, Step{0.5, true}, Step{0.5, false}, Step{1.25, false},
                 Step{0.05, true}, Step{20.0, true}, Step{1.0, false}}) {
    CAPTURE(s.rate);
    CAPTURE(s.monotonic);
    skewclock::Settings next = ctl.current();
    next.rate = s.rate;
    next.monotonic = s.monotonic;
    const auto version = ctl.set(next);
    REQUIRE(ctl.wait_applied(5s, version, p.pid()));
    auto ack = ctl.ack();
    REQUIRE(ack.has_value());
    CHECK(ack->pid == p.pid());
    CHECK(ack->settings.rate == s.rate);
    auto a = p.now();
    std::this_thread::sleep_for(150ms);
    auto b = p.now();
    CHECK(rate_between(a, b, "rt", "real_rt", "real_rt_after") == doctest::Approx(s.rate).epsilon(0.03));
    CHECK(rate_between(a, b, "mono", "real_mono", "real_mono_after") ==
          doctest::Approx(s.monotonic ? s.rate : 1.0).epsilon(0.03));
  }
  const std::string stop = p.request("stop");
  CAPTURE(stop);
  auto stats = parse_kv(stop);
  CHECK(stats.at("reads") > 1000);
  CHECK(stats.at("backwards") == 0);

  // An offset change is a deliberate jump of the wall clocks, by exactly the
  // difference; the monotonic clocks do not move.
  auto before = p.now();
  ctl.set_offset_ms(10000);
  REQUIRE(applied_by(ctl, p));
  auto after = p.now();
  auto skew = [](const std::map<std::string, long long>& x) { return x.at("rt") - x.at("real_rt"); };
  auto mono_skew = [](const std::map<std::string, long long>& x) { return x.at("mono") - x.at("real_mono"); };
  CHECK(skew(after) - skew(before) == doctest::Approx(10 * kSec).epsilon(0.001));
  CHECK(std::llabs(mono_skew(after) - mono_skew(before)) < kMs);
  ctl.set_offset_ms(-10000);
  REQUIRE(applied_by(ctl, p));
  auto back = p.now();
  CHECK(skew(back) - skew(after) == doctest::Approx(-20 * kSec).epsilon(0.001));

  // A suspend moves the boot clock ahead of the monotonic one by exactly
  // the time slept, and only forward: a smaller suspend_ms changes nothing.
  auto boot_lead = [](const std::map<std::string, long long>& x) { return x.at("boot") - x.at("mono"); };
  const auto awake = p.now();
  ctl.suspend(10s);
  REQUIRE(applied_by(ctl, p));
  const auto resumed = p.now();
  CHECK(boot_lead(resumed) - boot_lead(awake) == doctest::Approx(10 * kSec).epsilon(0.001));
  CHECK(std::llabs(mono_skew(resumed) - mono_skew(awake)) < kMs);
  CHECK(skew(resumed) == doctest::Approx(skew(back)).epsilon(0.0001));
  skewclock::Settings smaller = ctl.current();
  smaller.suspend_ms = 1000;
  ctl.set(smaller);
  REQUIRE(applied_by(ctl, p));
  CHECK(boot_lead(p.now()) - boot_lead(awake) == doctest::Approx(10 * kSec).epsilon(0.001));

  // A malformed file is reported on stderr and changes nothing.
  skewclock::detail::write_atomically(ctl.path(), "rate=banana\n");
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (slurp(d / "probe.log").find("rate: not a decimal number") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    p.now();  // a clock read makes it look
    std::this_thread::sleep_for(2ms);
  }
  CHECK(slurp(d / "probe.log").find("rate: not a decimal number") != std::string::npos);
  auto x = p.now();
  std::this_thread::sleep_for(100ms);
  auto y = p.now();
  CHECK(rate_between(x, y, "rt", "real_rt", "real_rt_after") == doctest::Approx(1.0).epsilon(0.03));
  CHECK(skew(y) == doctest::Approx(skew(back)).epsilon(0.0001));
}

TEST_CASE("probe: absolute deadlines on the skewed clock are mapped back to real time") {
  // pthread_cond_timedwait (jemalloc's background thread) and
  // clock_nanosleep(TIMER_ABSTIME): a deadline of skewed-now + 200 ms must
  // take ~200 ms, not 0 (negative offset) or 10.2 s (positive offset).
  for (const char* offset : {"SKEWCLOCK_OFFSET_MS=-10000", "SKEWCLOCK_OFFSET_MS=10000"}) {
    CAPTURE(offset);
    Probe p({offset});
    for (const char* cmd : {"condwait 200", "sleepabs realtime 200", "sleepabs monotonic 200"}) {
      CAPTURE(cmd);
      auto r = parse_kv(p.request(cmd, 5s));
      CHECK(r.at("real_ns") >= 190 * kMs);
      CHECK(r.at("real_ns") < 1500 * kMs);
    }
  }
  // A clock running at twice the rate: 400 skewed ms are 200 real ms.
  Probe p({"SKEWCLOCK_RATE=2", "SKEWCLOCK_MONOTONIC=1"});
  for (const char* cmd : {"condwait 400", "sleepabs realtime 400", "sleepabs monotonic 400"}) {
    CAPTURE(cmd);
    auto r = parse_kv(p.request(cmd, 5s));
    CHECK(r.at("real_ns") >= 190 * kMs);
    CHECK(r.at("real_ns") < 380 * kMs);
  }
}

// ==== redis-server under the shim ================================================

TEST_CASE("redis: TIME and INFO server show the skewed time; the server acknowledges changes") {
  TempDir d;
  skewclock::Control ctl(d / "redis.skew");
  ctl.set({3600 * 1000, 1.0, false, 0});  // one hour ahead
  SkewedRedis redis(ctl.path());
  REQUIRE(ctl.wait_applied(5s, 0, redis.pid()));
  MESSAGE("redis monotonic_clock: " << redis.info_text("server", "monotonic_clock"));

  const std::int64_t before = real_ns(CLOCK_REALTIME) / 1000;
  const std::int64_t t = redis.time_us();
  const std::int64_t after = real_ns(CLOCK_REALTIME) / 1000;
  CHECK(t >= before + 3600LL * 1000000 - 1);
  CHECK(t <= after + 3600LL * 1000000 + 1);

  const std::int64_t before_info = real_ns(CLOCK_REALTIME) / 1000;
  const long long server_time = redis.info_field("server", "server_time_usec");
  const std::int64_t after_info = real_ns(CLOCK_REALTIME) / 1000;
  CHECK(server_time >= before_info + 3600LL * 1000000 - 200000);  // a cached time, refreshed per command
  CHECK(server_time <= after_info + 3600LL * 1000000 + 1);
  CHECK(redis.info_field("server", "uptime_in_seconds") < 60);  // offset since start: no jump

  // Negative offsets work the same way.
  ctl.set_offset_ms(-3600 * 1000);
  REQUIRE(ctl.wait_applied(5s, 0, redis.pid()));
  const std::int64_t before2 = real_ns(CLOCK_REALTIME) / 1000;
  const std::int64_t t2 = redis.time_us();
  const std::int64_t after2 = real_ns(CLOCK_REALTIME) / 1000;
  CHECK(t2 >= before2 - 3600LL * 1000000 - 1);
  CHECK(t2 <= after2 - 3600LL * 1000000 + 1);
}

TEST_CASE("redis: at rate 2 a key with PX 2000 expires after ~1 s of real time") {
  TempDir d;
  skewclock::Control ctl(d / "redis.skew");
  ctl.set({});
  SkewedRedis redis(ctl.path());
  ctl.set_rate(2.0);  // changed while the server runs
  REQUIRE(ctl.wait_applied(5s, 0, redis.pid()));

  const std::int64_t sent = mono_ns();
  REQUIRE(redis.command({"SET", "k", "v", "PX", "2000"}).str == "OK");
  const std::int64_t replied = mono_ns();
  REQUIRE(replied - sent < 200 * kMs);

  // Half a second later (a full skewed second) it is still there, with about
  // 1000 skewed ms left: the server ran SET between `sent` and `replied`,
  // so up to twice that delay more (a loaded machine answers late).
  sleep_until_mono(sent + 500 * kMs);
  CHECK(redis.command({"EXISTS", "k"}).integer == 1);
  const long long pttl = redis.command({"PTTL", "k"}).integer;
  CHECK(pttl > 500);
  CHECK(pttl <= 1000 + 2 * (replied - sent) / kMs + 1);

  // Poll until it is gone: it expires 1000 real ms after the server ran SET
  // (at rate 1 it would be 2000 ms).
  std::int64_t gone = -1;
  while (mono_ns() < sent + 3 * kSec) {
    if (redis.command({"EXISTS", "k"}).integer == 0) {
      gone = mono_ns();
      break;
    }
    std::this_thread::sleep_for(5ms);
  }
  REQUIRE_MESSAGE(gone > 0, "key still present 3 s after SET");
  CAPTURE((gone - sent) / kMs);
  CHECK(gone - sent >= 990 * kMs);
  CHECK(gone - replied <= 1400 * kMs);  // well before 2 s
}

TEST_CASE("redis: an offset jump of +10 s expires a PX 5000 key at once") {
  TempDir d;
  skewclock::Control ctl(d / "redis.skew");
  ctl.set({});
  SkewedRedis redis(ctl.path());
  REQUIRE(redis.command({"SET", "short", "v", "PX", "5000"}).str == "OK");
  REQUIRE(redis.command({"SET", "long", "v", "PX", "20000"}).str == "OK");
  const long long uptime = redis.info_field("server", "uptime_in_seconds");

  ctl.set_offset_ms(10000);
  REQUIRE(ctl.wait_applied(5s, 0, redis.pid()));
  CHECK(redis.command({"GET", "short"}).type == REDIS_REPLY_NIL);  // next access
  CHECK(redis.command({"EXISTS", "short"}).integer == 0);
  const long long left = redis.command({"PTTL", "long"}).integer;
  CHECK(left > 9000);
  CHECK(left <= 10000);
  // Redis computes uptime from the wall clock too: it jumped with it.
  CHECK(redis.info_field("server", "uptime_in_seconds") >= uptime + 10);
}

TEST_CASE("redis: no hang at start-up or under load; fork and jemalloc's background thread behave") {
  TempDir d;
  skewclock::Control ctl(d / "redis.skew");
  ctl.set({-10000, 1.0, false, 0});  // ten seconds behind from the start
  const std::int64_t t0 = mono_ns();
  SkewedRedis redis(ctl.path());  // throws if not answering within 10 s
  MESSAGE("redis-server under the shim answered after " << (mono_ns() - t0) / kMs << " ms");

  // Thousands of commands, pipelined in batches, with expiring keys.
  constexpr int kBatches = 10, kPerBatch = 1000;
  for (int b = 0; b < kBatches; ++b) {
    std::vector<std::vector<std::string>> cmds;
    for (int i = 0; i < kPerBatch; ++i) {
      const std::string key = "key:" + std::to_string(b * kPerBatch + i);
      switch (i % 4) {
        case 0: cmds.push_back({"INCR", "counter"}); break;
        case 1: cmds.push_back({"SET", key, std::string(100, 'x'), "PX", "60000"}); break;
        case 2: cmds.push_back({"GET", "key:" + std::to_string(b * kPerBatch + i - 1)}); break;
        default: cmds.push_back({"PTTL", "key:" + std::to_string(b * kPerBatch + i - 2)}); break;
      }
    }
    auto replies = redis.pipeline(cmds);
    for (int i = 0; i < kPerBatch; ++i) {
      if (i % 4 == 2) REQUIRE(replies[static_cast<std::size_t>(i)].str == std::string(100, 'x'));
      if (i % 4 == 3) REQUIRE(replies[static_cast<std::size_t>(i)].integer > 59000);
    }
  }
  CHECK(redis.command({"GET", "counter"}).str == std::to_string(kBatches * kPerBatch / 4));

  // fork (BGSAVE): the child inherits the shim mid-flight.
  REQUIRE(redis.command({"BGSAVE"}).type == REDIS_REPLY_STATUS);
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (redis.info_field("persistence", "rdb_bgsave_in_progress") != 0 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  CHECK(redis.info_field("persistence", "rdb_bgsave_in_progress") == 0);
  CHECK(redis.info_text("persistence", "rdb_last_bgsave_status") == "ok");
  CHECK(ctl.ack()->pid == redis.pid());  // the child never acknowledges

  // jemalloc's background thread sleeps with pthread_cond_timedwait until
  // gettimeofday() + interval. With the clock 10 s behind and no deadline
  // translation it would wake at once, over and over (measured: ~10^4 runs
  // a second instead of a few). Churn memory so it has purging to schedule.
  for (int i = 0; i < 3; ++i) {
    REQUIRE(redis.command({"DEBUG", "POPULATE", "30000", "churn", "4000"}).type == REDIS_REPLY_STATUS);
    REQUIRE(redis.command({"FLUSHALL"}).type == REDIS_REPLY_STATUS);
  }
  auto bg_runs = [&]() -> long long {
    Reply r = redis.command({"MEMORY", "MALLOC-STATS"});
    auto p = r.str.find("Background threads: ");
    if (p == std::string::npos) return -1;
    auto q = r.str.find("num_runs: ", p);
    return q == std::string::npos ? -1 : std::atoll(r.str.c_str() + q + 10);
  };
  const long long runs0 = bg_runs();
  if (runs0 < 0) {
    MESSAGE("jemalloc background thread statistics not available; skipped that check");
  } else {
    std::this_thread::sleep_for(1s);  // a measuring window, not a wait for an event
    const long long runs1 = bg_runs();
    CAPTURE(runs0);
    CAPTURE(runs1);
    CHECK(runs1 - runs0 < 100);
  }
  CHECK(redis.command({"PING"}).str == "PONG");
}
