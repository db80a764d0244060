/* A non-leader thread forks; the child execs `sh -c "exit 4"`. The thread
 * reaps it; the process exits 0 if the child's status was 4. */
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

static void *worker(void *arg) {
    (void)arg;
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", "exit 4", (char *)NULL);
        _exit(120);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return (void *)1L;
    return (void *)(long)!(WIFEXITED(status) && WEXITSTATUS(status) == 4);
}

int main(void) {
    pthread_t t;
    void *ret;
    if (pthread_create(&t, NULL, worker, NULL) != 0)
        return 100;
    pthread_join(t, &ret);
    return (int)(long)ret;
}
