/* W5's load inside a guest: N times a one-byte read from /dev/zero and a
 * one-byte write to /dev/null, R times over; prints the nanoseconds the
 * fastest of the R took (the guest's own clock, so qemu's slowness cancels
 * out of a ratio, and the minimum leaves out the moments the host took the
 * guest's CPU away). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000;
    int repeats = argc > 2 ? atoi(argv[2]) : 1;
    long long best = -1;
    int in = open("/dev/zero", O_RDONLY), out = open("/dev/null", O_WRONLY);
    struct timespec a, b;
    char c;
    if (in < 0 || out < 0)
        return 1;
    for (int r = 0; r < repeats; r++) {
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (long i = 0; i < n; i++)
            if (read(in, &c, 1) != 1 || write(out, &c, 1) != 1)
                return 1;
        clock_gettime(CLOCK_MONOTONIC, &b);
        long long ns = (long long)(b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec);
        if (best < 0 || ns < best)
            best = ns;
    }
    printf("%lld\n", best);
    return 0;
}
