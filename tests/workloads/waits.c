/* Waits whose reason, function and waker are known, one after another
 * (`record --off-cpu`, tests/kernel/offcpu.rs), each timed here around
 * the call that waits, for the recording to be checked against:
 *
 *   sleep    nap_here() sleeps MS
 *   child    wait_child() waits for a child that computes for MS
 *   pipe     read_pipe() reads what a child writes after MS
 *   mutex    take_lock() takes a mutex another thread holds for MS
 *   fsync    sync_file() writes 64 MiB to FILE and syncs it
 *   runnable THREADS threads each compute for MS, more than the CPUs
 *
 * Each prints `NAME MS TID` (its own measure of the wait, and the thread
 * that waited); fsync `fsync MS CPU TID`, with the CPU time the thread
 * used in the call; the runnable threads `runnable WALL CPU TID`. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long ms;

static double now_ms(clockid_t clock)
{
	struct timespec t;

	clock_gettime(clock, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void report(const char *name, double since)
{
	printf("%s %.3f %ld\n", name, now_ms(CLOCK_MONOTONIC) - since, (long)syscall(SYS_gettid));
	fflush(stdout);
}

/* Computes for `ms` of this thread's CPU time. */
static void compute(long ms)
{
	double start = now_ms(CLOCK_THREAD_CPUTIME_ID);
	volatile unsigned long spin = 0;

	while (now_ms(CLOCK_THREAD_CPUTIME_ID) - start < ms)
		spin++;
}

static void __attribute__((noinline)) nap_here(void)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000 };
	double since = now_ms(CLOCK_MONOTONIC);

	nanosleep(&t, NULL);
	report("sleep", since);
}

static void __attribute__((noinline)) wait_child(void)
{
	double since;
	pid_t child = fork();

	if (child == 0) {
		compute(ms);
		_exit(0);
	}
	since = now_ms(CLOCK_MONOTONIC);
	waitpid(child, NULL, 0);
	report("child", since);
}

static void __attribute__((noinline)) read_pipe(void)
{
	int ends[2];
	char byte;
	double since;

	if (pipe(ends))
		exit(1);
	if (fork() == 0) {
		struct timespec t = { ms / 1000, (ms % 1000) * 1000000 };

		nanosleep(&t, NULL);
		if (write(ends[1], "x", 1) != 1)
			_exit(1);
		_exit(0);
	}
	since = now_ms(CLOCK_MONOTONIC);
	if (read(ends[0], &byte, 1) != 1)
		exit(1);
	report("pipe", since);
	wait(NULL);
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t taken = PTHREAD_COND_INITIALIZER;
static int holding;

static void *hold_lock(void *arg)
{
	pthread_mutex_lock(&lock);
	pthread_mutex_lock(&held);
	holding = 1;
	pthread_cond_signal(&taken);
	pthread_mutex_unlock(&held);
	compute(ms);
	pthread_mutex_unlock(&lock);
	return arg;
}

static void __attribute__((noinline)) take_lock(void)
{
	pthread_t holder;
	double since;

	pthread_create(&holder, NULL, hold_lock, NULL);
	pthread_mutex_lock(&held);
	while (!holding)
		pthread_cond_wait(&taken, &held);
	pthread_mutex_unlock(&held);
	since = now_ms(CLOCK_MONOTONIC);
	pthread_mutex_lock(&lock);
	report("mutex", since);
	pthread_mutex_unlock(&lock);
	pthread_join(holder, NULL);
}

static void __attribute__((noinline)) sync_file(const char *path)
{
	static char block[1 << 20];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	double since, cpu;

	memset(block, 'x', sizeof(block));
	for (int i = 0; i < 64; i++)
		if (write(fd, block, sizeof(block)) != sizeof(block))
			exit(1);
	since = now_ms(CLOCK_MONOTONIC);
	cpu = now_ms(CLOCK_THREAD_CPUTIME_ID);
	fsync(fd);
	printf("fsync %.3f %.3f %ld\n", now_ms(CLOCK_MONOTONIC) - since,
	       now_ms(CLOCK_THREAD_CPUTIME_ID) - cpu, (long)syscall(SYS_gettid));
	close(fd);
	unlink(path);
}

static void *spin(void *arg)
{
	double wall = now_ms(CLOCK_MONOTONIC), cpu = now_ms(CLOCK_THREAD_CPUTIME_ID);

	compute(ms);
	printf("runnable %.3f %.3f %ld\n", now_ms(CLOCK_MONOTONIC) - wall,
	       now_ms(CLOCK_THREAD_CPUTIME_ID) - cpu, (long)syscall(SYS_gettid));
	fflush(stdout);
	return arg;
}

static void runnable(int threads)
{
	pthread_t spinners[64];

	for (int i = 0; i < threads && i < 64; i++)
		pthread_create(&spinners[i], NULL, spin, NULL);
	for (int i = 0; i < threads && i < 64; i++)
		pthread_join(spinners[i], NULL);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: waits sleep|child|pipe|mutex|fsync FILE|runnable THREADS MS\n");
		return 2;
	}
	ms = atol(argv[argc - 1]);
	if (!strcmp(argv[1], "sleep"))
		nap_here();
	else if (!strcmp(argv[1], "child"))
		wait_child();
	else if (!strcmp(argv[1], "pipe"))
		read_pipe();
	else if (!strcmp(argv[1], "mutex"))
		take_lock();
	else if (!strcmp(argv[1], "fsync"))
		sync_file(argv[2]);
	else if (!strcmp(argv[1], "runnable"))
		runnable(atoi(argv[2]));
	else
		return 2;
	return 0;
}
