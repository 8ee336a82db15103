// resolver.cpp — see resolver.hpp.
#include "resolver.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/un.h>
#include <uv.h>

#include <cstddef>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>

namespace redlock::detail {

namespace {

// addresses_of runs getaddrinfo with `flags` (AI_NUMERICHOST: no lookup,
// never blocks); an empty vector and the reason on failure.
std::vector<SocketAddress> addresses_of(const std::string& host, int port, int flags, std::string* why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  // AI_ADDRCONFIG only for names: it costs a netlink query, and a numeric
  // host needs no filtering.
  hints.ai_flags = (flags & AI_NUMERICHOST) != 0 ? flags : flags | AI_ADDRCONFIG;
  addrinfo* list = nullptr;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &list);
  std::vector<SocketAddress> out;
  if (rc != 0) {
    if (why != nullptr) *why = rc == EAI_SYSTEM ? std::strerror(errno) : gai_strerror(rc);
    return out;
  }
  for (const addrinfo* a = list; a != nullptr; a = a->ai_next) {
    if ((a->ai_family != AF_INET && a->ai_family != AF_INET6) || a->ai_addrlen > sizeof(sockaddr_storage)) continue;
    SocketAddress s;
    std::memcpy(&s.storage, a->ai_addr, a->ai_addrlen);
    s.length = a->ai_addrlen;
    out.push_back(s);
  }
  freeaddrinfo(list);
  if (out.empty() && why != nullptr) *why = "no IPv4 or IPv6 address";
  return out;
}

// Shared between the loop and the lookup thread. The thread touches the
// async handle only under `mu` and only while `cancelled` is false.
struct LookupState {
  std::mutex mu;
  bool cancelled = false;
  uv_async_t* async = nullptr;  // the loop's; closed when the lookup ends
  std::vector<SocketAddress> addresses;
  std::string why;
  Resolver::Done done;
  std::string host;
};

void close_async(uv_async_t* async) {
  uv_close(reinterpret_cast<uv_handle_t*>(async), [](uv_handle_t* h) {
    delete static_cast<std::shared_ptr<LookupState>*>(h->data);
    delete reinterpret_cast<uv_async_t*>(h);
  });
}

class ThreadLookup final : public Lookup {
 public:
  explicit ThreadLookup(std::shared_ptr<LookupState> state) : state_(std::move(state)) {}
  ~ThreadLookup() override {
    uv_async_t* async = nullptr;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->cancelled = true;
      state_->done = nullptr;
      async = std::exchange(state_->async, nullptr);
    }
    if (async != nullptr) close_async(async);
  }

 private:
  std::shared_ptr<LookupState> state_;
};

void deliver(uv_async_t* async) {
  auto state = *static_cast<std::shared_ptr<LookupState>*>(async->data);
  Resolver::Done done;
  {
    std::lock_guard<std::mutex> lock(state->mu);
    if (state->cancelled || state->async == nullptr) return;
    state->async = nullptr;
    done = std::move(state->done);
    state->cancelled = true;  // delivered: the Lookup's destructor has nothing to close
  }
  close_async(async);
  if (!done) return;
  std::string why = state->addresses.empty() ? "cannot resolve " + state->host + ": " + state->why : std::string();
  done(std::move(state->addresses), std::move(why));
}

}  // namespace

std::vector<SocketAddress> numeric_address(const std::string& host, int port) {
  return addresses_of(host, port, AI_NUMERICHOST, nullptr);
}

std::optional<SocketAddress> unix_address(const std::string& path) {
  SocketAddress a;
  auto* un = reinterpret_cast<sockaddr_un*>(&a.storage);
  if (path.size() >= sizeof un->sun_path) return std::nullopt;
  un->sun_family = AF_UNIX;
  std::memcpy(un->sun_path, path.c_str(), path.size() + 1);
  a.length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
  return a;
}

std::unique_ptr<Lookup> ThreadResolver::resolve(const std::string& host, int port, Done done) {
  auto state = std::make_shared<LookupState>();
  state->done = std::move(done);
  state->host = host;
  auto* async = new uv_async_t;
  uv_async_init(loop_, async, deliver);
  async->data = new std::shared_ptr<LookupState>(state);
  state->async = async;
  try {
    std::thread([state, host, port] {
      std::string why;
      std::vector<SocketAddress> found = addresses_of(host, port, 0, &why);
      std::lock_guard<std::mutex> lock(state->mu);
      if (state->cancelled) return;
      state->addresses = std::move(found);
      state->why = std::move(why);
      uv_async_send(state->async);
    }).detach();
  } catch (const std::system_error& e) {
    std::lock_guard<std::mutex> lock(state->mu);
    state->why = std::string("cannot start a resolver thread: ") + e.what();
    uv_async_send(async);
  }
  return std::make_unique<ThreadLookup>(std::move(state));
}

}  // namespace redlock::detail
