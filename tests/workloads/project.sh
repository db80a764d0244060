#!/bin/sh
# A small C project built the way autoconf projects are: a configure that
# probes the compiler (some probes fail, as they do), then make -j2 over
# generated sources. No network; everything happens in the directory $1.
# A few hundred processes, each a real fork, exec and exit.
set -e
cd "$1"
mkdir -p src
i=0
while [ $i -lt 64 ]; do
    printf 'int f%d(int x) { return x * %d; }\n' $i $i > src/f$i.c
    i=$((i + 1))
done
printf 'int f0(int);\nint main(void) { return f0(0); }\n' > src/main.c

cat > configure <<'CONF'
#!/bin/sh
# Each probe compiles a test program; a missing header fails its probe.
: > config.h
for header in stdio.h stdlib.h string.h no_such_header.h unistd.h also_missing.h; do
    printf '#include <%s>\nint main(void) { return 0; }\n' "$header" > conftest.c
    if cc -c conftest.c -o conftest.o 2>/dev/null; then
        echo "#define HAVE_$(echo "$header" | tr a-z. A-Z_) 1" >> config.h
    fi
done
for function in printf no_such_function; do
    printf 'int %s(); int main(void) { return %s(); }\n' "$function" "$function" > conftest.c
    cc conftest.c -o conftest 2>/dev/null && echo "#define HAVE_$function 1" >> config.h || true
done
grep -q NO_SUCH config.h || echo "/* no_such_header.h is missing */" >> config.h
rm -f conftest.c conftest.o conftest
objects=$(cd src && ls *.c | sed 's/\.c$/.o/' | tr '\n' ' ')
printf 'OBJECTS = %s\nprog: $(addprefix src/,$(OBJECTS))\n\tcc -o $@ $^\nsrc/%%.o: src/%%.c\n\tcc -O1 -c -o $@ $<\n' "$objects" > Makefile
CONF
sh ./configure
make -s -j2
./prog
