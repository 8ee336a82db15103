// control_server.hpp — the control socket (TCP on loopback, or a unix
// socket): splits what each client sends into lines, hands every line to a
// handler and writes its reply back followed by "\n". Several control
// clients may be connected at once; replies keep the order of the lines.
#pragma once

#include <uv.h>

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_set>

#include "faultproxy/address.hpp"

namespace faultproxy {

class ControlServer {
 public:
  using Handler = std::function<std::string(std::string_view line)>;

  // Created with new; frees itself after close() once every handle closed.
  ControlServer(uv_loop_t* loop, Endpoint endpoint, Handler handler);
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // listen: 0 or a uv error code. address() is then the bound address
  // ("127.0.0.1:PORT" with the real port, or "unix:PATH").
  int listen();
  const std::string& address() const { return address_; }
  void close();  // closes the listening socket and every session

 private:
  struct Session;
  ~ControlServer() = default;
  uv_stream_t* stream() { return reinterpret_cast<uv_stream_t*>(&listen_handle_); }
  void reply(Session& s, std::string text);
  void finish_session(Session* s);
  void close_session(Session* s);
  void maybe_free();
  static void on_connection(uv_stream_t* server, int status);
  static void on_alloc(uv_handle_t* h, std::size_t suggested, uv_buf_t* buf);
  static void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
  static void on_write(uv_write_t* req, int status);
  static void on_shutdown(uv_shutdown_t* req, int status);
  static void on_session_close(uv_handle_t* h);
  static void on_listen_close(uv_handle_t* h);

  union {
    uv_tcp_t tcp;
    uv_pipe_t pipe;
  } listen_handle_{};
  uv_loop_t* loop_;
  Endpoint endpoint_;
  Handler handler_;
  std::string address_;
  std::unordered_set<Session*> sessions_;  // not yet closed
  std::size_t live_sessions_ = 0;          // not yet freed
  bool listen_open_ = true;
  bool closing_ = false;
};

}  // namespace faultproxy
