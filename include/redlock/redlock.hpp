// redlock/redlock.hpp — the umbrella header: everything public.
#pragma once

#include "redlock/async_client.hpp"
#include "redlock/client.hpp"
#include "redlock/clock.hpp"
#include "redlock/config.hpp"
#include "redlock/election.hpp"
#include "redlock/error.hpp"
#include "redlock/fenced_store.hpp"
#include "redlock/lease.hpp"
#include "redlock/lock.hpp"
#include "redlock/mutex.hpp"
#include "redlock/observer.hpp"
#include "redlock/options.hpp"
#include "redlock/status.hpp"
#include "redlock/version.hpp"
