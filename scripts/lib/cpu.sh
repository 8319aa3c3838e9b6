# CPU accounting for the comparison scripts' `CPU=1` (sourced, not run): the machine's busy
# time (every process and the kernel: user, system, irq, softirq and steal from /proc/stat)
# and a process's own (/proc/PID/stat), both in clock ticks of $HZ a second; `ticks` of no
# PID is 0 (a kernel file system has no daemon).
HZ=$(getconf CLK_TCK)
busy() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }
ticks() { if [ -n "$1" ]; then awk '{print $14 + $15}' "/proc/$1/stat"; else echo 0; fi; }
