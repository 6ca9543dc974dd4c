/* Round trip of 100 bytes over a pair of pipes between two processes: how much a process wake-up costs on this
 * machine, on one CPU (`taskset -c 0 ./pipe_pingpong`) and across CPUs (`./pipe_pingpong`). Context for the proxy
 * benchmark (BENCHMARKS.md), not part of agent-discover.
 * Build and run: gcc -O2 benches/pipe_pingpong.c -o target/pipe_pingpong && target/pipe_pingpong */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(void) {
    enum { N = 20000 };
    int to[2], from[2];
    char buf[128] = "x";
    if (pipe(to) || pipe(from)) return 1;
    if (fork() == 0) {
        for (;;) {
            ssize_t n = read(to[0], buf, sizeof buf);
            if (n <= 0) _exit(0);
            if (write(from[1], buf, (size_t)n) != n) _exit(1);
        }
    }
    double *v = malloc(sizeof(double) * N);
    for (int k = 0; k < N; k++) {
        double t = now_us();
        if (write(to[1], buf, 100) != 100 || read(from[0], buf, sizeof buf) <= 0) return 1;
        v[k] = now_us() - t;
    }
    close(to[1]);
    qsort(v, N, sizeof(double), cmp);
    printf("pipe round trip: p50 %.1f us, p99 %.1f us\n", v[N / 2], v[N * 99 / 100]);
    return 0;
}
