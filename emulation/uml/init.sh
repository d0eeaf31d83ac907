#!/bin/sh
# PID 1 of a user-mode Linux kernel started by emulation/uml.py. The root file system is the
# host's own (hostfs, read-write), so the clone, its venv and build/bin run unchanged; what the
# kernel needs of its own is mounted over it here, visible only inside this kernel:
#   /proc /sys /dev/shm, /run (namespaces live in /run/netns; pqshake's records in /run/pqshake),
#   and a scratch directory on that tmpfs as TMPDIR (sockets work there, which hostfs cannot
#   carry). The host's /tmp stays visible: a clone may live there.
# The job directory (kernel argument pqs_job=DIR, which the kernel hands to init as an
# environment variable) holds: env (shell assignments), cwd, cmd (the command, one shell line),
# and receives rc (its exit status). The UML kernel's modules are found through a modprobe
# wrapper, so `tc ... netem` loads sch_netem the way it does on any kernel.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
job=${pqs_job:?}
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t tmpfs -o mode=755 tmpfs /run
mkdir -p /dev/shm && mount -t tmpfs -o mode=1777 tmpfs /dev/shm
kver=$(uname -r)
mkdir -p /run/pqs-uml/lib/modules/$kver
mount --bind "$(cat "$job/modules")" /run/pqs-uml/lib/modules/$kver
printf '#!/bin/sh\nexec modprobe -d /run/pqs-uml "$@"\n' > /run/pqs-uml/modprobe
chmod 755 /run/pqs-uml/modprobe
echo /run/pqs-uml/modprobe > /proc/sys/kernel/modprobe
ip link set lo up
hostname "$(cat "$job/hostname")"
# What the project's kernel features need, loaded up front so a missing one says so here.
for m in $(cat "$job/preload"); do
  /run/pqs-uml/modprobe "$m" || echo "pqs-uml: cannot load module $m"
done
mkdir -p -m 1777 /run/pqs-uml/tmp
echo "pqs-uml: start $(uname -r)"
# Through a FIFO: the console is a terminal, and the command's output is a log, not a screen.
# Not through a plain pipe: a process the command leaves running would hold it open forever;
# the reader is stopped once the command has finished, and halt ends the stragglers.
mkfifo /run/pqs-uml/out
cat /run/pqs-uml/out &
reader=$!
(
  . "$job/env"
  TMPDIR=/run/pqs-uml/tmp
  export TMPDIR
  cd "$(cat "$job/cwd")" || { echo 125 > "$job/rc"; exit; }
  /bin/sh -c "$(cat "$job/cmd")" </dev/null
  echo $? > "$job/rc"
) >/run/pqs-uml/out 2>&1
sleep 0.2
kill $reader 2>/dev/null
sync
echo "pqs-uml: end"
halt -f
