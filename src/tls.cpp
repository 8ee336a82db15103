// tls.cpp — see tls.hpp.
#include "tls.hpp"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <cstring>

namespace redlock::detail {

namespace {

// openssl_reason: the reason of the oldest queued OpenSSL error, in words,
// and clears the queue; `fallback` when there is none.
std::string openssl_reason(std::string_view fallback) {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return std::string(fallback);
  // A system error (a file that cannot be opened) has no reason string in
  // OpenSSL 3: its reason is the errno. The raw form ("error:80000002:
  // system library::…") is never shown: it reads as user:password to the
  // credential mask and tells the user nothing.
  if (ERR_SYSTEM_ERROR(e)) return std::strerror(ERR_GET_REASON(e));
  const char* reason = ERR_reason_error_string(e);
  if (reason != nullptr) return reason;
  char buf[64];
  std::snprintf(buf, sizeof buf, "OpenSSL error %#lx", e);
  return buf;
}

Result<void> load(bool ok, std::string_view field, const std::string& path) {
  if (ok) return {};
  return make_error(Errc::config, std::string(field) + ": " + path + ": " + openssl_reason("cannot load"));
}

bool is_ip(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

}  // namespace

Result<std::unique_ptr<TlsContext>> TlsContext::create(const TlsSettings& settings) {
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) return make_error(Errc::internal, "tls: " + openssl_reason("cannot create a TLS context"));
  std::unique_ptr<TlsContext> out(new TlsContext(ctx, settings));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_ENABLE_PARTIAL_WRITE);
  if (!settings.ca_file.empty() || !settings.ca_dir.empty()) {
    const char* file = settings.ca_file.empty() ? nullptr : settings.ca_file.c_str();
    const char* dir = settings.ca_dir.empty() ? nullptr : settings.ca_dir.c_str();
    const bool ok = SSL_CTX_load_verify_locations(ctx, file, dir) == 1;
    if (Result<void> r = load(ok, file != nullptr ? "tls_ca_file" : "tls_ca_dir",
                              file != nullptr ? settings.ca_file : settings.ca_dir);
        !r) {
      return r.error();
    }
  } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
    ERR_clear_error();  // no system store: verification fails later, naming the chain
  }
  if (!settings.cert_file.empty()) {
    if (Result<void> r = load(SSL_CTX_use_certificate_chain_file(ctx, settings.cert_file.c_str()) == 1,
                              "tls_cert_file", settings.cert_file);
        !r) {
      return r.error();
    }
    if (Result<void> r = load(SSL_CTX_use_PrivateKey_file(ctx, settings.key_file.c_str(), SSL_FILETYPE_PEM) == 1,
                              "tls_key_file", settings.key_file);
        !r) {
      return r.error();
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
      return make_error(Errc::config, "tls_key_file: " + settings.key_file + " does not match tls_cert_file " +
                                          settings.cert_file);
    }
  }
  SSL_CTX_set_verify(ctx, settings.verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
  return out;
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

std::unique_ptr<TlsSession> TlsContext::session(const std::string& host, std::string& why) const {
  ERR_clear_error();
  SSL* ssl = SSL_new(ctx_);
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  if (ssl == nullptr || in == nullptr || out == nullptr) {
    why = "tls: " + openssl_reason("out of memory");
    BIO_free(in);
    BIO_free(out);
    SSL_free(ssl);
    return nullptr;
  }
  BIO_set_mem_eof_return(in, -1);  // an empty input BIO means "more to come"
  SSL_set_bio(ssl, in, out);        // the SSL owns both BIOs now
  auto session = std::make_unique<TlsSession>(ssl);
  SSL_set_connect_state(ssl);
  const std::string& name = settings_.server_name.empty() ? host : settings_.server_name;
  if (!is_ip(name)) SSL_set_tlsext_host_name(ssl, name.c_str());
  if (settings_.verify) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    const bool ok = is_ip(name) ? X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str()) == 1
                                : X509_VERIFY_PARAM_set1_host(param, name.c_str(), name.size()) == 1;
    if (!ok) {
      why = "tls: cannot verify the name " + name;
      return nullptr;
    }
  }
  return session;
}

TlsSession::~TlsSession() { SSL_free(ssl_); }

bool TlsSession::failed(int rc, std::string_view doing) {
  const int err = SSL_get_error(ssl_, rc);
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return false;
  if (err == SSL_ERROR_ZERO_RETURN) {
    error_ = "the server closed the TLS session";
    return true;
  }
  const long verify = SSL_get_verify_result(ssl_);
  const unsigned long e = ERR_peek_error();
  const int reason = ERR_GET_REASON(e);
  if (verify != X509_V_OK) {
    error_ = std::string("TLS certificate verify failed: ") + X509_verify_cert_error_string(verify);
  } else if (reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_PACKET_LENGTH_TOO_LONG ||
             reason == SSL_R_UNKNOWN_PROTOCOL) {
    error_ = "TLS " + std::string(doing) + " failed: the server does not speak TLS (a plain redis:// port?)";
  } else if (reason == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED || reason == SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE) {
    error_ = "TLS " + std::string(doing) + " failed: the server asked for a client certificate (" +
             openssl_reason("handshake failure") + "); set tls_cert_file and tls_key_file";
  } else {
    error_ = "TLS " + std::string(doing) + " failed: " + openssl_reason(err == SSL_ERROR_SYSCALL ? "unexpected end of stream" : "protocol error");
  }
  ERR_clear_error();
  return true;
}

TlsSession::Step TlsSession::handshake() {
  const int rc = SSL_do_handshake(ssl_);
  if (rc == 1) return Step::done;
  return failed(rc, "handshake") ? Step::failed : Step::again;
}

void TlsSession::feed(const char* data, std::size_t n) { BIO_write(SSL_get_rbio(ssl_), data, static_cast<int>(n)); }

bool TlsSession::read(std::string& plain) {
  char buf[16384];
  for (;;) {
    const int n = SSL_read(ssl_, buf, sizeof buf);
    if (n > 0) {
      plain.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    return !failed(n, "read");
  }
}

bool TlsSession::write(std::string_view plain) {
  while (!plain.empty()) {
    const int n = SSL_write(ssl_, plain.data(), static_cast<int>(plain.size()));
    if (n <= 0) {
      // Memory BIOs never block: "want" here means a TLS state we do not
      // expect after the handshake.
      if (!failed(n, "write")) error_ = "TLS write failed: the session wants to renegotiate";
      return false;
    }
    plain.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

void TlsSession::take_output(std::string& out) {
  BIO* bio = SSL_get_wbio(ssl_);
  const std::size_t pending = BIO_ctrl_pending(bio);
  if (pending == 0) return;
  const std::size_t old = out.size();
  out.resize(old + pending);
  const int n = BIO_read(bio, out.data() + old, static_cast<int>(pending));
  out.resize(old + static_cast<std::size_t>(n > 0 ? n : 0));
}

}  // namespace redlock::detail
