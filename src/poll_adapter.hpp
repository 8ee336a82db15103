// poll_adapter.hpp — hiredis async contexts on a libuv loop.
//
// Our own adapter rather than hiredis's adapters/libuv.h: its 0.14 version
// drops poll errors (a refused connect would only be noticed by a timeout),
// and it asks the poll for writability around every command. Ours hands
// poll errors to hiredis and flushes each connection's output once per loop
// turn (poll_adapter.cpp has the details). Used by HiredisWire, the
// connection of the node sessions and of the pub/sub subscribers.
#pragma once

#include <uv.h>

struct redisAsyncContext;

namespace redlock::detail {

// attach_to_loop hooks `ac` to `loop`; false if its socket cannot be
// watched. The adapter frees itself when hiredis frees the context.
// before_write, when given, runs with `data` and the context right before
// each write of the context's buffered commands: the last moment to queue
// one more command that goes out in the same write (HiredisWire's on_flush:
// the node session's vote check).
using BeforeWrite = void (*)(void* data, redisAsyncContext* ac);
bool attach_to_loop(redisAsyncContext* ac, uv_loop_t* loop, BeforeWrite before_write = nullptr,
                    void* data = nullptr);

}  // namespace redlock::detail
