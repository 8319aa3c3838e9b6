# Block-device accounting for the comparison scripts' `DEV=1` (sourced, not run): what the
# device under the file system did during a run, from /sys/block/NAME/stat (Documentation/
# block/stat.rst: writes, sectors written, flushes and their ticks, busy time, time in queue).
# `dev_snap DEVICE` prints a snapshot (nothing without a device: an image file); `dev_report BEFORE AFTER SECONDS` (the run's wall time) one line: the writes
# and their mean size, the flushes and the device's mean time per flush, how much of the run
# the device was busy, and how many requests were queued on average. A device that is idle
# part of the run while the program waits is waiting on the file system, not on the device.
dev_snap() { [ -n "$1" ] && cat "/sys/block/$(basename "$(readlink -f "$1")")/stat" 2>/dev/null || true; }
dev_report() {
    [ -n "$1" ] || { echo "device: none (not a block device)"; return; }
    awk -v a="$1" -v b="$2" -v s="$3" 'BEGIN {
        n = split(a, x, " "); split(b, y, " ");
        for (i = 1; i <= n; i++) d[i] = y[i] - x[i];
        w = d[5]; ws = d[7]; f = d[16]; ft = d[17]; busy = d[10]; q = d[11];
        printf "device: %d writes (%.1f KiB each), %d flushes (%.0f us each), busy %.0f%%, %.1f requests queued", w, (w ? ws * 512 / w / 1024 : 0), f, (f ? ft * 1000 / f : 0), busy / (s * 10), q / (s * 1000);
    }'
}
