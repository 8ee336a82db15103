// test_certs.cpp — see test_certs.hpp.
#include "test_certs.hpp"

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <stdexcept>

#include "support/process.hpp"

#ifndef REDLOCK_SCRIPTS_LIB
#error "REDLOCK_SCRIPTS_LIB (the path of scripts/lib.sh) must be defined by the build"
#endif

namespace redlock::test {

TestCerts::TestCerts() {
  char tmpl[] = "/tmp/redlock-certs-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("TestCerts: mkdtemp failed");
  dir_ = tmpl;
  support::ProcessOptions o;
  o.argv = {"/bin/bash", "-c",
            "source \"$1\" && make_test_certs \"$2\" && cd \"$2\" && "
            "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout other-ca.key "
            "-out other-ca.crt -days 2 -subj /CN=other-ca >>openssl.log 2>&1",
            "test_certs", REDLOCK_SCRIPTS_LIB, dir_};
  const support::ProcessResult r = support::run(std::move(o), std::chrono::seconds{60});
  if (r.exit_code != 0) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
    throw std::runtime_error("TestCerts: making the certificates failed: " + r.err);
  }
}

TestCerts::~TestCerts() {
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::vector<std::string> TestCerts::server_args(int tls_port, bool client_certs) const {
  return {"--tls-port",      std::to_string(tls_port), "--tls-cert-file",    path("server.crt"),
          "--tls-key-file",  path("server.key"),       "--tls-ca-cert-file", path("ca.crt"),
          "--tls-auth-clients", client_certs ? "yes" : "no"};
}

}  // namespace redlock::test
