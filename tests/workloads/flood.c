/* flood N [WAVE]: creates N processes as fast as it can, WAVE (default
 * 500) at a time: each child exits at once and the wave is reaped before
 * the next, so the pid space is never exhausted. Exits 0 when all N
 * children were created and exited 0. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    long total = atol(argv[1]);
    long wave = argc > 2 ? atol(argv[2]) : 500;
    for (long done = 0; done < total;) {
        long n = total - done < wave ? total - done : wave;
        for (long i = 0; i < n; i++) {
            pid_t pid = fork();
            if (pid == 0)
                _exit(0);
            if (pid < 0) {
                perror("fork");
                return 1;
            }
        }
        for (long i = 0; i < n; i++) {
            int st;
            if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
                return 1;
        }
        done += n;
    }
    return 0;
}
