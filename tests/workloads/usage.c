/* A process of known cost, which reports what the kernel says it used just
 * before it exits, for tests/kernel/resources.rs to compare with what
 * proctrace read at its exit:
 *   usage DIR REPORT
 * Two threads burn CPU and end, the main thread burns some more, touches
 * 64 MiB, writes 1 MiB to DIR/data with fsync, sleeps five times; then it
 * writes "cpu_ns maxrss_kb oublock nvcsw" to REPORT and _exits. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static long long cpu_now(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *burn(void *ms)
{
	long long until = cpu_now(CLOCK_THREAD_CPUTIME_ID) + (long)ms * 1000000LL;
	volatile unsigned long x = 0;

	while (cpu_now(CLOCK_THREAD_CPUTIME_ID) < until)
		x++;
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t threads[2];
	char path[4096], report[128];
	static char block[1 << 20];
	struct rusage ru;
	char *memory;
	int fd, len;

	if (argc != 3)
		return 2;
	for (int i = 0; i < 2; i++)
		pthread_create(&threads[i], NULL, burn, (void *)50L);
	for (int i = 0; i < 2; i++)
		pthread_join(threads[i], NULL);
	burn((void *)100L);
	memory = malloc(64 << 20);
	memset(memory, 1, 64 << 20);
	snprintf(path, sizeof(path), "%s/data", argv[1]);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	memset(block, 'x', sizeof(block));
	if (fd < 0 || write(fd, block, sizeof(block)) != sizeof(block) || fsync(fd))
		return 3;
	close(fd);
	for (int i = 0; i < 5; i++)
		usleep(1000);
	fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	getrusage(RUSAGE_SELF, &ru);
	len = snprintf(report, sizeof(report), "%lld %ld %ld %ld\n",
		       cpu_now(CLOCK_PROCESS_CPUTIME_ID), ru.ru_maxrss, ru.ru_oublock, ru.ru_nvcsw);
	if (fd < 0 || write(fd, report, len) != len)
		return 4;
	_exit(memory[12345] == 1 ? 0 : 5);
}
