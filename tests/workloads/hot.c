// cflags: -O2 -fomit-frame-pointer -fno-inline
/* A CPU profile with known answers, built as distributions build their
 * binaries: optimised, without frame pointers, so only call-frame
 * information unwinds it. main -> work -> spin_a takes three quarters of
 * the loop and main -> work -> spin_b one quarter, in every process.
 *
 *   [HOT_RATIO=A:B] hot MILLIS [CHILDREN CHILD_MILLIS]
 *
 * spins MILLIS ms of CPU, then forks CHILDREN children that each exec
 * this program for CHILD_MILLIS ms (short-lived processes, gone before
 * their samples are read), and waits for them. HOT_RATIO, 3:1 unless
 * set, is how many parts of each round go to spin_a and to spin_b: two
 * runs of the same command with other ratios shift the shares for
 * `diff` to find. An environment variable rather than an argument, so
 * that the command lines, and the processes `diff` pairs by them, are
 * the same in both runs; the children inherit it. A MILLIS of rN spins N
 * rounds instead: a fixed amount of work, whose CPU time is the measure
 * (bench/bench.py W8). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
/* Calls made: a side effect, so that the compiler makes every call rather
 * than one per round for parts of the same function. */
static volatile unsigned long calls;

__attribute__((noinline)) static unsigned long spin_a(unsigned long n)
{
	unsigned long x = 0;
	calls++;
	for (unsigned long i = 0; i < n; i++)
		x += i * i ^ (x >> 3);
	return x;
}

__attribute__((noinline)) static unsigned long spin_b(unsigned long n)
{
	unsigned long x = 1;
	calls++;
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

/* Parts of each round, and the iterations of one part. */
static int parts_a = 3, parts_b = 1;
#define PART 100000

/* Rounds of `parts_a` parts spin_a to `parts_b` parts spin_b until
 * `millis` of CPU, or `rounds` of them. Every call takes the same constant, as a single
 * spin_a(300000) did: GCC still names the functions' clones
 * spin_a.constprop.0, as the guide shows them. */
__attribute__((noinline)) static unsigned long work(double millis, long rounds)
{
	unsigned long sum = 0;
	double end = cpu_ms() + millis;
	while (rounds > 0 ? rounds-- > 0 : cpu_ms() < end) {
		for (int i = 0; i < parts_a; i++)
			sum += spin_a(PART);
		for (int i = 0; i < parts_b; i++)
			sum += spin_b(PART);
	}
	return sum;
}

int main(int argc, char **argv)
{
	const char *amount = argc > 1 ? argv[1] : "1000";
	long rounds = amount[0] == 'r' ? atol(amount + 1) : 0;
	double millis = rounds > 0 ? 0 : atof(amount);
	int children = argc > 2 ? atoi(argv[2]) : 0;
	const char *child_millis = argc > 3 ? argv[3] : "30";
	const char *ratio = getenv("HOT_RATIO");

	if (ratio && (sscanf(ratio, "%d:%d", &parts_a, &parts_b) != 2 || parts_a < 0 ||
		      parts_b < 0 || parts_a + parts_b == 0)) {
		fprintf(stderr, "hot: HOT_RATIO=%s is no ratio A:B\n", ratio);
		return 2;
	}
	sink = work(millis, rounds);
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
