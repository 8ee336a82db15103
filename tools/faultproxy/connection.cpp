// connection.cpp — see connection.hpp.
#include "faultproxy/connection.hpp"

#include <cstdio>

#include "faultproxy/listener.hpp"

namespace faultproxy {

Connection::Connection(Listener& listener)
    : listener_(listener), up_(*this, Direction::Up), down_(*this, Direction::Down) {}

Connection* Connection::accept(Listener& listener, uv_stream_t* server) {
  uv_loop_t* loop = server->loop;
  auto* c = new Connection(listener);
  // All four handles are initialised up front so that close() and the
  // free-on-last-close rule are the same on every path.
  uv_tcp_init(loop, &c->client_);
  uv_tcp_init(loop, &c->server_);
  c->up_.init_timer(loop);
  c->down_.init_timer(loop);
  c->client_.data = c;
  c->server_.data = c;
  c->open_handles_ = 4;
  listener.connection_created(c);
  const int rc = uv_accept(server, c->client_stream());
  if (rc != 0) {
    std::fprintf(stderr, "faultproxy: %s: accept: %s\n", listener.name().c_str(), uv_strerror(rc));
    c->close(false, false);
    return c;
  }
  c->start();
  return c;
}

void Connection::start() {
  auto& stats = listener_.stats();
  ++stats.accepted;
  if (listener_.faults().refuse) {
    ++stats.refused;
    close(false, false);
    return;
  }
  uv_tcp_nodelay(&client_, 1);  // a proxy must not add Nagle delay of its own
  up_.start_reading();
  // Under a blackhole the target must not even see the connection (its SYN
  // would be lost too): connect once the blackhole lifts.
  if (!listener_.faults().blackhole) connect_upstream();
}

void Connection::connect_upstream() {
  server_state_ = ServerState::Connecting;
  connect_req_.data = this;
  const int rc = uv_tcp_connect(&connect_req_, &server_, listener_.target().sa(), on_connect);
  if (rc != 0) on_connect(&connect_req_, rc);
}

void Connection::on_connect(uv_connect_t* req, int status) {
  auto* c = static_cast<Connection*>(req->data);
  if (status == UV_ECANCELED || c->closing_) return;
  if (status < 0) {
    // The target refused or is gone: the client sees a reset, as it would
    // connecting to the target directly.
    ++c->listener_.stats().connect_failed;
    c->close(true, false);
    return;
  }
  c->server_state_ = ServerState::Connected;
  uv_tcp_nodelay(&c->server_, 1);
  c->down_.start_reading();
  c->up_.pump();  // bytes the client sent while we were connecting
}

void Connection::faults_changed() {
  if (closing_) return;
  if (server_state_ == ServerState::Idle && !listener_.faults().blackhole) connect_upstream();
  if (closing_) return;
  up_.faults_changed();
  down_.faults_changed();
}

void Connection::on_flow_finished() {
  // Both sides have half-closed and every byte was written: a clean end.
  // With the client gone, the up direction's end is all that was left.
  if (up_.finished() && (down_.finished() || client_gone_)) close(false, false);
}

// A write to d's destination failed (EPIPE, ECONNRESET): that peer is gone.
// The proxy cannot keep half a TCP connection alive, so it does what the
// peer's kernel would have done to a sender: reset the other side.
//
// With keep_in_flight, a client that is gone (d == Down) does not take the
// bytes it already sent with it: see client_left.
void Connection::on_peer_gone(Direction d) {
  if (d == Direction::Down && listener_.keep_in_flight()) {
    client_left();
    return;
  }
  if (d == Direction::Up) close(true, false);
  else close(false, true);
}

// client_left (keep_in_flight): writing to the client failed — it closed
// its socket, and its kernel answered our last write with a RST. In a real
// network the segments it sent before are still on their way and reach the
// server anyway, after anything sent on a newer connection if they were
// slower. So the up direction keeps delivering its queue, delays included,
// then ends with a FIN (the client's own FIN if it was read, else one in
// place of its RST: the server must read every byte first). The down
// direction has nobody to deliver to any more: its bytes are dropped, and
// the pair closes once the up direction passed its FIN on (or the server
// ended its side first).
void Connection::client_left() {
  if (closing_ || client_gone_) return;
  client_gone_ = true;
  down_.discard_queue();
  up_.on_end(End::Eof);  // a no-op when the client's end was read already
  if (up_.finished()) close(false, false);
}

void Connection::on_server_end_after_client_gone() { close(false, false); }

// d's source ended with an error; the reset reached the front of d's queue
// (after the bytes read before it) and goes on to d's destination.
void Connection::on_reset_delivered(Direction d) {
  if (d == Direction::Up) close(false, true);
  else close(true, false);
}

void Connection::close(bool reset_client, bool reset_server) {
  if (closing_) return;
  closing_ = true;
  up_.discard_queue();
  down_.discard_queue();
  listener_.connection_closing(this);
  close_socket(&client_, reset_client);
  close_socket(&server_, reset_server && server_state_ == ServerState::Connected);
  uv_close(reinterpret_cast<uv_handle_t*>(up_.timer()), on_close);
  uv_close(reinterpret_cast<uv_handle_t*>(down_.timer()), on_close);
}

void Connection::close_socket(uv_tcp_t* socket, bool reset) {
  auto* h = reinterpret_cast<uv_handle_t*>(socket);
#if UV_VERSION_HEX >= 0x012000  // uv_tcp_close_reset appeared in libuv 1.32
  // It refuses a socket with a shutdown in progress; a plain close is the
  // best that is left then.
  if (reset && uv_tcp_close_reset(socket, on_close) == 0) return;
#else
  (void)reset;
#endif
  uv_close(h, on_close);
}

void Connection::on_close(uv_handle_t* handle) {
  // Timers carry their Flow in data, sockets the Connection.
  Connection* c = handle->type == UV_TIMER ? &static_cast<Flow*>(handle->data)->owner()
                                           : static_cast<Connection*>(handle->data);
  if (--c->open_handles_ > 0) return;
  Listener& listener = c->listener_;
  delete c;
  listener.connection_freed();  // may free the Listener: touch nothing after
}

}  // namespace faultproxy
