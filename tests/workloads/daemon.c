/* Classic double-forked daemon: the command forks A and exits 0; A calls
 * setsid() and forks D, then exits 0; D waits until the command is gone
 * (reparented), sleeps a little, creates argv[1] and exits 42. */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2)
        return 101;
    pid_t root = getpid();
    pid_t a = fork();
    if (a < 0)
        return 102;
    if (a > 0)
        return 0;
    if (setsid() < 0)
        _exit(103);
    pid_t pid = fork();
    if (pid < 0)
        _exit(104);
    if (pid > 0)
        _exit(0);
    /* The daemon: outlive the command for sure. */
    while (kill(root, 0) == 0)
        usleep(10000);
    usleep(300000);
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        _exit(105);
    close(fd);
    _exit(42);
}
