// sha1.hpp — SHA-1 of a script body, so EVALSHA can be sent before the
// server has ever answered (pipelined behind the connection handshake).
// Not used for anything security-relevant.
#pragma once

#include <string>
#include <string_view>

namespace redlock::detail {

// sha1_hex returns the 40 lowercase hex digits of SHA-1(data), as Redis
// names a script in its cache.
std::string sha1_hex(std::string_view data);

}  // namespace redlock::detail
