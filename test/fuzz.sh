#!/usr/bin/env bash
# Runs every native fuzz target in the repository (third_party/'s modules too)
# for $1 (default 10s) each. New
# interesting inputs land in each package's testdata/fuzz and should be committed.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-10s}
grep -rl --include='*_test.go' '^func Fuzz' . | while read -r file; do
  pkg=./$(dirname "${file#./}")
  for target in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$file" | cut -d' ' -f2); do
    echo "fuzz: $pkg $target ($fuzztime)"
    # From the package's directory: third_party/ holds modules of their own.
    (cd "$pkg" && go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" .)
  done
done
