// main.cpp — the faultproxy command: parse and check the addresses (loopback
// only, exit 2 otherwise), bind, print one JSON line with the bound
// addresses, then serve until SIGTERM/SIGINT.
#include <sys/resource.h>
#include <uv.h>

#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "faultproxy/address.hpp"
#include "faultproxy/proxy.hpp"

namespace {

constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;

std::vector<std::string> split_commas(const std::vector<std::string>& values) {
  std::vector<std::string> out;
  for (const auto& v : values) {
    std::size_t start = 0;
    while (start <= v.size()) {
      auto comma = v.find(',', start);
      if (comma == std::string::npos) comma = v.size();
      out.push_back(v.substr(start, comma - start));
      start = comma + 1;
    }
  }
  return out;
}

// Hundreds of proxied connections take two descriptors each: use the hard
// limit rather than a possibly small soft one.
void raise_fd_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
}

struct Signals {
  uv_signal_t term{};
  uv_signal_t intr{};
  faultproxy::Proxy* proxy = nullptr;
};

void on_signal(uv_signal_t* s, int) {
  auto* sig = static_cast<Signals*>(s->data);
  sig->proxy->shutdown();
  uv_close(reinterpret_cast<uv_handle_t*>(&sig->term), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&sig->intr), nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"faultproxy: a loopback TCP proxy that injects latency, blackholes and partitions"};
  std::string target;
  std::vector<std::string> listen;
  std::string control = "127.0.0.1:0";
  std::uint64_t seed = 0;
  std::size_t max_queue = faultproxy::kDefaultMaxQueue;
  app.add_option("--target", target, "HOST:PORT to forward to (loopback only)")->required();
  app.add_option("--listen", listen, "ADDR:PORT[,ADDR:PORT...] to accept on (loopback; port 0 picks one)")
      ->required();
  app.add_option("--control", control, "control socket: ADDR:PORT (loopback) or unix:PATH")
      ->capture_default_str();
  auto* seed_opt = app.add_option("--seed", seed, "seed for the jitter draws (default: random, printed)");
  app.add_option("--max-queue", max_queue, "bytes buffered per direction per connection before reading stops")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1024}, std::size_t{1} << 32));
  bool keep_in_flight = false;
  app.add_flag("--keep-in-flight", keep_in_flight,
               "when a client's side is gone, still deliver the bytes it sent (after their delay), then close "
               "upstream (default: drop them and close at once)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "faultproxy: " << e.what() << " (see --help)\n";
    return kExitUsage;
  }

  faultproxy::ProxyConfig config;
  try {
    config.target = faultproxy::parse_endpoint(target, "--target", false);
    for (const auto& l : split_commas(listen)) config.listen.push_back(faultproxy::parse_endpoint(l, "--listen", false));
    config.control = faultproxy::parse_endpoint(control, "--control", true);
  } catch (const faultproxy::AddressError& e) {
    std::cerr << "faultproxy: " << e.what() << "\n";
    return kExitUsage;
  }
  config.seed = seed_opt->count() > 0 ? seed : std::random_device{}();
  config.max_queue = max_queue;
  config.keep_in_flight = keep_in_flight;

  std::signal(SIGPIPE, SIG_IGN);  // a peer that vanished is a write error, not death
  raise_fd_limit();

  uv_loop_t loop;
  uv_loop_init(&loop);
  int status = 0;
  {
    faultproxy::Proxy proxy(&loop, config);
    Signals signals;
    signals.proxy = &proxy;
    try {
      proxy.start();
      uv_signal_init(&loop, &signals.term);
      uv_signal_init(&loop, &signals.intr);
      signals.term.data = signals.intr.data = &signals;
      uv_signal_start(&signals.term, on_signal, SIGTERM);
      uv_signal_start(&signals.intr, on_signal, SIGINT);
      std::cout << proxy.startup_info().dump() << std::endl;  // endl: the parent waits for this line
      uv_run(&loop, UV_RUN_DEFAULT);
    } catch (const std::exception& e) {
      std::cerr << "faultproxy: " << e.what() << "\n";
      status = kExitRuntime;
      proxy.shutdown();
      uv_run(&loop, UV_RUN_DEFAULT);  // runs the close callbacks
    }
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  if (uv_loop_close(&loop) != 0) {
    std::fprintf(stderr, "faultproxy: handles left open at exit\n");
    return kExitRuntime;
  }
  return status;
}
