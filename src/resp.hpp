// resp.hpp — the one RESP encoder of the library: a command as an array of
// bulk strings, *<argc>\r\n then $<len>\r\n<bytes>\r\n per argument.
// Replies are parsed by hiredis's redisReader (src/socket_wire.cpp); the
// ReplyScanner here reads the same bytes first and holds every reply to
// the limits below, which hiredis 0.14 has none of.
#pragma once

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace redlock::detail {

namespace resp {

inline void append_header(std::string& out, char kind, std::size_t n) {
  char digits[24];
  out += kind;
  out.append(digits, std::to_chars(digits, digits + sizeof digits, n).ptr);
  out += "\r\n";
}

// append_bulk appends one bulk string: $<len>\r\n<bytes>\r\n.
inline void append_bulk(std::string& out, std::string_view arg) {
  append_header(out, '$', arg.size());
  out += arg;
  out += "\r\n";
}

// split_bulks reads `n` bulk strings back from `in` (what append_bulk
// wrote) into `out`, as views into `in`; false if `in` is not exactly that.
inline bool split_bulks(std::string_view in, std::size_t n, std::vector<std::string_view>& out) {
  for (std::size_t i = 0; i < n; ++i) {
    if (in.empty() || in.front() != '$') return false;
    const std::size_t eol = in.find("\r\n");
    if (eol == std::string_view::npos) return false;
    std::size_t len = 0;
    const auto [end, ec] = std::from_chars(in.data() + 1, in.data() + eol, len);
    if (ec != std::errc{} || end != in.data() + eol || in.size() < eol + 2 + len + 2) return false;
    out.push_back(in.substr(eol + 2, len));
    if (in.substr(eol + 2 + len, 2) != "\r\n") return false;
    in.remove_prefix(eol + 2 + len + 2);
  }
  return in.empty();
}

// ReplyLimits — the most one reply may hold; a server that sends more is
// broken or hostile, and its connection ends. The largest replies the
// library asks for: INFO's default sections (a few KiB; about 50 bytes
// per non-empty db), a batched extension's one flag per key (at most
// 100,000 bytes: extend_batch_max), a holder's value (ours are a token of
// 22 or 33 characters and an owner; a value another program wrote at a
// lock key may be anything),
// arrays of at most 4 elements, never nested.
struct ReplyLimits {
  std::size_t max_bytes = 0;     // one reply, every byte (header lines, bulk strings and their CRLFs)
  std::size_t max_elements = 0;  // array elements in one reply, at every depth together
  std::size_t max_depth = 0;     // arrays within arrays (1: a flat array)
};

// reply_limits: 40 times the largest batched extension, and 1,000 times
// the longest array. What one connection can pin is about one reply
// (hiredis keeps the buffer and, at the end, a copy of each string).
inline constexpr ReplyLimits reply_limits{4 * 1024 * 1024, 4096, 4};

// max_quoted: the most bytes of a server's text (an error reply, a status,
// a holder's value) an error message of the library quotes.
inline constexpr std::size_t max_quoted = 256;

// server_text: `text` as an error message may quote it — at most
// max_quoted bytes (then "… (N bytes)"), each byte below 0x20 or 0x7f as
// '?': a server decides these bytes, and they go to callers' logs and
// terminals (which must not be flooded or steered).
inline std::string server_text(std::string_view text) {
  const std::size_t n = std::min(text.size(), max_quoted);
  std::string out(text.substr(0, n));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  if (n < text.size()) out.append("… (").append(std::to_string(text.size())).append(" bytes)");
  return out;
}

// ReplyScanner — follows a stream of RESP2 replies byte by byte (each byte
// once, whatever the split into reads), counts the replies it completes,
// and stops the stream at the first byte that breaks a limit or is not
// RESP2. A length is judged from its header line, before any of its bytes
// is buffered: `$9000000000000000000` or `*1000000000` ends the stream at
// once. What it accepts, hiredis parses as the same replies.
class ReplyScanner {
 public:
  explicit ReplyScanner(const ReplyLimits& limits) noexcept : limits_(limits) {}

  // scan reads the next bytes of the stream. False, with `why`, at the
  // first byte past a limit or outside RESP2; the stream is then unusable.
  bool scan(std::string_view bytes, std::string& why) {
    const char* p = bytes.data();
    const char* const end = p + bytes.size();
    while (p < end) {
      switch (at_) {
        case At::type: {
          kind_ = *p++;
          if (!count(1, why)) return false;
          if (kind_ == '$' || kind_ == '*') {
            at_ = At::number;
            negative_ = false;
            digits_ = 0;
            number_ = 0;
          } else if (kind_ == '+' || kind_ == '-' || kind_ == ':') {
            at_ = At::line;
            cr_ = false;
          } else {
            why = "protocol error: a reply starts with " + show(kind_) + ", which no RESP2 reply does";
            return false;
          }
          break;
        }
        case At::line: {
          // Status, error and integer lines: any bytes up to CRLF (as
          // hiredis reads them); only their length is judged.
          const char* lf = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
          const char* stop = lf != nullptr ? lf + 1 : end;
          if (!count(static_cast<std::size_t>(stop - p), why)) return false;
          if (lf != nullptr && ((lf > p && lf[-1] == '\r') || (lf == p && cr_))) {
            at_ = At::type;
            item_done();
          } else {
            cr_ = stop[-1] == '\r';
          }
          p = stop;
          break;
        }
        case At::number: {
          // A length line: -1 (nil) or up to 19 digits, judged whole at
          // its CR — before a byte of what it announces is buffered.
          const char c = *p++;
          if (!count(1, why)) return false;
          if (c == '-' && digits_ == 0 && !negative_) {
            negative_ = true;
          } else if (c >= '0' && c <= '9' && digits_ < (negative_ ? 1 : 19)) {
            ++digits_;
            number_ = number_ * 10 + static_cast<std::uint64_t>(c - '0');
          } else if (c == '\r' && digits_ > 0 && (!negative_ || number_ == 1)) {
            if (!negative_ && !fits(why)) return false;
            at_ = At::number_lf;
          } else {
            why = std::string("protocol error: bad length in a reply's ") + (kind_ == '$' ? "bulk string" : "array") +
                  " header";
            return false;
          }
          break;
        }
        case At::number_lf: {
          if (*p++ != '\n') {
            why = "protocol error: a length line without its LF";
            return false;
          }
          if (!count(1, why)) return false;
          at_ = At::type;
          if (negative_) {  // $-1, *-1: nil
            item_done();
          } else if (kind_ == '$') {
            bytes_ += number_ + 2;  // within the limit: fits()
            skip_ = number_ + 2;
            at_ = At::bulk;
          } else if (number_ == 0) {
            item_done();
          } else {
            elements_ += number_;
            left_[depth_++] = number_;
          }
          break;
        }
        case At::bulk: {
          const std::size_t n = std::min<std::size_t>(skip_, static_cast<std::size_t>(end - p));
          p += n;
          skip_ -= n;
          if (skip_ == 0) {
            at_ = At::type;
            item_done();
          }
          break;
        }
      }
    }
    return true;
  }

  // ready: replies completed and not yet taken; take: one of them was read.
  std::size_t ready() const noexcept { return ready_; }
  void take() noexcept { --ready_; }

 private:
  enum class At : std::uint8_t { type, line, number, number_lf, bulk };

  // count adds `n` bytes of header or line to the reply being read.
  bool count(std::size_t n, std::string& why) {
    bytes_ += n;
    if (bytes_ <= limits_.max_bytes) return true;
    why = "reply too large: more than " + std::to_string(limits_.max_bytes) + " bytes";
    return false;
  }

  // fits judges the length just read: a bulk string's bytes (and CRLF)
  // within the reply's byte limit, an array's elements within the element
  // limit, its depth within the depth limit.
  bool fits(std::string& why) {
    const std::uint64_t n = number_;
    if (kind_ == '$') {
      if (n + 3 <= limits_.max_bytes - bytes_) return true;  // the header's LF, the bytes, their CRLF
      why = "reply too large: a bulk string of " + std::to_string(n) + " bytes (at most " +
            std::to_string(limits_.max_bytes) + " bytes in one reply)";
      return false;
    }
    if (n > 0 && (depth_ >= limits_.max_depth || depth_ >= left_.size())) {
      why = "reply too large: arrays nested more than " + std::to_string(limits_.max_depth) + " deep";
      return false;
    }
    if (n <= limits_.max_elements - elements_) return true;
    why = "reply too large: an array of " + std::to_string(n) + " elements (at most " +
          std::to_string(limits_.max_elements) + " in one reply)";
    return false;
  }

  // item_done: one element (or a whole reply) is complete.
  void item_done() noexcept {
    while (depth_ > 0) {
      if (--left_[depth_ - 1] > 0) return;
      --depth_;
    }
    ++ready_;
    bytes_ = 0;
    elements_ = 0;
  }

  static std::string show(char c) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x21 && u < 0x7f) return std::string("'") + c + "'";
    constexpr char hex[] = "0123456789abcdef";
    return std::string("byte 0x") + hex[u >> 4] + hex[u & 15];
  }

  ReplyLimits limits_;
  At at_ = At::type;
  char kind_ = 0;
  bool cr_ = false;        // a line's last byte so far was CR
  bool negative_ = false;  // a length line's '-'
  int digits_ = 0;
  std::uint64_t number_ = 0;
  std::uint64_t skip_ = 0;  // a bulk string's bytes (and CRLF) still to come
  std::size_t bytes_ = 0;     // of the reply being read
  std::size_t elements_ = 0;  // of the reply being read
  std::size_t depth_ = 0;
  std::array<std::uint64_t, 8> left_{};  // elements still to come, per open array
  std::size_t ready_ = 0;
};

}  // namespace resp

// append_command appends one command in RESP to `out`.
inline void append_command(std::string& out, std::span<const std::string_view> argv) {
  resp::append_header(out, '*', argv.size());
  for (std::string_view arg : argv) resp::append_bulk(out, arg);
}

// append_command_encoded appends one command whose first arguments are
// `head` and whose other `tail_args` arguments are already bulk strings,
// in the pieces of `tail`, in order.
inline void append_command_encoded(std::string& out, std::span<const std::string_view> head, std::size_t tail_args,
                                   std::span<const std::string_view> tail) {
  resp::append_header(out, '*', head.size() + tail_args);
  for (std::string_view arg : head) resp::append_bulk(out, arg);
  for (std::string_view piece : tail) out += piece;
}

}  // namespace redlock::detail
