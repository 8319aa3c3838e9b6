#!/bin/bash
# direct I/O (default) vs page_cache through the mount: synced small appends and reads
set -e
B=${OKEANOS:-$(dirname "$0")/../target/release/okeanos}
D=$(mktemp -d /tmp/dio.XXXX)
for run in 1 2 3; do
for mode in direct page_cache; do
  rm -f $D/img; $B mkfs $D/img --size 2G >/dev/null
  mkdir -p $D/mnt
  opts="data=wasteless,dmeta"; [ $mode = page_cache ] && opts="$opts,page_cache"
  $B mount $D/img $D/mnt -o $opts >/dev/null
  w=$(fio --name=w --directory=$D/mnt --rw=write --bs=1k --size=8m --numjobs=16 --fdatasync=1 --runtime=5 --time_based --group_reporting --output-format=terse 2>/dev/null | awk -F';' '{print $49}')
  fio --name=prep --directory=$D/mnt --rw=write --bs=1m --size=256m --numjobs=1 --output-format=terse >/dev/null 2>&1
  r=$(fio --name=prep --directory=$D/mnt --rw=read --bs=128k --size=256m --numjobs=1 --output-format=terse 2>/dev/null | awk -F';' '{print $7}')
  rr=$(fio --name=prep --directory=$D/mnt --rw=randread --bs=4k --size=256m --numjobs=4 --runtime=5 --time_based --group_reporting --output-format=terse 2>/dev/null | awk -F';' '{print $8}')
  echo "run $run $mode: 16 jobs 1k+fdatasync write IOPS=$w; seq read 128k KB/s=$r; randread 4k IOPS=$rr"
  $B umount $D/mnt >/dev/null
done
done
rm -rf $D
