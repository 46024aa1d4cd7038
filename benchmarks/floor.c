/* The floor under any sandboxed exec: a bare fork + exec of `/bin/sh -c true` and
 * waitpid, N times, no sandbox. Prints p50/p99/mean like the other benches.
 *
 * usage: bench_floor [N] [-- COMMAND ARGS...]
 *   N        iterations (default 1000; 20 warm-up runs are not counted)
 *   COMMAND  what to fork+exec instead of /bin/sh -c true (the side-by-side harness
 *            times a fresh `bwrap --unshare-all --ro-bind / / /bin/sh -c true` this way)
 * --json     one JSON line instead of the text line
 * Benchmarks print numbers; nothing here asserts on timing. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

/* One fork + exec + waitpid; returns the exit status, or -1 when fork fails. */
static int run_once(char* const argv[]) {
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    execv(argv[0], argv);
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    ;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int main(int argc, char** argv) {
  long n = 1000;
  int json = 0;
  static char* sh_true[] = {"/bin/sh", "-c", "true", NULL};
  char** cmd = sh_true;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--") == 0) {
      if (i + 1 < argc)
        cmd = &argv[i + 1];
      break;
    } else if (strcmp(argv[i], "--json") == 0) {
      json = 1;
    } else {
      n = strtol(argv[i], NULL, 10);
      if (n <= 0) {
        fprintf(stderr, "usage: bench_floor [N] [--json] [-- COMMAND ARGS...]\n");
        return 2;
      }
    }
  }
  double* lat = malloc(sizeof(double) * (size_t)n);
  if (!lat)
    return 1;
  for (int i = 0; i < 20; ++i)
    if (run_once(cmd) != 0) {
      fprintf(stderr, "bench_floor: %s exited non-zero\n", cmd[0]);
      return 1;
    }
  double sum = 0;
  long failures = 0;
  for (long i = 0; i < n; ++i) {
    double t0 = now_ms();
    if (run_once(cmd) != 0)
      ++failures;
    lat[i] = now_ms() - t0;
    sum += lat[i];
  }
  qsort(lat, (size_t)n, sizeof(double), cmp);
  double p50 = lat[n / 2], p99 = lat[(long)(0.99 * n) < n ? (long)(0.99 * n) : n - 1];
  char what[256];
  snprintf(what, sizeof what, "fork+exec+wait `%s%s%s`", cmd == sh_true ? "/bin/sh -c true" : cmd[0],
           cmd == sh_true ? "" : " ...", "");
  if (json)
    printf("{\"command\":\"%s\",\"p50_ms\":%.4f,\"p99_ms\":%.4f,\"mean_ms\":%.4f,\"runs\":%ld,"
           "\"failures\":%ld}\n",
           cmd == sh_true ? "/bin/sh -c true" : cmd[0], p50, p99, sum / n, n, failures);
  else
    printf("%-44s p50 %7.3f ms  p99 %7.3f ms  mean %7.3f ms  (%ld runs, %ld failures)\n", what, p50,
           p99, sum / n, n, failures);
  free(lat);
  return failures ? 1 : 0;
}
