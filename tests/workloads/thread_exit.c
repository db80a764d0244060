/* A non-leader thread calls exit(7) (exit_group) while main sleeps. */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static void *worker(void *arg) {
    (void)arg;
    exit(7);
}

int main(void) {
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0)
        return 100;
    for (;;)
        pause();
}
