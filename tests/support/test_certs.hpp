// test_certs.hpp — throw-away TLS certificates for a test: a CA, and signed
// by it a server certificate for 127.0.0.1 and localhost and a client
// certificate, made by scripts/lib.sh's make_test_certs (the one recipe,
// shared with the benchmark), plus a second CA that signed nothing, in a
// temp dir removed with the object.
#pragma once

#include <string>
#include <vector>

namespace redlock::test {

class TestCerts {
 public:
  TestCerts();  // throws std::runtime_error with openssl's output on failure
  ~TestCerts();
  TestCerts(const TestCerts&) = delete;
  TestCerts& operator=(const TestCerts&) = delete;

  // path: ca.crt, ca.key, server.crt, server.key, client.crt, client.key,
  // other-ca.crt (a CA nobody trusts).
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  // server_args: redis-server arguments for a TLS port with these
  // certificates; `client_certs` asks clients for theirs (mutual TLS).
  std::vector<std::string> server_args(int tls_port, bool client_certs) const;

 private:
  std::string dir_;
};

}  // namespace redlock::test
