// control_server.cpp — see control_server.hpp.
#include "faultproxy/control_server.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

namespace faultproxy {
namespace {

// A command line longer than this is not a command: answer once and hang
// up rather than buffer without bound.
constexpr std::size_t kMaxLine = 64 * 1024;

struct WriteReq {
  uv_write_t req{};
  std::string data;
};

}  // namespace

struct ControlServer::Session {
  union {
    uv_tcp_t tcp;
    uv_pipe_t pipe;
  } handle{};
  uv_shutdown_t shutdown_req{};
  ControlServer* server = nullptr;
  std::string buffer;  // bytes after the last complete line
  char read_buf[4096];
  bool closing = false;
  uv_stream_t* stream() { return reinterpret_cast<uv_stream_t*>(&handle); }
};

ControlServer::ControlServer(uv_loop_t* loop, Endpoint endpoint, Handler handler)
    : loop_(loop), endpoint_(std::move(endpoint)), handler_(std::move(handler)) {
  if (endpoint_.is_unix) uv_pipe_init(loop_, &listen_handle_.pipe, 0);
  else uv_tcp_init(loop_, &listen_handle_.tcp);
  stream()->data = this;
}

int ControlServer::listen() {
  int rc = 0;
  if (endpoint_.is_unix) {
    // A socket file left by a killed proxy would make bind fail; remove it,
    // but never anything that is not a socket.
    struct stat st{};
    if (::lstat(endpoint_.path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) ::unlink(endpoint_.path.c_str());
    rc = uv_pipe_bind(&listen_handle_.pipe, endpoint_.path.c_str());
    if (rc == 0) address_ = endpoint_.text();  // also: ours to unlink on close
  } else {
    rc = uv_tcp_bind(&listen_handle_.tcp, endpoint_.sa(), 0);
  }
  if (rc == 0) rc = uv_listen(stream(), 64, on_connection);
  if (rc != 0 || endpoint_.is_unix) return rc;
  sockaddr_storage bound{};
  int len = sizeof bound;
  rc = uv_tcp_getsockname(&listen_handle_.tcp, reinterpret_cast<sockaddr*>(&bound), &len);
  if (rc == 0) address_ = endpoint_from_sockaddr(reinterpret_cast<sockaddr*>(&bound)).text();
  return rc;
}

void ControlServer::on_connection(uv_stream_t* server, int status) {
  auto* self = static_cast<ControlServer*>(server->data);
  if (status < 0) {
    std::fprintf(stderr, "faultproxy: control: accept failed: %s\n", uv_strerror(status));
    return;
  }
  auto* s = new Session;
  s->server = self;
  if (self->endpoint_.is_unix) uv_pipe_init(self->loop_, &s->handle.pipe, 0);
  else uv_tcp_init(self->loop_, &s->handle.tcp);
  s->stream()->data = s;
  self->sessions_.insert(s);
  ++self->live_sessions_;
  if (uv_accept(server, s->stream()) != 0 || uv_read_start(s->stream(), on_alloc, on_read) != 0) {
    self->close_session(s);
  }
}

void ControlServer::on_alloc(uv_handle_t* h, std::size_t, uv_buf_t* buf) {
  auto* s = static_cast<Session*>(h->data);
  *buf = uv_buf_init(s->read_buf, sizeof s->read_buf);
}

void ControlServer::on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  auto* s = static_cast<Session*>(stream->data);
  ControlServer* self = s->server;
  if (nread == UV_EOF) {
    self->finish_session(s);  // replies already queued still go out
    return;
  }
  if (nread < 0) {
    self->close_session(s);
    return;
  }
  s->buffer.append(buf->base, static_cast<std::size_t>(nread));
  std::size_t start = 0;
  for (std::size_t nl; !s->closing && (nl = s->buffer.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::string_view line(s->buffer.data() + start, nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    self->reply(*s, self->handler_(line));
  }
  s->buffer.erase(0, start);
  if (!s->closing && s->buffer.size() > kMaxLine) {
    self->reply(*s, "ERR line too long (more than " + std::to_string(kMaxLine) + " bytes without a newline)");
    self->finish_session(s);
  }
}

void ControlServer::reply(Session& s, std::string text) {
  if (s.closing) return;
  auto* w = new WriteReq;
  w->data = std::move(text);
  w->data += '\n';
  w->req.data = w;
  uv_buf_t buf = uv_buf_init(w->data.data(), static_cast<unsigned>(w->data.size()));
  if (uv_write(&w->req, s.stream(), &buf, 1, on_write) != 0) {
    delete w;
    close_session(&s);
  }
}

// finish_session stops reading and shuts down writing (after the queued
// replies), then closes: a client that sends its commands and half-closes
// still gets every reply.
void ControlServer::finish_session(Session* s) {
  if (s->closing) return;
  uv_read_stop(s->stream());
  s->shutdown_req.data = s;
  if (uv_shutdown(&s->shutdown_req, s->stream(), on_shutdown) != 0) close_session(s);
}

void ControlServer::on_write(uv_write_t* req, int) { delete static_cast<WriteReq*>(req->data); }

void ControlServer::on_shutdown(uv_shutdown_t* req, int) {
  auto* s = static_cast<Session*>(req->data);
  s->server->close_session(s);
}

void ControlServer::close_session(Session* s) {
  if (s->closing) return;
  s->closing = true;
  sessions_.erase(s);
  uv_close(reinterpret_cast<uv_handle_t*>(s->stream()), on_session_close);
}

void ControlServer::on_session_close(uv_handle_t* h) {
  auto* s = static_cast<Session*>(h->data);
  ControlServer* self = s->server;
  delete s;
  --self->live_sessions_;
  self->maybe_free();
}

void ControlServer::close() {
  if (closing_) return;
  closing_ = true;
  std::unordered_set<Session*> open = sessions_;
  for (Session* s : open) close_session(s);
  uv_close(reinterpret_cast<uv_handle_t*>(stream()), on_listen_close);
}

void ControlServer::on_listen_close(uv_handle_t* h) {
  auto* self = static_cast<ControlServer*>(h->data);
  if (self->endpoint_.is_unix && !self->address_.empty()) ::unlink(self->endpoint_.path.c_str());
  self->listen_open_ = false;
  self->maybe_free();
}

void ControlServer::maybe_free() {
  if (closing_ && !listen_open_ && live_sessions_ == 0) delete this;
}

}  // namespace faultproxy
