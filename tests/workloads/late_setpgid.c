/* A parent's setpgid(child, child) on a child that has already exited:
 * the kernel allows it while the child is a zombie that never exec'd
 * (bash job control races into exactly this). The child exits at once;
 * the parent waits until it is a zombie (WNOWAIT leaves it unreaped),
 * then moves it into a group of its own, then reaps it.
 * Exits 0 when setpgid on the zombie succeeded, as the kernel allows. */
#include <sys/wait.h>
#include <unistd.h>

int main(void) {
    pid_t child = fork();
    if (child < 0)
        return 10;
    if (child == 0)
        _exit(0);
    siginfo_t info;
    if (waitid(P_PID, child, &info, WEXITED | WNOWAIT) != 0)
        return 11;
    if (setpgid(child, child) != 0)
        return 12;
    if (waitpid(child, NULL, 0) != child)
        return 13;
    return 0;
}
