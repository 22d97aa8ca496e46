#!/usr/bin/env bash
# The Kubernetes manifests for real, in podman: the cpu overlay, rendered
# with kubectl kustomize and adapted for podman (podman_kube.py), is played
# with `podman kube play` on a user network with a Prometheus beside it.
# From this machine, through the coordinator's published port: a two-stage
# job must succeed, Prometheus must scrape the coordinator and both workers,
# and a job whose worker pod is killed mid-job must go on with the other
# worker (it may, with minWorkers 1) and succeed, naming the killed one.
# Everything is taken down afterwards, also on failure, and nothing may be
# left.
#
#   kube_play_test.sh CHIMERA_CLI IMAGE
set -euo pipefail
source "$(dirname "$0")/support.sh"
CHIMERA=$1
image=$2
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

network=chimera-kube-test-$$
work=$(mktemp -d)
grpc_port=$(free_port)
prometheus_port=$(free_port)
export CHIMERA_ADDRESS=127.0.0.1:$grpc_port

kubectl kustomize "$repo/deploy/kubernetes/overlays/cpu" |
  "$here/podman_kube.py" --image "$image" --publish "grpc=$grpc_port" \
    --secrets "$work" >"$work/chimera.yaml"
sed "s/HOSTPORT/$prometheus_port/" "$here/kube-prometheus.yaml" >"$work/prometheus.yaml"
# podman makes a volume of every claim and of every ConfigMap it plays.
volumes=$(python3 -c 'import sys, yaml
print(" ".join(o["metadata"]["name"] for f in sys.argv[1:] for o in yaml.safe_load_all(open(f))
               if o and o["kind"] in ("PersistentVolumeClaim", "ConfigMap")))' "$work"/*.yaml)
export CHIMERA_TOKEN=$(python3 -c 'import base64, json, sys
print(base64.b64decode(json.load(open(sys.argv[1]))["client-token"]).decode())' "$work/chimera-tokens.json")

for pod in chimera-coordinator-0 chimera-worker-0 chimera-worker-1; do
  ! podman pod exists "$pod" ||
    fail "pod $pod exists already: another deployment of Chimera runs in podman here"
done
! podman secret inspect chimera-tokens >/dev/null 2>&1 ||
  fail "podman has a secret chimera-tokens already: another deployment of Chimera runs here"
for volume in $volumes; do
  ! podman volume exists "$volume" ||
    fail "volume $volume exists already: another deployment of Chimera runs in podman here"
done

take_down() {
  volumes+=" $(container_volumes name=chimera- | tr '\n' ' ')"
  podman kube play --down "$work/prometheus.yaml" >/dev/null 2>&1 || true
  podman kube play --down "$work/chimera.yaml" >/dev/null 2>&1 || true
  # podman 4.3 keeps every volume and the Secret on --down.
  podman volume rm -f $volumes >/dev/null 2>&1 || true
  podman secret rm chimera-tokens >/dev/null 2>&1 || true
  podman network rm -f "$network" >/dev/null 2>&1 || true
}
trap 'status=$?; [ $status -eq 0 ] || show_logs name=chimera-; take_down; rm -rf "$work"' EXIT

ensure_prometheus_image
podman network create "$network" >/dev/null
podman secret create chimera-tokens "$work/chimera-tokens.json" >/dev/null
podman kube play --network "$network" "$work/chimera.yaml"
podman kube play --network "$network" "$work/prometheus.yaml" >/dev/null

wait_until 60 "healthy coordinator at $CHIMERA_ADDRESS" "$CHIMERA" health
wait_until 60 "registration of both workers" has_workers 2
id=$(submit_job 10)
expect_job "$id" JOB_STATE_SUCCEEDED 300
echo "job $id succeeded"
wait_until 90 "scrape of the coordinator and both workers" prometheus_targets_up "$prometheus_port" 3
echo "Prometheus scrapes all three"

id=$(submit_job 600)
wait_until 120 "first step of job $id" job_has_steps "$id"
podman pod kill chimera-worker-1 >/dev/null
expect_job "$id" JOB_STATE_SUCCEEDED 300
cause=$(job_field "$id" restart_cause)
[[ "$cause" == *chimera-worker-1* ]] || fail "job $id went on without naming the killed worker: $cause"
[ "$(job_field "$id" restarts)" = 1 ] || fail "job $id restarted $(job_field "$id" restarts) times, not once"
went_on_with=$("$CHIMERA" status "$id" -o json | python3 -c '
import json, sys
print(json.load(sys.stdin)["status"]["recoveries"][0]["toPlan"])')
[[ "$went_on_with" == *" on 1 worker" ]] || fail "job $id went on with $went_on_with, not the one worker left"
echo "job $id lost chimera-worker-1 ($cause) and succeeded with $went_on_with"

# Taking it down must leave nothing behind.
take_down
trap 'rm -rf "$work"' EXIT
leftover=$(podman pod ps -q --filter name=chimera-
  podman ps -a -q --filter name=chimera-
  podman volume ls -q | grep -Fx -f <(tr ' ' '\n' <<<"$volumes" | grep .) || true
  podman secret ls --format '{{.Name}}' | grep -Fx chimera-tokens || true
  podman network ls -q --filter "name=^$network\$")
[ -z "$leftover" ] || fail "left behind after --down: $leftover"
