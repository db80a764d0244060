/* PID reuse, in a PID namespace with a small pid_max. Modes:
 *   reuse burn MIN          creates processes until one gets a pid >= MIN,
 *                           so that later pids wrap around in [300, pid_max)
 *   reuse tracked DIR N     (the recorded command) creates N children one
 *                           after the other, each exits at once; writes their
 *                           pids to DIR/tracked, then waits for DIR/go
 *   reuse outsider DIR PROG (outside the tree) creates processes until one
 *                           gets one of the pids in DIR/tracked; that one
 *                           execs PROG report DIR; then creates DIR/go
 *   PROG report DIR         writes its own pid to DIR/reused
 * Exits 0 on success. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_TRACKED 64
#define ATTEMPTS 100000

static char path[4096];

static const char *in(const char *dir, const char *name) {
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

static void nap(void) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

/* Waits (without creating processes) up to a minute for a file. */
static int await(const char *file) {
    for (int i = 0; i < 6000; i++) {
        if (access(file, F_OK) == 0)
            return 0;
        nap();
    }
    return -1;
}

static pid_t spawn_exit(void) {
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    return pid;
}

static int burn(long min) {
    for (int i = 0; i < ATTEMPTS; i++)
        if (spawn_exit() >= min)
            return 0;
    return 1;
}

static int tracked(const char *dir, int n) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s/tracked.tmp", dir);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return 1;
    for (int i = 0; i < n; i++)
        fprintf(f, "%d\n", (int)spawn_exit());
    if (fclose(f) != 0 || rename(tmp, in(dir, "tracked")) != 0)
        return 1;
    return await(in(dir, "go")) == 0 ? 0 : 3;
}

static int outsider(const char *dir, const char *prog) {
    pid_t pids[MAX_TRACKED];
    int n = 0, found = 0;
    if (await(in(dir, "tracked")) != 0)
        return 1;
    FILE *f = fopen(path, "r");
    while (f && n < MAX_TRACKED && fscanf(f, "%d", &pids[n]) == 1)
        n++;
    for (int i = 0; i < ATTEMPTS && !found; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            for (int j = 0; j < n; j++)
                if (getpid() == pids[j])
                    execl(prog, prog, "report", dir, (char *)NULL);
            _exit(0);
        }
        if (pid < 0)
            break;
        waitpid(pid, NULL, 0);
        for (int j = 0; j < n; j++)
            found |= pid == pids[j];
    }
    FILE *go = fopen(in(dir, "go"), "w");
    if (go)
        fclose(go);
    return found ? 0 : 1;
}

static int report(const char *dir) {
    FILE *f = fopen(in(dir, "reused"), "w");
    if (!f)
        return 1;
    fprintf(f, "%d\n", (int)getpid());
    return fclose(f) == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "burn") == 0)
        return burn(atol(argv[2]));
    if (argc == 4 && strcmp(argv[1], "tracked") == 0)
        return tracked(argv[2], atoi(argv[3]) < MAX_TRACKED ? atoi(argv[3]) : MAX_TRACKED);
    if (argc == 4 && strcmp(argv[1], "outsider") == 0)
        return outsider(argv[2], argv[3]);
    if (argc == 3 && strcmp(argv[1], "report") == 0)
        return report(argv[2]);
    return 2;
}
