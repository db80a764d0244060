// cflags: -O2 -fomit-frame-pointer -fno-inline -pthread -Wall
/* Stacks of a known depth, built without frame pointers so that only
 * call-frame information unwinds them:
 *
 *   deep DEPTH MILLIS
 *
 * the main thread and one other each call `descend` DEPTH + 1 times
 * deep, each frame holding a few hundred bytes, then spin MILLIS ms of
 * their own CPU in `spin` at the bottom. A profile's stacks of `spin`
 * hold exactly DEPTH + 1 `descend` frames under main, or under
 * thread_main in the other thread, when the copy of the stack reached
 * the thread's entry. */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

static double thread_cpu_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

__attribute__((noinline)) static unsigned long spin(double millis)
{
	double until = thread_cpu_ms() + millis;
	unsigned long x = 0;
	while (thread_cpu_ms() < until)
		for (int i = 0; i < 10000; i++)
			x += i * i ^ (x >> 3);
	return x;
}

/* The frame's buffer is used after the call, so neither it nor the call
 * can be folded away. */
__attribute__((noinline)) static unsigned long descend(int depth, double millis)
{
	volatile char pad[256];
	unsigned long below;

	pad[depth & 255] = (char)depth;
	below = depth ? descend(depth - 1, millis) : spin(millis);
	return below + pad[depth & 255];
}

static int depth;
static double millis;

static void *thread_main(void *arg)
{
	sink += descend(depth, millis);
	return arg;
}

int main(int argc, char **argv)
{
	pthread_t thread;

	if (argc != 3)
		return 2;
	depth = atoi(argv[1]);
	millis = atof(argv[2]);
	if (pthread_create(&thread, NULL, thread_main, NULL))
		return 1;
	sink += descend(depth, millis);
	return pthread_join(thread, NULL) ? 1 : 0;
}
