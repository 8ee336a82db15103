// redis_server.hpp — the integration-test fixture: real redis-server
// processes on free loopback ports, each in its own temp dir, stopped by pid
// (also when a test fails: destructors, plus PR_SET_PDEATHSIG so a crashed
// test binary takes its servers with it; support/process.hpp). Never kills
// by name.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "support/process.hpp"

struct redisContext;  // hiredis (RawConnection)

namespace redlock::test {

// ServerOptions — how to start one redis-server.
struct ServerOptions {
  std::string password;  // requirepass (empty: none)
  // ACL users created at start: {user, password}, each with all keys,
  // channels and commands (ACL SETUSER user on >password ~* &* +@all).
  std::vector<std::pair<std::string, std::string>> acl_users;
  bool unix_socket = false;         // also listen on <dir>/redis.sock (unixsocketperm 700)
  bool appendfsync_always = false;  // appendonly yes, appendfsync always: restart keeps data
  std::vector<std::string> extra_args;  // more "--name value" pairs for redis-server
  // Environment variables set for the server on top of ours (e.g. LD_PRELOAD
  // and SKEWCLOCK_FILE for the clock-skew shim).
  std::vector<std::pair<std::string, std::string>> env;
};

// Reply — a copy of a hiredis reply. type is a REDIS_REPLY_* value.
struct Reply {
  int type = 0;
  long long integer = 0;
  std::string str;
  std::vector<Reply> elements;
};

// RedisServer — one redis-server child process. Start failures throw
// std::runtime_error carrying the tail of the server's log.
class RedisServer {
 public:
  explicit RedisServer(ServerOptions opts = {});
  ~RedisServer();  // SIGKILL by pid, waitpid, remove the temp dir
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const;
  const std::string& dir() const;        // temp dir (data, log, socket)
  const std::string& unix_path() const;  // empty unless opts.unix_socket
  pid_t pid() const;                     // -1 when not running
  bool running() const;
  bool paused() const;                   // stopped by pause()
  std::string address() const;           // "127.0.0.1:<port>"
  std::string url() const;               // "redis://127.0.0.1:<port>" (no credentials)

  void kill();                       // SIGKILL + waitpid; no-op when not running
  void pause();                      // SIGSTOP; returns once the process is stopped
  void resume();                     // SIGCONT; returns once it runs again
  void restart(bool wipe = false);   // kill, optionally delete the data, start on the same port, wait until ready

  // command runs one command synchronously (hiredis, 2 s timeout), after
  // AUTH with opts.password or the first ACL user if set. Throws
  // std::runtime_error on a connection error; error replies are returned
  // (type REDIS_REPLY_ERROR).
  Reply command(const std::vector<std::string>& argv) const;
  std::vector<std::string> keys(const std::string& pattern = "*") const;
  long long uptime_seconds() const;  // INFO server uptime_in_seconds

 private:
  void start();
  ServerOptions opts_;
  std::string dir_;
  std::string unix_path_;
  int port_ = 0;
  std::unique_ptr<support::Process> process_;  // null when not running
};

// RedisGroup — N independent masters (the test bed of one test).
class RedisGroup {
 public:
  explicit RedisGroup(std::size_t n, ServerOptions opts = {});
  RedisServer& operator[](std::size_t i) { return *servers_.at(i); }
  std::size_t size() const { return servers_.size(); }
  std::vector<std::string> urls() const;      // redis://127.0.0.1:<port> each
  std::string url_list() const;               // the same, comma-separated
  // keys_everywhere counts the keys matching pattern on every running node.
  std::size_t keys_everywhere(const std::string& pattern = "*") const;

 private:
  std::vector<std::unique_ptr<RedisServer>> servers_;
};

// free_port returns a TCP port on 127.0.0.1 that was free a moment ago.
int free_port();

// ---- the pieces RedisServer is made of, and what the other fixtures
// (redis_sentinel.cpp, redis_cluster.cpp) and their tests share

// command_at runs one command on 127.0.0.1:port over a new hiredis
// connection (connect and I/O timeout `timeout`), after AUTH when user or
// password is set (AUTH password as the default user when user is empty).
// An error reply to AUTH is not returned: the command's own reply shows it
// (NOAUTH, say). Error replies are returned (type REDIS_REPLY_ERROR); a
// connection error throws std::runtime_error.
Reply command_at(int port, const std::string& user, const std::string& password,
                 const std::vector<std::string>& argv,
                 std::chrono::milliseconds timeout = std::chrono::seconds(2));

// info_field: the value of the "name:value" line of an INFO reply ("" when absent).
std::string info_field(const Reply& info, const std::string& name);

// reply_text: a reply as one line, for test checks and error messages:
// "(nil)", integers as digits, "-" before an error's text, arrays as
// "[a b …]" (elements' texts joined by one space), anything else its string.
std::string reply_text(const Reply& r);

// percent_encode: s for a redis:// URL's user info, path or query: the RFC
// 3986 unreserved characters (A-Z a-z 0-9 - . _ ~) as they are, every other
// byte as %XX (upper-case hex).
std::string percent_encode(std::string_view s);

// poll_until calls `unmet` (what is not there yet; "" once it is) every
// `interval` until it answers "" or the deadline passes: then it throws
// std::runtime_error "<who>: <what>: not reached in time; last seen: <last
// answer>". A std::runtime_error thrown by `unmet` (a connection error, say)
// counts as not yet, its what() as the answer. The fixtures' waits.
void poll_until(std::string_view who, const std::string& what, std::chrono::steady_clock::time_point deadline,
                const std::function<std::string()>& unmet,
                std::chrono::milliseconds interval = std::chrono::milliseconds(50));

// RawConnection — one plain RESP2 hiredis connection to 127.0.0.1:port, no
// AUTH, for tests that need what RedisServer::command hides: commands that
// share a connection (ASKING, then the command it lets through), pipelines,
// SUBSCRIBE and the messages pushed after it, or the server dropping the
// connection. Every reply comes back as its reply_text; a connection error
// as "(connection error) <hiredis errstr>" (the connection is useless after
// one). The constructor throws std::runtime_error when it cannot connect.
// Used by tests/integration/test_sentinel_bed.cpp and test_cluster_bed.cpp.
class RawConnection {
 public:
  // timeout: for the connect and for each read and write.
  explicit RawConnection(int port, std::chrono::milliseconds timeout = std::chrono::seconds(5));
  ~RawConnection();
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  // pipeline sends every command, then reads one reply each; after a
  // connection error the list stops with that error's text.
  std::vector<std::string> pipeline(const std::vector<std::vector<std::string>>& commands);
  // command: a pipeline of one.
  std::string command(const std::vector<std::string>& argv);
  // next reads one more reply without sending anything: on a subscribed
  // connection the next message, "[message CHANNEL PAYLOAD]".
  std::string next();

 private:
  redisContext* c_ = nullptr;
};

// redis_server_binary: the redis-server on PATH; throws std::runtime_error
// when there is none.
std::string redis_server_binary();

// make_temp_dir creates $TMPDIR/<prefix>-XXXXXX (/tmp without TMPDIR) and
// returns its path; throws std::runtime_error when mkdtemp fails.
// short_path: /tmp instead when <dir>/redis.sock would not fit a unix
// socket's path.
std::string make_temp_dir(std::string_view prefix = "redlock-test", bool short_path = false);

// read_file_from: a file's content from byte offset on ("" when missing).
std::string read_file_from(const std::string& path, std::uintmax_t offset = 0);

// tail_lines: the last n lines of text (a log), each as "  | line\n";
// "  | (log is empty)\n" when there are none. For start errors.
std::string tail_lines(const std::string& text, std::size_t n = 20);

// exit_text: how a process ended, from support::Process's exit code
// ("exited with status N", "killed by signal …").
std::string exit_text(int code);

}  // namespace redlock::test
