// control_protocol.hpp — the text commands of the control socket, one per
// line, one reply line each: "OK", "OK <json>" or "ERR <what is wrong>".
// Pure string in, string out, so it runs the same for every transport.
#pragma once

#include <string>
#include <string_view>

namespace faultproxy {

class Proxy;

// execute_command runs one command line (without its newline) against the
// proxy and returns the reply line (without newline). Commands:
//   PING                          OK
//   STATUS                        OK {"listeners":[...],...}
//   SET <listener|*> k=v [k=v..]  OK            (all checked before any applies)
//   CLEAR <listener|*>            OK            (every fault off, held bytes released)
//   RESET <listener|*>            OK {"reset":N} (RST every live connection)
// A listener is named by its index or its "ADDR:PORT"; "*" is all of them.
std::string execute_command(Proxy& proxy, std::string_view line);

}  // namespace faultproxy
