// The floor under any idle-to-busy path on this host: one thread blocks in
// poll() on an eventfd, another writes it after GAP_US of quiet; prints the
// wake-up latency percentiles. cc -O2 -pthread bench/wake-floor.c -o /tmp/wake-floor
//   /tmp/wake-floor SAMPLES GAP_US
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

static int efd, samples;
static volatile uint64_t sent_ns;
static uint64_t *lat;

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void *waiter(void *arg) {
    (void)arg;
    for (int i = 0; i < samples; i++) {
        struct pollfd p = {efd, POLLIN, 0};
        uint64_t v;
        poll(&p, 1, -1);
        lat[i] = now_ns() - sent_ns;
        if (read(efd, &v, sizeof v) != sizeof v) abort();
    }
    return NULL;
}

static int cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s SAMPLES GAP_US\n", argv[0]);
        return 2;
    }
    samples = atoi(argv[1]);
    int gap = atoi(argv[2]);
    lat = calloc((size_t)samples, sizeof *lat);
    efd = eventfd(0, 0);
    pthread_t t;
    pthread_create(&t, NULL, waiter, NULL);
    for (int i = 0; i < samples; i++) {
        usleep((useconds_t)gap);
        sent_ns = now_ns();
        uint64_t one = 1;
        if (write(efd, &one, sizeof one) != sizeof one) abort();
        usleep(1000);
    }
    pthread_join(t, NULL);
    qsort(lat, (size_t)samples, sizeof *lat, cmp);
    printf("gap_us=%d samples=%d p50_us=%.1f p90_us=%.1f p99_us=%.1f max_us=%.1f\n", gap, samples,
           lat[samples / 2] / 1e3, lat[samples * 9 / 10] / 1e3, lat[samples * 99 / 100] / 1e3, lat[samples - 1] / 1e3);
    return 0;
}
