/* Part of the kernel-matrix workload: a process with a second thread.
 * It moves itself into its own process group (a SetPGID event), then the
 * second thread ends the whole process with exit(4) while the main thread
 * waits: a group exit, reported once, and the thread itself never appears
 * as a process. Built with `cc -static -pthread`. */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static void *worker(void *arg)
{
	(void)arg;
	if (setpgid(0, 0) != 0)
		exit(10);
	exit(4);
}

int main(void)
{
	pthread_t thread;

	if (pthread_create(&thread, NULL, worker, NULL) != 0)
		return 11;
	pthread_join(thread, NULL);
	return 12; /* not reached: the worker exits the process */
}
