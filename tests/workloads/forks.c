/* Every way to create a process: vfork+exec, raw clone(CLONE_PARENT) from
 * a child (the grandchild becomes our child), clone3 and posix_spawn.
 * Exits 0 when every child reported the expected status. */
#define _GNU_SOURCE
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static int status_of(pid_t pid) {
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

int main(void) {
    /* 1. vfork + exec: exit 11 */
    pid_t v = vfork();
    if (v == 0) {
        execl("/bin/sh", "sh", "-c", "exit 11", (char *)NULL);
        _exit(120);
    }
    if (v < 0 || status_of(v) != 11)
        return 1;

    /* 2. c forks g with CLONE_PARENT: g is our child; c exits 13, g 12 */
    int fds[2];
    if (pipe(fds) != 0)
        return 2;
    pid_t c = fork();
    if (c == 0) {
        long g = syscall(SYS_clone, CLONE_PARENT | SIGCHLD, 0, 0, 0, 0);
        if (g == 0)
            _exit(12);
        if (g < 0)
            _exit(121);
        pid_t gp = (pid_t)g;
        if (write(fds[1], &gp, sizeof gp) != sizeof gp)
            _exit(122);
        _exit(13);
    }
    if (c < 0)
        return 3;
    close(fds[1]);
    pid_t g;
    if (read(fds[0], &g, sizeof g) != sizeof g)
        return 4;
    close(fds[0]);
    if (status_of(c) != 13 || status_of(g) != 12)
        return 5;

    /* 3. clone3: exit 14 */
    struct clone_args args;
    memset(&args, 0, sizeof args);
    args.exit_signal = SIGCHLD;
    long k = syscall(SYS_clone3, &args, sizeof args);
    if (k == 0)
        _exit(14);
    if (k < 0 || status_of((pid_t)k) != 14)
        return 6;

    /* 4. posix_spawn: exit 15 */
    pid_t s;
    char *argv[] = {"sh", "-c", "exit 15", NULL};
    if (posix_spawn(&s, "/bin/sh", NULL, NULL, argv, environ) != 0)
        return 7;
    if (status_of(s) != 15)
        return 8;
    return 0;
}
