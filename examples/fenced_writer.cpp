// fenced_writer — a lock holder that writes to a fenced store
// (redlock/fenced_store.hpp), driven line by line on stdin; the integration
// tests use it to pause a real holder (SIGSTOP) past its validity and show
// that its late write is refused.
//
//   fenced_writer --nodes URL,... --store 127.0.0.1:PORT --resource NAME [--ttl MS]
//
// Commands (one per line), each answered by one JSON line on stdout:
//   acquire        take RESOURCE with a fencing token (one attempt):
//                  {"acquired": true, "fence": F, "valid": true} or
//                  {"acquired": false, "error": "..."}
//   write VALUE    write VALUE to the store's key store:RESOURCE with the
//                  fence taken (without checking the lock first, as a holder
//                  that was paused right after its check would):
//                  {"accepted": bool, "highest": H}, or {"error": "..."}
//                  (before any acquire: fence 0 is no fence, refused)
//   quit           exit 0
// Exit 2 on a usage error, 1 when the store or the nodes are unusable.
#include <cstdio>
#include <iostream>
#include <string>

#include "redlock/redlock.hpp"

namespace {

int usage(const std::string& why) {
  std::cerr << "fenced_writer: " << why
            << "\nusage: fenced_writer --nodes URL,... --store 127.0.0.1:PORT --resource NAME [--ttl MS]\n";
  return 2;
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out + "\"";
}

}  // namespace

int main(int argc, char** argv) {
  std::string nodes, store, resource;
  long long ttl_ms = 1000;
  for (int i = 1; i < argc; ++i) {
    const std::string opt = argv[i];
    if (i + 1 >= argc) return usage(opt + ": missing value");
    const std::string val = argv[++i];
    if (opt == "--nodes") nodes = val;
    else if (opt == "--store") store = val;
    else if (opt == "--resource") resource = val;
    else if (opt == "--ttl") {
      try {
        ttl_ms = std::stoll(val);
      } catch (const std::exception&) {
        return usage("--ttl: not a number: " + val);
      }
    } else {
      return usage("unknown option " + opt);
    }
  }
  if (nodes.empty() || store.empty() || resource.empty()) return usage("--nodes, --store and --resource are required");
  auto store_address = redlock::parse_node_url("redis://" + store);
  if (!store_address) return usage("--store: expected HOST:PORT: " + store_address.error().message);

  redlock::Config config;
  auto parsed = redlock::parse_node_list(nodes);
  if (!parsed) return usage("--nodes: " + parsed.error().message);
  config.nodes = std::move(*parsed);
  config.options.quarantine = false;  // the tests' masters were just started
  auto client = redlock::Client::create(std::move(config));
  if (!client) return usage(client.error().to_string());
  auto fenced = redlock::FencedStore::connect(*store_address);
  if (!fenced) {
    std::cerr << "fenced_writer: " << fenced.error().to_string() << "\n";
    return 1;
  }
  const std::string key = "store:" + resource;

  std::uint64_t fence = 0;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line == "quit") break;
    if (line == "acquire") {
      auto lock = (*client)->acquire(resource, {.ttl = std::chrono::milliseconds{ttl_ms}, .fence = true});
      if (lock) {
        fence = lock->fence;
        std::cout << "{\"acquired\": true, \"fence\": " << fence << ", \"valid\": " << (lock->valid() ? "true" : "false")
                  << "}" << std::endl;
      } else {
        std::cout << "{\"acquired\": false, \"error\": " << quoted(lock.error().to_string()) << "}" << std::endl;
      }
    } else if (line.rfind("write ", 0) == 0) {
      const auto w = (*fenced)->write(key, fence, line.substr(6));
      if (!w) {
        std::cout << "{\"error\": " << quoted(w.error().to_string()) << "}" << std::endl;
      } else {
        std::cout << "{\"accepted\": " << (w->accepted ? "true" : "false") << ", \"highest\": " << w->highest
                  << "}" << std::endl;
      }
    } else {
      std::cout << "{\"error\": " << quoted("unknown command: " + line) << "}" << std::endl;
    }
  }
  return 0;
}
