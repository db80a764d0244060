#!/bin/sh
# The recorded tree (every child forked by this shell):
#   /bin/echo 'hello world' x         exec, exit 0, with PYTEST_CURRENT_TEST
#                                     (recorded) and SECRET (never recorded)
#   /bin/sh -c 'exit 3'               exec, exit 3, with fd 3 on /workload.sh and
#                                     fd 4 on /proc/version (paths across a mount)
#   ( exit 5 )                        fork without exec, exit 5
#   /bin/setsid /bin/sh -c 'exit 7'   setsid(), two execs, exit 7
#   /threads arg1                     setpgid(0, 0), a thread, exit 4
#   /compat_setid                     a 32-bit program: its child's setsid,
#                                     then its own setpgid(0, 0), exit 0
# and this shell exits 9.
PYTEST_CURRENT_TEST='w.py::t (call)' SECRET=matrix-secret /bin/echo 'hello world' x >/dev/null
/bin/sh -c 'exit 3' 3</workload.sh 4</proc/version
(exit 5)
/bin/setsid /bin/sh -c 'exit 7'
/threads arg1
/compat_setid
exit 9
