#!/bin/sh
# The bundled demo: a small build-script-like run with the shapes proctrace
# is for — a pipeline, a subshell, a background job, a failing step, a
# daemon that outlives the script, and command lines with ':' in them.
set -u

echo "demo: start" | tr 'a-z' 'A-Z'
sleep 0.2 &
( cd / && ls >/dev/null )
/bin/echo "step 1: compile" >/dev/null
sh -c 'exit 3' || echo "demo: step 2 failed with $?"
env LC_ALL=C sort </etc/hostname >/dev/null
setsid sh -c 'sleep 0.3' </dev/null >/dev/null 2>&1 &
wait
echo "demo: done"
