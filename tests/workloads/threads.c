/* Threads are not processes.
 *   threads join        : 4 pthreads that exit, joined by main; exit 0.
 *   threads leader-first: main thread calls pthread_exit while 4 threads
 *                         live; the last of them calls exit(3) once the
 *                         leader is a zombie. The process exits only then. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_barrier_t barrier;
static int leader_first;

static int leader_is_zombie(void) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)getpid());
    FILE *f = fopen(path, "r");
    if (!f)
        return 1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    return p && (p[2] == 'Z' || p[2] == 'X');
}

static void *worker(void *arg) {
    long id = (long)arg;
    pthread_barrier_wait(&barrier);
    if (leader_first && id == 3) {
        while (!leader_is_zombie())
            usleep(1000);
        exit(3);
    }
    if (leader_first)
        pause();
    return NULL;
}

int main(int argc, char **argv) {
    leader_first = argc > 1 && strcmp(argv[1], "leader-first") == 0;
    pthread_t t[4];
    pthread_barrier_init(&barrier, NULL, 4);
    for (long i = 0; i < 4; i++)
        if (pthread_create(&t[i], NULL, worker, (void *)i) != 0)
            return 100;
    if (leader_first)
        pthread_exit(NULL);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    return 0;
}
