// floor.cpp — the raw floor of the redlock benchmarks (bench/CONTRACT.md).
//
// What this machine can do for one parallel round trip to N masters, with no
// library logic at all: one connection per master on one libuv loop, and per
// pair
//
//   acquire  SET key token NX PX 10000            to all N at once,
//            decided at the first majority of +OK (or when a majority can no
//            longer say yes); later replies are ignored when they come;
//   release  EVALSHA <release sha> 1 key token channel   to all N at once, decided at
//            the first majority of :1 (same rule).
//
// The release script is the library's own (GET, compare, DEL, PUBLISH on
// the channel in ARGV[2]), loaded once per master at start (SCRIPT LOAD).
//
// Connections. redis:// is a hiredis async context with a minimal poll
// adapter of our own (below) that flushes writes once per loop turn, as the
// library does. rediss:// (hiredis 0.14 has no TLS) is the library's
// transport reduced to its bones (TlsConn below): a non-blocking socket on a
// uv_poll handle, OpenSSL through memory BIOs, hiredis's reply reader; per
// loop turn the commands of the turn go through ONE SSL_write (one record
// for a pair's few hundred bytes) and one send(), and a readable socket is
// read in 16 KiB chunks, each fed to TLS, decrypted and parsed. The same
// OpenSSL settings as the library: TLS 1.2 at least, the peer verified
// against --tls-ca and its certificate checked for the node's IP address,
// an optional client certificate (--tls-cert / --tls-key).
//
// No per-node deadline, no validity/drift arithmetic, no retry, no rollback of
// failed attempts, no reconnect: a node that disconnects stays gone (the run
// fails once fewer than a majority are connected). Tokens are 128-bit hex
// from a seeded mt19937_64 (not getrandom per call).
//
// Scenarios:
//   latency     one worker, acquire + release of ONE key in a loop for S s;
//   throughput  C workers (default 64), each on its own key, all pipelined on
//               the same N connections, for S s; cpu_us_per_op from getrusage
//               (user + sys of this process over the run) / pairs;
//   handoff     the physical minimum of a handoff (redis:// only), as
//               bench/redlock_scenarios.cpp measures it: a holder and a
//               waiter with connections of their own (the holder's N, the
//               waiter's N for commands and N more SUBSCRIBEd, for the whole
//               run, to the key's channel). Per handoff: the holder acquires
//               (as above), the waiter is then waiting, the holder holds
//               2 + uniform(0..100) ms and releases (the script PUBLISHes the
//               holder's token on every master it deletes on); on the FIRST
//               notification carrying that token the waiter sends SET key
//               token NX PX 10000 to all N, decided at majority as above.
//               Sample = the waiter's acquire decided − the holder's release
//               decided (0 when the acquire came first); also
//               from_release_call_p50_us / _p99_us: from the holder's
//               release CALL instead (both round trips, whenever a system
//               reports its release's completion). An attempt that
//               loses (a master had not run the release yet) is counted in
//               failed_attempts_per_handoff, undone with the release script
//               and tried again at once. The waiter then releases; next
//               handoff. No waiting acquire of a library: no retry timer,
//               no per-wait SUBSCRIBE;
//   memory      unsupported: the floor keeps no per-lock state in the client
//               (a lock is a key on the masters), so there is nothing to
//               measure that would bound a library's per-lock memory.
//
// Settings: TTL 10000 ms; keys "bench:floor:<pid>-<random>:<worker>" so runs
// never share keys. Only hiredis API present in both 0.14 and 1.x is used.
//
// Output: exactly one JSON line on stdout (bench/CONTRACT.md); diagnostics on
// stderr. Exit 0 on success, 1 when the nodes are unreachable or the run
// failed, 2 on a usage error.

#include <CLI/CLI.hpp>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <uv.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "run_seconds.hpp"

namespace {

using Clock = std::chrono::steady_clock;

// The library's release script, word for word (src/scripts.hpp): the same
// server work per release, wake-up PUBLISH included.
constexpr const char* kReleaseScript =
    "\nif redis.call('GET', KEYS[1]) == ARGV[1] then\n"
    "  redis.call('DEL', KEYS[1])\n"
    "  if ARGV[2] then redis.call('PUBLISH', ARGV[2], ARGV[1]) end\n"
    "  return 1\n"
    "end\n"
    "return 0\n";
constexpr const char* kTtlMs = "10000";

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "floor: %s\nRun with --help for more information.\n", msg.c_str());
  std::exit(2);
}

[[noreturn]] void fail(const std::string& msg) {
  std::fprintf(stderr, "floor: %s\n", msg.c_str());
  std::exit(1);
}

struct Endpoint {
  std::string host;
  int port = 0;
  bool tls = false;  // rediss://
};

bool is_loopback_host(const std::string& h) {
  if (h == "localhost") return true;
  unsigned a, b, c, d;
  char tail;
  if (std::sscanf(h.c_str(), "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) != 4) return false;
  return a == 127 && b < 256 && c < 256 && d < 256;
}

// shown: a node URL as an error may show it — without what stands before
// an '@' (the floor takes no password, but one given by mistake is never
// printed).
std::string shown(const std::string& url) {
  const auto at = url.rfind('@');
  if (at == std::string::npos) return url;
  const auto scheme = url.find("://");
  return (scheme != std::string::npos && scheme < at ? url.substr(0, scheme + 3) : std::string()) + "***@" +
         url.substr(at + 1);
}

Endpoint parse_url(const std::string& url) {
  Endpoint e;
  std::string rest;
  if (url.rfind("redis://", 0) == 0) {
    rest = url.substr(8);
  } else if (url.rfind("rediss://", 0) == 0) {
    rest = url.substr(9);
    e.tls = true;
  } else {
    usage_error("node URL must be redis://127.0.0.1:PORT or rediss://127.0.0.1:PORT, got '" + shown(url) + "'");
  }
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  auto colon = rest.rfind(':');
  e.host = colon == std::string::npos ? rest : rest.substr(0, colon);
  std::string port = colon == std::string::npos ? "6379" : rest.substr(colon + 1);
  char* end = nullptr;
  long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || p < 1 || p > 65535) usage_error("bad port in '" + shown(url) + "'");
  if (!is_loopback_host(e.host)) usage_error("loopback only: '" + shown(url) + "'");
  if (e.host == "localhost") e.host = "127.0.0.1";
  e.port = static_cast<int>(p);
  return e;
}

// ---- a minimal hiredis <-> libuv poll adapter ---------------------------------
// hiredis 0.14's adapters/libuv.h drops poll errors (status < 0), so a refused
// connect would hang. Here an error is handed to hiredis, which then reads
// SO_ERROR (connecting) or the failing read (connected) and reports it.
//
// The floor gets every I/O economy the library has, so that it stays a floor:
// the poll handle is touched only when its events change, and on a connected
// context a command does not ask for writability (an epoll_ctl on and another
// off per command) but starts a prepare handle, which writes hiredis's buffer
// right before the loop polls — one write() per connection per loop turn.
// Only a socket that takes less than the whole buffer waits for writability.
struct PollAdapter {
  uv_poll_t handle{};
  uv_prepare_t flush{};
  redisAsyncContext* ac = nullptr;
  int events = 0;
  int open_handles = 2;
  bool flush_armed = false;
  bool flushing = false;
};

void poll_cb(uv_poll_t* h, int status, int events) {
  auto* p = static_cast<PollAdapter*>(h->data);
  if (p->ac == nullptr) return;
  if (status < 0) {
    if (!(p->ac->c.flags & REDIS_CONNECTED)) {
      redisAsyncHandleWrite(p->ac);
    } else {
      redisAsyncHandleRead(p->ac);
    }
    return;
  }
  if (p->ac != nullptr && (events & UV_READABLE)) redisAsyncHandleRead(p->ac);
  if (p->ac != nullptr && (events & UV_WRITABLE)) redisAsyncHandleWrite(p->ac);
}

void poll_set(PollAdapter* p, int events) {
  if (events == p->events) return;
  p->events = events;
  if (p->events != 0) {
    uv_poll_start(&p->handle, p->events, poll_cb);
  } else {
    uv_poll_stop(&p->handle);
  }
}

void flush_cb(uv_prepare_t* h) {
  auto* p = static_cast<PollAdapter*>(h->data);
  uv_prepare_stop(h);
  p->flush_armed = false;
  if (p->ac == nullptr) return;
  p->flushing = true;
  redisAsyncHandleWrite(p->ac);  // calls delWrite (all written) or addWrite (the rest)
  p->flushing = false;
}

void ev_add_read(void* d) { auto* p = static_cast<PollAdapter*>(d); poll_set(p, p->events | UV_READABLE); }
void ev_del_read(void* d) { auto* p = static_cast<PollAdapter*>(d); poll_set(p, p->events & ~UV_READABLE); }
void ev_add_write(void* d) {
  auto* p = static_cast<PollAdapter*>(d);
  if (p->flushing || (p->events & UV_WRITABLE) || p->ac == nullptr || !(p->ac->c.flags & REDIS_CONNECTED)) {
    poll_set(p, p->events | UV_WRITABLE);  // connecting, or a full socket
  } else if (!p->flush_armed) {
    p->flush_armed = true;
    uv_prepare_start(&p->flush, flush_cb);
  }
}
void ev_del_write(void* d) { auto* p = static_cast<PollAdapter*>(d); poll_set(p, p->events & ~UV_WRITABLE); }
void ev_cleanup(void* d) {
  auto* p = static_cast<PollAdapter*>(d);
  p->ac = nullptr;
  auto closed = [](uv_handle_t* h) {
    auto* adapter = static_cast<PollAdapter*>(h->data);
    if (--adapter->open_handles == 0) delete adapter;
  };
  uv_close(reinterpret_cast<uv_handle_t*>(&p->handle), closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&p->flush), closed);
}

bool attach(redisAsyncContext* ac, uv_loop_t* loop) {
  auto* p = new PollAdapter;
  if (uv_poll_init(loop, &p->handle, ac->c.fd) != 0) {
    delete p;
    return false;
  }
  uv_prepare_init(loop, &p->flush);
  p->handle.data = p;
  p->flush.data = p;
  p->ac = ac;
  ac->ev.data = p;
  ac->ev.addRead = ev_add_read;
  ac->ev.delRead = ev_del_read;
  ac->ev.addWrite = ev_add_write;
  ac->ev.delWrite = ev_del_write;
  ac->ev.cleanup = ev_cleanup;
  return true;
}

// ---- TLS: the library's transport reduced to its bones ------------------------------

SSL_CTX* g_tls_ctx = nullptr;

// tls_reason: OpenSSL's oldest queued reason (and clears the queue).
std::string tls_reason(const char* fallback) {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return fallback;
  if (ERR_SYSTEM_ERROR(e)) return std::strerror(ERR_GET_REASON(e));
  const char* reason = ERR_reason_error_string(e);
  return reason != nullptr ? reason : fallback;
}

void tls_setup(const std::string& ca, const std::string& cert, const std::string& key) {
  g_tls_ctx = SSL_CTX_new(TLS_client_method());
  if (g_tls_ctx == nullptr) fail("tls: " + tls_reason("cannot create a TLS context"));
  SSL_CTX_set_min_proto_version(g_tls_ctx, TLS1_2_VERSION);
  SSL_CTX_set_mode(g_tls_ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_ENABLE_PARTIAL_WRITE);
  if (!ca.empty() ? SSL_CTX_load_verify_locations(g_tls_ctx, ca.c_str(), nullptr) != 1
                  : SSL_CTX_set_default_verify_paths(g_tls_ctx) != 1) {
    fail("--tls-ca " + ca + ": " + tls_reason("cannot load"));
  }
  if (!cert.empty()) {
    if (SSL_CTX_use_certificate_chain_file(g_tls_ctx, cert.c_str()) != 1)
      fail("--tls-cert " + cert + ": " + tls_reason("cannot load"));
    if (SSL_CTX_use_PrivateKey_file(g_tls_ctx, key.c_str(), SSL_FILETYPE_PEM) != 1)
      fail("--tls-key " + key + ": " + tls_reason("cannot load"));
    if (SSL_CTX_check_private_key(g_tls_ctx) != 1) fail("--tls-key does not match --tls-cert");
  }
  SSL_CTX_set_verify(g_tls_ctx, SSL_VERIFY_PEER, nullptr);
}

struct Node;
void node_lost(Node* node, const std::string& why);

// One rediss:// connection: commands are formatted by hiredis into
// plain_out, encrypted by one SSL_write per loop turn (the prepare handle),
// sent with one send(); replies are decrypted and parsed by hiredis's reader
// and handed, in order, to the callbacks waiting in `pending`.
struct TlsConn {
  Node* node = nullptr;
  int fd = -1;
  uv_poll_t poll{};
  uv_prepare_t flush{};
  int watching = 0;
  bool flush_armed = false;
  bool connecting = true;
  bool ready = false;  // handshake done
  bool dead = false;
  int open_handles = 0;
  SSL* ssl = nullptr;
  redisReader* reader = nullptr;
  std::string plain_out, out;
  size_t out_sent = 0;
  std::deque<std::pair<redisCallbackFn*, void*>> pending;
};

void tls_fail(TlsConn* c, const std::string& why);
void tls_flush_cb(uv_prepare_t* h);
void tls_poll_cb(uv_poll_t* h, int status, int events);

void tls_watch(TlsConn* c, int events) {
  if (c->dead || events == c->watching) return;
  c->watching = events;
  if (events != 0) {
    uv_poll_start(&c->poll, events, tls_poll_cb);
  } else {
    uv_poll_stop(&c->poll);
  }
}

void tls_arm_flush(TlsConn* c) {
  if (c->flush_armed || c->dead) return;
  c->flush_armed = true;
  uv_prepare_start(&c->flush, tls_flush_cb);
}

void tls_take_output(TlsConn* c) {
  BIO* bio = SSL_get_wbio(c->ssl);
  const size_t pending = BIO_ctrl_pending(bio);
  if (pending == 0) return;
  const size_t old = c->out.size();
  c->out.resize(old + pending);
  const int n = BIO_read(bio, c->out.data() + old, static_cast<int>(pending));
  c->out.resize(old + static_cast<size_t>(n > 0 ? n : 0));
}

// tls_error: why an SSL call failed, or "" when it only wants more bytes.
std::string tls_error(TlsConn* c, int rc, const char* doing) {
  const int err = SSL_get_error(c->ssl, rc);
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return {};
  if (err == SSL_ERROR_ZERO_RETURN) return "the server closed the TLS session";
  const long verify = SSL_get_verify_result(c->ssl);
  if (verify != X509_V_OK) return std::string("TLS certificate verify failed: ") + X509_verify_cert_error_string(verify);
  return std::string("TLS ") + doing + " failed: " + tls_reason("protocol error");
}

void tls_send_out(TlsConn* c) {
  while (c->out_sent < c->out.size()) {
    const ssize_t n = ::send(c->fd, c->out.data() + c->out_sent, c->out.size() - c->out_sent, MSG_NOSIGNAL);
    if (n >= 0) {
      c->out_sent += static_cast<size_t>(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    return tls_fail(c, std::strerror(errno));
  }
  if (c->out_sent == c->out.size()) {
    c->out.clear();
    c->out_sent = 0;
    tls_watch(c, UV_READABLE);
  } else {
    tls_watch(c, UV_READABLE | UV_WRITABLE);
  }
}

void tls_flush_cb(uv_prepare_t* h) {
  auto* c = static_cast<TlsConn*>(h->data);
  uv_prepare_stop(h);
  c->flush_armed = false;
  if (c->dead) return;
  if (c->ready && !c->plain_out.empty()) {
    const int n = SSL_write(c->ssl, c->plain_out.data(), static_cast<int>(c->plain_out.size()));
    if (n != static_cast<int>(c->plain_out.size())) {
      std::string why = n > 0 ? "TLS write was partial" : tls_error(c, n, "write");
      return tls_fail(c, why.empty() ? "TLS write failed: the session wants to renegotiate" : why);
    }
    c->plain_out.clear();
    tls_take_output(c);
  }
  tls_send_out(c);
}

void tls_handshake(TlsConn* c) {
  const int rc = SSL_do_handshake(c->ssl);
  tls_take_output(c);
  if (rc != 1) {
    std::string why = tls_error(c, rc, "handshake");
    if (!why.empty()) return tls_fail(c, why);
  } else {
    c->ready = true;
  }
  if (!c->out.empty() || (c->ready && !c->plain_out.empty())) tls_arm_flush(c);
}

void tls_deliver(TlsConn* c) {
  for (;;) {
    void* raw = nullptr;
    if (redisReaderGetReply(c->reader, &raw) != REDIS_OK) return tls_fail(c, "protocol error");
    if (raw == nullptr) return;
    if (c->pending.empty()) {
      freeReplyObject(raw);
      return tls_fail(c, "a reply nobody asked for");
    }
    auto [fn, privdata] = c->pending.front();
    c->pending.pop_front();
    fn(nullptr, raw, privdata);
    freeReplyObject(raw);
    if (c->dead) return;
  }
}

void tls_read(TlsConn* c) {
  char buf[16384];
  for (;;) {
    const ssize_t n = ::recv(c->fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) return tls_fail(c, n == 0 ? "server closed the connection" : std::strerror(errno));
    BIO_write(SSL_get_rbio(c->ssl), buf, static_cast<int>(n));
    if (!c->ready) {
      tls_handshake(c);
      if (c->dead || !c->ready) {
        if (static_cast<size_t>(n) < sizeof buf) return;
        continue;
      }
    }
    char plain[16384];
    for (;;) {
      const int got = SSL_read(c->ssl, plain, sizeof plain);
      if (got > 0) {
        if (redisReaderFeed(c->reader, plain, static_cast<size_t>(got)) != REDIS_OK) return tls_fail(c, "out of memory");
        continue;
      }
      std::string why = tls_error(c, got, "read");
      if (!why.empty()) return tls_fail(c, why);
      break;
    }
    tls_take_output(c);  // TLS may answer something of its own
    if (!c->out.empty()) tls_arm_flush(c);
    tls_deliver(c);
    if (c->dead || static_cast<size_t>(n) < sizeof buf) return;
  }
}

void tls_connected(TlsConn* c) {
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err != 0) return tls_fail(c, std::strerror(err));
  c->connecting = false;
  tls_watch(c, UV_READABLE);
  tls_handshake(c);
}

void tls_poll_cb(uv_poll_t* h, int status, int events) {
  auto* c = static_cast<TlsConn*>(h->data);
  if (c->dead) return;
  if (status < 0) events = c->connecting ? UV_WRITABLE : UV_READABLE;  // the syscall says what happened
  if (c->connecting) {
    if (events & UV_WRITABLE) tls_connected(c);
    return;
  }
  if (events & UV_READABLE) tls_read(c);
  if (!c->dead && (events & UV_WRITABLE)) tls_send_out(c);
}

void tls_close(TlsConn* c) {
  auto closed = [](uv_handle_t* h) {
    auto* conn = static_cast<TlsConn*>(h->data);
    if (--conn->open_handles == 0) {
      SSL_free(conn->ssl);
      if (conn->reader != nullptr) redisReaderFree(conn->reader);
      delete conn;
    }
  };
  uv_close(reinterpret_cast<uv_handle_t*>(&c->poll), closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&c->flush), closed);
  if (c->fd >= 0) ::close(c->fd);
  c->fd = -1;
}

// tls_fail: the connection is gone; the node is told, then its waiting
// callbacks run with NULL (as hiredis's do).
void tls_fail(TlsConn* c, const std::string& why) {
  if (c->dead) return;
  c->dead = true;
  uv_prepare_stop(&c->flush);
  uv_poll_stop(&c->poll);
  node_lost(c->node, why);
  auto pending = std::move(c->pending);
  for (auto [fn, privdata] : pending) fn(nullptr, nullptr, privdata);
  tls_close(c);
}

// tls_connect starts one rediss:// connection; nullptr with `why` when the
// socket cannot even be made.
TlsConn* tls_connect(uv_loop_t* loop, Node* node, const Endpoint& ep, std::string& why) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(ep.port));
  inet_pton(AF_INET, ep.host.c_str(), &sa.sin_addr);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    why = std::strerror(errno);
    return nullptr;
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0 && errno != EINPROGRESS) {
    why = std::strerror(errno);
    ::close(fd);
    return nullptr;
  }
  SSL* ssl = SSL_new(g_tls_ctx);
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  if (ssl == nullptr || in == nullptr || out == nullptr) fail("tls: " + tls_reason("out of memory"));
  BIO_set_mem_eof_return(in, -1);  // an empty input BIO means "more to come"
  SSL_set_bio(ssl, in, out);
  SSL_set_connect_state(ssl);
  X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), ep.host.c_str());
  auto* c = new TlsConn;
  c->node = node;
  c->fd = fd;
  c->ssl = ssl;
  c->reader = redisReaderCreate();
  if (uv_poll_init_socket(loop, &c->poll, fd) != 0) fail("uv_poll_init_socket failed");
  uv_prepare_init(loop, &c->flush);
  c->poll.data = c->flush.data = c;
  c->open_handles = 2;
  tls_watch(c, UV_WRITABLE);  // writable: the connect finished, one way or the other
  return c;
}

void tls_command(TlsConn* c, redisCallbackFn* fn, void* privdata, int argc, const char** argv, const size_t* argvlen) {
  char* cmd = nullptr;
  const int len = redisFormatCommandArgv(&cmd, argc, argv, argvlen);
  if (len < 0) fail("out of memory");
  c->plain_out.append(cmd, static_cast<size_t>(len));
  redisFreeCommand(cmd);
  c->pending.emplace_back(fn, privdata);
  if (c->ready) tls_arm_flush(c);
}

// ---- the bench ------------------------------------------------------------------

// One connection to one master: a hiredis context (redis://) or a TlsConn
// (rediss://); both nullptr once it is gone.
struct Node {
  Endpoint ep;
  redisAsyncContext* ac = nullptr;  // nullptr once disconnected (hiredis frees it)
  TlsConn* tls = nullptr;           // nullptr once failed (freed when its handles close)
  std::string error;
  bool alive() const { return ac != nullptr || tls != nullptr; }
};

// A set of connections, one per master: the holder's (every scenario), and in
// handoff the waiter's commands and the waiter's subscriptions.
using Group = std::vector<Node>;

struct Worker;

enum class Kind { script_load, acquire, release, h_acquire, h_release, w_acquire, w_rollback, w_release };

// One command fanned out to every node of a group. Lives until every node
// has answered (or its callback ran with NULL at teardown), whatever was
// decided before.
struct Op {
  Kind kind;
  Worker* worker = nullptr;  // latency, throughput
  int outstanding = 0;       // callbacks still to come
  int yes = 0;
  int no = 0;
  bool decided = false;
  bool success = false;
};

struct Worker {
  int index = 0;
  std::string key;
  std::string channel;  // the release's wake-up channel, like the library's
  std::string token;
  Clock::time_point t0;
  bool acquired_ok = false;
  bool busy = false;
};

// handoff: one holder, one waiter, one key (see the header).
struct Handoff {
  std::string key, channel;
  std::string holder_token, waiter_token;
  uv_timer_t timer{};
  bool waiting = false;      // the holder holds; the waiter acts on its release's notification
  bool attempting = false;   // the waiter's acquire (or its undo) is out
  bool released = false, waited = false, waiter_holds = false;
  Clock::time_point release_called_at, released_at, waiter_at;
  std::vector<uint32_t> from_call;  // µs from the holder's release CALL to the waiter's acquire decided
  uint64_t failed_attempts = 0;
  int subscribed = 0;  // SUBSCRIBE confirmations
};

struct Bench {
  uv_loop_t* loop = nullptr;
  Group nodes;                       // the holder's (every scenario)
  Group waiter_nodes, sub_nodes;     // handoff: the waiter's
  int quorum = 0;
  std::string sha;
  bool script_loaded = false;
  bool startup_done = false;
  bool stopping = false;
  bool handoff = false;

  std::vector<std::unique_ptr<Worker>> workers;
  int busy_workers = 0;
  Handoff h;
  Clock::time_point start, deadline, end;
  std::vector<uint32_t> samples;
  uint64_t errors = 0;
  std::mt19937_64 rng{std::random_device{}()};
  std::string fatal;
};

Bench g;

void decide(Op* op);
void start_pair(Worker* w);
void handoff_cycle();

int alive_nodes(const Group& group) {
  int n = 0;
  for (const auto& node : group) n += node.alive() ? 1 : 0;
  return n;
}

void abort_run(const std::string& why) {
  if (g.fatal.empty()) g.fatal = why;
  g.stopping = true;
  uv_stop(g.loop);
}

// groups_ok: every group still has a majority connected.
bool groups_ok() {
  for (const Group* group : {&g.nodes, &g.waiter_nodes, &g.sub_nodes}) {
    if (!group->empty() && alive_nodes(*group) < g.quorum) return false;
  }
  return true;
}

void node_lost(Node* node, const std::string& why) {
  node->ac = nullptr;
  node->tls = nullptr;
  if (g.stopping) return;
  node->error = why;
  std::fprintf(stderr, "floor: %s:%d: connection lost: %s\n", node->ep.host.c_str(), node->ep.port, why.c_str());
  if (!groups_ok()) abort_run("fewer than a majority of the nodes are connected");
}

void on_connect(const redisAsyncContext* ac, int status) {
  auto* node = static_cast<Node*>(ac->data);
  if (status != REDIS_OK) node_lost(node, std::string("connect failed: ") + ac->errstr);
}

void on_disconnect(const redisAsyncContext* ac, int status) {
  node_lost(static_cast<Node*>(ac->data), status == REDIS_OK ? "disconnected" : ac->errstr);
}

bool reply_is_yes(Kind kind, const redisReply* r) {
  if (r == nullptr) return false;
  switch (kind) {
    case Kind::script_load:
      return r->type == REDIS_REPLY_STRING;
    case Kind::acquire:
    case Kind::h_acquire:
    case Kind::w_acquire:
      return r->type == REDIS_REPLY_STATUS && r->len == 2 && std::memcmp(r->str, "OK", 2) == 0;
    case Kind::release:
    case Kind::h_release:
    case Kind::w_release:
      return r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    case Kind::w_rollback:
      return r->type == REDIS_REPLY_INTEGER;  // 0 where the attempt had not set it: also done
  }
  return false;
}

void on_reply(redisAsyncContext*, void* r, void* privdata) {
  auto* op = static_cast<Op*>(privdata);
  auto* reply = static_cast<redisReply*>(r);
  bool yes = reply_is_yes(op->kind, reply);
  if (op->kind == Kind::script_load && yes) {
    std::string sha(reply->str, reply->len);
    if (g.sha.empty()) g.sha = sha;
    else if (g.sha != sha) abort_run("SCRIPT LOAD returned different digests");
  } else if (op->kind == Kind::script_load && reply != nullptr) {
    std::fprintf(stderr, "floor: SCRIPT LOAD failed: %.*s\n", static_cast<int>(reply->len), reply->str);
  }
  if (yes) ++op->yes; else ++op->no;
  --op->outstanding;
  if (!op->decided) decide(op);
  if (op->outstanding == 0) delete op;
}

// Sends one command to every connected node of `group`; a node that is gone
// counts as a "no" at once (never enough to decide: the run aborts below a
// majority).
void fan_out(Op* op, Group& group, int argc, const char** argv, const size_t* argvlen) {
  int failed = 0;
  op->outstanding = static_cast<int>(group.size());
  for (auto& node : group) {
    if (node.tls != nullptr) {
      tls_command(node.tls, on_reply, op, argc, argv, argvlen);
    } else if (node.ac == nullptr ||
               redisAsyncCommandArgv(node.ac, on_reply, op, argc, argv, argvlen) != REDIS_OK) {
      ++failed;
    }
  }
  op->outstanding -= failed;
  op->no += failed;
  if (!op->decided) decide(op);
  if (op->outstanding == 0) delete op;
}

void new_token(std::string& token) {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016" PRIx64 "%016" PRIx64, static_cast<uint64_t>(g.rng()),
                static_cast<uint64_t>(g.rng()));
  token.assign(buf, 32);
}

void send_set(Kind kind, Worker* w, Group& group, const std::string& key, const std::string& token) {
  auto* op = new Op{kind, w};
  const char* argv[] = {"SET", key.c_str(), token.c_str(), "NX", "PX", kTtlMs};
  const size_t len[] = {3, key.size(), token.size(), 2, 2, std::strlen(kTtlMs)};
  fan_out(op, group, 6, argv, len);
}

// send_unlock: the release script; `channel` empty = no wake-up PUBLISH.
void send_unlock(Kind kind, Worker* w, Group& group, const std::string& key, const std::string& token,
                 const std::string& channel) {
  auto* op = new Op{kind, w};
  const char* argv[] = {"EVALSHA", g.sha.c_str(), "1", key.c_str(), token.c_str(), channel.c_str()};
  const size_t len[] = {7, g.sha.size(), 1, key.size(), token.size(), channel.size()};
  fan_out(op, group, channel.empty() ? 5 : 6, argv, len);
}

void start_pair(Worker* w) {
  w->busy = true;
  new_token(w->token);
  w->t0 = Clock::now();
  send_set(Kind::acquire, w, g.nodes, w->key, w->token);
}

void run_over() {
  g.end = Clock::now();
  g.stopping = true;
  uv_stop(g.loop);
}

void worker_idle(Worker* w) {
  w->busy = false;
  if (--g.busy_workers == 0) run_over();
}

void maybe_started() {
  if (g.startup_done || !g.script_loaded) return;
  if (g.handoff && g.h.subscribed < g.quorum) return;  // one notification is enough
  g.startup_done = true;
  uv_stop(g.loop);
}

// ---- handoff -------------------------------------------------------------------

void handoff_after(uint64_t ms, void (*what)()) {
  g.h.timer.data = reinterpret_cast<void*>(what);
  uv_timer_start(&g.h.timer, [](uv_timer_t* t) { reinterpret_cast<void (*)()>(t->data)(); }, ms, 0);
}

void handoff_release_holder() {
  g.h.release_called_at = Clock::now();
  send_unlock(Kind::h_release, nullptr, g.nodes, g.h.key, g.h.holder_token, g.h.channel);
}

void handoff_attempt() {
  g.h.attempting = true;
  new_token(g.h.waiter_token);
  send_set(Kind::w_acquire, nullptr, g.waiter_nodes, g.h.key, g.h.waiter_token);
}

// handoff_record: both the holder's release and the waiter's acquire are
// decided: the sample, then the waiter releases and the next handoff begins.
void handoff_record() {
  if (!g.h.waiter_holds) return handoff_after(0, handoff_cycle);
  const auto gap = std::chrono::duration_cast<std::chrono::microseconds>(g.h.waiter_at - g.h.released_at).count();
  g.samples.push_back(static_cast<uint32_t>(std::max<int64_t>(gap, 0)));
  g.h.from_call.push_back(static_cast<uint32_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(g.h.waiter_at - g.h.release_called_at).count()));
  send_unlock(Kind::w_release, nullptr, g.waiter_nodes, g.h.key, g.h.waiter_token, g.h.channel);
}

void handoff_cycle() {
  if (Clock::now() >= g.deadline) return run_over();
  new_token(g.h.holder_token);
  g.h.released = g.h.waited = g.h.waiter_holds = g.h.waiting = g.h.attempting = false;
  send_set(Kind::h_acquire, nullptr, g.nodes, g.h.key, g.h.holder_token);
}

// on_message: the waiter's subscription on one master: its confirmation,
// then a message per release (payload: the releaser's token).
void on_message(redisAsyncContext*, void* r, void*) {
  auto* reply = static_cast<redisReply*>(r);
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY || reply->elements != 3) return;
  const redisReply* kind = reply->element[0];
  const redisReply* payload = reply->element[2];
  if (kind->type != REDIS_REPLY_STRING) return;
  const std::string_view what(kind->str, kind->len);
  if (what == "subscribe") {
    ++g.h.subscribed;
    return maybe_started();
  }
  if (what != "message" || g.stopping || !g.h.waiting || g.h.attempting || payload->type != REDIS_REPLY_STRING ||
      std::string_view(payload->str, payload->len) != g.h.holder_token) {
    return;  // another handoff's, the waiter's own release's, or not the first
  }
  handoff_attempt();
}

void handoff_decided(Op* op) {
  Handoff& h = g.h;
  switch (op->kind) {
    case Kind::h_acquire:
      if (!op->success) {
        ++g.errors;
        std::fprintf(stderr, "floor: handoff: the holder's acquire failed\n");
        return handoff_after(10, handoff_cycle);
      }
      h.waiting = true;
      handoff_after(2 + std::uniform_int_distribution<uint64_t>(0, 100)(g.rng), handoff_release_holder);
      return;
    case Kind::h_release:
      h.released_at = Clock::now();
      h.released = true;
      if (!op->success) ++g.errors;
      if (h.waited) handoff_record();
      return;
    case Kind::w_acquire:
      if (op->success) {
        h.waiter_at = Clock::now();
        h.waited = h.waiter_holds = true;
        h.waiting = h.attempting = false;
        if (h.released) handoff_record();
        return;
      }
      ++h.failed_attempts;  // lost: undo it where it was set, and try again at once
      send_unlock(Kind::w_rollback, nullptr, g.waiter_nodes, h.key, h.waiter_token, std::string());
      return;
    case Kind::w_rollback:
      if (!op->success || Clock::now() >= g.deadline + std::chrono::seconds(5)) {
        ++g.errors;  // the waiter gives up (5 s, the library waiter's wait)
        std::fprintf(stderr, "floor: handoff: the waiter did not get the lock\n");
        h.waiting = h.attempting = false;
        h.waited = true;
        if (h.released) handoff_record();
        return;
      }
      return handoff_attempt();
    case Kind::w_release:
      if (!op->success) ++g.errors;
      return handoff_cycle();
    default:
      return;
  }
}

void decide(Op* op) {
  const int n = static_cast<int>(g.nodes.size());
  if (op->yes >= g.quorum) {
    op->decided = op->success = true;
  } else if (op->no > n - g.quorum) {
    op->decided = true;
  } else {
    return;
  }
  if (g.stopping && op->kind != Kind::script_load) return;  // teardown: callbacks with NULL
  switch (op->kind) {
    case Kind::script_load:
      if (!op->success) return abort_run("SCRIPT LOAD did not succeed on a majority");
      g.script_loaded = true;
      return maybe_started();
    case Kind::acquire:
      op->worker->acquired_ok = op->success;
      send_unlock(Kind::release, op->worker, g.nodes, op->worker->key, op->worker->token, op->worker->channel);
      return;
    case Kind::release: {
      Worker* w = op->worker;
      auto now = Clock::now();
      if (!w->acquired_ok || !op->success) {
        ++g.errors;
      } else {
        g.samples.push_back(static_cast<uint32_t>(
            std::chrono::duration_cast<std::chrono::microseconds>(now - w->t0).count()));
      }
      if (now < g.deadline) {
        start_pair(w);
      } else {
        worker_idle(w);
      }
      return;
    }
    default:
      return handoff_decided(op);
  }
}

uint64_t percentile(const std::vector<uint32_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  auto rank = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// connect_group: one connection per endpoint (queued commands wait for it).
void connect_group(Group& group, const std::vector<Endpoint>& endpoints) {
  group.resize(endpoints.size());  // never resized again: the connections point at their Node
  for (size_t i = 0; i < endpoints.size(); ++i) {
    Node& node = group[i];
    node.ep = endpoints[i];
    if (node.ep.tls) {
      std::string why;
      node.tls = tls_connect(g.loop, &node, node.ep, why);
      if (node.tls == nullptr) std::fprintf(stderr, "floor: %s:%d: %s\n", node.ep.host.c_str(), node.ep.port, why.c_str());
      continue;
    }
    redisAsyncContext* ac = redisAsyncConnect(node.ep.host.c_str(), node.ep.port);
    if (ac == nullptr) fail("out of memory");
    if (ac->err) {
      std::fprintf(stderr, "floor: %s:%d: %s\n", node.ep.host.c_str(), node.ep.port, ac->errstr);
      redisAsyncFree(ac);
      continue;
    }
    ac->data = &node;
    if (!attach(ac, g.loop)) fail("uv_poll_init failed");
    node.ac = ac;
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
  }
}

void teardown() {
  g.stopping = true;
  for (Group* group : {&g.nodes, &g.waiter_nodes, &g.sub_nodes}) {
    for (auto& node : *group) {
      if (node.ac != nullptr) {
        redisAsyncContext* ac = node.ac;
        redisAsyncFree(ac);  // pending callbacks run with NULL; on_disconnect clears node.ac
        node.ac = nullptr;
      } else if (node.tls != nullptr) {
        tls_fail(node.tls, "closed");  // pending callbacks run with NULL; clears node.tls
      }
    }
  }
  if (g.handoff) uv_close(reinterpret_cast<uv_handle_t*>(&g.h.timer), nullptr);
  uv_run(g.loop, UV_RUN_DEFAULT);  // close callbacks of the poll handles
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  std::string nodes_arg, scenario, samples_path, ignored_locks, tls_ca, tls_cert, tls_key;
  double seconds = 3.0;
  long concurrency = 64;
  CLI::App app{"floor: the raw floor of the benchmarks, hiredis + libuv (+ OpenSSL for rediss://) and no library "
               "logic; prints one JSON line (bench/CONTRACT.md).",
               "floor"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--nodes", nodes_arg, "The masters")
      ->type_name("redis[s]://127.0.0.1:PORT,...")
      ->required();
  app.add_option("--scenario", scenario, "What to measure (memory: reported as unsupported)")
      ->type_name("NAME")
      ->required()
      ->check(CLI::IsMember({"latency", "throughput", "handoff", "memory"}));
  app.add_option("--seconds", seconds, "Measure this long")
      ->type_name("S")
      ->check(bench::run_seconds(0, 3600, true))
      ->capture_default_str();
  app.add_option("--concurrency", concurrency, "throughput: workers, each on its own key")
      ->type_name("C")
      ->check(CLI::Range(1L, 100000L))
      ->capture_default_str();
  app.add_option("--samples", samples_path, "Write every sample (µs) here, one a line")->type_name("FILE");
  app.add_option("--locks", ignored_locks, "Ignored: the floor has no memory scenario")->type_name("N");
  app.add_option("--tls-ca", tls_ca, "rediss://: the CA file that verifies the masters (default: the system's)")
      ->type_name("FILE");
  auto* cert = app.add_option("--tls-cert", tls_cert, "rediss://: a client certificate")->type_name("FILE");
  auto* key = app.add_option("--tls-key", tls_key, "rediss://: its key")->type_name("FILE");
  cert->needs(key);
  key->needs(cert);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0) std::fputs("floor: ", stderr);
    return app.exit(e) == 0 ? 0 : 2;
  }

  if (scenario == "memory") {
    std::printf("{\"system\":\"floor\",\"scenario\":\"memory\",\"unsupported\":\"the floor keeps no "
                "per-lock state in the client (a lock is only a key on the masters)\"}\n");
    return 0;
  }
  if (scenario == "latency" || scenario == "handoff") concurrency = 1;
  g.handoff = scenario == "handoff";

  std::vector<Endpoint> endpoints;
  bool any_tls = false;
  size_t pos = 0;
  while (pos <= nodes_arg.size()) {
    auto comma = nodes_arg.find(',', pos);
    if (comma == std::string::npos) comma = nodes_arg.size();
    std::string url = nodes_arg.substr(pos, comma - pos);
    if (!url.empty()) {
      endpoints.push_back(parse_url(url));
      any_tls = any_tls || endpoints.back().tls;
    }
    pos = comma + 1;
  }
  if (endpoints.empty()) usage_error("--nodes names no node");
  if (any_tls && g.handoff) usage_error("handoff runs over redis:// only");
  g.quorum = static_cast<int>(endpoints.size()) / 2 + 1;
  if (any_tls) tls_setup(tls_ca, tls_cert, tls_key);

  uv_loop_t loop;
  uv_loop_init(&loop);
  g.loop = &loop;

  char prefix[64];
  std::snprintf(prefix, sizeof prefix, "bench:floor:%d-%08" PRIx64 ":", static_cast<int>(getpid()),
                static_cast<uint64_t>(g.rng() & 0xffffffffu));

  // Connect every node, then SCRIPT LOAD on each (queued behind the connect);
  // handoff: the waiter's connections too, and its SUBSCRIBE.
  connect_group(g.nodes, endpoints);
  if (g.handoff) {
    g.h.key = std::string(prefix) + "handoff";
    g.h.channel = g.h.key + ":released";
    uv_timer_init(&loop, &g.h.timer);
    connect_group(g.waiter_nodes, endpoints);
    connect_group(g.sub_nodes, endpoints);
    for (auto& node : g.sub_nodes) {
      const char* av[] = {"SUBSCRIBE", g.h.channel.c_str()};
      const size_t len[] = {9, g.h.channel.size()};
      if (node.ac != nullptr) redisAsyncCommandArgv(node.ac, on_message, nullptr, 2, av, len);
    }
  }
  if (!groups_ok()) fail("fewer than a majority of the nodes are reachable");
  {
    auto* op = new Op{Kind::script_load};
    const char* av[] = {"SCRIPT", "LOAD", kReleaseScript};
    const size_t len[] = {6, 4, std::strlen(kReleaseScript)};
    fan_out(op, g.nodes, 3, av, len);
  }
  uv_timer_t startup_timer;
  uv_timer_init(&loop, &startup_timer);
  uv_timer_start(&startup_timer,
                 [](uv_timer_t*) { abort_run("no majority answered SCRIPT LOAD (and SUBSCRIBE) within 5 s"); },
                 5000, 0);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_timer_stop(&startup_timer);
  uv_close(reinterpret_cast<uv_handle_t*>(&startup_timer), nullptr);
  if (!g.fatal.empty() || !g.startup_done) {
    std::string why = g.fatal.empty() ? "startup failed" : g.fatal;
    teardown();
    fail(why + " (nodes: " + nodes_arg + ")");
  }

  // The run.
  if (!g.handoff) {
    for (long i = 0; i < concurrency; ++i) {
      auto w = std::make_unique<Worker>();
      w->index = static_cast<int>(i);
      w->key = std::string(prefix) + std::to_string(i);
      w->channel = w->key + ":released";
      g.workers.push_back(std::move(w));
    }
  }
  g.samples.reserve(1 << 20);
  double cpu0 = cpu_seconds();
  g.start = Clock::now();
  g.deadline = g.start + std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6));
  g.busy_workers = static_cast<int>(g.workers.size());
  if (g.handoff) {
    handoff_cycle();
  } else {
    for (auto& w : g.workers) start_pair(w.get());
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  double cpu1 = cpu_seconds();
  std::string fatal = g.fatal;
  teardown();
  uv_loop_close(&loop);
  if (g_tls_ctx != nullptr) SSL_CTX_free(g_tls_ctx);
  if (!fatal.empty()) fail("run failed: " + fatal);

  double elapsed = std::chrono::duration<double>(g.end - g.start).count();
  uint64_t ops = g.samples.size();
  std::vector<uint32_t> sorted = g.samples;
  std::sort(sorted.begin(), sorted.end());

  if (!samples_path.empty()) {
    FILE* f = std::fopen(samples_path.c_str(), "w");
    if (f == nullptr) fail("cannot write " + samples_path + ": " + std::strerror(errno));
    for (uint32_t s : g.samples) std::fprintf(f, "%u\n", s);
    std::fclose(f);
  }

  std::string out = "{\"system\":\"floor\",\"scenario\":\"" + scenario + "\"";
  char buf[512];
  std::snprintf(buf, sizeof buf,
                ",\"ops\":%" PRIu64 ",\"seconds\":%.3f,\"ops_per_s\":%.1f,\"p50_us\":%" PRIu64
                ",\"p90_us\":%" PRIu64 ",\"p99_us\":%" PRIu64 ",\"p999_us\":%" PRIu64,
                ops, elapsed, elapsed > 0 ? static_cast<double>(ops) / elapsed : 0.0, percentile(sorted, 0.50),
                percentile(sorted, 0.90), percentile(sorted, 0.99), percentile(sorted, 0.999));
  out += buf;
  if (scenario == "throughput") {
    std::snprintf(buf, sizeof buf, ",\"concurrency\":%ld,\"cpu_us_per_op\":%.3f", concurrency,
                  ops > 0 ? (cpu1 - cpu0) * 1e6 / static_cast<double>(ops) : 0.0);
    out += buf;
  }
  if (g.handoff && ops > 0) {
    std::sort(g.h.from_call.begin(), g.h.from_call.end());
    std::snprintf(buf, sizeof buf,
                  ",\"failed_attempts_per_handoff\":%.4f,\"from_release_call_p50_us\":%" PRIu64
                  ",\"from_release_call_p99_us\":%" PRIu64,
                  static_cast<double>(g.h.failed_attempts) / static_cast<double>(ops),
                  percentile(g.h.from_call, 0.50), percentile(g.h.from_call, 0.99));
    out += buf;
  }
  std::snprintf(buf, sizeof buf, ",\"errors\":%" PRIu64 "}", g.errors);
  out += buf;
  std::puts(out.c_str());
  if (ops == 0) {
    std::fprintf(stderr, "floor: no %s completed\n", g.handoff ? "handoff" : "pair");
    return 1;
  }
  return 0;
}
