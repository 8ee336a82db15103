// redis_server.cpp — see redis_server.hpp. Real redis-server children on
// free loopback ports; every signal goes to the pid we started, never by name.
#include "redis_server.hpp"

#include <hiredis/hiredis.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cctype>
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

// file_size_or_zero: where a new start's log begins.
std::uintmax_t file_size_or_zero(const std::string& path) {
  std::error_code ec;
  auto n = fs::file_size(path, ec);
  return ec ? 0 : n;
}

}  // namespace

// ---- shared pieces (redis_server.hpp) -----------------------------------------

Reply command_at(int port, const std::string& user, const std::string& password,
                 const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  const std::string where = "127.0.0.1:" + std::to_string(port) + ": ";
  if (argv.empty()) throw std::runtime_error(where + "empty command");
  const long ms = static_cast<long>(timeout.count());
  struct timeval tv{ms / 1000, (ms % 1000) * 1000};
  std::string err;
  ContextPtr c = connect(port, tv, err);
  if (!c) throw std::runtime_error(where + err);
  if (redisSetTimeout(c.get(), tv) != REDIS_OK)
    throw std::runtime_error(where + (c->err ? c->errstr : "redisSetTimeout failed"));
  if (!send_auth(c.get(), Auth{user, password})) throw std::runtime_error(where + c->errstr);
  ReplyPtr r = run(c.get(), argv);
  if (!r) throw std::runtime_error(where + (c->err ? c->errstr : "no reply"));
  return copy_reply(r.get());
}

std::string info_field(const Reply& info, const std::string& name) {
  std::istringstream in(info.str);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.size() > name.size() && line.compare(0, name.size(), name) == 0 && line[name.size()] == ':')
      return line.substr(name.size() + 1);
  }
  return {};
}

std::string reply_text(const Reply& r) {
  switch (r.type) {
    case REDIS_REPLY_NIL: return "(nil)";
    case REDIS_REPLY_INTEGER: return std::to_string(r.integer);
    case REDIS_REPLY_ERROR: return "-" + r.str;
    case REDIS_REPLY_ARRAY: {
      std::string out = "[";
      for (std::size_t i = 0; i < r.elements.size(); ++i) out += (i == 0 ? "" : " ") + reply_text(r.elements[i]);
      return out + "]";
    }
    default: return r.str;
  }
}

std::string percent_encode(std::string_view s) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char ch : s) {
    if (std::isalnum(ch) != 0 || ch == '-' || ch == '.' || ch == '_' || ch == '~') {
      out += static_cast<char>(ch);
    } else {
      out += {'%', hex[ch >> 4], hex[ch & 15]};
    }
  }
  return out;
}

void poll_until(std::string_view who, const std::string& what, std::chrono::steady_clock::time_point deadline,
                const std::function<std::string()>& unmet, std::chrono::milliseconds interval) {
  std::string last;
  for (;;) {
    try {
      last = unmet();
    } catch (const std::runtime_error& e) {
      last = e.what();
    }
    if (last.empty()) return;
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(interval);
  }
  throw std::runtime_error(std::string(who) + ": " + what + ": not reached in time; last seen: " + last);
}

// ---- RawConnection ---------------------------------------------------------------

namespace {

// read_reply_text reads one reply into text (reply_text); false, with text
// "(connection error) <errstr>", on a connection error.
bool read_reply_text(redisContext* c, std::string& text) {
  void* raw = nullptr;
  if (redisGetReply(c, &raw) != REDIS_OK || raw == nullptr) {
    text = std::string("(connection error) ") + c->errstr;
    return false;
  }
  const ReplyPtr r(static_cast<redisReply*>(raw));
  text = reply_text(copy_reply(r.get()));
  return true;
}

}  // namespace

RawConnection::RawConnection(int port, std::chrono::milliseconds timeout) {
  const long ms = static_cast<long>(timeout.count());
  struct timeval tv{ms / 1000, (ms % 1000) * 1000};
  std::string err;
  ContextPtr c = connect(port, tv, err);
  if (!c) throw std::runtime_error("RawConnection: 127.0.0.1:" + std::to_string(port) + ": " + err);
  if (redisSetTimeout(c.get(), tv) != REDIS_OK)
    throw std::runtime_error("RawConnection: 127.0.0.1:" + std::to_string(port) + ": " +
                             (c->err ? c->errstr : "redisSetTimeout failed"));
  c_ = c.release();
}

RawConnection::~RawConnection() { redisFree(c_); }

std::vector<std::string> RawConnection::pipeline(const std::vector<std::vector<std::string>>& commands) {
  for (const auto& argv : commands) {
    std::vector<const char*> ptrs;
    std::vector<std::size_t> lens;
    for (const auto& a : argv) {
      ptrs.push_back(a.data());
      lens.push_back(a.size());
    }
    if (redisAppendCommandArgv(c_, static_cast<int>(argv.size()), ptrs.data(), lens.data()) != REDIS_OK)
      return {std::string("(connection error) ") + c_->errstr};
  }
  std::vector<std::string> out;
  for (std::size_t i = 0; i < commands.size(); ++i) {
    std::string text;
    const bool ok = read_reply_text(c_, text);
    out.push_back(std::move(text));
    if (!ok) break;
  }
  return out;
}

std::string RawConnection::command(const std::vector<std::string>& argv) { return pipeline({argv}).at(0); }

std::string RawConnection::next() {
  std::string text;
  read_reply_text(c_, text);
  return text;
}

std::string redis_server_binary() {
  const char* path = std::getenv("PATH");
  std::string found = support::find_program(
      "redis-server", path != nullptr && *path != '\0' ? path : "/usr/local/bin:/usr/bin:/bin");
  if (found.empty()) throw std::runtime_error("redis-server not found in PATH (install redis-server: scripts/bootstrap.sh)");
  return found;
}

std::string make_temp_dir(std::string_view prefix, bool short_path) {
  std::string base = "/tmp";
  const char* t = std::getenv("TMPDIR");
  if (t != nullptr && *t != '\0') base = t;
  // sockaddr_un.sun_path is 108 bytes: keep the socket path short.
  if (short_path && base.size() + prefix.size() + std::strlen("/-XXXXXX/redis.sock") >= 100) base = "/tmp";
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  std::string tmpl = base + "/" + std::string(prefix) + "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) throw std::runtime_error(errno_text(("mkdtemp " + tmpl).c_str(), errno));
  return std::string(buf.data());
}

std::string read_file_from(const std::string& path, std::uintmax_t offset) {
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

std::string exit_text(int code) {
  if (code > 128) return std::string("killed by signal ") + strsignal(code - 128);
  return "exited with status " + std::to_string(code);
}

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
  dir_ = make_temp_dir("redlock-test", opts_.unix_socket);
  if (opts_.unix_socket) unix_path_ = dir_ + "/redis.sock";
  try {
    start();
  } catch (...) {
    process_.reset();  // killed by pid and reaped
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
pid_t RedisServer::pid() const { return process_ ? process_->pid() : -1; }
bool RedisServer::running() const { return process_ && process_->running(); }
bool RedisServer::paused() const { return process_ && process_->stopped(); }

std::string RedisServer::address() const { return "127.0.0.1:" + std::to_string(port_); }
std::string RedisServer::url() const { return "redis://" + address(); }

void RedisServer::start() {
  if (process_) throw std::runtime_error(address() + ": start: already running (pid " + std::to_string(pid()) + ")");
  const bool fixed_port = port_ != 0;  // restart keeps its port; the first start may pick again
  const std::string exe = redis_server_binary();
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

    // The server's environment: ours, with opts_.env set on top (LD_PRELOAD
    // of the clock-skew shim, say). Its output goes to the log.
    support::ProcessOptions po;
    po.argv = std::move(args);
    po.env_set = opts_.env;
    po.out = support::Stream::file(log);
    po.err = support::Stream::file(log);
    const std::uintmax_t log_offset = file_size_or_zero(log);
    process_ = std::make_unique<support::Process>(std::move(po));

    // Wait until our process answers on the port (any reply counts, except
    // LOADING), or it exits (bind failure etc.), or 10 s pass.
    const auto deadline = std::chrono::steady_clock::now() + kReadyTimeout;
    bool ready = false;
    bool exited = false;
    std::string probe_err;
    const Auth auth = auth_for(opts_);
    while (std::chrono::steady_clock::now() < deadline) {
      if (!process_->running()) {
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
            if (p != std::string::npos && std::atol(text.c_str() + p + 11) != static_cast<long>(pid())) {
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
      // Ask again shortly; an exit ends the wait at once.
      if (process_->wait(kPollInterval)) {
        exited = true;
        break;
      }
    }

    if (ready) {
      // ACL users, authenticating as default first when a password is set.
      if (!opts_.acl_users.empty()) {
        const Auth as_default{"", opts_.password};
        for (const auto& [user, pass] : opts_.acl_users) {
          Reply r = command_at(port_, as_default.user, as_default.pass,
                               {"ACL", "SETUSER", user, "on", ">" + pass, "~*", "&*", "+@all"});
          if (r.type == REDIS_REPLY_ERROR)
            throw std::runtime_error(address() + ": ACL SETUSER " + user + ": " + r.str);
        }
      }
      return;
    }

    const std::string new_log = read_file_from(log, log_offset);
    if (!exited) {
      process_.reset();
      throw std::runtime_error(address() + ": redis-server (" + exe + ") not ready after 10 s (" + probe_err +
                               "); log tail:\n" + tail_lines(new_log, kLogTailLines));
    }
    const int code = process_->wait();
    process_.reset();
    last_error = address() + ": redis-server " + exit_text(code) + " during start; log tail:\n" +
                 tail_lines(new_log, kLogTailLines);
    const bool port_taken = new_log.find("Address already in use") != std::string::npos;
    if (!port_taken || fixed_port) break;  // only a lost port race is worth another try
  }
  throw std::runtime_error(last_error);
}

void RedisServer::kill() { process_.reset(); }  // SIGKILL by pid, reaped

void RedisServer::pause() {
  if (!process_) throw std::runtime_error(address() + ": pause: not running");
  if (process_->pause()) return;
  const int code = process_->wait();
  process_.reset();
  throw std::runtime_error(address() + ": pause: redis-server " + exit_text(code));
}

void RedisServer::resume() {
  if (!process_) throw std::runtime_error(address() + ": resume: not running");
  if (process_->resume()) return;
  const int code = process_->wait();
  process_.reset();
  throw std::runtime_error(address() + ": resume: redis-server " + exit_text(code));
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
  const Auth auth = auth_for(opts_);
  return command_at(port_, auth.user, auth.pass, argv);
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
  const std::string uptime = info_field(r, "uptime_in_seconds");
  if (uptime.empty()) throw std::runtime_error(address() + ": INFO server has no uptime_in_seconds");
  return std::atoll(uptime.c_str());
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
    if (!s->running() || s->paused()) continue;
    n += s->keys(pattern).size();
  }
  return n;
}

}  // namespace redlock::test
