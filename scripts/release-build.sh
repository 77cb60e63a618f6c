#!/usr/bin/env bash
# release-build.sh builds nodeplane the way `make release` ships it: static,
# stripped, -trimpath, and with two files of our dependencies swapped for the
# stand-ins in release/_overlay (see release/_overlay/README.md), so the Go
# linker can drop unused methods again (about a third of the binary).
#
# Go refuses to overlay files inside the module cache, so the build runs on a
# temporary copy of the tree with its dependencies vendored (`go mod vendor`);
# the vendored files themselves are left as the module proxy served them and
# the stand-ins are applied with `go build -overlay`. Nothing in the
# repository changes.
#
# Usage: scripts/release-build.sh OUTPUT [extra -ldflags]   (GOOS/GOARCH from the environment)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:?usage: release-build.sh OUTPUT [ldflags]}"
ldflags="-s -w ${2:-}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
work="$(mktemp -d "${TMPDIR:-/tmp}/nodeplane-release.XXXXXX")"
trap 'rm -rf "$work"' EXIT
tar -C "$repo" --exclude=./.git --exclude=./bin --exclude=./dist --exclude=./vendor -cf - . | tar -C "$work" -xf -
cd "$work"
go mod vendor
for f in vendor/golang.org/x/net/trace/trace.go vendor/golang.org/x/net/trace/events.go \
  vendor/golang.org/x/net/trace/histogram.go vendor/go.etcd.io/etcd/server/v3/storage/backend/verify.go; do
  [ -f "$f" ] || { echo "release-build.sh: $f is not vendored any more: a dependency changed; update release/_overlay" >&2; exit 1; }
done
cat > overlay.json <<JSON
{"Replace": {
  "$work/vendor/golang.org/x/net/trace/trace.go": "",
  "$work/vendor/golang.org/x/net/trace/events.go": "",
  "$work/vendor/golang.org/x/net/trace/histogram.go": "",
  "$work/vendor/golang.org/x/net/trace/stand_in.go": "$work/release/_overlay/xnettrace.go",
  "$work/vendor/go.etcd.io/etcd/server/v3/storage/backend/verify.go": "$work/release/_overlay/etcdverify.go"
}}
JSON
CGO_ENABLED=0 go build -mod=vendor -overlay overlay.json -tags grpcnotrace -trimpath -ldflags "$ldflags" -o "$out" ./cmd/nodeplane
