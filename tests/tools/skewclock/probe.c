/* probe.c — skewclock_probe: a process the tests run under libskewclock.so.
 * It answers one-line commands on stdin with one line on stdout:
 *
 *   now            real and skewed readings of every interface:
 *                  "real_rt=.. rt=.. rt_coarse=.. gtod_us=.. time=.. real_rt_after=..
 *                   real_mono=.. mono=.. mono_coarse=.. mono_raw=.. boot=.. real_mono_after=.."
 *                  (real_*: syscall(SYS_clock_gettime), which the shim cannot see;
 *                  the skewed wall readings are taken between real_rt and
 *                  real_rt_after, the monotonic ones between real_mono and
 *                  real_mono_after; all in ns except gtod_us and time)
 *   hammer N       start N threads reading clock_gettime(REALTIME, MONOTONIC,
 *                  REALTIME_COARSE), gettimeofday and time() in a loop, each
 *                  checking that no reading is below the previous one
 *   stop           stop them: "reads=.. backwards=.. max_back_ns=.. worst=<clock>"
 *   condwait MS    pthread_cond_timedwait on a default (CLOCK_REALTIME) condvar
 *                  until skewed-now + MS: "real_ns=<real time it took>"
 *   sleepabs C MS  clock_nanosleep(C, TIMER_ABSTIME) until skewed-now + MS on
 *                  clock C (realtime|monotonic): "real_ns=.."
 *   pid            "pid=<pid>"
 *   quit           exit 0
 *
 * Plain C and never sanitized: it runs with the shim preloaded. */
#define _GNU_SOURCE 1

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int64_t ns_of(const struct timespec* ts) { return (int64_t)ts->tv_sec * 1000000000LL + ts->tv_nsec; }

static int64_t real_ns(clockid_t c) {
  struct timespec ts;
  syscall(SYS_clock_gettime, (long)c, &ts);
  return ns_of(&ts);
}

static int64_t fake_ns(clockid_t c) {
  struct timespec ts;
  if (clock_gettime(c, &ts) != 0) return -1;
  return ns_of(&ts);
}

/* ---- hammer ---- */

enum { K_RT, K_MONO, K_RT_COARSE, K_GTOD, K_TIME, K_N };
static const char* const k_names[K_N] = {"realtime", "monotonic", "realtime_coarse", "gettimeofday",
                                         "time"};

static atomic_int g_stop;
static pthread_t g_threads[64];
static int g_nthreads;
struct result {
  long long reads, backwards;
  int64_t max_back_ns;
  int worst;
};
static struct result g_results[64];

static void* hammer(void* arg) {
  struct result* r = arg;
  int64_t last[K_N];
  for (int k = 0; k < K_N; ++k) last[k] = INT64_MIN;
  while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) {
    int64_t v[K_N];
    struct timeval tv;
    v[K_RT] = fake_ns(CLOCK_REALTIME);
    v[K_MONO] = fake_ns(CLOCK_MONOTONIC);
    v[K_RT_COARSE] = fake_ns(CLOCK_REALTIME_COARSE);
    gettimeofday(&tv, NULL);
    v[K_GTOD] = (int64_t)tv.tv_sec * 1000000000LL + (int64_t)tv.tv_usec * 1000;
    v[K_TIME] = (int64_t)time(NULL) * 1000000000LL;
    for (int k = 0; k < K_N; ++k) {
      if (last[k] != INT64_MIN && v[k] < last[k]) {
        r->backwards++;
        if (last[k] - v[k] > r->max_back_ns) {
          r->max_back_ns = last[k] - v[k];
          r->worst = k;
        }
      }
      last[k] = v[k];
    }
    r->reads++;
  }
  return NULL;
}

/* ---- deadlines ---- */

static int64_t condwait(int64_t ms) {
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t c = PTHREAD_COND_INITIALIZER;
  struct timeval tv;
  gettimeofday(&tv, NULL); /* the way jemalloc computes its deadline */
  int64_t deadline = (int64_t)tv.tv_sec * 1000000000LL + (int64_t)tv.tv_usec * 1000 + ms * 1000000LL;
  struct timespec ts = {(time_t)(deadline / 1000000000LL), (long)(deadline % 1000000000LL)};
  int64_t t0 = real_ns(CLOCK_MONOTONIC);
  pthread_mutex_lock(&m);
  int rc;
  do {
    rc = pthread_cond_timedwait(&c, &m, &ts);
  } while (rc == 0); /* spurious wake-up: nobody signals c */
  pthread_mutex_unlock(&m);
  return real_ns(CLOCK_MONOTONIC) - t0;
}

static int64_t sleepabs(clockid_t clk, int64_t ms) {
  int64_t deadline = fake_ns(clk) + ms * 1000000LL;
  struct timespec ts = {(time_t)(deadline / 1000000000LL), (long)(deadline % 1000000000LL)};
  int64_t t0 = real_ns(CLOCK_MONOTONIC);
  while (clock_nanosleep(clk, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
  return real_ns(CLOCK_MONOTONIC) - t0;
}

int main(void) {
  char line[256];
  setvbuf(stdout, NULL, _IOLBF, 0);
  printf("ready pid=%ld\n", (long)getpid());
  while (fgets(line, sizeof line, stdin) != NULL) {
    char arg1[64] = "";
    long long n = 0;
    if (strncmp(line, "now", 3) == 0) {
      struct timeval tv;
      int64_t real_rt = real_ns(CLOCK_REALTIME);
      int64_t rt = fake_ns(CLOCK_REALTIME);
      int64_t rtc = fake_ns(CLOCK_REALTIME_COARSE);
      gettimeofday(&tv, NULL);
      time_t t = time(NULL);
      int64_t real_rt_after = real_ns(CLOCK_REALTIME);
      int64_t real_mono = real_ns(CLOCK_MONOTONIC);
      int64_t mono = fake_ns(CLOCK_MONOTONIC);
      int64_t monoc = fake_ns(CLOCK_MONOTONIC_COARSE);
      int64_t raw = fake_ns(CLOCK_MONOTONIC_RAW);
      int64_t boot = fake_ns(CLOCK_BOOTTIME);
      int64_t real_mono_after = real_ns(CLOCK_MONOTONIC);
      printf("real_rt=%lld rt=%lld rt_coarse=%lld gtod_us=%lld time=%lld real_rt_after=%lld "
             "real_mono=%lld mono=%lld mono_coarse=%lld mono_raw=%lld boot=%lld real_mono_after=%lld\n",
             (long long)real_rt, (long long)rt, (long long)rtc,
             (long long)tv.tv_sec * 1000000LL + tv.tv_usec, (long long)t, (long long)real_rt_after,
             (long long)real_mono, (long long)mono, (long long)monoc, (long long)raw, (long long)boot,
             (long long)real_mono_after);
    } else if (sscanf(line, "hammer %lld", &n) == 1 && n > 0 && n <= 64 && g_nthreads == 0) {
      atomic_store(&g_stop, 0);
      memset(g_results, 0, sizeof g_results);
      for (int i = 0; i < n; ++i) pthread_create(&g_threads[i], NULL, hammer, &g_results[i]);
      g_nthreads = (int)n;
      printf("hammering threads=%d\n", g_nthreads);
    } else if (strncmp(line, "stop", 4) == 0) {
      atomic_store(&g_stop, 1);
      struct result total = {0, 0, 0, 0};
      for (int i = 0; i < g_nthreads; ++i) {
        pthread_join(g_threads[i], NULL);
        total.reads += g_results[i].reads;
        total.backwards += g_results[i].backwards;
        if (g_results[i].max_back_ns > total.max_back_ns) {
          total.max_back_ns = g_results[i].max_back_ns;
          total.worst = g_results[i].worst;
        }
      }
      g_nthreads = 0;
      printf("reads=%lld backwards=%lld max_back_ns=%lld worst=%s\n", total.reads, total.backwards,
             (long long)total.max_back_ns, total.backwards ? k_names[total.worst] : "none");
    } else if (sscanf(line, "condwait %lld", &n) == 1) {
      printf("real_ns=%lld\n", (long long)condwait(n));
    } else if (sscanf(line, "sleepabs %63s %lld", arg1, &n) == 2) {
      clockid_t c = strcmp(arg1, "monotonic") == 0 ? CLOCK_MONOTONIC : CLOCK_REALTIME;
      printf("real_ns=%lld\n", (long long)sleepabs(c, n));
    } else if (strncmp(line, "pid", 3) == 0) {
      printf("pid=%ld\n", (long)getpid());
    } else if (strncmp(line, "quit", 4) == 0) {
      return 0;
    } else {
      printf("error unknown command\n");
    }
  }
  return 0;
}
