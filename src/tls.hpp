// tls.hpp — TLS for the connections to the masters, with OpenSSL through
// memory BIOs: the socket stays ours (src/socket_wire.hpp); a TlsSession
// only turns received records into plaintext and plaintext into records.
//
// The TlsContext is built once per client from Config::tls: the CA (file
// or directory, else the system's), the client certificate and key for
// mutual TLS, the name to verify, and whether to verify at all. TLS 1.2 is
// the floor. Verification checks the chain and that the certificate names
// the host (or tls_server_name, or the IP address for a numeric host).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "redlock/config.hpp"
#include "redlock/error.hpp"

struct ssl_ctx_st;
struct ssl_st;

namespace redlock::detail {

class TlsSession;

class TlsContext {
 public:
  // create loads the files `settings` names; Errc::config names the field,
  // the file and OpenSSL's reason ("tls_cert_file: /x.pem: no such file").
  static Result<std::unique_ptr<TlsContext>> create(const TlsSettings& settings);
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;
  ~TlsContext();

  // session starts the client side of one connection to `host`; null and
  // `why` when OpenSSL cannot (out of memory).
  std::unique_ptr<TlsSession> session(const std::string& host, std::string& why) const;

 private:
  TlsContext(ssl_ctx_st* ctx, TlsSettings settings) : ctx_(ctx), settings_(std::move(settings)) {}
  ssl_ctx_st* ctx_;
  TlsSettings settings_;
};

class TlsSession {
 public:
  enum class Step : std::uint8_t { done, again, failed };
  explicit TlsSession(ssl_st* ssl) noexcept : ssl_(ssl) {}
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;
  ~TlsSession();

  // handshake advances the handshake with what was fed so far: done once
  // the server is verified, again while it needs more bytes, failed with
  // error() naming why (certificate verify failed: …, the server does not
  // speak TLS, the server asked for a client certificate, …).
  Step handshake();
  // feed hands received bytes to TLS.
  void feed(const char* data, std::size_t n);
  // read appends the plaintext that the fed records hold; false with
  // error() on a TLS error or when the server closed the TLS session.
  bool read(std::string& plain);
  // write encrypts `plain` (false with error() on failure).
  bool write(std::string_view plain);
  // take_output appends the records waiting to be sent (handshake,
  // encrypted commands, alerts) to `out`.
  void take_output(std::string& out);
  const std::string& error() const noexcept { return error_; }

 private:
  bool failed(int rc, std::string_view doing);
  ssl_st* ssl_;
  std::string error_;
};

}  // namespace redlock::detail
