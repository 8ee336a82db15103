// skewclock.hpp — drive libskewclock.so from C++ (tests, the chaos suite,
// the skewclock-set command). Header-only; POSIX.
//
// A process runs under the shim with
//   LD_PRELOAD=/path/to/libskewclock.so SKEWCLOCK_FILE=/path/to/settings
// and re-reads the settings file whenever it changes (checked at most every
// SKEWCLOCK_POLL_MS, default 5 ms, on its next clock read). Control writes
// that file atomically (temp file + rename) with an increasing version; the
// process acknowledges each version it applied in "<file>.ack", which
// wait_applied() watches. Use one settings file per process. See
// docs/skewclock.md.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "skewclock_settings.h"

namespace skewclock {

// Settings — what the shim applies. offset_ms moves the wall clocks (a
// deliberate jump when it changes); rate is how fast they run (1.05: 5 %
// fast); monotonic=true makes the monotonic clocks run at rate too (never
// offset). version is bumped by Control::set and echoed in the ack.
struct Settings {
  std::int64_t offset_ms = 0;
  double rate = 1.0;
  bool monotonic = false;
  std::uint64_t version = 0;
  // suspend_ms: the time the system was suspended in all, in ms: the boot
  // clocks (CLOCK_BOOTTIME) run that far ahead of CLOCK_MONOTONIC. It only
  // grows; raising it is a suspend of the difference, seen at once.
  std::int64_t suspend_ms = 0;

  bool operator==(const Settings&) const = default;
};

// format renders s in the settings-file format (one line, every key). The
// rate is written in the shortest fixed notation that reads back exactly.
inline std::string format(const Settings& s) {
  char rate[64];
  auto r = std::to_chars(rate, rate + sizeof rate, s.rate, std::chars_format::fixed);
  std::string out = "offset_ms=" + std::to_string(s.offset_ms) + " rate=" +
                    std::string(rate, r.ec == std::errc{} ? r.ptr : rate) +
                    " monotonic=" + (s.monotonic ? "1" : "0") + " suspend_ms=" + std::to_string(s.suspend_ms) +
                    " version=" + std::to_string(s.version) + "\n";
  return out;
}

// parse reads text in the settings-file format; keys that are absent keep
// their value from base. Throws std::invalid_argument naming the problem.
inline Settings parse(std::string_view text, Settings base = {}) {
  skewclock_settings st{};
  const char* err = "";
  std::size_t at = 0;
  if (skewclock_parse(text.data(), text.size(), &st, &err, &at) != 0) {
    throw std::invalid_argument("skewclock settings: byte " + std::to_string(at) + ": " + err);
  }
  if (st.has_offset) base.offset_ms = st.offset_ms;
  if (st.has_rate) base.rate = st.rate;
  if (st.has_monotonic) base.monotonic = st.monotonic != 0;
  if (st.has_suspend) base.suspend_ms = st.suspend_ms;
  if (st.has_version) base.version = st.version;
  return base;
}

// Ack — the content of "<file>.ack": what a process applied, and its pid.
struct Ack {
  Settings settings;
  pid_t pid = 0;
};

namespace detail {

inline std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::int64_t mtime_ns(const struct stat& sb) {
  return static_cast<std::int64_t>(sb.st_mtim.tv_sec) * 1000000000LL + sb.st_mtim.tv_nsec;
}

// write_atomically: path <- text via "<path>.tmp.<pid>" + rename. The new
// file gets a fresh inode and an mtime strictly later than the old file's,
// so the shim's change check (inode, mtime, ctime, size) cannot miss it.
inline void write_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "skewclock: create " + tmp);
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t w = ::write(fd, text.data() + done, text.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw std::system_error(e, std::generic_category(), "skewclock: write " + tmp);
    }
    done += static_cast<std::size_t>(w);
  }
  struct stat old{};
  struct stat cur{};
  if (::stat(path.c_str(), &old) == 0 && ::fstat(fd, &cur) == 0 && mtime_ns(cur) <= mtime_ns(old)) {
    std::int64_t want = mtime_ns(old) + 1000;  // 1 µs later
    struct timespec times[2];
    times[0].tv_sec = 0;
    times[0].tv_nsec = UTIME_OMIT;
    times[1].tv_sec = static_cast<time_t>(want / 1000000000LL);
    times[1].tv_nsec = static_cast<long>(want % 1000000000LL);
    ::futimens(fd, times);
  }
  if (::close(fd) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    throw std::system_error(e, std::generic_category(), "skewclock: close " + tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    throw std::system_error(e, std::generic_category(), "skewclock: rename " + tmp + " -> " + path);
  }
}

}  // namespace detail

// Control — the settings file of one process under the shim. Not
// thread-safe (one Control per file, used from one thread at a time).
class Control {
 public:
  // Control reads path if it exists (a malformed file throws
  // std::invalid_argument); it does not create it until set().
  explicit Control(std::string path) : path_(std::move(path)) {
    if (auto text = detail::read_file(path_)) current_ = parse(*text);
  }

  const std::string& path() const { return path_; }
  std::string ack_path() const { return path_ + ".ack"; }

  // current: the settings last written (or read at construction).
  const Settings& current() const { return current_; }

  // set writes s (its version replaced by the next one) and returns that
  // version. Throws std::system_error on I/O errors.
  std::uint64_t set(Settings s) {
    s.version = current_.version + 1;
    detail::write_atomically(path_, format(s));
    current_ = s;
    return s.version;
  }
  std::uint64_t set_offset_ms(std::int64_t offset_ms) {
    Settings s = current_;
    s.offset_ms = offset_ms;
    return set(s);
  }
  std::uint64_t set_rate(double rate) {
    Settings s = current_;
    s.rate = rate;
    return set(s);
  }
  // suspend: the system "sleeps" for `d` at once (suspend_ms grows by it).
  std::uint64_t suspend(std::chrono::milliseconds d) {
    Settings s = current_;
    s.suspend_ms += d.count();
    return set(s);
  }
  std::uint64_t set_monotonic(bool on) {
    Settings s = current_;
    s.monotonic = on;
    return set(s);
  }

  // ack: the acknowledgement file, if present and well-formed.
  std::optional<Ack> ack() const {
    auto text = detail::read_file(ack_path());
    if (!text) return std::nullopt;
    skewclock_settings st{};
    const char* err = "";
    std::size_t at = 0;
    if (skewclock_parse(text->data(), text->size(), &st, &err, &at) != 0 || !st.has_version ||
        !st.has_pid)
      return std::nullopt;
    Ack a;
    a.settings = parse(*text);
    a.pid = static_cast<pid_t>(st.pid);
    return a;
  }

  // wait_applied waits until the process acknowledged version (0: the last
  // one set) — by then every clock read it makes uses those settings — and
  // returns true; false after timeout. If pid > 0, only that process's
  // acknowledgement counts. The process must read a clock to notice the
  // change (redis-server does at least every 100 ms; any command does).
  bool wait_applied(std::chrono::milliseconds timeout, std::uint64_t version = 0,
                    pid_t pid = 0) const {
    if (version == 0) version = current_.version;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (auto a = ack(); a && a->settings.version >= version && (pid <= 0 || a->pid == pid))
        return true;
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  // env: the two variables that put a process under the shim with this file.
  std::vector<std::string> env(const std::string& library) const {
    return {"LD_PRELOAD=" + library, "SKEWCLOCK_FILE=" + path_};
  }

 private:
  std::string path_;
  Settings current_;
};

}  // namespace skewclock
