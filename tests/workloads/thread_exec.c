/* A non-leader thread execs argv[1..] while the main thread sleeps. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static char **args;

static void *worker(void *arg) {
    (void)arg;
    execv(args[0], args);
    perror("execv");
    _exit(120);
}

int main(int argc, char **argv) {
    if (argc < 2)
        return 101;
    args = argv + 1;
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0)
        return 100;
    for (;;)
        pause();
}
