// cflags: -O2 -fomit-frame-pointer -fno-inline
/* Probes with known answers (`record --probe`): allocate() calls malloc
 * exactly N times and nothing else in the program does after main starts
 * counting; each round fires the USDT probe proctrace_test:round with
 * its number and N, and proctrace_test:done once with the sum 0+..+N-1
 * and a negative constant, and proctrace_test:named once with a string
 * (the function's name) and N unsigned, which <sys/sdt.h> writes alike
 * (8@): the string is read as one, N stays a number. Built without frame pointers, as distributions
 * build: the stacks at the hits unwind through .eh_frame.
 *
 * Then nap() sleeps NAPS times 20 ms: calls that take at least that long.
 *
 *   probed N [NAPS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sdt.h>
#include <time.h>

/* Kept from being optimised away: the pointers go somewhere. */
void *volatile sink;

void allocate(long n)
{
	long sum = 0;

	for (long i = 0; i < n; i++) {
		sink = malloc(16 + i);
		free(sink);
		DTRACE_PROBE2(proctrace_test, round, i, n);
		sum += i;
	}
	DTRACE_PROBE2(proctrace_test, done, sum, -7);
	/* On the stack: a page the kernel can read without faulting it in. */
	char name[16];

	strcpy(name, __func__);
	DTRACE_PROBE2(proctrace_test, named, name, (unsigned long)n);
}

void nap(void)
{
	struct timespec nap = {0, 20 * 1000 * 1000};

	while (nanosleep(&nap, &nap))
		;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 0;
	long naps = argc > 2 ? atol(argv[2]) : 0;

	allocate(n);
	for (long i = 0; i < naps; i++)
		nap();
	return 0;
}
