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

# Build everything first so that compile errors are reported on their own.
cargo build --workspace --all-targets --locked
cargo test --workspace --locked -- --test-threads=2
