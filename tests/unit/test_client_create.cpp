// test_client_create.cpp — Client::create when the system refuses the loop
// thread: an error, not an exception, and nothing left open or leaked.
#include <doctest/doctest.h>
#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cerrno>

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
