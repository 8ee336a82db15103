// flow.cpp — see flow.hpp.
#include "faultproxy/flow.hpp"

#include <random>

#include "faultproxy/connection.hpp"
#include "faultproxy/listener.hpp"

namespace faultproxy {
namespace {

constexpr std::size_t kReadBufferSize = 64 * 1024;
constexpr std::uint64_t kNsPerMs = 1'000'000;

// One read buffer for the whole (single-threaded) loop: libuv calls the read
// callback right after the alloc callback, and on_data copies exactly the
// bytes read, so a queue of many small chunks never pins 64 KiB each.
char g_read_buffer[kReadBufferSize];

}  // namespace

struct Flow::WriteReq {
  uv_write_t req{};
  std::string data;
  Flow* flow = nullptr;
};

Flow::Flow(Connection& owner, Direction dir) : owner_(owner), dir_(dir) {}

void Flow::init_timer(uv_loop_t* loop) {
  uv_timer_init(loop, &timer_);
  timer_.data = this;
}

const Faults& Flow::faults() const { return owner_.listener().faults(); }
uv_stream_t* Flow::src() const { return dir_ == Direction::Up ? owner_.client_stream() : owner_.server_stream(); }
uv_stream_t* Flow::dst() const { return dir_ == Direction::Up ? owner_.server_stream() : owner_.client_stream(); }
bool Flow::dst_ready() const { return dir_ == Direction::Down || owner_.server_connected(); }
bool Flow::src_ready() const { return dir_ == Direction::Up || owner_.server_connected(); }

std::size_t Flow::held_bytes() const {
  const Faults& f = faults();
  return f.holds(dir_) && !f.drops(dir_) ? queued_bytes_ : 0;
}

void Flow::start_reading() {
  if (ended_ || paused_ || reading_ || owner_.closing()) return;
  if (uv_read_start(src(), on_alloc, on_read) == 0) reading_ = true;
}

void Flow::on_alloc(uv_handle_t*, std::size_t, uv_buf_t* buf) {
  *buf = uv_buf_init(g_read_buffer, sizeof g_read_buffer);
}

void Flow::on_read(uv_stream_t* s, ssize_t nread, const uv_buf_t* buf) {
  auto* conn = static_cast<Connection*>(s->data);
  Flow& flow = conn->flow_reading(s);
  if (nread > 0) flow.on_data(buf->base, static_cast<std::size_t>(nread));
  else if (nread == UV_EOF) flow.on_end(End::Eof);
  else if (nread < 0) flow.on_end(End::Reset);
}

void Flow::on_data(const char* data, std::size_t n) {
  if (owner_.closing()) return;
  if (faults().drops(dir_) || (dir_ == Direction::Down && owner_.client_gone())) {
    owner_.listener().stats().dir(dir_).dropped += n;
    return;
  }
  enqueue(Item{0, std::string(data, n), End::None});
}

void Flow::on_end(End end) {
  if (ended_ || owner_.closing()) return;
  ended_ = true;
  if (reading_) uv_read_stop(src());
  reading_ = false;
  if (dir_ == Direction::Down && owner_.client_gone()) {
    owner_.on_server_end_after_client_gone();  // nobody to pass it on to
    return;
  }
  // While dropping, the end is kept rather than lost: like a FIN that TCP
  // retransmits until the partition heals. Otherwise a blackholed pair whose
  // client went away could never finish.
  if (faults().drops(dir_)) retained_end_ = end;
  else enqueue(Item{0, {}, end});
}

void Flow::enqueue(Item item) {
  const Faults& f = faults();
  std::uint64_t due = uv_hrtime() + std::uint64_t{f.delay(dir_)} * kNsPerMs;
  if (f.jitter(dir_) > 0) {
    std::uniform_int_distribution<std::uint64_t> extra(0, std::uint64_t{f.jitter(dir_)} * kNsPerMs);
    due += extra(owner_.listener().rng());
  }
  // Jitter must not reorder bytes (a TCP stream is ordered, even over a
  // jittery link). The queue is strictly FIFO, so order holds anyway; the
  // max keeps due times monotonic, so the timer is always armed for the
  // front item and a chunk never counts as late behind a slower one.
  due = std::max(due, last_due_ns_);
  last_due_ns_ = due;
  item.due_ns = due;
  queued_bytes_ += item.data.size();
  queue_.push_back(std::move(item));
  owner_.listener().stats().dir(dir_).note_queued(queued_bytes());
  maybe_pause();
  pump();
}

void Flow::faults_changed() {
  if (owner_.closing()) return;
  if (retained_end_ != End::None && !faults().drops(dir_)) {
    const End end = retained_end_;
    retained_end_ = End::None;
    enqueue(Item{0, {}, end});
  }
  pump();
}

void Flow::pump() {
  if (owner_.closing() || !dst_ready() || end_delivered_) return;
  if (dir_ == Direction::Down && owner_.client_gone()) return;  // its queue was discarded
  const Faults& f = faults();
  // A drop applies to bytes leaving the proxy as well as to bytes arriving:
  // nothing crosses a blackhole, even what was queued before it was set.
  if (f.drops(dir_)) {
    auto& stats = owner_.listener().stats().dir(dir_);
    for (auto& item : queue_) {
      if (item.end != End::None) retained_end_ = item.end;
      stats.dropped += item.data.size();
    }
    queue_.clear();
    queued_bytes_ = 0;
    maybe_resume();
    return;
  }
  if (f.holds(dir_)) return;  // released by faults_changed when the hold lifts

  while (!queue_.empty()) {
    const std::uint64_t now = uv_hrtime();
    Item& front = queue_.front();
    if (front.due_ns > now) {
      // Round up: the delay is a lower bound. uv timers have 1 ms
      // resolution and may fire early against hrtime; pump re-checks.
      const std::uint64_t ms = (front.due_ns - now + kNsPerMs - 1) / kNsPerMs;
      uv_timer_start(&timer_, on_timer, ms, 0);
      return;
    }
    Item item = std::move(front);
    queue_.pop_front();
    queued_bytes_ -= item.data.size();
    if (item.end != End::None) {
      deliver_end(item.end);
      return;  // nothing is queued after an end
    }
    write(std::move(item.data));
    if (owner_.closing()) return;
  }
  maybe_resume();
}

void Flow::on_timer(uv_timer_t* t) { static_cast<Flow*>(t->data)->pump(); }

void Flow::write(std::string data) {
  auto* w = new WriteReq;
  w->data = std::move(data);
  w->flow = this;
  w->req.data = w;
  const std::size_t n = w->data.size();
  uv_buf_t buf = uv_buf_init(w->data.data(), static_cast<unsigned>(n));
  inflight_bytes_ += n;
  const int rc = uv_write(&w->req, dst(), &buf, 1, on_write);
  if (rc != 0) {
    delete w;
    on_written(n, rc);
  }
}

void Flow::on_write(uv_write_t* req, int status) {
  auto* w = static_cast<WriteReq*>(req->data);
  Flow* flow = w->flow;
  const std::size_t n = w->data.size();
  delete w;
  flow->on_written(n, status);
}

// on_written may run while the pair closes (status UV_ECANCELED, from
// uv_close): the Connection and its Listener are still alive then, since
// both are freed only after every close callback.
void Flow::on_written(std::size_t n, int status) {
  inflight_bytes_ -= n;
  auto& stats = owner_.listener().stats().dir(dir_);
  if (status == 0) stats.forwarded += n;
  else stats.dropped += n;
  if (owner_.closing()) return;
  if (status < 0) {
    owner_.on_peer_gone(dir_);
    return;
  }
  maybe_resume();
}

void Flow::deliver_end(End end) {
  end_delivered_ = true;
  uv_timer_stop(&timer_);
  if (end == End::Reset) {
    owner_.on_reset_delivered(dir_);
    return;
  }
  // uv_shutdown waits for the writes queued before it: the FIN follows the
  // data, which is the half-close the client asked for.
  shutdown_req_.data = this;
  if (uv_shutdown(&shutdown_req_, dst(), on_shutdown) != 0) owner_.on_peer_gone(dir_);
}

void Flow::on_shutdown(uv_shutdown_t* req, int status) {
  auto* flow = static_cast<Flow*>(req->data);
  if (status == UV_ECANCELED || flow->owner_.closing()) return;
  if (status < 0) {
    flow->owner_.on_peer_gone(flow->dir_);
    return;
  }
  flow->finished_ = true;
  flow->owner_.on_flow_finished();
}

// Backpressure: the bytes a direction holds (queued + being written) are
// bounded by max_queue. Past it the source is not read any more, so TCP
// flow control pushes back on the sender instead of the proxy growing.
void Flow::maybe_pause() {
  if (paused_ || queued_bytes() < owner_.listener().max_queue()) return;
  paused_ = true;
  if (reading_) uv_read_stop(src());
  reading_ = false;
}

// Resume at half the limit, so a full queue does not flip the read state
// on every chunk written.
void Flow::maybe_resume() {
  if (!paused_ || queued_bytes() > owner_.listener().max_queue() / 2) return;
  paused_ = false;
  if (src_ready()) start_reading();
}

void Flow::discard_queue() {
  auto& stats = owner_.listener().stats().dir(dir_);
  stats.dropped += queued_bytes_;
  queue_.clear();
  queued_bytes_ = 0;
}

}  // namespace faultproxy
