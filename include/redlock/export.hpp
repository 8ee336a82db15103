// redlock/export.hpp — which declarations libredlock.so exports.
//
// The library is compiled with -fvisibility=hidden
// -fvisibility-inlines-hidden, so a symbol is exported only when its
// declaration carries REDLOCK_API: every public class and struct and every
// public non-inline function in include/redlock/. Templates, inline
// functions and enums need nothing (they are compiled into the caller).
// Everything in src/ (redlock::detail and the classes behind the public
// ones) stays hidden; tests/abi checks that nothing else is exported and
// docs/abi.md says how the tests still reach the internals.
#pragma once

// REDLOCK_API marks a public declaration exported; REDLOCK_LOCAL keeps a
// member of such a class hidden when only the library calls it (the private
// constructors that take internal state). Empty on compilers other than GCC
// and Clang.
#if defined(__GNUC__) || defined(__clang__)
#define REDLOCK_API __attribute__((visibility("default")))
#define REDLOCK_LOCAL __attribute__((visibility("hidden")))
#else
#define REDLOCK_API
#define REDLOCK_LOCAL
#endif
