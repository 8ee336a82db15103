// sentinel_watch.cpp — where a sentinel member's primary is. See
// sentinel_watch.hpp.
#include "sentinel_watch.hpp"

#include <array>
#include <charconv>

#include "resp.hpp"

namespace redlock::detail {

namespace {

// host_ok: a host a sentinel may name: 1–255 bytes, no blank or control
// byte (it is dialled and quoted in messages).
bool host_ok(std::string_view host) noexcept {
  if (host.empty() || host.size() > 255) return false;
  for (unsigned char c : host) {
    if (c <= 0x20 || c == 0x7f) return false;
  }
  return true;
}

std::optional<int> port_of(std::string_view text) noexcept {
  int port = 0;
  if (text.empty() || text.size() > 5) return std::nullopt;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (ec != std::errc{} || end != text.data() + text.size() || port < 1 || port > 65535) return std::nullopt;
  return port;
}

}  // namespace

NodeAddress serving_address(const NodeAddress& member) {
  if (member.kind == NodeAddress::Kind::cluster) {
    // A cluster member's wake-up subscriber: a PUBLISH reaches every node
    // of a cluster, so its first seed hears every shard's releases.
    NodeAddress seed = member;
    seed.kind = NodeAddress::Kind::tcp;
    seed.host = member.seeds.empty() ? std::string() : member.seeds.front().host;
    seed.port = member.seeds.empty() ? 0 : member.seeds.front().port;
    seed.seeds.clear();
    return seed;
  }
  if (member.kind != NodeAddress::Kind::sentinel) return member;
  NodeAddress serving = member;
  serving.kind = NodeAddress::Kind::tcp;
  serving.host.clear();
  serving.port = 0;
  serving.seeds.clear();
  serving.sentinel_user.clear();
  serving.sentinel_password.clear();
  return serving;
}

std::optional<Endpoint> parse_switch_master(std::string_view payload, std::string_view name) {
  std::array<std::string_view, 5> field;
  std::size_t n = 0;
  while (!payload.empty()) {
    const std::size_t space = payload.find(' ');
    if (n == field.size()) return std::nullopt;
    field[n++] = payload.substr(0, space);
    payload = space == std::string_view::npos ? std::string_view() : payload.substr(space + 1);
  }
  if (n != field.size() || field[0] != name || !host_ok(field[3])) return std::nullopt;
  const std::optional<int> port = port_of(field[4]);
  if (!port) return std::nullopt;
  return Endpoint{std::string(field[3]), *port};
}

std::optional<Endpoint> parse_master_addr(const WireReply& reply, std::string& why) {
  if (reply.type == WireReply::Type::nil) {
    why = "does not monitor that name";
    return std::nullopt;
  }
  if (reply.type == WireReply::Type::error) {
    why = "answered " + resp::server_text(reply.str);
    return std::nullopt;
  }
  if (reply.type != WireReply::Type::array || reply.elements.size() != 2 ||
      reply.elements[0].type != WireReply::Type::string || reply.elements[1].type != WireReply::Type::string) {
    why = "answered get-master-addr-by-name with something else than [host, port]";
    return std::nullopt;
  }
  const std::optional<int> port = port_of(reply.elements[1].str);
  if (!host_ok(reply.elements[0].str) || !port) {
    why = "named a primary that is no host:port (" + resp::server_text(reply.elements[0].str) + ":" +
          resp::server_text(reply.elements[1].str) + ")";
    return std::nullopt;
  }
  return Endpoint{std::string(reply.elements[0].str), *port};
}

SentinelWatch::SentinelWatch(Runtime& runtime, WireFactory& wires, const NodeAddress& member, const Options& options,
                             std::function<void(const Endpoint&)> on_named, std::function<void()> on_closed)
    : name_(member.master_name),
      seeds_(member.seeds),
      on_named_(std::move(on_named)),
      conn_(runtime, wires, sentinel_, options, *this, std::move(on_closed)) {
  sentinel_.kind = NodeAddress::Kind::tcp;
  sentinel_.user = member.sentinel_user;
  sentinel_.password = member.sentinel_password;
  sentinel_.tls = member.tls;
  if (!seeds_.empty()) {
    sentinel_.host = seeds_[0].host;
    sentinel_.port = seeds_[0].port;
  }
}

void SentinelWatch::start() {
  if (!seeds_.empty()) conn_.start();
}

bool SentinelWatch::on_open() {
  phase_ = Phase::asking;
  const std::array<std::string_view, 3> ask{"SENTINEL", "get-master-addr-by-name", name_};
  const std::array<std::string_view, 2> subscribe{"SUBSCRIBE", "+switch-master"};
  return conn_.write(ask) && conn_.write(subscribe);
}

void SentinelWatch::on_reply(const WireReply& reply) {
  switch (phase_) {
    case Phase::asking: {
      std::string why;
      const std::optional<Endpoint> primary = parse_master_addr(reply, why);
      if (!primary) return conn_.drop(why);
      phase_ = Phase::subscribing;
      return named(*primary);
    }
    case Phase::subscribing:
    case Phase::listening: {
      const bool pushed = reply.type == WireReply::Type::array && reply.elements.size() == 3 &&
                          reply.elements[0].type == WireReply::Type::string &&
                          reply.elements[1].str == "+switch-master";
      const std::string_view kind = pushed ? reply.elements[0].str : std::string_view();
      if (phase_ == Phase::subscribing && kind == "subscribe") {
        phase_ = Phase::listening;
        return conn_.ready();
      }
      if (phase_ == Phase::listening && kind == "message") {
        // Another name's switch, or a payload of another shape: not ours.
        if (auto primary = parse_switch_master(reply.elements[2].str, name_)) named(*primary);
        return;
      }
      return conn_.drop("unexpected reply on the +switch-master subscription; reconnecting");
    }
  }
}

// on_down: the next connection asks the next sentinel.
void SentinelWatch::on_down(std::string_view why) {
  last_error_ = "sentinel " + sentinel_.display() + ": " + std::string(why);
  phase_ = Phase::asking;
  if (seeds_.empty()) return;
  next_ = (next_ + 1) % seeds_.size();
  sentinel_.host = seeds_[next_].host;
  sentinel_.port = seeds_[next_].port;
}

void SentinelWatch::refresh(std::string_view why) {
  conn_.redial("asking the next sentinel: " + std::string(why));
}

void SentinelWatch::close() { conn_.close(std::chrono::milliseconds{0}); }

void SentinelWatch::named(const Endpoint& primary) {
  primary_ = primary;
  on_named_(primary);
}

}  // namespace redlock::detail
