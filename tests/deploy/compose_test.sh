#!/usr/bin/env bash
# The compose stack for real: deploy/compose.yaml brought up with
# podman-compose (coordinator, two workers, Prometheus; Grafana has no image
# offline), a two-stage job submitted from this machine through the published
# port must succeed, and Prometheus must scrape all three daemons. The stack,
# its volumes and its network are removed afterwards, also on failure.
#
#   compose_test.sh CHIMERA_CLI IMAGE
set -euo pipefail
source "$(dirname "$0")/support.sh"
CHIMERA=$1
image=$2
repo=$(cd "$(dirname "$0")/../.." && pwd)

project=chimera-compose-test-$$
compose=(podman-compose -p "$project" -f "$repo/deploy/compose.yaml")
export CHIMERA_IMAGE=$image PROMETHEUS_IMAGE=$PROMETHEUS_TEST_IMAGE
export CHIMERA_PORT=$(free_port) PROMETHEUS_PORT=$(free_port)
# The coordinator takes tokens of 16 characters or more, one per role.
export CHIMERA_CLIENT_TOKEN=client-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
export CHIMERA_WORKER_TOKEN=worker-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
export CHIMERA_ADDRESS=127.0.0.1:$CHIMERA_PORT CHIMERA_TOKEN=$CHIMERA_CLIENT_TOKEN

volumes=
cleanup() {
  volumes+=" $(container_volumes "label=io.podman.compose.project=$project" | tr '\n' ' ')"
  "${compose[@]}" down -v >/dev/null 2>&1 || true
  podman volume rm -f $volumes >/dev/null 2>&1 || true
  podman network rm -f "${project}_default" >/dev/null 2>&1 || true
}

ensure_prometheus_image
# podman-compose prints every podman command it runs: kept for a failure.
log=$(mktemp)
trap 'status=$?
  [ $status -eq 0 ] || { cat "$log" >&2; show_logs "label=io.podman.compose.project=$project"; }
  cleanup; rm -f "$log"' EXIT
"${compose[@]}" up -d coordinator worker-0 worker-1 prometheus >"$log" 2>&1

wait_until 60 "healthy coordinator at $CHIMERA_ADDRESS" "$CHIMERA" health
wait_until 60 "registration of both workers" has_workers 2
# The image's HEALTHCHECK, run as the engine runs it.
podman healthcheck run "${project}_worker-0_1" || fail "the health check of worker-0 fails"
id=$(submit_job 10)
expect_job "$id" JOB_STATE_SUCCEEDED 300
echo "job $id succeeded"
wait_until 90 "scrape of the coordinator and both workers" prometheus_targets_up "$PROMETHEUS_PORT" 3
echo "Prometheus scrapes all three"

# Taking it down must leave nothing behind.
cleanup
trap 'rm -f "$log"' EXIT
leftover=$(podman ps -a -q --filter "label=io.podman.compose.project=$project"
  podman volume ls -q --filter "label=io.podman.compose.project=$project"
  podman volume ls -q | grep -Fx -f <(tr ' ' '\n' <<<"$volumes" | grep .) || true
  podman network ls -q --filter "name=^${project}_")
[ -z "$leftover" ] || fail "left behind after down: $leftover"
