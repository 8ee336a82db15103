// faults.hpp — the fault settings of one listener and how `SET key=value`
// changes them. Kept apart from the sockets so the control protocol's
// validation is one small, pure piece.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace faultproxy {

// Direction: up = client → server (the target), down = server → client.
enum class Direction { Up, Down };

inline const char* direction_name(Direction d) { return d == Direction::Up ? "up" : "down"; }

// kMaxDelayMs bounds delays and jitter: a typo such as delay_up=1000000000
// is refused instead of freezing a connection for days.
inline constexpr std::uint32_t kMaxDelayMs = 3'600'000;

// Faults — everything that can be switched on for one listener. All off by
// default (a plain forwarder).
struct Faults {
  std::uint32_t delay_up = 0;     // ms added to every client→server chunk
  std::uint32_t delay_down = 0;   // ms added to every server→client chunk
  std::uint32_t jitter_up = 0;    // uniform extra 0..jitter ms per chunk
  std::uint32_t jitter_down = 0;
  bool blackhole = false;         // drop both directions; no upstream connect
  bool drop_up = false;           // drop client→server bytes
  bool drop_down = false;         // drop server→client bytes
  bool refuse = false;            // close new connections right after accept
  bool hold_up = false;           // queue client→server bytes until lifted
  bool hold_down = false;         // queue server→client bytes until lifted

  // Per-direction views used by the forwarding code.
  std::uint32_t delay(Direction d) const { return d == Direction::Up ? delay_up : delay_down; }
  std::uint32_t jitter(Direction d) const { return d == Direction::Up ? jitter_up : jitter_down; }
  bool drops(Direction d) const { return blackhole || (d == Direction::Up ? drop_up : drop_down); }
  bool holds(Direction d) const { return d == Direction::Up ? hold_up : hold_down; }

  // to_json: every key with its value as SET takes it (flags as 0/1), so a
  // STATUS reply can be fed back into SET.
  nlohmann::json to_json() const;
};

// apply_setting applies one "key=value" token. Returns an error message
// naming the bad token, or nullopt. `reset` is not a setting but an action:
// it is reported through *reset_requested (left untouched unless reset=1).
std::optional<std::string> apply_setting(Faults& f, std::string_view token, bool* reset_requested);

// setting_keys: the keys apply_setting knows, for error messages and docs.
const char* setting_keys();

}  // namespace faultproxy
