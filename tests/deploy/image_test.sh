#!/usr/bin/env bash
# The CPU image for real: builds it from deploy/docker/Dockerfile with
# podman (making the debian:12 base first where no registry provides it),
# then checks that it runs as a non-root user, that its binaries work in it
# (chimera tokenize with the SentencePiece library it loads) and name this
# checkout's commit, and that its health check is set.
# The image it leaves is the one the other deployment tests run.
#
#   image_test.sh IMAGE
set -euo pipefail
source "$(dirname "$0")/support.sh"
image=$1
repo=$(cd "$(dirname "$0")/../.." && pwd)

"$repo/deploy/docker/build-image" "$image"

uid=$(podman run --rm "$image" id -u)
[ "$uid" != 0 ] || fail "the image runs as root"
echo "runs as uid $uid"

version=$(podman run --rm "$image" chimera --version)
commit=$(git -C "$repo" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
[[ "$version" == *"commit $commit"* ]] || fail "chimera --version says '$version', not commit $commit"
echo "$version"
podman run --rm "$image" chimera-coordinator --version
podman run --rm "$image" chimera-worker --version | grep -q "runs on LibTorch" ||
  fail "chimera-worker --version does not name its LibTorch"
podman run --rm "$image" chimera-worker daemon --help | grep -q -- "--coordinator" ||
  fail "chimera-worker daemon --help does not show the daemon's flags"
podman run --rm "$image" chimera tokenize -i examples/data/corpus.txt \
  -o /tmp/corpus.tokens -m /tmp/corpus.model --train-vocab 256 | grep -q "wrote /tmp/corpus.tokens" ||
  fail "chimera tokenize does not run in the image"

healthcheck=$(podman image inspect --format '{{json .Config.Healthcheck}}' "$image")
[[ "$healthcheck" == *'"health"'* ]] || fail "no chimera health check in the image: $healthcheck"
for volume in /var/lib/chimera /data /checkpoints; do
  podman image inspect --format '{{json .Config.Volumes}}' "$image" | grep -q "\"$volume\"" ||
    fail "no volume $volume"
done
# The health check itself: a worker's /healthz answers it, nothing else.
podman run --rm "$image" chimera health --http 127.0.0.1:9400 --timeout 2 &&
  fail "health passed with nothing serving"
echo "image $image checked"
