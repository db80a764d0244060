// cflags: -O2 -fomit-frame-pointer -fno-inline
/* A CPU profile with known answers, built as distributions build their
 * binaries: optimised, without frame pointers, so only call-frame
 * information unwinds it. main -> work -> spin_a takes three quarters of
 * the loop and main -> work -> spin_b one quarter, in every process.
 *
 *   hot MILLIS [CHILDREN CHILD_MILLIS]
 *
 * spins MILLIS ms of CPU, then forks CHILDREN children that each exec
 * this program for CHILD_MILLIS ms (short-lived processes, gone before
 * their samples are read), and waits for them. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

__attribute__((noinline)) static unsigned long spin_a(unsigned long n)
{
	unsigned long x = 0;
	for (unsigned long i = 0; i < n; i++)
		x += i * i ^ (x >> 3);
	return x;
}

__attribute__((noinline)) static unsigned long spin_b(unsigned long n)
{
	unsigned long x = 1;
	for (unsigned long i = 0; i < n; i++)
		x += i * i ^ (x >> 5);
	return x;
}

static double cpu_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Rounds of 3 parts spin_a to 1 part spin_b until `millis` of CPU. */
__attribute__((noinline)) static unsigned long work(double millis)
{
	unsigned long sum = 0;
	double end = cpu_ms() + millis;
	while (cpu_ms() < end) {
		sum += spin_a(300000);
		sum += spin_b(100000);
	}
	return sum;
}

int main(int argc, char **argv)
{
	double millis = argc > 1 ? atof(argv[1]) : 1000;
	int children = argc > 2 ? atoi(argv[2]) : 0;
	const char *child_millis = argc > 3 ? argv[3] : "30";

	sink = work(millis);
	for (int i = 0; i < children; i++) {
		pid_t pid = fork();
		if (pid == 0) {
			execl("/proc/self/exe", argv[0], child_millis, (char *)NULL);
			_exit(127);
		}
	}
	while (wait(NULL) > 0)
		;
	printf("%lu\n", sink);
	return 0;
}
