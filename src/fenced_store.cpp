// fenced_store.cpp — FencedStore: fenced writes to one Redis over hiredis's
// blocking API. Apart from the lock engine: it holds no lock and touches
// no master; a caller's thread waits on its own connection.
#include "redlock/fenced_store.hpp"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <array>
#include <charconv>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "resp.hpp"
#include "scripts.hpp"
#include "sha1.hpp"

namespace redlock {
namespace {

struct FreeContext {
  void operator()(redisContext* c) const noexcept { redisFree(c); }
};
struct FreeReply {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using Context = std::unique_ptr<redisContext, FreeContext>;
using Reply = std::unique_ptr<redisReply, FreeReply>;

// decimal reads a whole reply string as an unsigned integer: digits only,
// no overflow; nullopt for anything else (numbers from a server are
// hostile until checked).
std::optional<std::uint64_t> decimal(std::string_view text) {
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// fence_of reads a fence the store returned: 0 to 2^53, as the script keeps.
std::optional<std::uint64_t> fence_of(const redisReply* r) {
  if (r->type != REDIS_REPLY_STRING) return std::nullopt;
  const auto v = decimal({r->str, r->len});
  if (!v || *v > detail::max_fence) return std::nullopt;
  return v;
}

timeval to_timeval(std::chrono::milliseconds d) {
  return {static_cast<time_t>(d.count() / 1000), static_cast<suseconds_t>(d.count() % 1000 * 1000)};
}

}  // namespace

struct FencedStore::Impl {
  NodeAddress address;
  FencedStoreOptions options;
  Context ctx;  // null after a connection error: the next call connects again

  Error failure(std::string_view what, std::string_view why) const {
    return make_error(Errc::store, "fenced store " + address.display() + ": " + std::string(what) + ": " +
                                       std::string(why));
  }

  // command sends one command (argv: any bytes) and returns its reply, an
  // error reply included; a connection error drops the connection.
  Result<Reply> command(std::string_view what, const std::vector<std::string_view>& argv) {
    if (!ctx) {
      if (auto opened = open(); !opened) return std::move(opened).error();
    }
    std::vector<const char*> data;
    std::vector<std::size_t> sizes;
    for (const auto arg : argv) {
      data.push_back(arg.empty() ? "" : arg.data());  // never a null pointer, even for no bytes
      sizes.push_back(arg.size());
    }
    Reply reply(static_cast<redisReply*>(
        redisCommandArgv(ctx.get(), static_cast<int>(argv.size()), data.data(), sizes.data())));
    if (reply == nullptr) {
      const std::string why = ctx->err != 0 ? ctx->errstr : "no reply";
      ctx.reset();
      return failure(what, why);
    }
    return reply;
  }

  // open connects, then AUTH and SELECT as the address says.
  Result<void> open() {
    const timeval bound = to_timeval(options.timeout);
    Context c(address.kind == NodeAddress::Kind::unix_socket
                  ? redisConnectUnixWithTimeout(address.path.c_str(), bound)
                  : redisConnectWithTimeout(address.host.c_str(), address.port, bound));
    if (c == nullptr) return make_error(Errc::internal, "fenced store " + address.display() + ": out of memory");
    if (c->err != 0) return failure("connect", c->errstr);
    if (redisSetTimeout(c.get(), bound) != REDIS_OK) return failure("connect", "cannot set the reply timeout");
    ctx = std::move(c);
    if (!address.password.empty()) {
      std::vector<std::string_view> auth{"AUTH"};
      if (!address.user.empty()) auth.push_back(address.user);
      auth.push_back(address.password);
      if (auto r = checked_ok("AUTH", auth); !r) return r;
    }
    if (address.db != 0) {
      const std::string db = std::to_string(address.db);
      if (auto r = checked_ok("SELECT", {"SELECT", db}); !r) return r;
    }
    return {};
  }

  // checked_ok sends a handshake command that must answer +OK; anything
  // else leaves no connection behind.
  Result<void> checked_ok(std::string_view what, const std::vector<std::string_view>& argv) {
    auto reply = command(what, argv);
    if (!reply) return std::move(reply).error();
    const redisReply* r = reply->get();
    if (r->type == REDIS_REPLY_STATUS && std::string_view(r->str, r->len) == "OK") return {};
    ctx.reset();
    return failure(what, r->type == REDIS_REPLY_ERROR ? detail::resp::server_text({r->str, r->len}) : "unexpected reply");
  }
};

FencedStore::FencedStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FencedStore::~FencedStore() = default;

Result<std::unique_ptr<FencedStore>> FencedStore::connect(const NodeAddress& store, FencedStoreOptions options) {
  if (store.kind == NodeAddress::Kind::cluster || store.kind == NodeAddress::Kind::sentinel) {
    return make_error(Errc::config, "fenced store " + store.display() +
                                        ": a cluster or sentinel address is not supported; use redis:// or unix://");
  }
  if (store.tls) {
    return make_error(Errc::config, "fenced store " + store.display() +
                                        ": rediss:// is not supported (the store's connection has no TLS); "
                                        "use redis:// or unix://");
  }
  if (options.timeout.count() <= 0) {
    return make_error(Errc::config, "fenced store: timeout must be above 0 ms, got " +
                                        std::to_string(options.timeout.count()) + " ms");
  }
  auto impl = std::make_unique<Impl>(Impl{store, options, nullptr});
  if (auto opened = impl->open(); !opened) return std::move(opened).error();
  return std::unique_ptr<FencedStore>(new FencedStore(std::move(impl)));
}

Result<FencedWrite> FencedStore::write(std::string_view key, std::uint64_t fence, std::string_view value) {
  if (fence == 0 || fence > detail::max_fence) {
    return make_error(Errc::invalid_argument, "fenced write: fence " + std::to_string(fence) +
                                                  " is not an integer from 1 to 2^53 (" +
                                                  std::to_string(detail::max_fence) + "); nothing sent");
  }
  static const std::string sha = detail::sha1_hex(fenced_store_script);
  const std::string fence_text = std::to_string(fence);
  // A timeout or a lost connection after the send leaves the outcome open.
  constexpr std::string_view what = "write (outcome unknown unless the store refused it: read() tells)";
  auto reply = impl_->command(what, {"EVALSHA", sha, "1", key, fence_text, value});
  if (reply && (*reply)->type == REDIS_REPLY_ERROR && std::string_view((*reply)->str, (*reply)->len).starts_with("NOSCRIPT")) {
    reply = impl_->command(what, {"EVAL", fenced_store_script, "1", key, fence_text, value});
  }
  if (!reply) return std::move(reply).error();
  const redisReply* r = reply->get();
  if (r->type == REDIS_REPLY_ERROR) return impl_->failure("write", detail::resp::server_text({r->str, r->len}));
  if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[0]->type == REDIS_REPLY_INTEGER &&
      (r->element[0]->integer == 0 || r->element[0]->integer == 1)) {
    const bool accepted = r->element[0]->integer == 1;
    const auto highest = fence_of(r->element[1]);
    // The script's own promise: accepted at our fence, rejected below it.
    if (highest && (accepted ? *highest == fence : *highest > fence)) return FencedWrite{accepted, *highest};
  }
  return impl_->failure("write", "unexpected reply to the fenced write script (another script under its SHA-1?)");
}

Result<FencedValue> FencedStore::read(std::string_view key) {
  auto reply = impl_->command("read", {"HMGET", key, "fence", "value", "rejected"});
  if (!reply) return std::move(reply).error();
  const redisReply* r = reply->get();
  if (r->type == REDIS_REPLY_ERROR) return impl_->failure("read", detail::resp::server_text({r->str, r->len}));
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 3) return impl_->failure("read", "unexpected reply to HMGET");
  const std::array<const redisReply*, 3> fields{r->element[0], r->element[1], r->element[2]};
  FencedValue v;
  if (fields[0]->type != REDIS_REPLY_NIL) {
    const auto highest = fence_of(fields[0]);
    if (!highest) return impl_->failure("read", "the stored fence is not an integer from 0 to 2^53");
    v.highest = *highest;
  }
  if (fields[1]->type == REDIS_REPLY_STRING) {
    v.value.assign(fields[1]->str, fields[1]->len);
  } else if (fields[1]->type != REDIS_REPLY_NIL) {
    return impl_->failure("read", "the stored value is not a string");
  }
  if (fields[2]->type != REDIS_REPLY_NIL) {
    const auto rejected = fields[2]->type == REDIS_REPLY_STRING ? decimal({fields[2]->str, fields[2]->len})
                                                                 : std::nullopt;
    if (!rejected) return impl_->failure("read", "the stored count of rejected writes is not a whole number");
    v.rejected = *rejected;
  }
  return v;
}

}  // namespace redlock
