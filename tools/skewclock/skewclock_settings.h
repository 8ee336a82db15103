/* skewclock_settings.h — the settings-file format of libskewclock, shared by
 * the shim (C, no allocation, async-signal-safe) and the C++ side
 * (skewclock.hpp, skewclock-set), so both agree on every byte.
 *
 * Format: whitespace-separated key=value tokens; '#' starts a comment that
 * runs to the end of the line. Keys (each optional, a repeated key: the last
 * one wins):
 *   offset_ms=<int>      wall-clock offset in ms, may be negative, |v| <= 1e12
 *   rate=<decimal>       wall-clock rate, 0.001 <= v <= 1000 ("1.05", "5e-1")
 *   monotonic=<0|1>      1: the monotonic clocks run at `rate` too
 *   suspend_ms=<uint>    total time the system was suspended, in ms, <= 1e12:
 *                        CLOCK_BOOTTIME (and _ALARM) run this far ahead of
 *                        CLOCK_MONOTONIC, as after a real suspend; it only
 *                        grows (a smaller value than the last is ignored)
 *   version=<uint>       opaque; echoed in the acknowledgement file
 *   pid=<int>            only in acknowledgement files (who applied it)
 * Anything else (unknown key, bad number, missing '=') rejects the whole text.
 *
 * Example: "offset_ms=1500 rate=1.02 monotonic=0 version=7\n"
 */
#ifndef SKEWCLOCK_SETTINGS_H
#define SKEWCLOCK_SETTINGS_H

#include <stddef.h>
#include <stdint.h>

#define SKEWCLOCK_RATE_MIN 0.001
#define SKEWCLOCK_RATE_MAX 1000.0
#define SKEWCLOCK_OFFSET_MS_MAX 1000000000000LL /* ~31.7 years */

#ifdef __cplusplus
extern "C" {
#endif

struct skewclock_settings {
  int has_offset, has_rate, has_monotonic, has_version, has_pid, has_suspend;
  int64_t offset_ms, suspend_ms;
  double rate;
  int monotonic;
  uint64_t version;
  int64_t pid;
};

/* skewclock_parse_u64: decimal digits [p, end) into *out; 0 on success. */
static inline int skewclock_parse_u64_(const char* p, const char* end, uint64_t* out) {
  uint64_t v = 0;
  if (p == end) return -1;
  for (; p < end; ++p) {
    if (*p < '0' || *p > '9') return -1;
    unsigned d = (unsigned)(*p - '0');
    if (v > (UINT64_MAX - d) / 10) return -1;
    v = v * 10 + d;
  }
  *out = v;
  return 0;
}

static inline int skewclock_parse_i64_(const char* p, const char* end, int64_t* out) {
  int neg = 0;
  uint64_t v = 0;
  if (p < end && (*p == '-' || *p == '+')) {
    neg = *p == '-';
    ++p;
  }
  if (skewclock_parse_u64_(p, end, &v) != 0 || v > (uint64_t)INT64_MAX) return -1;
  *out = neg ? -(int64_t)v : (int64_t)v;
  return 0;
}

/* Decimal with optional fraction and exponent: [+]digits[.digits][e[+-]digits]
 * (a leading '.' or trailing '.' is accepted when the other side has digits).
 * Up to 19 significant digits are used; more are ignored (truncated). */
static inline int skewclock_parse_double_(const char* p, const char* end, double* out) {
  uint64_t mant = 0;
  int sig = 0, digits = 0, exp10 = 0;
  if (p < end && *p == '+') ++p;
  for (; p < end && *p >= '0' && *p <= '9'; ++p, ++digits) {
    if (mant == 0 && *p == '0') continue;
    if (sig < 19) {
      mant = mant * 10 + (uint64_t)(*p - '0');
      ++sig;
    } else {
      ++exp10;
    }
  }
  if (p < end && *p == '.') {
    ++p;
    for (; p < end && *p >= '0' && *p <= '9'; ++p, ++digits) {
      if (mant == 0 && *p == '0') {
        --exp10;
        continue;
      }
      if (sig < 19) {
        mant = mant * 10 + (uint64_t)(*p - '0');
        ++sig;
        --exp10;
      }
    }
  }
  if (digits == 0) return -1;
  if (p < end && (*p == 'e' || *p == 'E')) {
    int64_t e = 0;
    if (skewclock_parse_i64_(p + 1, end, &e) != 0 || e > 400 || e < -400) return -1;
    exp10 += (int)e;
    p = end;
  }
  if (p != end) return -1;
  double v = (double)mant;
  /* Exact powers of ten up to 1e22; scale in steps beyond (values that far
   * out are rejected by the range checks anyway). */
  static const double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                  1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                  1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  while (exp10 > 0 && v != 0.0) {
    int s = exp10 > 22 ? 22 : exp10;
    v *= kPow10[s];
    exp10 -= s;
    if (v > 1e300) break;
  }
  while (exp10 < 0 && v != 0.0) {
    int s = -exp10 > 22 ? 22 : -exp10;
    v /= kPow10[s];
    exp10 += s;
  }
  *out = v;
  return 0;
}

static inline int skewclock_key_is_(const char* k, const char* kend, const char* name) {
  for (; k < kend; ++k, ++name) {
    if (*name == '\0' || *k != *name) return 0;
  }
  return *name == '\0';
}

/* skewclock_parse parses text[0, len) into *out (which it clears first).
 * Returns 0 on success; otherwise -1 with *error set to a static message and
 * *error_at to the byte offset of the offending token. Never allocates. */
static inline int skewclock_parse(const char* text, size_t len, struct skewclock_settings* out,
                                  const char** error, size_t* error_at) {
  const char* p = text;
  const char* end = text + len;
  struct skewclock_settings s;
  s.has_offset = s.has_rate = s.has_monotonic = s.has_version = s.has_pid = s.has_suspend = 0;
  s.offset_ms = 0;
  s.suspend_ms = 0;
  s.rate = 1.0;
  s.monotonic = 0;
  s.version = 0;
  s.pid = 0;
  *error = "";
  *error_at = 0;
  while (p < end) {
    char c = *p;
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') {
      ++p;
      continue;
    }
    if (c == '#') {
      while (p < end && *p != '\n') ++p;
      continue;
    }
    const char* tok = p;
    while (p < end && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r' && *p != '\v' &&
           *p != '\f' && *p != '#')
      ++p;
    const char* eq = tok;
    while (eq < p && *eq != '=') ++eq;
    *error_at = (size_t)(tok - text);
    if (eq == p) {
      *error = "expected key=value";
      return -1;
    }
    const char* v = eq + 1;
    if (skewclock_key_is_(tok, eq, "offset_ms")) {
      int64_t x;
      if (skewclock_parse_i64_(v, p, &x) != 0) {
        *error = "offset_ms: not an integer";
        return -1;
      }
      if (x > SKEWCLOCK_OFFSET_MS_MAX || x < -SKEWCLOCK_OFFSET_MS_MAX) {
        *error = "offset_ms: out of range (|offset_ms| <= 1e12)";
        return -1;
      }
      s.offset_ms = x;
      s.has_offset = 1;
    } else if (skewclock_key_is_(tok, eq, "rate")) {
      double x;
      if (skewclock_parse_double_(v, p, &x) != 0) {
        *error = "rate: not a decimal number";
        return -1;
      }
      if (!(x >= SKEWCLOCK_RATE_MIN && x <= SKEWCLOCK_RATE_MAX)) {
        *error = "rate: out of range (0.001 <= rate <= 1000)";
        return -1;
      }
      s.rate = x;
      s.has_rate = 1;
    } else if (skewclock_key_is_(tok, eq, "monotonic")) {
      if (p - v != 1 || (*v != '0' && *v != '1')) {
        *error = "monotonic: expected 0 or 1";
        return -1;
      }
      s.monotonic = *v == '1';
      s.has_monotonic = 1;
    } else if (skewclock_key_is_(tok, eq, "suspend_ms")) {
      uint64_t x;
      if (skewclock_parse_u64_(v, p, &x) != 0 || x > (uint64_t)SKEWCLOCK_OFFSET_MS_MAX) {
        *error = "suspend_ms: not an integer in 0..1e12";
        return -1;
      }
      s.suspend_ms = (int64_t)x;
      s.has_suspend = 1;
    } else if (skewclock_key_is_(tok, eq, "version")) {
      uint64_t x;
      if (skewclock_parse_u64_(v, p, &x) != 0) {
        *error = "version: not an unsigned integer";
        return -1;
      }
      s.version = x;
      s.has_version = 1;
    } else if (skewclock_key_is_(tok, eq, "pid")) {
      int64_t x;
      if (skewclock_parse_i64_(v, p, &x) != 0) {
        *error = "pid: not an integer";
        return -1;
      }
      s.pid = x;
      s.has_pid = 1;
    } else {
      *error = "unknown key (expected offset_ms, rate, monotonic, suspend_ms, version)";
      return -1;
    }
  }
  *out = s;
  return 0;
}

#ifdef __cplusplus
}
#endif

#endif /* SKEWCLOCK_SETTINGS_H */
