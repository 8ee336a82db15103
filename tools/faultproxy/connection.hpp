// connection.hpp — one proxied connection: the accepted client socket, the
// socket to the target, and a Flow for each direction. It owns four uv
// handles (two sockets, two timers) and deletes itself in the close
// callback of the last one; its Listener is kept alive until then.
#pragma once

#include <uv.h>

#include "faultproxy/faults.hpp"
#include "faultproxy/flow.hpp"

namespace faultproxy {

class Listener;

class Connection {
 public:
  // accept takes the next pending connection of server. Always returns a
  // Connection the Listener must track (it may already be closing, e.g.
  // when refuse is on or the accept failed).
  static Connection* accept(Listener& listener, uv_stream_t* server);

  Listener& listener() const { return listener_; }
  bool closing() const { return closing_; }
  // client_gone: keep-in-flight mode only — the client's side is gone, and
  // the pair lives on to deliver what the client had sent (docs/faultproxy.md).
  bool client_gone() const { return client_gone_; }
  bool server_connected() const { return server_state_ == ServerState::Connected; }
  uv_stream_t* client_stream() { return reinterpret_cast<uv_stream_t*>(&client_); }
  uv_stream_t* server_stream() { return reinterpret_cast<uv_stream_t*>(&server_); }
  Flow& flow(Direction d) { return d == Direction::Up ? up_ : down_; }
  Flow& flow_reading(uv_stream_t* s) { return s == client_stream() ? up_ : down_; }

  void faults_changed();  // the Listener's faults were changed
  // close tears the pair down now; reset_* picks RST instead of FIN for that
  // side. Idempotent.
  void close(bool reset_client, bool reset_server);

  // Called by the Flows.
  void on_flow_finished();             // a direction passed its EOF on
  void on_peer_gone(Direction d);      // writing to d's destination failed
  void on_reset_delivered(Direction d);  // d's source was reset; pass it on
  void on_server_end_after_client_gone();  // the target ended its side: nothing more to do

 private:
  enum class ServerState { Idle, Connecting, Connected };

  explicit Connection(Listener& listener);
  ~Connection() = default;
  void start();
  void connect_upstream();
  void close_socket(uv_tcp_t* socket, bool reset);
  void client_left();
  static void on_connect(uv_connect_t* req, int status);
  static void on_close(uv_handle_t* handle);

  Listener& listener_;
  uv_tcp_t client_{};
  uv_tcp_t server_{};
  uv_connect_t connect_req_{};
  Flow up_;
  Flow down_;
  ServerState server_state_ = ServerState::Idle;
  int open_handles_ = 0;
  bool closing_ = false;
  bool client_gone_ = false;
};

}  // namespace faultproxy
