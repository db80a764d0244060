// cflags: -O1 -g -fno-inline -fomit-frame-pointer
/* C++ names with known counts: thrower(int) runs N times and thrower
 * (double) once, Box<int>::push N times and Box<long>::push twice, all
 * from run(), each throwing nothing but named as C++ mangles them.
 *
 *   thrower N
 */
#include <cstdio>
#include <cstdlib>

volatile long sink;

void thrower(int n) { sink += n; }
void thrower(double d) { sink += (long)d; }

template <typename T> struct Box {
	T total = 0;
	void push(T v) { total += v; sink = (long)total; }
};

void run(long n)
{
	Box<int> ints;
	Box<long> longs;
	for (long i = 0; i < n; i++) {
		thrower((int)i);
		ints.push((int)i);
	}
	thrower(1.5);
	longs.push(1);
	longs.push(2);
}

int main(int argc, char **argv)
{
	run(argc > 1 ? atol(argv[1]) : 0);
	return 0;
}
