// hiredis_wire.cpp — the production Wire. See hiredis_wire.hpp.
#include "hiredis_wire.hpp"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <cctype>
#include <charconv>
#include <vector>

#include "poll_adapter.hpp"

namespace redlock::detail {

namespace {

// hiredis says "Connection refused"; outcomes read "connection refused".
std::string lowercase_first(const char* text) {
  std::string s = text != nullptr && *text != '\0' ? text : "connection error";
  s[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(s[0])));
  return s;
}

// The owner of a context is in its data pointer; null once the Wire is
// gone or has reported on_lost.
HiredisWire* owner(const redisAsyncContext* ac) { return static_cast<HiredisWire*>(ac->data); }

void reply_trampoline(redisAsyncContext* ac, void* reply, void*) {
  // A null reply: hiredis is freeing the context (its owner reports that).
  if (HiredisWire* w = owner(ac); w != nullptr && reply != nullptr) w->replied(reply);
}

void connect_trampoline(const redisAsyncContext* ac, int status) {
  HiredisWire* w = owner(ac);
  if (w == nullptr) return;
  if (status == REDIS_OK) {
    w->connected();
  } else {
    w->lost(lowercase_first(ac->errstr));  // hiredis frees the context itself
  }
}

void disconnect_trampoline(const redisAsyncContext* ac, int status) {
  if (HiredisWire* w = owner(ac)) w->lost(status == REDIS_OK ? "disconnected" : lowercase_first(ac->errstr));
}

void before_write_trampoline(void*, redisAsyncContext* ac) {
  if (HiredisWire* w = owner(ac)) w->flushing();
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

// append_bulk appends one RESP bulk string: $<len>\r\n<bytes>\r\n.
void append_bulk(std::string& out, std::string_view arg) {
  char digits[24];
  out += '$';
  out.append(digits, std::to_chars(digits, digits + sizeof digits, arg.size()).ptr);
  out += "\r\n";
  out += arg;
  out += "\r\n";
}

}  // namespace

HiredisWire::HiredisWire(uv_loop_t* loop, Runtime& runtime, const NodeAddress& address, WireEvents& events)
    : events_(events) {
  redisAsyncContext* ac = address.kind == NodeAddress::Kind::tcp
                              ? redisAsyncConnect(address.host.c_str(), address.port)
                              : redisAsyncConnectUnix(address.path.c_str());
  if (ac == nullptr) {
    failure_ = "out of memory creating the connection";
  } else if (ac->err != 0) {
    failure_ = lowercase_first(ac->errstr);
    redisAsyncFree(ac);
  } else if (!attach_to_loop(ac, loop, before_write_trampoline, nullptr)) {
    failure_ = "cannot watch the socket";
    redisAsyncFree(ac);
  } else {
    ac->data = this;
    ac_ = ac;
    redisAsyncSetConnectCallback(ac, connect_trampoline);
    redisAsyncSetDisconnectCallback(ac, disconnect_trampoline);
    return;
  }
  // Failed at once: on_lost comes on a later loop turn, never inside connect.
  failure_timer_ = runtime.timer([this] { events_.on_lost(failure_); });
  failure_timer_->start(std::chrono::milliseconds{0});
}

HiredisWire::~HiredisWire() {
  if (ac_ == nullptr) return;
  ac_->data = nullptr;  // its remaining callbacks (null replies) find no owner
  redisAsyncFree(ac_);  // deferred by hiredis while inside one of its callbacks
}

bool HiredisWire::write(std::span<const std::string_view> argv) {
  if (failure_timer_ != nullptr) return true;  // dropped with the connection: on_lost follows
  if (ac_ == nullptr) return false;
  buffer_.clear();
  char digits[24];
  buffer_ += '*';
  buffer_.append(digits, std::to_chars(digits, digits + sizeof digits, argv.size()).ptr);
  buffer_ += "\r\n";
  for (std::string_view arg : argv) append_bulk(buffer_, arg);
  return redisAsyncFormattedCommand(ac_, reply_trampoline, nullptr, buffer_.data(), buffer_.size()) == REDIS_OK;
}

void HiredisWire::read_now() {
  // hiredis treats EAGAIN as "nothing yet".
  if (ac_ != nullptr) redisAsyncHandleRead(ac_);
}

void HiredisWire::replied(const void* reply) {
  const auto* r = static_cast<const redisReply*>(reply);
  WireReply out;
  std::vector<WireReply> store(count_nested(r));  // empty (no allocation) unless an array
  std::size_t next = 0;
  convert(r, out, store, next);
  events_.on_reply(out);  // may destroy this Wire
}

// lost: hiredis reported the connection gone and frees the context itself.
void HiredisWire::lost(std::string why) {
  ac_->data = nullptr;
  ac_ = nullptr;
  events_.on_lost(why);  // may destroy this Wire
}

}  // namespace redlock::detail
