// listener.cpp — see listener.hpp.
#include "faultproxy/listener.hpp"

#include <cstdio>
#include <vector>

#include "faultproxy/connection.hpp"

namespace faultproxy {
namespace {

constexpr int kBacklog = 1024;  // hundreds of clients may connect at once

}  // namespace

Listener::Listener(uv_loop_t* loop, std::size_t index, Endpoint listen, Endpoint target,
                   std::size_t max_queue, std::uint64_t seed, bool keep_in_flight)
    : index_(index),
      listen_(std::move(listen)),
      target_(std::move(target)),
      name_(listen_.text()),
      max_queue_(max_queue),
      keep_in_flight_(keep_in_flight),
      // One stream per listener, derived from the seed: a run can be
      // replayed with --seed, and listeners do not share jitter draws.
      rng_(seed ^ (0x9E3779B97F4A7C15ULL * (index + 1))) {
  uv_tcp_init(loop, &server_);
  server_.data = this;
}

int Listener::listen() {
  int rc = uv_tcp_bind(&server_, listen_.sa(), 0);
  if (rc == 0) rc = uv_listen(reinterpret_cast<uv_stream_t*>(&server_), kBacklog, on_connection);
  if (rc != 0) return rc;
  sockaddr_storage bound{};
  int len = sizeof bound;
  rc = uv_tcp_getsockname(&server_, reinterpret_cast<sockaddr*>(&bound), &len);
  if (rc != 0) return rc;
  name_ = endpoint_from_sockaddr(reinterpret_cast<sockaddr*>(&bound)).text();
  return 0;
}

void Listener::on_connection(uv_stream_t* server, int status) {
  auto* self = static_cast<Listener*>(server->data);
  if (status < 0) {
    // EMFILE and the like: report and keep serving; the client retries.
    std::fprintf(stderr, "faultproxy: %s: accept failed: %s\n", self->name_.c_str(), uv_strerror(status));
    return;
  }
  if (self->closing_) return;
  Connection::accept(*self, server);
}

void Listener::set_faults(const Faults& f) {
  faults_ = f;
  // Copy first: a connection may close (and leave active_) while reacting.
  std::vector<Connection*> conns(active_.begin(), active_.end());
  for (Connection* c : conns) {
    if (!c->closing()) c->faults_changed();
  }
}

void Listener::reset_connections() {
  std::vector<Connection*> conns(active_.begin(), active_.end());
  stats_.reset += conns.size();
  for (Connection* c : conns) c->close(true, true);
}

void Listener::connection_created(Connection* c) {
  ++live_connections_;
  active_.insert(c);
}

void Listener::connection_closing(Connection* c) {
  active_.erase(c);
  ++stats_.closed;
}

void Listener::connection_freed() {
  --live_connections_;
  maybe_free();
}

void Listener::close() {
  if (closing_) return;
  closing_ = true;
  std::vector<Connection*> conns(active_.begin(), active_.end());
  for (Connection* c : conns) c->close(false, false);
  uv_close(reinterpret_cast<uv_handle_t*>(&server_), on_close);
}

void Listener::on_close(uv_handle_t* handle) {
  auto* self = static_cast<Listener*>(handle->data);
  self->handle_closed_ = true;
  self->maybe_free();
}

void Listener::maybe_free() {
  if (handle_closed_ && live_connections_ == 0) delete this;
}

nlohmann::json Listener::status() const {
  std::size_t queued[2] = {0, 0};
  std::size_t held[2] = {0, 0};
  for (Connection* c : active_) {
    for (Direction d : {Direction::Up, Direction::Down}) {
      const int i = d == Direction::Up ? 0 : 1;
      queued[i] += c->flow(d).queued_bytes();
      held[i] += c->flow(d).held_bytes();
    }
  }
  auto dir = [&](const DirectionStats& s, int i) {
    return nlohmann::json{{"forwarded", s.forwarded}, {"dropped", s.dropped}, {"queued", queued[i]},
                          {"held", held[i]}, {"peak_queued", s.peak_queued}};
  };
  return {{"index", index_},
          {"name", name_},
          {"faults", faults_.to_json()},
          {"connections",
           {{"accepted", stats_.accepted},
            {"active", active_.size()},
            {"refused", stats_.refused},
            {"reset", stats_.reset},
            {"connect_failed", stats_.connect_failed},
            {"closed", stats_.closed}}},
          {"up", dir(stats_.up, 0)},
          {"down", dir(stats_.down, 1)}};
}

}  // namespace faultproxy
