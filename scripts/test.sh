#!/usr/bin/env bash
# Runs every test of the project. Installs what the tests need when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

need_cargo() {
    if command -v cargo >/dev/null 2>&1; then return 0; fi
    if [ -x "$HOME/.cargo/bin/cargo" ]; then export PATH="$HOME/.cargo/bin:$PATH"; return 0; fi
    echo "cargo (Rust 1.80 or newer, from rustup) is required and was not found" >&2
    exit 1
}
need_cargo

# The FUSE tests run real programs on a mount (fio, postmark, sqlite3, PostgreSQL): install
# them from Debian's packages when missing.
# (Tests that need /dev/fuse skip with a message where it cannot be opened.)
need_pkgs=()
command -v fusermount3 >/dev/null 2>&1 || need_pkgs+=(fuse3)
command -v fio >/dev/null 2>&1 || need_pkgs+=(fio)
command -v postmark >/dev/null 2>&1 || need_pkgs+=(postmark)
command -v sqlite3 >/dev/null 2>&1 || need_pkgs+=(sqlite3)
# PostgreSQL runs initdb and pgbench on a mount, and survives a crash of its daemon.
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_pkgs+=(postgresql)
# POSIX ACLs on a mount are set and read with setfacl/getfacl.
command -v setfacl >/dev/null 2>&1 || need_pkgs+=(acl)
# The benchmark tests make ext4 on loop devices (kernel targets); XFS is a benchmark target too.
command -v mkfs.ext4 >/dev/null 2>&1 || need_pkgs+=(e2fsprogs)
command -v mkfs.xfs >/dev/null 2>&1 || need_pkgs+=(xfsprogs)
# The MLB disk is exported over NBD to real clients: nbdinfo, nbdcopy, nbdfuse; qemu-io, qemu-img.
command -v nbdfuse >/dev/null 2>&1 || need_pkgs+=(libnbd-bin)
command -v qemu-io >/dev/null 2>&1 || need_pkgs+=(qemu-utils)
if [ ${#need_pkgs[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "installing ${need_pkgs[*]}" >&2
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}") >&2 ||
            echo "could not install ${need_pkgs[*]}; the tests that need them will say they skip" >&2
    else
        echo "missing ${need_pkgs[*]} and cannot install them (not root or no apt-get); those tests will skip" >&2
    fi
fi

# The JetStream tests start a real 3-node nats-server cluster on 127.0.0.1: a pinned
# nats-server, built once with Go into ~/.cache/okeanos/tools.
if [ -z "${OKEANOS_NATS_SERVER:-}" ]; then
    if nats=$(bash scripts/install-nats.sh); then
        export OKEANOS_NATS_SERVER="$nats"
    else
        echo "nats-server could not be installed: the JetStream tests will fail saying so" >&2
    fi
fi

# What this machine offers the tests, promised to them: a test that needs it fails instead of
# skipping (a skip here would hide a test that should have run).
require=()
if [ "$(id -u)" = 0 ]; then
    require+=(root)
    if [ -c /dev/fuse ] && command -v fusermount3 >/dev/null 2>&1; then require+=(fuse); fi
    # FUSE over io_uring (Linux 6.14 and later): the tests switch it on and back themselves.
    [ -e /sys/module/fuse/parameters/enable_uring ] && require+=(uring)
fi
have_all=1
for t in fio postmark sqlite3 setfacl getfacl setpriv python3 fallocate nbdinfo nbdcopy nbdfuse qemu-io qemu-img; do
    command -v "$t" >/dev/null 2>&1 || have_all=0
done
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || have_all=0
[ "$have_all" = 1 ] && require+=(tools)
OKEANOS_TESTS_REQUIRE=$(IFS=,; echo "${require[*]}")
export OKEANOS_TESTS_REQUIRE
echo "the tests may rely on: ${OKEANOS_TESTS_REQUIRE:-nothing beyond cargo}"

# Build everything first so that compile errors are reported on their own.
cargo build --workspace --all-targets --locked
status=0
cargo test --workspace --locked --no-fail-fast -- --test-threads=2 || status=1
# The FUSE suite again, every mount over FUSE over io_uring (the run above uses /dev/fuse, the
# default transport, except in the tests of the rings themselves).
if [[ ",$OKEANOS_TESTS_REQUIRE," == *,uring,* ]]; then
    OKEANOS_TEST_TRANSPORT=io_uring cargo test -p okeanos-cli --locked --test fuse -- --test-threads=2 || status=1
fi
# The Python and Go packages (the C ABI's tests are among the cargo tests above).
bash scripts/test-bindings.sh || status=1
exit $status
