/* Two threads take two mutexes in opposite order and deadlock: "first"
 * holds a and waits for b, "second" holds b and waits for a; main joins
 * "first". Once both hold their first mutex, main writes to argv[1]
 * "TID_FIRST TID_SECOND ADDR_A ADDR_B". */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER, b = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t both_hold;
static pid_t tids[2];

struct order {
    int n;
    pthread_mutex_t *mine, *theirs;
};

static void *take(void *arg) {
    struct order *o = arg;
    tids[o->n] = gettid();
    pthread_mutex_lock(o->mine);
    pthread_barrier_wait(&both_hold);
    pthread_mutex_lock(o->theirs);
    return NULL;
}

int main(int argc, char **argv) {
    pthread_barrier_init(&both_hold, NULL, 3);
    struct order first = {0, &a, &b}, second = {1, &b, &a};
    pthread_t t[2];
    pthread_create(&t[0], NULL, take, &first);
    pthread_setname_np(t[0], "first");
    pthread_create(&t[1], NULL, take, &second);
    pthread_setname_np(t[1], "second");
    pthread_barrier_wait(&both_hold);
    FILE *out = fopen(argc > 1 ? argv[1] : "/dev/stdout", "w");
    if (!out)
        return 2;
    fprintf(out, "%d %d %p %p\n", tids[0], tids[1], (void *)&a, (void *)&b);
    fclose(out);
    pthread_join(t[0], NULL);
    return 0;
}
