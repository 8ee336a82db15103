// test_tls.cpp — rediss:// against real redis-servers with a TLS port:
// certificates made for the test (tests/support/test_certs.hpp: a CA, a
// server certificate for 127.0.0.1 and localhost, a client certificate,
// and a second CA that signed nothing we trust); TLS masters, mutual TLS, TLS and plain mixed,
// and each way a TLS connection can be wrong, with its error in words.
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <cstdlib>

#include "helpers.hpp"
#include "test_certs.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;

namespace {

using Certs = TestCerts;

// TlsServer — a redis-server with a TLS port beside its plain one (the
// fixture administers it over the plain port; the clients under test use
// the TLS one).
struct TlsServer {
  int tls_port;
  RedisServer server;

  TlsServer(const Certs& certs, bool client_certs)
      : tls_port(free_port()),
        server(options(certs, tls_port, client_certs)) {}

  static ServerOptions options(const Certs& certs, int port, bool client_certs) {
    ServerOptions so;
    so.extra_args = certs.server_args(port, client_certs);
    return so;
  }
  std::string url(const std::string& host = "127.0.0.1") const {
    return "rediss://" + host + ":" + std::to_string(tls_port);
  }
};

std::unique_ptr<Client> tls_client(const std::vector<std::string>& urls, const TlsSettings& tls) {
  // A TLS handshake costs a few ms of CPU per master: generous deadlines,
  // so a loaded test machine does not turn it into a timeout.
  Config config = config_for(urls, [](Options& o) {
    o.connect_timeout = 2000ms;
    o.node_timeout = 500ms;
    o.stall_timeout = 2000ms;
  });
  config.tls = tls;
  auto client = Client::create(std::move(config));
  if (!client) throw std::runtime_error(client.error().to_string());
  return std::move(*client);
}

TlsSettings trusting(const Certs& certs) {
  TlsSettings tls;
  tls.ca_file = certs.path("ca.crt");
  return tls;
}

// refusal: the error of the one node of `client` once its connection has
// failed (the node report names the last failure), and proof that no lock
// can be taken through it.
std::string refusal(Client& client, const std::string& expected) {
  std::string why;
  eventually(
      [&] {
        auto report = client.nodes();
        why = report.ok() && !report->nodes.empty() ? report->nodes[0].error : std::string();
        return why.find(expected) != std::string::npos;
      },
      5000ms);
  auto r = client.try_acquire("tls-refused");
  CHECK_FALSE(r.ok());
  return why;
}

}  // namespace

TEST_CASE("TLS: five masters over rediss://, the whole lock cycle") {
  Certs certs;
  std::vector<std::unique_ptr<TlsServer>> servers;
  std::vector<std::string> urls;
  for (int i = 0; i < 5; ++i) {
    servers.push_back(std::make_unique<TlsServer>(certs, false));
    urls.push_back(servers.back()->url());
  }
  auto client = tls_client(urls, trusting(certs));
  auto lock = client->acquire("tls-job");
  REQUIRE_MESSAGE(lock.ok(), lock.error().to_string());
  // Decided at the third yes; the other two land just after.
  CHECK(count_outcome(lock->nodes, Outcome::ok) >= 3);
  for (auto& s : servers) {
    CHECK(eventually([&] { return s->server.command({"GET", "redlock:{tls-job}:lock"}).str == lock->token; }));
  }
  auto extended = client->extend(*lock, 5000ms);
  REQUIRE_MESSAGE(extended.ok(), extended.error().to_string());
  auto released = client->release(*extended);
  REQUIRE(released.ok());
  CHECK(released->released);
  for (auto& s : servers) CHECK(s->server.command({"EXISTS", "redlock:{tls-job}:lock"}).integer == 0);
}

TEST_CASE("TLS: the certificate may name the host: localhost verifies against its DNS name") {
  Certs certs;
  TlsServer s(certs, false);
  auto client = tls_client({s.url("localhost")}, trusting(certs));
  auto lock = client->acquire("tls-localhost");
  REQUIRE_MESSAGE(lock.ok(), lock.error().to_string());
}

TEST_CASE("TLS: mutual TLS needs the client certificate, and says so when it is missing") {
  Certs certs;
  TlsServer s(certs, true);
  TlsSettings with_cert = trusting(certs);
  with_cert.cert_file = certs.path("client.crt");
  with_cert.key_file = certs.path("client.key");
  auto client = tls_client({s.url()}, with_cert);
  auto lock = client->acquire("tls-mutual");
  REQUIRE_MESSAGE(lock.ok(), lock.error().to_string());

  auto anonymous = tls_client({s.url()}, trusting(certs));
  const std::string why = refusal(*anonymous, "client certificate");
  INFO(why);
  CHECK(why.find("client certificate") != std::string::npos);
}

TEST_CASE("TLS: TLS and plain masters mixed in one quorum") {
  Certs certs;
  TlsServer a(certs, false), b(certs, false), c(certs, false);
  RedisServer d, e;
  auto client = tls_client({a.url(), d.url(), b.url(), e.url(), c.url()}, trusting(certs));
  auto lock = client->acquire("tls-mixed");
  REQUIRE_MESSAGE(lock.ok(), lock.error().to_string());
  CHECK(count_outcome(lock->nodes, Outcome::ok) >= 3);
  CHECK(eventually([&] { return d.command({"GET", "redlock:{tls-mixed}:lock"}).str == lock->token; }));
  CHECK(eventually([&] { return a.server.command({"GET", "redlock:{tls-mixed}:lock"}).str == lock->token; }));
}

TEST_CASE("TLS: each wrong connection fails with its reason, and nothing hangs") {
  Certs certs;
  TlsServer s(certs, false);

  SUBCASE("a server certificate from a CA we do not trust") {
    TlsSettings wrong;
    wrong.ca_file = certs.path("other-ca.crt");
    auto client = tls_client({s.url()}, wrong);
    const std::string why = refusal(*client, "certificate verify failed");
    INFO(why);
    CHECK(why.find("certificate verify failed") != std::string::npos);
  }
  SUBCASE("the system store does not know our test CA") {
    auto client = tls_client({s.url()}, TlsSettings{});
    const std::string why = refusal(*client, "certificate verify failed");
    INFO(why);
    CHECK(why.find("certificate verify failed") != std::string::npos);
  }
  SUBCASE("a certificate for another name") {
    TlsSettings other = trusting(certs);
    other.server_name = "db.example.org";
    auto client = tls_client({s.url()}, other);
    const std::string why = refusal(*client, "mismatch");
    INFO(why);
    CHECK(why.find("certificate verify failed") != std::string::npos);
    CHECK(why.find("mismatch") != std::string::npos);
  }
  SUBCASE("tls_verify false accepts what it cannot verify (the unsafe test setting)") {
    TlsSettings insecure;
    insecure.ca_file = certs.path("other-ca.crt");
    insecure.verify = false;
    auto client = tls_client({s.url()}, insecure);
    auto lock = client->acquire("tls-insecure");
    REQUIRE_MESSAGE(lock.ok(), lock.error().to_string());
  }
  SUBCASE("a plain client on the TLS port") {
    auto client = tls_client({"redis://127.0.0.1:" + std::to_string(s.tls_port)}, TlsSettings{});
    const std::string why = refusal(*client, "rediss://");
    INFO(why);
    CHECK(why.find("rediss://") != std::string::npos);
  }
  SUBCASE("a TLS client on the plain port") {
    // Redis answers the ClientHello with an error when it holds a newline
    // byte; otherwise it waits for one, and the connect timeout says where.
    auto client = tls_client({"rediss://127.0.0.1:" + std::to_string(s.server.port())}, trusting(certs));
    const std::string why = refusal(*client, "TLS");
    INFO(why);
    CHECK((why.find("does not speak TLS") != std::string::npos ||
           why.find("waiting for the TLS handshake (no answer: a plain redis:// port?)") != std::string::npos));
  }
}

TEST_CASE("TLS: files that cannot be loaded are config errors naming the field") {
  Certs certs;
  Config config = config_for({"rediss://127.0.0.1:1"});
  config.tls.ca_file = certs.path("missing.crt");
  auto no_ca = Client::create(config);
  REQUIRE_FALSE(no_ca.ok());
  CHECK(no_ca.error().code == Errc::config);
  CHECK(no_ca.error().message.find("tls_ca_file") != std::string::npos);
  CHECK(no_ca.error().message.find("missing.crt") != std::string::npos);
  // The system's words for it, not OpenSSL 3's raw "error:80000002:system
  // library::…" (which the credential mask garbled into "error:***").
  CHECK(no_ca.error().message.ends_with("missing.crt: No such file or directory"));
  CHECK(no_ca.error().message.find("error:") == std::string::npos);

  config.tls = trusting(certs);
  config.tls.cert_file = certs.path("client.crt");
  config.tls.key_file = certs.path("server.key");  // not the certificate's key
  auto mismatch = Client::create(config);
  REQUIRE_FALSE(mismatch.ok());
  CHECK(mismatch.error().message.find("tls_key_file") != std::string::npos);

  config.tls.key_file.clear();
  auto half = Client::create(config);
  REQUIRE_FALSE(half.ok());
  CHECK(half.error().message.find("tls_cert_file: set without tls_key_file") != std::string::npos);
}

TEST_CASE("TLS: the CLI takes --tls-ca, or REDLOCK_TLS_CA from the environment") {
  Certs certs;
  TlsServer s(certs, false);
  const char* cli = std::getenv("REDLOCK_CLI");
  REQUIRE(cli != nullptr);
  const std::string base = std::string(cli) + " --no-quarantine --nodes " + s.url() + " ";
  CHECK(shell_status(base + "--tls-ca " + certs.path("ca.crt") + " acquire tls-cli --ttl 5000ms") == 0);
  CHECK(s.server.keys("redlock:{tls-cli}:lock").size() == 1);
  CHECK(shell_status("REDLOCK_TLS_CA=" + certs.path("ca.crt") + " " + base + "acquire tls-cli-env --ttl 5000ms") == 0);
  // Not trusted: no master can answer (69); a CA file that does not exist: usage (2).
  CHECK(shell_status(base + "--tls-ca " + certs.path("other-ca.crt") + " acquire tls-cli-2 --ttl 5000ms") == 69);
  CHECK(shell_status(base + "--tls-ca " + certs.path("nope.crt") + " acquire tls-cli-3 --ttl 5000ms") == 2);
  CHECK(shell_status(base + "--tls-ca " + certs.path("other-ca.crt") + " --tls-insecure acquire tls-cli-4 --ttl 5000ms") == 0);
}
