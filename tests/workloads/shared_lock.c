/* A lock in memory shared over fork, held by one child while another
 * waits for it; the parent waits for the waiter.
 *   shared_lock mutex : a process-shared pthread mutex (glibc records its
 *                       owner);
 *   shared_lock robust: the same, robust (the lock word is the owner);
 *   shared_lock pi    : the same, priority-inheriting (FUTEX_LOCK_PI);
 *   shared_lock sem   : a process-shared semaphore (no owner anywhere);
 *   shared_lock waitv : a shared word the waiter waits on with
 *                       futex_waitv(2) (Linux 5.16), to change from 0.
 * The holder locks, tells the parent through a pipe, and sleeps in
 * pause(); only then is the waiter forked, or argv[2] waiters, for each
 * of which the parent then waits.
 *   shared_lock deadlock: two shared mutexes; the first child holds one
 *                       and waits for the other, which the second child
 *                       holds while it waits for the first. */
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

struct shared {
    pthread_mutex_t mutex[2];
    sem_t sem;
    uint32_t word;
};

/* include/uapi/linux/futex.h, which older headers lack. */
struct futex_waitv {
    uint64_t val;
    uint64_t uaddr;
    uint32_t flags;
    uint32_t reserved;
};

static void lock(struct shared *s, const char *kind) {
    if (!strcmp(kind, "sem")) {
        sem_wait(&s->sem);
    } else if (!strcmp(kind, "waitv")) {
        /* FUTEX2_SIZE_U32, shared; SYS_futex_waitv is 449 everywhere. */
        struct futex_waitv w = {0, (uintptr_t)&s->word, 2, 0};
        while (s->word == 0)
            syscall(449, &w, 1, 0, NULL, 0);
    } else {
        pthread_mutex_lock(&s->mutex[0]);
    }
}

/* Each child takes one mutex, tells the other through its pipe once it
 * holds it, waits to hear the same, then takes the other mutex. */
static int deadlock(struct shared *s) {
    int told[2][2];
    if (pipe(told[0]) || pipe(told[1]))
        return 2;
    for (int i = 0; i < 2; i++) {
        if (fork() == 0) {
            char c;
            pthread_mutex_lock(&s->mutex[i]);
            write(told[i][1], "x", 1);
            read(told[1 - i][0], &c, 1);
            pthread_mutex_lock(&s->mutex[1 - i]);
            return 0;
        }
    }
    while (wait(NULL) > 0)
        ;
    return 0;
}

int main(int argc, char **argv) {
    const char *kind = argc > 1 ? argv[1] : "mutex";
    struct shared *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED)
        return 2;
    if (!strcmp(kind, "sem")) {
        sem_init(&s->sem, 1, 1);
    } else {
        pthread_mutexattr_t attr;
        pthread_mutexattr_init(&attr);
        pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
        if (!strcmp(kind, "robust"))
            pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
        if (!strcmp(kind, "pi"))
            pthread_mutexattr_setprotocol(&attr, PTHREAD_PRIO_INHERIT);
        pthread_mutex_init(&s->mutex[0], &attr);
        pthread_mutex_init(&s->mutex[1], &attr);
    }
    if (!strcmp(kind, "deadlock"))
        return deadlock(s);
    int ready[2];
    if (pipe(ready))
        return 2;
    if (fork() == 0) {
        /* futex_waitv's word has no lock to hold: its waiter waits for the
         * holder to change it. */
        if (strcmp(kind, "waitv"))
            lock(s, kind);
        write(ready[1], "x", 1);
        for (;;)
            pause();
    }
    char c;
    if (read(ready[0], &c, 1) != 1)
        return 2;
    int waiters = argc > 2 ? atoi(argv[2]) : 1;
    for (int i = 0; i < waiters; i++) {
        if (fork() == 0) {
            lock(s, kind);
            return 0;
        }
    }
    while (wait(NULL) > 0)
        ;
    return 0;
}
