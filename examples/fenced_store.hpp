// fenced_store.hpp — a resource that checks fencing tokens.
//
// The other half of fencing: the protected resource itself remembers the
// highest fence it has accepted and refuses any write that carries a lower
// one. Here the resource is a hash on a separate redis (not one of the lock
// masters): {fence, value}, changed only by a Lua check-and-set, so the
// check and the write are one atomic step. A holder that was paused past its
// lease's validity (a GC pause, SIGSTOP) and then writes with its old fence
// is rejected as soon as a later holder has written with a higher one.
//
// The hash also counts the writes it refused ({rejected}), so a demo can
// show how many stale writes fencing stopped.
//
// Header-only, on hiredis's blocking API; used by the tests and examples.
#pragma once

#include <hiredis/hiredis.h>

#include <cstdint>
#include <memory>
#include <string>

namespace redlock::examples {

class FencedStore {
 public:
  // Outcome of one write: accepted, or rejected because `highest` (the
  // highest fence accepted so far) is above ours; `error` is set (and
  // nothing else means anything) when the store could not be asked.
  struct Write {
    bool accepted = false;
    std::uint64_t highest = 0;
    std::string value;  // the value now (after an accepted write: ours)
    std::uint64_t rejected = 0;  // read() only: stale writes refused so far
    std::string error;
  };

  // connect opens a connection to the store's redis (loopback host, port)
  // for the hash `key`; check error() afterwards.
  FencedStore(const std::string& host, int port, std::string key) : key_(std::move(key)) {
    const timeval bound{2, 0};
    ctx_.reset(redisConnectWithTimeout(host.c_str(), port, bound));
    if (ctx_ == nullptr) {
      error_ = "cannot allocate a redis context";
    } else if (ctx_->err != 0) {
      error_ = std::string("cannot connect to the fenced store ") + host + ":" + std::to_string(port) + ": " +
               ctx_->errstr;
    } else {
      redisSetTimeout(ctx_.get(), bound);
    }
  }

  const std::string& error() const noexcept { return error_; }

  // write sets the value if `fence` is at least the highest accepted one.
  Write write(std::uint64_t fence, const std::string& value) { return run(fence, "set", value); }
  // increment adds 1 to the (integer) value under the same rule.
  Write increment(std::uint64_t fence) { return run(fence, "incr", ""); }

  // read returns {highest fence, value, rejected} (empty value and zeros
  // when never written).
  Write read() {
    Write w;
    redisReply* r = command("HMGET %s fence value rejected", key_.c_str());
    if (r == nullptr) return failed(w);
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 3) {
      if (r->element[0]->type == REDIS_REPLY_STRING) w.highest = std::stoull(r->element[0]->str);
      if (r->element[1]->type == REDIS_REPLY_STRING) w.value.assign(r->element[1]->str, r->element[1]->len);
      if (r->element[2]->type == REDIS_REPLY_STRING) w.rejected = std::stoull(r->element[2]->str);
      w.accepted = true;
    } else {
      w.error = "unexpected reply to HMGET";
    }
    freeReplyObject(r);
    return w;
  }

 private:
  struct Free {
    void operator()(redisContext* c) const { redisFree(c); }
  };

  // KEYS[1] the hash; ARGV[1] fence, ARGV[2] "set" | "incr", ARGV[3] value.
  // A fence below the highest accepted one → {0, highest, value} (and the
  // refusal is counted in 'rejected'); else the write happens →
  // {1, fence, new value}. Values travel as strings.
  static constexpr const char* script = R"lua(
local highest = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
local fence = tonumber(ARGV[1])
if fence < highest then
  redis.call('HINCRBY', KEYS[1], 'rejected', 1)
  return {0, highest, redis.call('HGET', KEYS[1], 'value') or ''}
end
redis.call('HSET', KEYS[1], 'fence', ARGV[1])
if ARGV[2] == 'incr' then
  return {1, fence, tostring(redis.call('HINCRBY', KEYS[1], 'value', 1))}
end
redis.call('HSET', KEYS[1], 'value', ARGV[3])
return {1, fence, ARGV[3]}
)lua";

  Write run(std::uint64_t fence, const char* op, const std::string& value) {
    Write w;
    const std::string f = std::to_string(fence);
    redisReply* r = command("EVAL %s 1 %s %s %s %b", script, key_.c_str(), f.c_str(), op, value.data(), value.size());
    if (r == nullptr) return failed(w);
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 3) {
      w.accepted = r->element[0]->integer == 1;
      w.highest = static_cast<std::uint64_t>(r->element[1]->integer);
      if (r->element[2]->type == REDIS_REPLY_STRING) w.value.assign(r->element[2]->str, r->element[2]->len);
    } else {
      w.error = r->type == REDIS_REPLY_ERROR ? std::string(r->str, r->len) : "unexpected reply to the fenced write";
    }
    freeReplyObject(r);
    return w;
  }

  template <class... Args>
  redisReply* command(const char* format, Args... args) {
    if (ctx_ == nullptr || !error_.empty()) return nullptr;
    return static_cast<redisReply*>(redisCommand(ctx_.get(), format, args...));
  }

  Write failed(Write w) const {
    w.error = !error_.empty() ? error_
              : ctx_ != nullptr && ctx_->err != 0 ? std::string("fenced store: ") + ctx_->errstr
                                                   : "fenced store: no reply";
    return w;
  }

  std::unique_ptr<redisContext, Free> ctx_;
  std::string key_;
  std::string error_;
};

}  // namespace redlock::examples
