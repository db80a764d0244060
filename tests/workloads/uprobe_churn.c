/* Holds up the machine's uprobes, as a busy `perf probe` user does:
 * registers a uprobe at OFFSET in FILE and unregisters it, in a loop,
 * until killed. Each turn takes the locks that every other uprobe's
 * registration waits for.
 *
 *   uprobe_churn FILE OFFSET
 */
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct perf_event_attr attr;
	FILE *pmu = fopen("/sys/bus/event_source/devices/uprobe/type", "r");
	int type;

	if (argc != 3 || !pmu || fscanf(pmu, "%d", &type) != 1)
		return 2;
	memset(&attr, 0, sizeof(attr));
	attr.type = type;
	attr.size = sizeof(attr);
	attr.config1 = (uintptr_t)argv[1];
	attr.config2 = strtoull(argv[2], NULL, 0);
	for (;;) {
		int fd = syscall(SYS_perf_event_open, &attr, -1, 0, -1, PERF_FLAG_FD_CLOEXEC);

		if (fd < 0) {
			perror("perf_event_open");
			return 1;
		}
		close(fd);
	}
}
