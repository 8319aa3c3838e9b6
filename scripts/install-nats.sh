#!/usr/bin/env bash
# Installs the nats-server that the JetStream tests and benchmarks start (a pinned version,
# built with `go install` through the Go module proxy) into ~/.cache/okeanos/tools, unless it
# is there already. Prints the binary's path. Needs Go (1.24 or newer).
set -euo pipefail
VERSION=v2.14.9
DIR="${OKEANOS_TOOLS:-$HOME/.cache/okeanos/tools}/nats-server-$VERSION"
BIN="$DIR/nats-server"
if [ -x "$BIN" ]; then
    echo "$BIN"
    exit 0
fi
if ! command -v go >/dev/null 2>&1; then
    for g in /usr/local/go/bin /usr/lib/go/bin "$HOME/go/bin"; do
        if [ -x "$g/go" ]; then export PATH="$g:$PATH"; break; fi
    done
fi
if ! command -v go >/dev/null 2>&1; then
    echo "nats-server $VERSION is needed by the JetStream tests and benchmarks, and Go is needed to build it:" >&2
    echo "install Go 1.24 or newer (https://go.dev/dl/), or set OKEANOS_NATS_SERVER to a nats-server binary" >&2
    exit 1
fi
echo "building nats-server $VERSION with $(go version) (once; into $DIR)" >&2
mkdir -p "$DIR"
GOBIN="$DIR" GOFLAGS=-mod=mod go install "github.com/nats-io/nats-server/v2@$VERSION" >&2
echo "$BIN"
