// cflags: -O1 -fno-builtin -fomit-frame-pointer
/* libc functions with known calls and arguments:
 * - measure() calls strlen N times (an IFUNC: the loader picks its code
 *   for the CPU) and strtoimax N times (an alias of strtol, one address);
 * - allocate() calls malloc N times with the sizes 1 << (i % 20): each
 *   power of two from 1 to 512K, N / 20 times each;
 * - reads() calls read N times on fd -1 (returns -1) and N times on
 *   /dev/zero for 8 bytes (returns 8);
 * - opens() opens /dev/null N times, O_RDONLY, and /dev/zero once with
 *   O_RDONLY | O_CLOEXEC.
 *
 *   strings N
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

void reads(long n)
{
	char buf[8];
	int zero = open("/dev/zero", O_RDONLY | O_CLOEXEC);

	for (long i = 0; i < n; i++) {
		total += read(-1, buf, 1);
		total += read(zero, buf, sizeof(buf));
	}
	close(zero);
}

void opens(long n)
{
	for (long i = 0; i < n; i++)
		close(open("/dev/null", O_RDONLY));
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 0;

	measure(n, "12345");
	allocate(n);
	reads(n);
	opens(n);
	return 0;
}
