// flow.hpp — one direction of one proxied connection: bytes read from the
// source socket wait here until their (delayed, jittered) delivery time and
// until no hold is on, then are written to the destination socket in the
// order they were read. The end of the source stream (EOF or reset) is an
// item of the same queue, so it can never overtake data read before it.
#pragma once

#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>

#include "faultproxy/faults.hpp"

namespace faultproxy {

class Connection;

// End — how a source stream ended: EOF (a FIN, i.e. shutdown of writing) or
// an error such as ECONNRESET (passed on as a RST).
enum class End { None, Eof, Reset };

class Flow {
 public:
  Flow(Connection& owner, Direction dir);
  Flow(const Flow&) = delete;
  Flow& operator=(const Flow&) = delete;

  void init_timer(uv_loop_t* loop);  // the one uv handle a Flow owns (freed by Connection)
  uv_timer_t* timer() { return &timer_; }
  Connection& owner() const { return owner_; }

  // Source side. start_reading is called once the source socket is usable
  // (client: at accept; server: once connected).
  void start_reading();
  void on_data(const char* data, std::size_t n);
  void on_end(End end);

  // pump delivers every due item (when the destination is usable and no
  // hold is on) and arms the timer for the next one. Called on every event
  // that can make an item deliverable.
  void pump();
  void faults_changed();  // a SET/CLEAR touched this listener

  // finished: the end was passed on (and, for EOF, the shutdown completed).
  bool finished() const { return finished_; }
  std::size_t queued_bytes() const { return queued_bytes_ + inflight_bytes_; }
  std::size_t held_bytes() const;
  // discard_queue counts still-queued bytes as dropped (the pair is closing).
  void discard_queue();

 private:
  struct Item {
    std::uint64_t due_ns = 0;  // uv_hrtime() at or after which it may be delivered
    std::string data;          // empty for an end item
    End end = End::None;
  };
  struct WriteReq;

  const Faults& faults() const;
  uv_stream_t* src() const;
  uv_stream_t* dst() const;
  bool dst_ready() const;
  bool src_ready() const;
  void enqueue(Item item);
  void write(std::string data);
  void deliver_end(End end);
  void maybe_pause();
  void maybe_resume();
  void on_written(std::size_t n, int status);

  static void on_alloc(uv_handle_t* h, std::size_t suggested, uv_buf_t* buf);
  static void on_read(uv_stream_t* s, ssize_t nread, const uv_buf_t* buf);
  static void on_write(uv_write_t* req, int status);
  static void on_shutdown(uv_shutdown_t* req, int status);
  static void on_timer(uv_timer_t* t);

  Connection& owner_;
  const Direction dir_;
  uv_timer_t timer_{};
  uv_shutdown_t shutdown_req_{};
  std::deque<Item> queue_;
  std::size_t queued_bytes_ = 0;    // data bytes in queue_
  std::size_t inflight_bytes_ = 0;  // handed to uv_write, not yet completed
  std::uint64_t last_due_ns_ = 0;   // never schedule before this: keeps byte order under jitter
  End retained_end_ = End::None;    // an end that arrived while dropping; sent when the drop lifts
  bool reading_ = false;            // uv_read_start is in effect
  bool paused_ = false;             // reading stopped by backpressure
  bool ended_ = false;              // the source ended (end queued, retained or delivered)
  bool end_delivered_ = false;
  bool finished_ = false;
};

}  // namespace faultproxy
