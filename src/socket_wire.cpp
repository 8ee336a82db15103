// socket_wire.cpp — the production Wire. See socket_wire.hpp.
#include "socket_wire.hpp"

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <hiredis/read.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>

#include "resp.hpp"

namespace redlock::detail {

namespace {

// The work one loop turn gives one connection (socket_wire.hpp): a 64 KiB
// read is four recv() calls and well under a millisecond of parsing; 1,024
// replies are the session's bookkeeping for as many commands. A healthy
// connection rarely meets either: replies to one turn's commands come in
// a few KiB.
constexpr std::size_t read_budget = 64 * 1024;
constexpr std::size_t reply_budget = 1024;

// "Connection refused" reads "connection refused" in outcomes.
std::string os_error(int err) {
  std::string s = std::strerror(err);
  if (s.empty()) return "connection error";
  s[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(s[0])));
  return s;
}

// count_nested: how many replies an array holds, at every depth.
std::size_t count_nested(const redisReply* r) {
  std::size_t n = 0;
  if (r->type != REDIS_REPLY_ARRAY) return 0;
  for (std::size_t i = 0; i < r->elements; ++i) n += 1 + (r->element[i] != nullptr ? count_nested(r->element[i]) : 0);
  return n;
}

// convert fills `out` from `r`; an array's elements take the next
// r->elements slots of `store` (sized by count_nested beforehand, so spans
// stay valid).
void convert(const redisReply* r, WireReply& out, std::vector<WireReply>& store, std::size_t& next) {
  switch (r->type) {
    case REDIS_REPLY_STATUS: out.type = WireReply::Type::status; break;
    case REDIS_REPLY_STRING: out.type = WireReply::Type::string; break;
    case REDIS_REPLY_INTEGER: out.type = WireReply::Type::integer; break;
    case REDIS_REPLY_ERROR: out.type = WireReply::Type::error; break;
    case REDIS_REPLY_ARRAY: out.type = WireReply::Type::array; break;
    default: out.type = WireReply::Type::nil; break;  // nil, or a RESP3 type we never ask for
  }
  out.integer = r->integer;
  if (r->str != nullptr) out.str = std::string_view(r->str, r->len);
  if (r->type != REDIS_REPLY_ARRAY) return;
  const std::size_t first = next;
  next += r->elements;
  for (std::size_t i = 0; i < r->elements; ++i) {
    if (r->element[i] != nullptr) convert(r->element[i], store[first + i], store, next);
  }
  out.elements = std::span<const WireReply>(store.data() + first, r->elements);
}

void poll_trampoline(uv_poll_t* handle, int status, int events) {
  static_cast<SocketWire*>(handle->data)->polled(status, events);
}

void prepare_trampoline(uv_prepare_t* handle) { static_cast<SocketWire*>(handle->data)->prepared(); }

void idle_trampoline(uv_idle_t* handle) { static_cast<SocketWire*>(handle->data)->resumed(); }

template <typename Handle>
void close_and_free(Handle* handle) {
  uv_close(reinterpret_cast<uv_handle_t*>(handle), [](uv_handle_t* h) { delete reinterpret_cast<Handle*>(h); });
}

void set_option(int fd, int level, int name, int value) { setsockopt(fd, level, name, &value, sizeof value); }

// The first bytes of a TLS record: a handshake (0x16) or an alert (0x15).
bool looks_like_tls(unsigned char first) { return first == 0x15 || first == 0x16; }

}  // namespace

// Gone — set up at the top of every entry from the loop: the destructor
// marks it, so code after an event that may have freed the Wire can tell.
// Nested entries pass the news outwards.
struct SocketWire::Gone {
  explicit Gone(SocketWire* wire) : wire_(wire), outer_(wire->gone_) { wire->gone_ = &gone; }
  Gone(const Gone&) = delete;
  Gone& operator=(const Gone&) = delete;
  ~Gone() {
    if (!gone) {
      wire_->gone_ = outer_;
    } else if (outer_ != nullptr) {
      *outer_ = true;
    }
  }
  bool gone = false;

 private:
  SocketWire* wire_;
  bool* outer_;
};

// enter: one entry from the loop — `body`, then the failure it caused, if
// the Wire is still there.
template <class Body>
void SocketWire::enter(Body body) {
  Gone g(this);
  body();
  if (!g.gone) report_failure();
}

SocketWire::SocketWire(uv_loop_t* loop, Resolver& resolver, const TlsContext* tls, const NodeAddress& address,
                       WireEvents& events, const resp::ReplyLimits& limits)
    : loop_(loop), resolver_(resolver), tls_context_(tls), address_(address), events_(events), scanner_(limits) {
  flush_ = new uv_prepare_t;
  uv_prepare_init(loop_, flush_);
  flush_->data = this;
  backlog_ = new uv_idle_t;
  uv_idle_init(loop_, backlog_);
  backlog_->data = this;
  reader_ = redisReaderCreate();
  start();
}

// start: the unix socket or numeric address at once, else the lookup.
void SocketWire::start() {
  if (reader_ == nullptr) return fail("out of memory creating the connection");
  if (address_.tls && tls_context_ == nullptr) return fail("rediss:// without a TLS context");
  if (address_.kind == NodeAddress::Kind::unix_socket) {
    auto a = unix_address(address_.path);
    if (!a) return fail("unix socket path too long: " + address_.path);
    addresses_.push_back(*a);
    return connect_next();
  }
  addresses_ = numeric_address(address_.host, address_.port);
  if (!addresses_.empty()) return connect_next();
  lookup_ = resolver_.resolve(address_.host, address_.port, [this](std::vector<SocketAddress> found, std::string why) {
    resolved(std::move(found), std::move(why));
  });
}

SocketWire::~SocketWire() {
  if (gone_ != nullptr) *gone_ = true;
  lookup_.reset();
  close_socket();
  close_and_free(flush_);
  close_and_free(backlog_);
  if (reader_ != nullptr) redisReaderFree(reader_);
}

// The same bytes as append_command(argv).
bool SocketWire::write(std::span<const std::string_view> argv) { return write_encoded(argv, 0, {}); }

bool SocketWire::write_encoded(std::span<const std::string_view> head, std::size_t tail_args,
                               std::span<const std::string_view> tail) {
  if (state_ == State::failed) return false;
  append_command_encoded(address_.tls ? plain_out_ : out_, head, tail_args, tail);
  if (state_ == State::ready) arm_flush();
  return true;
}

void SocketWire::read_now() {
  if (state_ == State::ready || state_ == State::tls_handshake) enter([this] { read_socket(); });
}

std::string SocketWire::waiting_for() const {
  switch (state_) {
    case State::resolving: return "the name " + address_.host + " to resolve";
    case State::connecting: return "the TCP connect";
    case State::tls_handshake:
      return received_any_ ? "the TLS handshake" : "the TLS handshake (no answer: a plain redis:// port?)";
    case State::ready:
      // The transport is up; the session's own handshake (AUTH, INFO, …)
      // has not answered.
      return "the server to answer";
    case State::failed: break;
  }
  return {};
}

void SocketWire::resolved(std::vector<SocketAddress> addresses, std::string why) {
  lookup_.reset();
  if (addresses.empty()) {
    fail(std::move(why));
  } else {
    addresses_ = std::move(addresses);
    connect_next();
  }
  report_failure();
}

// connect_next starts a connect to the next address; fails the Wire when
// none is left, with the first address's error (usually the one that
// names the cause).
void SocketWire::connect_next() {
  close_socket();
  to(State::connecting);
  while (next_address_ < addresses_.size()) {
    const SocketAddress& a = addresses_[next_address_++];
    const int fd = ::socket(a.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      if (first_error_.empty()) first_error_ = os_error(errno);
      continue;
    }
    if (a.storage.ss_family != AF_UNIX) {
      set_option(fd, IPPROTO_TCP, TCP_NODELAY, 1);
      set_option(fd, SOL_SOCKET, SO_KEEPALIVE, 1);
      set_option(fd, IPPROTO_TCP, TCP_KEEPIDLE, 15);
      set_option(fd, IPPROTO_TCP, TCP_KEEPINTVL, 5);
      set_option(fd, IPPROTO_TCP, TCP_KEEPCNT, 3);
    }
    int rc;
    do {
      rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&a.storage), a.length);
    } while (rc < 0 && errno == EINTR);
    if (rc < 0 && errno != EINPROGRESS) {
      if (first_error_.empty()) first_error_ = os_error(errno);
      ::close(fd);
      continue;
    }
    poll_ = new uv_poll_t;
    if (uv_poll_init_socket(loop_, poll_, fd) != 0) {
      delete poll_;
      poll_ = nullptr;
      ::close(fd);
      if (first_error_.empty()) first_error_ = "cannot watch the socket";
      continue;
    }
    poll_->data = this;
    fd_ = fd;
    watch(UV_WRITABLE);  // writable: the connect finished, one way or the other
    return;
  }
  fail(first_error_.empty() ? "no address to connect to" : first_error_);
}

void SocketWire::connect_done() {
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err != 0) {
    if (first_error_.empty()) first_error_ = os_error(err);
    return connect_next();
  }
  if (address_.tls) return start_tls();
  to(State::ready);
  watch(UV_READABLE);
  Gone g(this);
  events_.on_connected();
  if (!g.gone && !out_.empty()) arm_flush();
}

void SocketWire::start_tls() {
  std::string why;
  tls_ = tls_context_->session(address_.host, why);
  if (tls_ == nullptr) return fail(why);
  to(State::tls_handshake);
  watch(UV_READABLE);
  handshake_step();
}

// handshake_step advances the TLS handshake with what was received, sends
// what it produced, and reports on_connected once it is done.
void SocketWire::handshake_step() {
  const TlsSession::Step step = tls_->handshake();
  tls_->take_output(out_);
  if (step == TlsSession::Step::failed) {
    send_out();  // the alert, if the socket takes it
    return fail(tls_->error());
  }
  if (!out_.empty()) arm_flush();
  if (step == TlsSession::Step::again) return;
  to(State::ready);
  Gone g(this);
  events_.on_connected();
  if (!g.gone && !plain_out_.empty()) arm_flush();
}

void SocketWire::polled(int status, int events) {
  Gone g(this);
  if (status < 0) {
    // libuv stopped the handle: find out what happened by reading (or
    // asking the socket), and watch afresh.
    events = watching_ | UV_READABLE;
    watching_ = 0;
  }
  if (state_ == State::connecting) {
    if ((events & UV_WRITABLE) != 0) connect_done();
  } else {
    if ((events & UV_READABLE) != 0) read_socket();
    if (!g.gone && state_ != State::failed && (events & UV_WRITABLE) != 0) send_out();
    if (!g.gone && state_ != State::failed && status < 0) watch(out_.size() > out_sent_ ? UV_READABLE | UV_WRITABLE : UV_READABLE);
  }
  if (!g.gone) report_failure();
}

// read_socket: one turn's work on the connection — the replies already
// read first, then at most read_budget bytes from the socket, and at most
// reply_budget replies delivered in all. Bytes left in the socket wait for
// the next poll; replies left in the reader, for the backlog handle.
void SocketWire::read_socket() {
  std::size_t budget = reply_budget;
  if (!deliver_replies(budget)) return;
  char buf[16384];
  for (std::size_t taken = 0; taken < read_budget;) {
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n > 0) {
      taken += static_cast<std::size_t>(n);
      if (!take_bytes(buf, static_cast<std::size_t>(n), budget)) return;
      if (static_cast<std::size_t>(n) < sizeof buf) return;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    std::string why = n == 0 ? "server closed the connection" : os_error(errno);
    // A TLS server drops a plain client without a word (or with a reset).
    if (!received_any_ && !address_.tls) why += " before answering (a TLS port? then use rediss://)";
    return fail(std::move(why));
  }
}

// take_bytes hands received bytes to TLS or straight to the reply reader;
// false when the Wire is gone or failed meanwhile, or the turn's replies
// are spent.
bool SocketWire::take_bytes(const char* data, std::size_t n, std::size_t& budget) {
  if (!received_any_ && !address_.tls && looks_like_tls(static_cast<unsigned char>(data[0]))) {
    fail("the server speaks TLS: use rediss://");
    return false;
  }
  received_any_ = true;
  if (tls_ == nullptr) return parse(data, n, budget);
  Gone g(this);
  tls_->feed(data, n);
  if (state_ == State::tls_handshake) {
    handshake_step();
    if (g.gone || state_ != State::ready) return false;
  }
  std::string plain;
  const bool ok = tls_->read(plain);
  tls_->take_output(out_);  // TLS may answer something of its own
  if (out_.size() > out_sent_) arm_flush();
  const bool more = plain.empty() || parse(plain.data(), plain.size(), budget);
  if (g.gone || state_ == State::failed) return false;
  if (!ok) fail(tls_->error());
  return ok && more;
}

// parse holds the bytes to the reply limits, then gives them to hiredis
// and delivers what they complete.
bool SocketWire::parse(const char* data, std::size_t n, std::size_t& budget) {
  std::string why;
  if (!scanner_.scan(std::string_view(data, n), why)) {
    fail(std::move(why));
    return false;
  }
  if (redisReaderFeed(reader_, data, n) != REDIS_OK) {
    fail("out of memory reading a reply");
    return false;
  }
  return deliver_replies(budget);
}

// deliver_replies hands the complete replies read so far to the owner, at
// most `budget` of them; true when none is left, false when the Wire is
// gone or failed, or the rest waits for the next turn (the backlog handle).
bool SocketWire::deliver_replies(std::size_t& budget) {
  Gone g(this);
  while (scanner_.ready() > 0) {
    if (budget == 0) {
      uv_idle_start(backlog_, idle_trampoline);
      return false;
    }
    --budget;
    void* raw = nullptr;
    if (redisReaderGetReply(reader_, &raw) != REDIS_OK || raw == nullptr) {
      fail(std::string("protocol error: ") + (reader_->err != 0 ? reader_->errstr : "a reply hiredis did not read"));
      return false;
    }
    scanner_.take();
    std::unique_ptr<redisReply, void (*)(void*)> reply(static_cast<redisReply*>(raw), freeReplyObject);
    WireReply out;
    std::vector<WireReply> store(count_nested(reply.get()));  // empty (no allocation) unless an array
    std::size_t next = 0;
    convert(reply.get(), out, store, next);
    events_.on_reply(out);  // may destroy this Wire
    if (g.gone || state_ == State::failed) return false;
  }
  uv_idle_stop(backlog_);
  return true;
}

// resumed: a later turn for the replies a budget left in the reader.
void SocketWire::resumed() {
  enter([this] {
    if (state_ == State::ready) return read_socket();
    uv_idle_stop(backlog_);
  });
}

void SocketWire::prepared() {
  uv_prepare_stop(flush_);
  flush_armed_ = false;
  enter([this] { flush(); });
}

// flush: the once-per-turn write. The owner's on_flush runs first, when
// commands are waiting (its vote check joins them).
void SocketWire::flush() {
  if (state_ != State::ready && state_ != State::tls_handshake) return;
  if (state_ == State::ready && (address_.tls ? !plain_out_.empty() : out_.size() > out_sent_)) {
    Gone g(this);
    events_.on_flush();
    if (g.gone || state_ == State::failed) return;
  }
  if (tls_ != nullptr && state_ == State::ready && !plain_out_.empty()) {
    const bool ok = tls_->write(plain_out_);
    plain_out_.clear();
    tls_->take_output(out_);
    if (!ok) return fail(tls_->error());
  }
  send_out();
}

// send_out sends what the socket takes; the rest waits for writability.
bool SocketWire::send_out() {
  while (out_sent_ < out_.size()) {
    const ssize_t n = ::send(fd_, out_.data() + out_sent_, out_.size() - out_sent_, MSG_NOSIGNAL);
    if (n >= 0) {
      out_sent_ += static_cast<std::size_t>(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    fail(os_error(errno));
    return false;
  }
  if (out_sent_ == out_.size()) {
    out_.clear();
    out_sent_ = 0;
    watch(UV_READABLE);
  } else {
    if (out_sent_ > out_.size() / 2) {
      out_.erase(0, out_sent_);
      out_sent_ = 0;
    }
    watch(UV_READABLE | UV_WRITABLE);
  }
  return true;
}

void SocketWire::fail(std::string why) {
  if (state_ == State::failed) return;
  to(State::failed);
  failure_ = std::move(why);
  uv_idle_stop(backlog_);
  lookup_.reset();
  close_socket();
  arm_flush();  // reported by the next turn's flush, unless a loop entry reports it first
}

// report_failure tells the owner once; the last thing any entry does (the
// owner may free the Wire inside it).
void SocketWire::report_failure() {
  if (state_ != State::failed || reported_) return;
  reported_ = true;
  events_.on_lost(failure_);
}

void SocketWire::watch(int events) {
  if (poll_ == nullptr || events == watching_) return;
  watching_ = events;
  events != 0 ? uv_poll_start(poll_, events, poll_trampoline) : uv_poll_stop(poll_);
}

void SocketWire::close_socket() {
  if (poll_ != nullptr) {
    close_and_free(poll_);  // stops watching the fd before it is closed
    poll_ = nullptr;
  }
  watching_ = 0;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void SocketWire::arm_flush() {
  if (flush_armed_) return;
  flush_armed_ = true;
  uv_prepare_start(flush_, prepare_trampoline);
}

}  // namespace redlock::detail
