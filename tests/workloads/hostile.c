/* Executes a program with an argv no shell would pass along unharmed.
 *
 *   hostile PATH ARGV0 ARG...   execv(PATH, {ARGV0, ARG...}): the bytes
 *                               exactly as given, PATH apart from ARGV0
 *   hostile --many N PATH       execv(PATH, {PATH, "a0", ..., "a<N-1>"})
 *
 * Exits 127 if the exec fails. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "--many") == 0) {
        long n = atol(argv[2]);
        char **args = calloc((size_t)n + 2, sizeof *args);
        if (!args)
            return 126;
        args[0] = argv[3];
        for (long i = 0; i < n; i++) {
            char word[24];
            snprintf(word, sizeof word, "a%ld", i);
            if (!(args[i + 1] = strdup(word)))
                return 126;
        }
        execv(argv[3], args);
        perror("execv");
        return 127;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: hostile PATH ARGV0 ARG... | hostile --many N PATH\n");
        return 2;
    }
    execv(argv[1], argv + 2);
    perror("execv");
    return 127;
}
