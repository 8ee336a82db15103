/* skewclock.c — libskewclock.so, an LD_PRELOAD shim that skews a process's
 * view of wall-clock time (and, on request, the rate of its monotonic
 * clocks). See docs/skewclock.md.
 *
 * Model, per clock c (t = the real reading of c):
 *   fake_c(t) = t + extra_c + round((t - anchor_c) * (rate_c - 1)) + offset_c
 * where offset_c is the configured offset for the wall clocks and 0 for the
 * monotonic ones, rate_c is the configured rate for the wall clocks and for
 * the monotonic ones only when monotonic=1 (else 1). Every settings change
 * re-anchors each clock at its current reading (anchor_c = t_now, extra_c
 * absorbs the drift so far), so a rate change never moves a clock; only an
 * offset change moves the wall clocks, by exactly the difference.
 *
 * Constraints (the reason for the odd style):
 *  - No allocation, no dlsym, no stdio: jemalloc calls clock_gettime while it
 *    initialises (possibly before any constructor ran, possibly from inside
 *    malloc), and Debian's libfaketime deadlocks redis-server exactly there.
 *    Real clocks are read through the vDSO, found via getauxval(AT_SYSINFO_EHDR)
 *    and parsed here, or through syscall(SYS_clock_gettime).
 *  - Thread-safe and async-signal-safe: readers take a seqlock (never a
 *    mutex); the single writer blocks signals while it holds the write side,
 *    so a signal handler can never spin on its own thread's update.
 *  - errno is preserved across the settings-file check.
 */
#define _GNU_SOURCE 1

#include <elf.h>
#include <link.h> /* ElfW */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h> /* rename() only; no stdio streams are used */
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/select.h> /* struct timeval, without gettimeofday's declaration */
#include <time.h>
#include <unistd.h>

#include "skewclock_settings.h"

#define SK_EXPORT __attribute__((visibility("default")))

extern char** environ;

/* ---- clocks ------------------------------------------------------------- */

enum { SK_NCLOCKS = 12 };                 /* clock ids 0..11 */
enum { FAM_NONE = 0, FAM_WALL = 1, FAM_MONO = 2 };

/* Which ids are skewed, and as what. CPU-time clocks (2, 3) and unknown or
 * dynamic (negative) ids are passed through untouched. */
static const unsigned char k_family[SK_NCLOCKS] = {
    [CLOCK_REALTIME] = FAM_WALL,        [CLOCK_MONOTONIC] = FAM_MONO,
    [CLOCK_PROCESS_CPUTIME_ID] = FAM_NONE, [CLOCK_THREAD_CPUTIME_ID] = FAM_NONE,
    [CLOCK_MONOTONIC_RAW] = FAM_MONO,   [CLOCK_REALTIME_COARSE] = FAM_WALL,
    [CLOCK_MONOTONIC_COARSE] = FAM_MONO, [CLOCK_BOOTTIME] = FAM_MONO,
    [CLOCK_REALTIME_ALARM] = FAM_WALL,  [CLOCK_BOOTTIME_ALARM] = FAM_MONO,
    [10] = FAM_NONE,                    [CLOCK_TAI] = FAM_WALL,
};

static inline int family_of(clockid_t id) {
  return (id >= 0 && id < SK_NCLOCKS) ? k_family[id] : FAM_NONE;
}

typedef int (*vdso_gettime_fn)(clockid_t, struct timespec*);

/* 0: not looked up yet; 1: looked up (g_vdso_gettime may still be NULL). */
static _Atomic int g_vdso_state;
static _Atomic(vdso_gettime_fn) g_vdso_gettime;

/* find_vdso_symbol walks the vDSO's dynamic symbol table (DT_HASH gives its
 * size; the kernel links the vDSO with --hash-style=both). */
static void* find_vdso_symbol(const char* name) {
  uintptr_t base = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
  if (base == 0) return NULL;
  const ElfW(Ehdr)* eh = (const ElfW(Ehdr)*)base;
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0) return NULL;
  const ElfW(Phdr)* ph = (const ElfW(Phdr)*)(base + eh->e_phoff);
  uintptr_t bias = 0;
  int have_load = 0;
  const ElfW(Dyn)* dyn = NULL;
  for (int i = 0; i < eh->e_phnum; ++i) {
    if (ph[i].p_type == PT_LOAD && !have_load) {
      bias = base + ph[i].p_offset - ph[i].p_vaddr;
      have_load = 1;
    } else if (ph[i].p_type == PT_DYNAMIC) {
      dyn = (const ElfW(Dyn)*)(base + ph[i].p_offset);
    }
  }
  if (!have_load || dyn == NULL) return NULL;
  const ElfW(Sym)* symtab = NULL;
  const char* strtab = NULL;
  const ElfW(Word)* hash = NULL;
  for (; dyn->d_tag != DT_NULL; ++dyn) {
    if (dyn->d_tag == DT_SYMTAB) symtab = (const ElfW(Sym)*)(bias + dyn->d_un.d_ptr);
    else if (dyn->d_tag == DT_STRTAB) strtab = (const char*)(bias + dyn->d_un.d_ptr);
    else if (dyn->d_tag == DT_HASH) hash = (const ElfW(Word)*)(bias + dyn->d_un.d_ptr);
  }
  if (symtab == NULL || strtab == NULL || hash == NULL) return NULL;
  ElfW(Word) nsyms = hash[1]; /* nchain == number of symbols */
  for (ElfW(Word) i = 0; i < nsyms; ++i) {
    const ElfW(Sym)* s = &symtab[i];
    if (ELF64_ST_TYPE(s->st_info) != STT_FUNC || s->st_shndx == SHN_UNDEF) continue;
    if (strcmp(strtab + s->st_name, name) == 0) return (void*)(bias + s->st_value);
  }
  return NULL;
}

static int env_flag(const char* name); /* below */

static vdso_gettime_fn vdso_gettime(void) {
  if (atomic_load_explicit(&g_vdso_state, memory_order_acquire) == 0) {
    vdso_gettime_fn f = NULL;
    void* sym = NULL;
    if (!env_flag("SKEWCLOCK_NO_VDSO")) {
#if defined(__x86_64__)
      sym = find_vdso_symbol("__vdso_clock_gettime");
#elif defined(__aarch64__)
      sym = find_vdso_symbol("__kernel_clock_gettime");
#endif
    }
    if (sym != NULL) memcpy(&f, &sym, sizeof f); /* object -> function pointer */
    atomic_store_explicit(&g_vdso_gettime, f, memory_order_relaxed);
    atomic_store_explicit(&g_vdso_state, 1, memory_order_release); /* idempotent: races are benign */
  }
  return atomic_load_explicit(&g_vdso_gettime, memory_order_relaxed);
}

/* real_gettime: the real clock, never through libc's clock_gettime (which is
 * us). Returns 0 or an errno value. */
static int real_gettime(clockid_t id, struct timespec* ts) {
  vdso_gettime_fn f = vdso_gettime();
  if (f != NULL) {
    int r = f(id, ts); /* raw kernel convention: 0 or -errno */
    return r == 0 ? 0 : -r;
  }
  long r = syscall(SYS_clock_gettime, (long)id, ts);
  return r == 0 ? 0 : errno;
}

static inline int64_t ts_to_ns(const struct timespec* ts) {
  return (int64_t)ts->tv_sec * 1000000000LL + ts->tv_nsec;
}

static inline struct timespec ns_to_ts(int64_t ns) {
  struct timespec ts;
  int64_t s = ns / 1000000000LL, r = ns % 1000000000LL;
  if (r < 0) {
    r += 1000000000LL;
    s -= 1;
  }
  ts.tv_sec = (time_t)s;
  ts.tv_nsec = (long)r;
  return ts;
}

static inline int64_t round_to_i64(double x) {
  return x >= 0 ? (int64_t)(x + 0.5) : -(int64_t)(-x + 0.5);
}

static inline uint64_t dbits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}
static inline double bitsd(uint64_t u) {
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

/* ---- state (seqlock) ---------------------------------------------------- */

/* Read by everyone under g_seq; written only by the holder of g_wlock. */
static _Atomic int64_t g_anchor[SK_NCLOCKS];
static _Atomic int64_t g_extra[SK_NCLOCKS];
static _Atomic uint64_t g_wall_rate_bits;  /* double */
static _Atomic uint64_t g_mono_rate_bits;  /* double: wall rate when monotonic=1, else 1 */
static _Atomic int64_t g_offset_ns;
static _Atomic unsigned g_seq;             /* odd: an update is in progress */
static atomic_flag g_wlock = ATOMIC_FLAG_INIT;

/* Writer-only state (under g_wlock). */
static int64_t w_offset_ms;
static double w_rate = 1.0;
static int w_monotonic;
static int64_t w_suspend_ms;

/* 0: not initialised, 1: initialising, 2: ready. */
static _Atomic int g_init_state;

/* Settings file. */
static char g_file[4096];          /* empty: no file */
static int64_t g_poll_ns = 5000000; /* SKEWCLOCK_POLL_MS */
static _Atomic int64_t g_last_poll_ns = INT64_MIN;
static atomic_flag g_poll_busy = ATOMIC_FLAG_INIT;
static int g_verbose;
static int g_no_deadlines;
static pid_t g_owner_pid;          /* only this process writes acknowledgements */
static int g_env_seen;             /* environ was readable at init */
/* Identity of the last file version looked at (under g_poll_busy). */
static struct {
  int valid;
  dev_t dev;
  ino_t ino;
  int64_t mtime_ns, ctime_ns;
  off_t size;
} g_seen;

static void spin_pause(unsigned* n) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
  if (++*n % 64 == 0) sched_yield();
}

static void wlock_acquire(void) {
  unsigned n = 0;
  while (atomic_flag_test_and_set_explicit(&g_wlock, memory_order_acquire)) spin_pause(&n);
}
static void wlock_release(void) { atomic_flag_clear_explicit(&g_wlock, memory_order_release); }

/* write_params re-anchors every skewed clock at its current real reading and
 * installs the new settings. Caller holds g_wlock with signals blocked. */
static void write_params(int64_t offset_ms, double rate, int monotonic, int64_t suspend_ms) {
  unsigned s = atomic_load_explicit(&g_seq, memory_order_relaxed);
  atomic_store_explicit(&g_seq, s + 1, memory_order_relaxed);
  /* Full fence: readers that see the old seq must have read their clock
   * before the clock readings below (store->load ordering). */
  atomic_thread_fence(memory_order_seq_cst);
  double old_wall = bitsd(atomic_load_explicit(&g_wall_rate_bits, memory_order_relaxed));
  double old_mono = bitsd(atomic_load_explicit(&g_mono_rate_bits, memory_order_relaxed));
  for (int id = 0; id < SK_NCLOCKS; ++id) {
    int fam = k_family[id];
    if (fam == FAM_NONE) continue;
    struct timespec ts;
    if (real_gettime(id, &ts) != 0) continue; /* unsupported here: never read either */
    int64_t t = ts_to_ns(&ts);
    int64_t a = atomic_load_explicit(&g_anchor[id], memory_order_relaxed);
    int64_t e = atomic_load_explicit(&g_extra[id], memory_order_relaxed);
    double r = fam == FAM_WALL ? old_wall : old_mono;
    /* A suspend moves only the boot clocks, forward, by the added time. */
    int64_t slept = 0;
    if ((id == CLOCK_BOOTTIME || id == CLOCK_BOOTTIME_ALARM) && suspend_ms > w_suspend_ms)
      slept = (suspend_ms - w_suspend_ms) * 1000000LL;
    atomic_store_explicit(&g_extra[id], e + round_to_i64((double)(t - a) * (r - 1.0)) + slept,
                          memory_order_relaxed);
    atomic_store_explicit(&g_anchor[id], t, memory_order_relaxed);
  }
  atomic_store_explicit(&g_wall_rate_bits, dbits(rate), memory_order_relaxed);
  atomic_store_explicit(&g_mono_rate_bits, dbits(monotonic ? rate : 1.0), memory_order_relaxed);
  atomic_store_explicit(&g_offset_ns, offset_ms * 1000000LL, memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
  atomic_store_explicit(&g_seq, s + 2, memory_order_relaxed);
  w_offset_ms = offset_ms;
  w_rate = rate;
  w_monotonic = monotonic;
  if (suspend_ms > w_suspend_ms) w_suspend_ms = suspend_ms;
}

/* apply_settings: merge the keys present in *st into the current settings. */
static void apply_settings(const struct skewclock_settings* st) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  wlock_acquire();
  write_params(st->has_offset ? st->offset_ms : w_offset_ms, st->has_rate ? st->rate : w_rate,
               st->has_monotonic ? st->monotonic : w_monotonic, st->has_suspend ? st->suspend_ms : w_suspend_ms);
  wlock_release();
  pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* ---- tiny formatting (no stdio) ----------------------------------------- */

struct buf {
  char* p;
  size_t n, cap;
};
static void put_str(struct buf* b, const char* s) {
  while (*s && b->n + 1 < b->cap) b->p[b->n++] = *s++;
  b->p[b->n] = '\0';
}
static void put_u64(struct buf* b, uint64_t v) {
  char tmp[24];
  int i = 0;
  do {
    tmp[i++] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (i > 0 && b->n + 1 < b->cap) b->p[b->n++] = tmp[--i];
  b->p[b->n] = '\0';
}
static void put_i64(struct buf* b, int64_t v) {
  if (v < 0) {
    put_str(b, "-");
    put_u64(b, (uint64_t)0 - (uint64_t)v);
  } else {
    put_u64(b, (uint64_t)v);
  }
}
static void put_rate(struct buf* b, double r) { /* fixed, 9 decimals */
  uint64_t scaled = (uint64_t)(r * 1e9 + 0.5);
  put_u64(b, scaled / 1000000000ULL);
  put_str(b, ".");
  uint64_t frac = scaled % 1000000000ULL;
  char tmp[10];
  for (int i = 8; i >= 0; --i) {
    tmp[i] = (char)('0' + frac % 10);
    frac /= 10;
  }
  tmp[9] = '\0';
  put_str(b, tmp);
}
static void put_settings(struct buf* b, int64_t off, double rate, int mono, int64_t suspend_ms) {
  put_str(b, "offset_ms=");
  put_i64(b, off);
  put_str(b, " rate=");
  put_rate(b, rate);
  put_str(b, " monotonic=");
  put_str(b, mono ? "1" : "0");
  put_str(b, " suspend_ms=");
  put_i64(b, suspend_ms);
}

static void say(const char* msg) {
  size_t n = strlen(msg);
  while (n > 0) {
    ssize_t w = write(STDERR_FILENO, msg, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    msg += w;
    n -= (size_t)w;
  }
}

/* ---- environment and settings file ------------------------------------- */

/* get_env: getenv without locale/allocation concerns; NULL before libc has
 * set environ up. */
static const char* get_env(const char* name) {
  char** env = environ;
  if (env == NULL) return NULL;
  size_t n = strlen(name);
  for (; *env != NULL; ++env) {
    if (strncmp(*env, name, n) == 0 && (*env)[n] == '=') return *env + n + 1;
  }
  return NULL;
}

static int env_flag(const char* name) {
  const char* v = get_env(name);
  return v != NULL && v[0] != '\0' && !(v[0] == '0' && v[1] == '\0');
}

/* settings_from_env: SKEWCLOCK_OFFSET_MS / SKEWCLOCK_RATE / SKEWCLOCK_MONOTONIC
 * through the file parser (same syntax, same limits). */
static void settings_from_env(struct skewclock_settings* st) {
  static const struct {
    const char* env;
    const char* key;
  } k[] = {{"SKEWCLOCK_OFFSET_MS", "offset_ms="},
           {"SKEWCLOCK_RATE", "rate="},
           {"SKEWCLOCK_MONOTONIC", "monotonic="}};
  memset(st, 0, sizeof *st);
  st->rate = 1.0;
  for (size_t i = 0; i < sizeof k / sizeof k[0]; ++i) {
    const char* v = get_env(k[i].env);
    if (v == NULL) continue;
    char line[128];
    struct buf b = {line, 0, sizeof line};
    put_str(&b, k[i].key);
    put_str(&b, v);
    struct skewclock_settings one;
    const char* err;
    size_t at;
    if (b.n + 1 >= sizeof line || skewclock_parse(line, b.n, &one, &err, &at) != 0) {
      char m[256];
      struct buf e = {m, 0, sizeof m};
      put_str(&e, "skewclock: ignoring ");
      put_str(&e, k[i].env);
      put_str(&e, ": bad value\n");
      say(m);
      continue;
    }
    if (one.has_offset) st->offset_ms = one.offset_ms, st->has_offset = 1;
    if (one.has_rate) st->rate = one.rate, st->has_rate = 1;
    if (one.has_monotonic) st->monotonic = one.monotonic, st->has_monotonic = 1;
    if (one.has_suspend) st->suspend_ms = one.suspend_ms, st->has_suspend = 1;
  }
}

/* write_ack: <file>.ack <- "version=N pid=P offset_ms=.. rate=.. monotonic=..",
 * via a temp file and rename so readers never see half of it. */
static void write_ack(uint64_t version) {
  pid_t pid = (pid_t)syscall(SYS_getpid);
  if (pid != g_owner_pid) return; /* a forked child (redis BGSAVE): not the server */
  char ack[sizeof g_file + 8], tmp[sizeof g_file + 40], text[256];
  struct buf a = {ack, 0, sizeof ack}, t = {tmp, 0, sizeof tmp}, x = {text, 0, sizeof text};
  put_str(&a, g_file);
  put_str(&a, ".ack");
  put_str(&t, ack);
  put_str(&t, ".tmp.");
  put_u64(&t, (uint64_t)pid);
  put_str(&x, "version=");
  put_u64(&x, version);
  put_str(&x, " pid=");
  put_u64(&x, (uint64_t)pid);
  put_str(&x, " ");
  put_settings(&x, w_offset_ms, w_rate, w_monotonic, w_suspend_ms);
  put_str(&x, "\n");
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return;
  ssize_t w = write(fd, text, x.n);
  close(fd);
  if (w == (ssize_t)x.n) {
    if (rename(tmp, ack) == 0) return;
  }
  unlink(tmp);
}

/* check_file: re-read the settings file if its identity changed. Called by
 * at most one thread at a time (g_poll_busy). */
static void check_file(void) {
  struct stat sb;
  if (stat(g_file, &sb) != 0) return; /* missing: keep the current settings */
  int64_t mt = (int64_t)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec;
  int64_t ct = (int64_t)sb.st_ctim.tv_sec * 1000000000LL + sb.st_ctim.tv_nsec;
  if (g_seen.valid && g_seen.dev == sb.st_dev && g_seen.ino == sb.st_ino && g_seen.mtime_ns == mt &&
      g_seen.ctime_ns == ct && g_seen.size == sb.st_size)
    return;
  char text[4096];
  int fd = open(g_file, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  struct stat fsb;
  size_t n = 0;
  int ok = fstat(fd, &fsb) == 0;
  while (ok && n < sizeof text) {
    ssize_t r = read(fd, text + n, sizeof text - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) ok = 0;
    if (r <= 0) break;
    n += (size_t)r;
  }
  close(fd);
  if (!ok) return;
  /* Remember what was read (the fstat of the opened file, which may be newer
   * than the stat above if it was replaced in between). */
  g_seen.valid = 1;
  g_seen.dev = fsb.st_dev;
  g_seen.ino = fsb.st_ino;
  g_seen.mtime_ns = (int64_t)fsb.st_mtim.tv_sec * 1000000000LL + fsb.st_mtim.tv_nsec;
  g_seen.ctime_ns = (int64_t)fsb.st_ctim.tv_sec * 1000000000LL + fsb.st_ctim.tv_nsec;
  g_seen.size = fsb.st_size;

  struct skewclock_settings st;
  const char* err;
  size_t at;
  if (n == sizeof text) {
    err = "file larger than 4095 bytes";
    at = 0;
  }
  if (n == sizeof text || skewclock_parse(text, n, &st, &err, &at) != 0) {
    char m[sizeof g_file + 256];
    struct buf b = {m, 0, sizeof m};
    put_str(&b, "skewclock: ");
    put_str(&b, g_file);
    put_str(&b, ": byte ");
    put_u64(&b, at);
    put_str(&b, ": ");
    put_str(&b, err);
    put_str(&b, "; keeping ");
    put_settings(&b, w_offset_ms, w_rate, w_monotonic, w_suspend_ms);
    put_str(&b, "\n");
    say(m);
    return;
  }
  apply_settings(&st);
  if (g_verbose) {
    char m[256];
    struct buf b = {m, 0, sizeof m};
    put_str(&b, "skewclock: applied version=");
    put_u64(&b, st.version);
    put_str(&b, " ");
    put_settings(&b, w_offset_ms, w_rate, w_monotonic, w_suspend_ms);
    put_str(&b, "\n");
    say(m);
  }
  write_ack(st.version);
}

static int64_t mono_coarse_ns(void) {
  struct timespec ts;
  if (real_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0 && real_gettime(CLOCK_MONOTONIC, &ts) != 0)
    return 0;
  return ts_to_ns(&ts);
}

/* maybe_poll: at most every g_poll_ns, one thread stats the settings file. */
static void maybe_poll(void) {
  if (g_file[0] == '\0') return;
  int64_t now = mono_coarse_ns();
  int64_t last = atomic_load_explicit(&g_last_poll_ns, memory_order_relaxed);
  if (last != INT64_MIN && now - last < g_poll_ns) return;
  if (atomic_flag_test_and_set_explicit(&g_poll_busy, memory_order_acquire)) return;
  atomic_store_explicit(&g_last_poll_ns, now, memory_order_relaxed);
  int saved = errno;
  check_file();
  errno = saved;
  atomic_flag_clear_explicit(&g_poll_busy, memory_order_release);
}

/* ---- initialisation ----------------------------------------------------- */

/* read_config: everything taken from the environment except the settings. */
static void read_config(void) {
  g_env_seen = environ != NULL;
  g_owner_pid = (pid_t)syscall(SYS_getpid);
  g_verbose = env_flag("SKEWCLOCK_VERBOSE");
  g_no_deadlines = env_flag("SKEWCLOCK_NO_DEADLINES");
  const char* poll = get_env("SKEWCLOCK_POLL_MS");
  if (poll != NULL) {
    int64_t ms;
    if (skewclock_parse_i64_(poll, poll + strlen(poll), &ms) == 0 && ms >= 0 && ms <= 60000)
      g_poll_ns = ms * 1000000LL;
    else
      say("skewclock: ignoring SKEWCLOCK_POLL_MS: expected 0..60000\n");
  }
  const char* file = get_env("SKEWCLOCK_FILE");
  size_t len = file != NULL ? strlen(file) : 0;
  if (len > 0 && len < sizeof g_file - 64) {
    memcpy(g_file, file, len + 1);
  } else if (len > 0) {
    say("skewclock: SKEWCLOCK_FILE path too long; ignored\n");
  }
}

/* load_settings: the environment's settings, then the file's (if any). */
static void load_settings(void) {
  struct skewclock_settings st;
  settings_from_env(&st);
  apply_settings(&st);
  if (g_file[0] != '\0') {
    unsigned n = 0;
    while (atomic_flag_test_and_set_explicit(&g_poll_busy, memory_order_acquire)) spin_pause(&n);
    atomic_store_explicit(&g_last_poll_ns, mono_coarse_ns(), memory_order_relaxed);
    int saved = errno;
    check_file();
    errno = saved;
    atomic_flag_clear_explicit(&g_poll_busy, memory_order_release);
  }
  if (g_verbose) {
    char m[sizeof g_file + 256];
    struct buf b = {m, 0, sizeof m};
    put_str(&b, "skewclock: pid=");
    put_u64(&b, (uint64_t)g_owner_pid);
    put_str(&b, vdso_gettime() != NULL ? " clock=vdso " : " clock=syscall ");
    put_settings(&b, w_offset_ms, w_rate, w_monotonic, w_suspend_ms);
    put_str(&b, " file=");
    put_str(&b, g_file[0] ? g_file : "(none)");
    put_str(&b, "\n");
    say(m);
  }
}

static void do_init(void) {
  int saved = errno;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  read_config();
  /* Every clock starts at its real reading with zero extra: write_params
   * re-anchors with the old rate, which must be 1 the first time. */
  atomic_store_explicit(&g_wall_rate_bits, dbits(1.0), memory_order_relaxed);
  atomic_store_explicit(&g_mono_rate_bits, dbits(1.0), memory_order_relaxed);
  wlock_acquire();
  write_params(0, 1.0, 0, 0);
  wlock_release();
  /* Ready before signals come back: a handler on this thread must not wait
   * for the initialisation it interrupted. */
  atomic_store_explicit(&g_init_state, 2, memory_order_release);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  load_settings();
  errno = saved;
}

static inline void ensure_init(void) {
  if (atomic_load_explicit(&g_init_state, memory_order_acquire) == 2) return;
  int expected = 0;
  if (atomic_compare_exchange_strong_explicit(&g_init_state, &expected, 1, memory_order_acq_rel,
                                              memory_order_acquire)) {
    do_init();
    return;
  }
  /* Another thread is initialising (with signals blocked, so it is not this
   * thread): wait for it, a few microseconds. */
  unsigned n = 0;
  while (atomic_load_explicit(&g_init_state, memory_order_acquire) != 2) spin_pause(&n);
}

static void atfork_prepare(void) { wlock_acquire(); }
static void atfork_parent(void) { wlock_release(); }
static void atfork_child(void) {
  wlock_release();
  /* A thread of the parent may have been polling: it does not exist here. */
  atomic_flag_clear_explicit(&g_poll_busy, memory_order_relaxed);
}

__attribute__((constructor)) static void skewclock_ctor(void) {
  ensure_init();
  /* Defensive: if the first clock call came before libc had set environ up,
   * the environment was not seen; read it now. */
  if (!g_env_seen && environ != NULL) {
    read_config();
    load_settings();
  }
  pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

/* ---- reading the skewed clocks ----------------------------------------- */

/* fake_now: the skewed reading of clock id (skewed family), or an errno. */
static int fake_now(clockid_t id, int64_t* out) {
  int fam = family_of(id);
  unsigned n = 0;
  for (;;) {
    unsigned s1 = atomic_load_explicit(&g_seq, memory_order_acquire);
    if (s1 & 1u) {
      spin_pause(&n);
      continue;
    }
    struct timespec ts;
    int err = real_gettime(id, &ts);
    if (err != 0) return err;
    int64_t t = ts_to_ns(&ts);
    int64_t a = atomic_load_explicit(&g_anchor[id], memory_order_relaxed);
    int64_t e = atomic_load_explicit(&g_extra[id], memory_order_relaxed);
    double r = bitsd(atomic_load_explicit(fam == FAM_WALL ? &g_wall_rate_bits : &g_mono_rate_bits,
                                          memory_order_relaxed));
    int64_t off = fam == FAM_WALL ? atomic_load_explicit(&g_offset_ns, memory_order_relaxed) : 0;
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&g_seq, memory_order_relaxed) != s1) continue;
    *out = t + e + round_to_i64((double)(t - a) * (r - 1.0)) + off;
    return 0;
  }
}

/* real_from_fake: the inverse, for absolute deadlines given on the skewed
 * timeline. Returns 0 when *out_ns was computed, -1 to leave it alone. */
static int real_from_fake(clockid_t id, int64_t fake, int64_t* out_ns) {
  int fam = family_of(id);
  if (fam == FAM_NONE) return -1;
  unsigned n = 0;
  for (;;) {
    unsigned s1 = atomic_load_explicit(&g_seq, memory_order_acquire);
    if (s1 & 1u) {
      spin_pause(&n);
      continue;
    }
    int64_t a = atomic_load_explicit(&g_anchor[id], memory_order_relaxed);
    int64_t e = atomic_load_explicit(&g_extra[id], memory_order_relaxed);
    double r = bitsd(atomic_load_explicit(fam == FAM_WALL ? &g_wall_rate_bits : &g_mono_rate_bits,
                                          memory_order_relaxed));
    int64_t off = fam == FAM_WALL ? atomic_load_explicit(&g_offset_ns, memory_order_relaxed) : 0;
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&g_seq, memory_order_relaxed) != s1) continue;
    if (r == 1.0 && e == 0 && off == 0) return -1; /* identity */
    /* fake = t + e + (t - a)(r - 1) + off  =>  t = a + (fake - a - e - off) / r */
    *out_ns = a + round_to_i64((double)(fake - a - e - off) / r);
    return 0;
  }
}

static int clock_entry(clockid_t id, struct timespec* ts) {
  ensure_init();
  if (family_of(id) == FAM_NONE || ts == NULL) {
    int err = ts == NULL ? EFAULT : real_gettime(id, ts);
    if (err != 0) {
      errno = err;
      return -1;
    }
    return 0;
  }
  maybe_poll();
  int64_t ns;
  int err = fake_now(id, &ns);
  if (err != 0) {
    errno = err;
    return -1;
  }
  *ts = ns_to_ts(ns);
  return 0;
}

/* ---- the interposed functions ------------------------------------------ */

SK_EXPORT int clock_gettime(clockid_t id, struct timespec* ts) { return clock_entry(id, ts); }

SK_EXPORT int gettimeofday(struct timeval* restrict tv, void* restrict tz) {
  if (tz != NULL) {
    long r = syscall(SYS_gettimeofday, NULL, tz);
    if (r != 0) return -1;
  }
  /* glibc declares tv nonnull, yet gettimeofday(NULL, &tz) is old practice:
   * look at the pointer through a volatile so the check survives. */
  struct timeval* volatile tvp = tv;
  if (tvp == NULL) return 0;
  struct timespec ts;
  if (clock_entry(CLOCK_REALTIME, &ts) != 0) return -1;
  tv->tv_sec = ts.tv_sec;
  tv->tv_usec = (suseconds_t)(ts.tv_nsec / 1000);
  return 0;
}

SK_EXPORT time_t time(time_t* tloc) {
  struct timespec ts;
  if (clock_entry(CLOCK_REALTIME, &ts) != 0) return (time_t)-1;
  if (tloc != NULL) *tloc = ts.tv_sec;
  return ts.tv_sec;
}

/* translate_deadline: *abstime on the skewed timeline of clk -> the real
 * one, with the settings of the moment. Returns the pointer to use. */
static const struct timespec* translate_deadline(clockid_t clk, const struct timespec* abstime,
                                                 struct timespec* real) {
  if (g_no_deadlines || abstime->tv_nsec < 0 || abstime->tv_nsec >= 1000000000L || abstime->tv_sec < 0 ||
      abstime->tv_sec >= 100000000000LL /* year 5138: "forever" */)
    return abstime;
  int64_t out;
  if (real_from_fake(clk, ts_to_ns(abstime), &out) != 0) return abstime;
  *real = ns_to_ts(out < 0 ? 0 : out);
  return real;
}

/* clock_nanosleep(TIMER_ABSTIME) sleeps until a deadline computed from the
 * skewed clock (Python's time.sleep does this on CLOCK_MONOTONIC); map it
 * back like pthread_cond_timedwait below. Relative sleeps pass through. */
SK_EXPORT int clock_nanosleep(clockid_t clk, int flags, const struct timespec* req,
                              struct timespec* rem) {
  ensure_init();
  struct timespec real;
  const struct timespec* use = req;
  if ((flags & TIMER_ABSTIME) && family_of(clk) != FAM_NONE) use = translate_deadline(clk, req, &real);
  int saved = errno;
  long r = syscall(SYS_clock_nanosleep, (long)clk, (long)flags, use, rem);
  int err = r == 0 ? 0 : errno;
  errno = saved;
  return err; /* clock_nanosleep returns the error number, errno untouched */
}

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 30))
/* pthread_cond_timedwait takes an absolute deadline on the condition
 * variable's clock, computed by the caller from the skewed clock (jemalloc's
 * background thread: gettimeofday + interval). Without translation a
 * negative offset makes every such wait return at once (a busy loop) and a
 * positive one oversleeps by the offset. The deadline is mapped back to the
 * real timeline with the settings of the moment and handed to
 * pthread_cond_clockwait (glibc >= 2.30), which is not interposed.
 * glibc keeps the condvar's clock in bit 1 of __wrefs (set at init only). */
SK_EXPORT int pthread_cond_timedwait(pthread_cond_t* restrict cond, pthread_mutex_t* restrict mutex,
                                     const struct timespec* restrict abstime) {
  ensure_init();
  unsigned flags = __atomic_load_n(&cond->__data.__wrefs, __ATOMIC_RELAXED);
  clockid_t clk = (flags & 2u) ? CLOCK_MONOTONIC : CLOCK_REALTIME;
  struct timespec real;
  const struct timespec* use = translate_deadline(clk, abstime, &real);
  return pthread_cond_clockwait(cond, mutex, clk, use);
}
#endif
