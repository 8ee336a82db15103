// listener.hpp — one listening address of the proxy: its faults, its
// counters and its live connections. Created with new; it deletes itself
// once its listening socket has closed and every Connection that refers to
// it has been freed, so no callback can ever see a dead Listener.
#pragma once

#include <uv.h>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <random>
#include <string>
#include <unordered_set>

#include "faultproxy/address.hpp"
#include "faultproxy/faults.hpp"
#include "faultproxy/stats.hpp"

namespace faultproxy {

class Connection;

class Listener {
 public:
  Listener(uv_loop_t* loop, std::size_t index, Endpoint listen, Endpoint target,
           std::size_t max_queue, std::uint64_t seed, bool keep_in_flight);
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // listen binds and starts accepting; returns 0 or a uv error code. name()
  // then holds the bound "ADDR:PORT" (the real port when 0 was asked for).
  int listen();
  // close stops accepting and closes every connection (FIN). The object
  // frees itself afterwards: do not use it once close() was called.
  void close();

  std::size_t index() const { return index_; }
  const std::string& name() const { return name_; }
  const Endpoint& target() const { return target_; }
  std::size_t max_queue() const { return max_queue_; }
  bool keep_in_flight() const { return keep_in_flight_; }  // ProxyConfig::keep_in_flight
  const Faults& faults() const { return faults_; }
  ListenerStats& stats() { return stats_; }
  std::mt19937_64& rng() { return rng_; }

  void set_faults(const Faults& f);  // applies to existing and new connections
  void reset_connections();          // RST both sides of every live connection
  nlohmann::json status() const;

  // Connection bookkeeping (called by Connection only).
  void connection_created(Connection* c);
  void connection_closing(Connection* c);
  void connection_freed();

 private:
  ~Listener() = default;
  void maybe_free();
  static void on_connection(uv_stream_t* server, int status);
  static void on_close(uv_handle_t* handle);

  uv_tcp_t server_{};
  const std::size_t index_;
  Endpoint listen_;
  Endpoint target_;
  std::string name_;
  const std::size_t max_queue_;
  const bool keep_in_flight_;
  std::mt19937_64 rng_;
  Faults faults_;
  ListenerStats stats_;
  std::unordered_set<Connection*> active_;  // not yet closing
  std::size_t live_connections_ = 0;        // not yet freed (closing ones too)
  bool closing_ = false;
  bool handle_closed_ = false;
};

}  // namespace faultproxy
