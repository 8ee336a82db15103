// redis_server.cpp — see redis_server.hpp. Real redis-server children on
// free loopback ports; every signal goes to the pid we forked, never by name.
#include "redis_server.hpp"

#include <hiredis/hiredis.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <thread>

namespace redlock::test {
namespace {

namespace fs = std::filesystem;

constexpr int kStartAttempts = 5;                       // new port per attempt (first start only)
constexpr auto kReadyTimeout = std::chrono::seconds(10);
constexpr auto kPollInterval = std::chrono::milliseconds(10);
constexpr long kProbeTimeoutUs = 100 * 1000;            // readiness probe connect timeout
constexpr long kCommandTimeoutSec = 2;                  // command() connect + I/O timeout
constexpr std::size_t kLogTailLines = 20;

std::string errno_text(const char* what, int err) {
  return std::string(what) + ": " + std::strerror(err);
}

// ---- hiredis helpers --------------------------------------------------------

struct ContextDeleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
using ContextPtr = std::unique_ptr<redisContext, ContextDeleter>;

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

// connect returns a context or nullptr; err receives the error text.
ContextPtr connect(int port, struct timeval timeout, std::string& err) {
  ContextPtr c(redisConnectWithTimeout("127.0.0.1", port, timeout));
  if (!c) {
    err = "cannot allocate hiredis context";
    return nullptr;
  }
  if (c->err) {
    err = c->errstr;
    return nullptr;
  }
  return c;
}

// run sends one command; nullptr on a connection/protocol error (c->errstr).
ReplyPtr run(redisContext* c, const std::vector<std::string>& argv) {
  std::vector<const char*> ptrs;
  std::vector<std::size_t> lens;
  ptrs.reserve(argv.size());
  lens.reserve(argv.size());
  for (const auto& a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  return ReplyPtr(static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), ptrs.data(), lens.data())));
}

Reply copy_reply(const redisReply* r) {
  Reply out;
  out.type = r->type;
  out.integer = r->integer;
  if (r->str != nullptr) out.str.assign(r->str, r->len);
  if (r->element != nullptr) {
    out.elements.reserve(r->elements);
    for (std::size_t i = 0; i < r->elements; ++i) {
      if (r->element[i] != nullptr) out.elements.push_back(copy_reply(r->element[i]));
    }
  }
  return out;
}

// Credentials: which AUTH to send first (none when user and pass are empty).
struct Auth {
  std::string user;  // empty: AUTH <pass> (default user)
  std::string pass;
};

Auth auth_for(const ServerOptions& o) {
  if (!o.password.empty()) return {"", o.password};
  if (!o.acl_users.empty()) return {o.acl_users.front().first, o.acl_users.front().second};
  return {};
}

// send_auth sends AUTH if needed. Error replies are ignored (the next command
// shows them); returns false on a connection error.
bool send_auth(redisContext* c, const Auth& a) {
  if (a.user.empty() && a.pass.empty()) return true;
  std::vector<std::string> argv{"AUTH"};
  if (!a.user.empty()) argv.push_back(a.user);
  argv.push_back(a.pass);
  return run(c, argv) != nullptr;
}

Reply command_at(int port, const Auth& auth, const std::vector<std::string>& argv) {
  const std::string where = "127.0.0.1:" + std::to_string(port) + ": ";
  if (argv.empty()) throw std::runtime_error(where + "empty command");
  struct timeval tv{kCommandTimeoutSec, 0};
  std::string err;
  ContextPtr c = connect(port, tv, err);
  if (!c) throw std::runtime_error(where + err);
  if (redisSetTimeout(c.get(), tv) != REDIS_OK)
    throw std::runtime_error(where + (c->err ? c->errstr : "redisSetTimeout failed"));
  if (!send_auth(c.get(), auth)) throw std::runtime_error(where + c->errstr);
  ReplyPtr r = run(c.get(), argv);
  if (!r) throw std::runtime_error(where + (c->err ? c->errstr : "no reply"));
  return copy_reply(r.get());
}

// ---- process / file helpers -------------------------------------------------

// proc_state returns the state letter from /proc/<pid>/stat, or 0.
char proc_state(pid_t pid) {
  if (pid <= 0) return 0;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return 0;
  auto rp = line.rfind(')');
  if (rp == std::string::npos || rp + 2 >= line.size()) return 0;
  return line[rp + 2];
}

std::string find_in_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string p = path != nullptr && *path != '\0' ? path : "/usr/local/bin:/usr/bin:/bin";
  std::stringstream ss(p);
  std::string d;
  while (std::getline(ss, d, ':')) {
    if (d.empty()) d = ".";
    std::string cand = d + "/" + name;
    if (::access(cand.c_str(), X_OK) == 0) return cand;
  }
  throw std::runtime_error(name + " not found in PATH (install redis-server: scripts/bootstrap.sh)");
}

std::uintmax_t file_size_or_zero(const std::string& path) {
  std::error_code ec;
  auto n = fs::file_size(path, ec);
  return ec ? 0 : n;
}

// read_from returns the file content from byte offset on ("" if missing).
std::string read_from(const std::string& path, std::uintmax_t offset) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  in.seekg(static_cast<std::streamoff>(offset));
  if (!in) return {};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string tail_lines(const std::string& text, std::size_t n) {
  std::deque<std::string> lines;
  std::stringstream ss(text);
  std::string l;
  while (std::getline(ss, l)) {
    lines.push_back(l);
    if (lines.size() > n) lines.pop_front();
  }
  std::string out;
  for (const auto& x : lines) out += "  | " + x + "\n";
  return out.empty() ? "  | (log is empty)\n" : out;
}

// reap_nohang: true when the child has exited (status in *st).
bool reap_nohang(pid_t pid, int* st) {
  for (;;) {
    pid_t r = ::waitpid(pid, st, WNOHANG);
    if (r == pid) return WIFEXITED(*st) || WIFSIGNALED(*st);
    if (r == 0) return false;
    if (errno == EINTR) continue;
    // ECHILD: someone else reaped it (e.g. SIGCHLD set to SIG_IGN): gone.
    *st = 0;
    return true;
  }
}

void kill_and_reap(pid_t pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGKILL);  // also ends a stopped process
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
}

std::string status_text(int st) {
  if (WIFEXITED(st)) return "exited with status " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return std::string("killed by signal ") + strsignal(WTERMSIG(st));
  return "exited";
}

std::string make_temp_dir(bool short_path) {
  std::string base = "/tmp";
  const char* t = std::getenv("TMPDIR");
  if (t != nullptr && *t != '\0') base = t;
  // sockaddr_un.sun_path is 108 bytes: keep the socket path short.
  if (short_path && base.size() + std::strlen("/redlock-test-XXXXXX/redis.sock") >= 100) base = "/tmp";
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  std::string tmpl = base + "/redlock-test-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) throw std::runtime_error(errno_text(("mkdtemp " + tmpl).c_str(), errno));
  return std::string(buf.data());
}

}  // namespace

// ---- free_port ----------------------------------------------------------------

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(errno_text("free_port: socket", errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = 0;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    int e = errno;
    ::close(fd);
    throw std::runtime_error(errno_text("free_port: bind 127.0.0.1:0", e));
  }
  socklen_t len = sizeof a;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    int e = errno;
    ::close(fd);
    throw std::runtime_error(errno_text("free_port: getsockname", e));
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

// ---- RedisServer -------------------------------------------------------------

RedisServer::RedisServer(ServerOptions opts) : opts_(std::move(opts)) {
  dir_ = make_temp_dir(opts_.unix_socket);
  if (opts_.unix_socket) unix_path_ = dir_ + "/redis.sock";
  try {
    start();
  } catch (...) {
    kill_and_reap(pid_);
    pid_ = -1;
    std::error_code ec;
    fs::remove_all(dir_, ec);
    throw;
  }
}

RedisServer::~RedisServer() {
  try {
    kill();
  } catch (...) {
  }
  std::error_code ec;
  if (!dir_.empty()) fs::remove_all(dir_, ec);
}

int RedisServer::port() const { return port_; }
const std::string& RedisServer::dir() const { return dir_; }
const std::string& RedisServer::unix_path() const { return unix_path_; }
pid_t RedisServer::pid() const { return pid_; }

bool RedisServer::running() const {
  if (pid_ <= 0) return false;
  char s = proc_state(pid_);
  return s != 0 && s != 'Z' && s != 'X';
}

std::string RedisServer::address() const { return "127.0.0.1:" + std::to_string(port_); }
std::string RedisServer::url() const { return "redis://" + address(); }

void RedisServer::start() {
  if (pid_ > 0) throw std::runtime_error(address() + ": start: already running (pid " + std::to_string(pid_) + ")");
  const bool fixed_port = port_ != 0;  // restart keeps its port; the first start may pick again
  const std::string exe = find_in_path("redis-server");
  const std::string log = dir_ + "/redis.log";

  std::string last_error;
  for (int attempt = 0; attempt < kStartAttempts; ++attempt) {
    if (!fixed_port) port_ = free_port();

    std::vector<std::string> args{exe,
                                  "--port", std::to_string(port_),
                                  "--bind", "127.0.0.1",
                                  "--dir", dir_,
                                  "--logfile", log,
                                  "--daemonize", "no",
                                  "--save", "",
                                  "--protected-mode", "no"};
    if (opts_.appendfsync_always) {
      args.insert(args.end(), {"--appendonly", "yes", "--appendfsync", "always"});
    } else {
      args.insert(args.end(), {"--appendonly", "no"});
    }
    if (!opts_.password.empty()) args.insert(args.end(), {"--requirepass", opts_.password});
    if (opts_.unix_socket) args.insert(args.end(), {"--unixsocket", unix_path_, "--unixsocketperm", "700"});
    args.insert(args.end(), opts_.extra_args.begin(), opts_.extra_args.end());

    // Everything the child touches is prepared before fork: after fork in a
    // multi-threaded process only async-signal-safe calls are allowed.
    std::vector<char*> cargv;
    for (auto& a : args) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    // The server's environment: ours, with opts_.env set on top (LD_PRELOAD
    // of the clock-skew shim, say).
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string_view entry(*e);
      const std::string_view name = entry.substr(0, entry.find('='));
      bool overridden = false;
      for (const auto& [k, v] : opts_.env) overridden = overridden || name == k;
      if (!overridden) env_strings.emplace_back(entry);
    }
    for (const auto& [k, v] : opts_.env) env_strings.push_back(k + "=" + v);
    std::vector<char*> cenv;
    for (auto& e : env_strings) cenv.push_back(e.data());
    cenv.push_back(nullptr);
    const std::uintmax_t log_offset = file_size_or_zero(log);
    const pid_t parent = ::getpid();

    pid_t child = ::fork();
    if (child < 0) throw std::runtime_error(address() + ": " + errno_text("fork", errno));
    if (child == 0) {
      // Child: die with the parent (test binary crash), and close the race
      // where the parent already died before prctl.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
      if (fd >= 0) {
        ::dup2(fd, STDOUT_FILENO);
        ::dup2(fd, STDERR_FILENO);
      }
      int nul = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (nul >= 0) ::dup2(nul, STDIN_FILENO);
      // Don't leak the test binary's descriptors (pipes, sockets) into redis.
#ifdef SYS_close_range
      if (::syscall(SYS_close_range, 3U, ~0U, 0U) != 0)
#endif
      {
        for (int i = 3; i < 4096; ++i) ::close(i);
      }
      sigset_t all;
      sigemptyset(&all);
      ::sigprocmask(SIG_SETMASK, &all, nullptr);
      ::signal(SIGPIPE, SIG_DFL);
      ::signal(SIGTERM, SIG_DFL);
      ::signal(SIGINT, SIG_DFL);
      ::execve(cargv[0], cargv.data(), cenv.data());
      static const char msg[] = "redis_server fixture: execv redis-server failed\n";
      ssize_t ignored = ::write(STDERR_FILENO, msg, sizeof msg - 1);
      (void)ignored;
      ::_exit(127);
    }
    pid_ = child;

    // Wait until our process answers on the port (any reply counts, except
    // LOADING), or it exits (bind failure etc.), or 10 s pass.
    const auto deadline = std::chrono::steady_clock::now() + kReadyTimeout;
    bool ready = false;
    bool exited = false;
    int st = 0;
    std::string probe_err;
    const Auth auth = auth_for(opts_);
    while (std::chrono::steady_clock::now() < deadline) {
      if (reap_nohang(pid_, &st)) {
        exited = true;
        break;
      }
      struct timeval tv{0, kProbeTimeoutUs};
      ContextPtr c = connect(port_, tv, probe_err);
      if (c) {
        redisSetTimeout(c.get(), tv);
        // 1. INFO server for the pid, so a stranger that grabbed the port
        //    does not pass for our server (skipped when INFO is refused).
        // 2. PING: any reply counts (NOAUTH too) except -LOADING. INFO is
        //    served while an AOF/RDB is still loading, PING is not.
        bool ours = true;
        bool answered = false;
        if (!send_auth(c.get(), auth)) {
          probe_err = c->errstr;
        } else if (ReplyPtr info = run(c.get(), {"INFO", "server"}); !info) {
          probe_err = c->errstr;
        } else {
          if (info->type == REDIS_REPLY_STRING) {
            std::string text(info->str, info->len);
            auto p = text.find("process_id:");
            if (p != std::string::npos && std::atol(text.c_str() + p + 11) != static_cast<long>(pid_)) {
              ours = false;
              probe_err = "port answered by another process";
            }
          }
          if (ours) {
            ReplyPtr pong = run(c.get(), {"PING"});
            if (!pong) {
              probe_err = c->errstr;
            } else if (pong->type == REDIS_REPLY_ERROR && pong->str != nullptr &&
                       std::strncmp(pong->str, "LOADING", 7) == 0) {
              probe_err = "still loading";
            } else {
              answered = true;
            }
          }
        }
        if (ours && answered) {
          ready = true;
          break;
        }
      }
      std::this_thread::sleep_for(kPollInterval);
    }

    if (ready) {
      // ACL users, authenticating as default first when a password is set.
      if (!opts_.acl_users.empty()) {
        const Auth as_default{"", opts_.password};
        for (const auto& [user, pass] : opts_.acl_users) {
          Reply r = command_at(port_, as_default, {"ACL", "SETUSER", user, "on", ">" + pass, "~*", "&*", "+@all"});
          if (r.type == REDIS_REPLY_ERROR)
            throw std::runtime_error(address() + ": ACL SETUSER " + user + ": " + r.str);
        }
      }
      return;
    }

    const std::string new_log = read_from(log, log_offset);
    if (!exited) {
      kill_and_reap(pid_);
      pid_ = -1;
      throw std::runtime_error(address() + ": redis-server (" + exe + ") not ready after 10 s (" + probe_err +
                               "); log tail:\n" + tail_lines(new_log, kLogTailLines));
    }
    pid_ = -1;
    last_error = address() + ": redis-server " + status_text(st) + " during start; log tail:\n" +
                 tail_lines(new_log, kLogTailLines);
    const bool port_taken = new_log.find("Address already in use") != std::string::npos;
    if (!port_taken || fixed_port) break;  // only a lost port race is worth another try
  }
  throw std::runtime_error(last_error);
}

void RedisServer::kill() {
  if (pid_ <= 0) return;
  kill_and_reap(pid_);
  pid_ = -1;
}

void RedisServer::pause() {
  if (pid_ <= 0) throw std::runtime_error(address() + ": pause: not running");
  if (proc_state(pid_) == 'T') return;  // already stopped: no new stop report would come
  if (::kill(pid_, SIGSTOP) != 0) throw std::runtime_error(address() + ": " + errno_text("kill(SIGSTOP)", errno));
  for (;;) {
    int st = 0;
    pid_t r = ::waitpid(pid_, &st, WUNTRACED);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(address() + ": " + errno_text("waitpid(WUNTRACED)", errno));
    }
    if (WIFSTOPPED(st)) return;
    if (WIFEXITED(st) || WIFSIGNALED(st)) {
      pid_ = -1;
      throw std::runtime_error(address() + ": pause: redis-server " + status_text(st));
    }
  }
}

void RedisServer::resume() {
  if (pid_ <= 0) throw std::runtime_error(address() + ": resume: not running");
  const bool stopped = proc_state(pid_) == 'T';
  if (::kill(pid_, SIGCONT) != 0) throw std::runtime_error(address() + ": " + errno_text("kill(SIGCONT)", errno));
  if (!stopped) return;  // it was running: no "continued" report will come
  for (;;) {
    int st = 0;
    pid_t r = ::waitpid(pid_, &st, WCONTINUED);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(address() + ": " + errno_text("waitpid(WCONTINUED)", errno));
    }
    if (WIFCONTINUED(st)) return;
    if (WIFEXITED(st) || WIFSIGNALED(st)) {
      pid_ = -1;
      throw std::runtime_error(address() + ": resume: redis-server " + status_text(st));
    }
  }
}

void RedisServer::restart(bool wipe) {
  kill();
  if (wipe) {
    std::error_code ec;
    for (const char* name : {"dump.rdb", "appendonly.aof", "appendonlydir"}) {
      fs::remove_all(fs::path(dir_) / name, ec);
    }
    // Leftover temp files of an interrupted rewrite/save.
    for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string n = it->path().filename().string();
      if (n.rfind("temp-", 0) == 0 || n.rfind("appendonly", 0) == 0) {
        std::error_code ec2;
        fs::remove_all(it->path(), ec2);
      }
    }
  }
  start();
}

Reply RedisServer::command(const std::vector<std::string>& argv) const {
  return command_at(port_, auth_for(opts_), argv);
}

std::vector<std::string> RedisServer::keys(const std::string& pattern) const {
  Reply r = command({"KEYS", pattern});
  if (r.type == REDIS_REPLY_ERROR) throw std::runtime_error(address() + ": KEYS: " + r.str);
  std::vector<std::string> out;
  out.reserve(r.elements.size());
  for (const auto& e : r.elements) out.push_back(e.str);
  return out;
}

long long RedisServer::uptime_seconds() const {
  Reply r = command({"INFO", "server"});
  if (r.type == REDIS_REPLY_ERROR) throw std::runtime_error(address() + ": INFO: " + r.str);
  auto p = r.str.find("uptime_in_seconds:");
  if (p == std::string::npos) throw std::runtime_error(address() + ": INFO server has no uptime_in_seconds");
  return std::atoll(r.str.c_str() + p + std::strlen("uptime_in_seconds:"));
}

// ---- RedisGroup ----------------------------------------------------------------

RedisGroup::RedisGroup(std::size_t n, ServerOptions opts) {
  servers_.reserve(n);
  for (std::size_t i = 0; i < n; ++i) servers_.push_back(std::make_unique<RedisServer>(opts));
}

std::vector<std::string> RedisGroup::urls() const {
  std::vector<std::string> out;
  out.reserve(servers_.size());
  for (const auto& s : servers_) out.push_back(s->url());
  return out;
}

std::string RedisGroup::url_list() const {
  std::string out;
  for (const auto& s : servers_) {
    if (!out.empty()) out += ',';
    out += s->url();
  }
  return out;
}

std::size_t RedisGroup::keys_everywhere(const std::string& pattern) const {
  std::size_t n = 0;
  for (const auto& s : servers_) {
    // Killed nodes have no keys to count; paused ones cannot answer.
    if (!s->running() || proc_state(s->pid()) == 'T') continue;
    n += s->keys(pattern).size();
  }
  return n;
}

}  // namespace redlock::test
