// version.cpp — redlock::version() (redlock/version.hpp).
#include "redlock/version.hpp"

namespace redlock {

std::string_view version() noexcept { return REDLOCK_VERSION_STRING; }

}  // namespace redlock
