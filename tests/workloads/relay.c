/* A relay of argv[1] processes: each forks the next and exits at once, so
 * at most a couple of processes of the tree are alive at any time. The
 * last one exits 0 after creating argv[2] (proof that it ran to the end).
 * Every hop hands the tree over from a parent to its child. */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3)
        return 101;
    int hops = atoi(argv[1]);
    for (int i = 0; i < hops; i++) {
        pid_t pid = fork();
        if (pid < 0)
            _exit(102);
        if (pid > 0)
            _exit(0);
    }
    int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        _exit(103);
    close(fd);
    _exit(0);
}
