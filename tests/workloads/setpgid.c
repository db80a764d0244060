/* setpgid in all its forms:
 *  1. setpgid(0, 0): the process leads a group of its own;
 *  2. setsid() now fails (a group leader): no SetSID;
 *  3. setpgid(getppid(), ...) fails (not our child): no SetPGID;
 *  4. children c1, c2 block on a pipe; the parent calls setpgid(c1, c1)
 *     and setpgid(c2, c1); then releases them; they exit 0.
 * Exits 0 when every call did what was expected. */
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static pid_t child(int fds[2]) {
    pid_t pid = fork();
    if (pid == 0) {
        char c;
        close(fds[1]);
        while (read(fds[0], &c, 1) > 0)
            ;
        _exit(0);
    }
    return pid;
}

int main(void) {
    if (setpgid(0, 0) != 0 || getpgrp() != getpid())
        return 10;
    if (setsid() != -1 || errno != EPERM)
        return 11;
    if (setpgid(getppid(), getppid()) != -1)
        return 12;
    int fds[2];
    if (pipe(fds) != 0)
        return 13;
    pid_t c1 = child(fds);
    pid_t c2 = child(fds);
    if (c1 < 0 || c2 < 0)
        return 14;
    close(fds[0]);
    if (setpgid(c1, c1) != 0)
        return 15;
    if (setpgid(c2, c1) != 0)
        return 16;
    if (getpgid(c2) != c1)
        return 17;
    close(fds[1]);
    int s1, s2;
    if (waitpid(c1, &s1, 0) != c1 || waitpid(c2, &s2, 0) != c2)
        return 18;
    return WIFEXITED(s1) && WEXITSTATUS(s1) == 0 && WIFEXITED(s2) && WEXITSTATUS(s2) == 0 ? 0 : 19;
}
