/* A runner that names its tests inside its own process, as pytest does,
 * from its very first instructions: sets PYTEST_CURRENT_TEST to test_first
 * and calls getppid FIRST times, then to test_second for SECOND calls,
 * unsets it and calls getppid once more. Its first mark comes well within
 * a millisecond of its exec.
 *
 * Its strings are copies on the heap, as an interpreter's are: a uprobe's
 * program cannot fault a page in, and a literal in a page of .rodata not
 * yet touched is unreadable at the first call that passes it.
 *
 *   marks FIRST SECOND
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void calls(long n)
{
	for (long i = 0; i < n; i++)
		getppid();
}

int main(int argc, char **argv)
{
	char *name = strdup("PYTEST_CURRENT_TEST");
	char *first = strdup("t.py::test_first (call)");
	char *second = strdup("t.py::test_second (call)");

	if (argc != 3 || !name || !first || !second)
		return 2;
	setenv(name, first, 1);
	calls(atol(argv[1]));
	setenv(name, second, 1);
	calls(atol(argv[2]));
	unsetenv(name);
	calls(1);
	return 0;
}
