// cflags: -O1 -fno-builtin -fomit-frame-pointer
/* libc functions behind an IFUNC and an alias, with known counts:
 * measure() calls strlen N times (an IFUNC: the loader picks its code for
 * the CPU) and strtoimax N times (an alias of strtol, one address);
 * allocate() calls malloc with the sizes 1 << (i % 20) for i below N.
 *
 *   strings N
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

void *volatile sink;
volatile size_t total;

void measure(long n, const char *text)
{
	for (long i = 0; i < n; i++) {
		total += strlen(text);
		total += strtoimax(text, NULL, 10);
	}
}

void allocate(long n)
{
	for (long i = 0; i < n; i++) {
		sink = malloc((size_t)1 << (i % 20));
		free(sink);
	}
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 0;

	measure(n, "12345");
	allocate(n);
	return 0;
}
