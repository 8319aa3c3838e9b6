#!/usr/bin/env bash
# The bindings' own tests, after the workspace is built (scripts/test.sh runs this): the Python
# package (pip-installed into a virtual environment under target/, then pytest) and the Go
# package (go vet, go test, the example) over target/<profile>/libokeanos.so. The C ABI's tests
# are cargo tests of crates/okeanos-ffi.
set -euo pipefail
cd "$(dirname "$0")/.."
profile_dir=${OKEANOS_PROFILE_DIR:-target/debug}
lib="$PWD/$profile_dir"
status=0

# Python: pip install ./bindings/python, built by maturin with the workspace's dev profile so
# that it reuses the engine compiled for the tests. (`--python-only`: install and test it, and
# stop there; scripts/bench-bindings.sh uses that.)
venv=target/python-venv
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c 'import maturin, pytest' 2>/dev/null; then
    "$venv/bin/pip" install -q 'maturin>=1.5,<2' pytest
fi
echo "installing the Python package (pip install ./bindings/python)" >&2
if PATH="$PWD/$venv/bin:$PATH" CARGO_TARGET_DIR="$PWD/target" MATURIN_PEP517_ARGS="--profile dev" \
    "$venv/bin/pip" install -q --no-build-isolation --force-reinstall --no-deps ./bindings/python; then
    # Run from outside the source tree, so that the installed package is what is imported.
    (cd bindings/python/tests && "$PWD/../../../$venv/bin/python" -m pytest -q -p no:cacheprovider .) || status=1
else
    echo "the Python package did not build" >&2
    status=1
fi
if [ "${1:-}" = "--python-only" ]; then
    exit $status
fi

# Go: cgo over the C ABI.
if command -v go >/dev/null 2>&1 || [ -x /usr/local/go/bin/go ]; then
    export PATH="$PATH:/usr/local/go/bin"
    export CGO_LDFLAGS="-L$lib -Wl,-rpath,$lib"
    # Each step exits the subshell on failure itself: `set -e` does not act inside a subshell
    # on the left of `||` (a failing `go test` here once left CI green).
    (
        cd bindings/go || exit 1
        unformatted=$(gofmt -l .)
        if [ -n "$unformatted" ]; then
            echo "gofmt would change: $unformatted" >&2
            exit 1
        fi
        go vet ./... || exit 1
        go test -count=1 ./... || exit 1
        go run ./example || exit 1
    ) || status=1
else
    echo "go is required for the Go package's tests and was not found" >&2
    status=1
fi
exit $status
