// test_client_create.cpp — Client::create and AsyncClient::create: when the
// system refuses the loop thread (an error, not an exception, and nothing
// left open or leaked), and the members this version refuses to serve.
#include <doctest/doctest.h>
#include <dlfcn.h>
#include <pthread.h>

#include <uv.h>

#include <atomic>
#include <cerrno>
#include <string>

#include "redlock/async_client.hpp"
#include "redlock/client.hpp"
#include "redlock/config.hpp"

using namespace redlock;

namespace {

std::atomic<bool> refuse_threads{false};

}  // namespace

// The executable's pthread_create comes before libc's (and a sanitizer's):
// while refuse_threads is set it says what a process at its thread or
// memory limit hears.
extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*), void* arg) {
  if (refuse_threads) return EAGAIN;
  using Create = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  static const auto real = reinterpret_cast<Create>(dlsym(RTLD_NEXT, "pthread_create"));
  return real(thread, attr, start, arg);
}

TEST_CASE("Client::create when no thread can be started: an error naming the loop thread, then a client as usual") {
  auto nodes = parse_node_list("redis://127.0.0.1:1,redis://127.0.0.1:2,redis://127.0.0.1:3");
  REQUIRE_MESSAGE(nodes, nodes.error().to_string());
  Config config;
  config.nodes = *nodes;
  refuse_threads = true;
  Result<std::unique_ptr<Client>> refused = Client::create(config);
  refuse_threads = false;
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == Errc::internal);
  CHECK(refused.error().message.find("cannot start the client's loop thread") != std::string::npos);
  // Nothing of the refused one is in the way of the next.
  Result<std::unique_ptr<Client>> made = Client::create(config);
  REQUIRE(made);
  CHECK_FALSE((*made)->try_acquire("r").ok());  // nothing listens on those ports: an answer, not a hang
}

TEST_CASE("Client::create and AsyncClient::create refuse, naming them, the members this version does not serve") {
  struct Refused {
    const char* url;
    const char* message;
  };
  // A cluster member is served, but not with WAIT (each shard would need
  // its own).
  const Refused cases[] = {
      {"rediss+cluster://:pw@127.0.0.1:5?wait_replicas=1",
       R"(nodes[1]: "rediss+cluster://127.0.0.1:5": wait_replicas on a cluster member is not supported by this version)"},
      {"redis+cluster://127.0.0.1:5,127.0.0.1:6?wait_replicas=all",
       R"(nodes[1]: "redis+cluster://127.0.0.1:5,127.0.0.1:6": wait_replicas on a cluster member is not supported by this version)"},
  };
  for (const auto& [url, message] : cases) {
    CAPTURE(url);
    auto nodes = parse_node_list(std::string("redis://127.0.0.1:1,") + url + ",redis://127.0.0.1:3");
    REQUIRE_MESSAGE(nodes, nodes.error().to_string());
    Config config;
    config.nodes = *nodes;
    REQUIRE(validate_config(config).ok());  // a valid config: only this version does not serve it
    Result<std::unique_ptr<Client>> blocking = Client::create(config);
    REQUIRE_FALSE(blocking);
    CHECK(blocking.error().code == Errc::config);
    CHECK(blocking.error().message == message);
    uv_loop_t loop;
    REQUIRE(uv_loop_init(&loop) == 0);
    Result<std::unique_ptr<AsyncClient>> async = AsyncClient::create(&loop, config);
    REQUIRE_FALSE(async);
    CHECK(async.error().code == Errc::config);
    CHECK(async.error().message == message);
    CHECK(uv_loop_close(&loop) == 0);  // nothing was opened on it
  }
}
