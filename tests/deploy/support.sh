# Shared by the deployment tests (sourced): failing with a reason, bounded
# waits, free ports, and following a job through the host's chimera CLI.
# The caller sets CHIMERA (the CLI binary) and exports CHIMERA_ADDRESS and
# CHIMERA_TOKEN.

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# show_logs FILTER: the last lines of every container podman's FILTER
# matches, for a test that failed, before they are taken down.
show_logs() {
  local container
  for container in $(podman ps -a --format '{{.Names}}' --filter "$1" | grep -v -- -infra); do
    echo "--- podman logs $container (last 30 lines)" >&2
    podman logs --tail 30 "$container" >&2 2>&1 || true
  done
}

# container_volumes FILTER: the volumes the containers podman's FILTER
# matches have mounted, the anonymous ones for the image's VOLUMEs included
# (podman removes none of those when it takes a deployment down).
container_volumes() {
  local ids
  ids=$(podman ps -a -q --filter "$1")
  [ -z "$ids" ] || podman inspect --format '{{range .Mounts}}{{if .Name}}{{.Name}}{{"\n"}}{{end}}{{end}}' $ids | sort -u
}

# A TCP port free on this machine's loopback right now.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_until SECONDS WHAT COMMAND...: runs COMMAND every 2 s until it
# succeeds; fails naming WHAT once SECONDS have passed.
wait_until() {
  local limit=$1 what=$2
  shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || fail "no $what within ${limit} s"
    sleep 2
  done
}

# job_field ID FIELD: a field of the job's status (state, message,
# completed_steps), as `chimera status -o json` prints it.
job_field() {
  "$CHIMERA" status "$1" -o json | python3 -c '
import json, sys
status = json.load(sys.stdin).get("status", {})
camel = "".join(w if i == 0 else w.title() for i, w in enumerate(sys.argv[1].split("_")))
print(status.get(sys.argv[1], status.get(camel, "")))' "$2"
}

# The number of workers the coordinator knows.
worker_count() {
  "$CHIMERA" workers -o json | python3 -c 'import json, sys; print(len(json.load(sys.stdin)["workers"]))'
}

has_workers() { [ "$(worker_count)" -eq "$1" ]; }

# submit_job STEPS: submits tests/deploy/two-stage-job.yaml with maxSteps
# STEPS and prints the job id.
submit_job() {
  local file
  file=$(mktemp --suffix .yaml)
  sed "s/STEPS/$1/" "$(dirname "${BASH_SOURCE[0]}")/two-stage-job.yaml" >"$file"
  "$CHIMERA" submit -f "$file" --no-wait
  rm -f "$file"
}

job_has_ended() {
  case "$(job_field "$1" state)" in
    JOB_STATE_SUCCEEDED | JOB_STATE_FAILED | JOB_STATE_STOPPED) return 0 ;;
    *) return 1 ;;
  esac
}

job_has_steps() { [ "$(job_field "$1" completed_steps)" -gt 0 ] 2>/dev/null; }

# expect_job ID STATE SECONDS: waits for the job to end and fails unless it
# ended in STATE.
expect_job() {
  wait_until "$3" "end of job $1" job_has_ended "$1"
  local state
  state=$(job_field "$1" state)
  [ "$state" = "$2" ] || fail "job $1 ended $state, not $2: $(job_field "$1" message)"
}

# prometheus_targets_up PORT N: true when Prometheus on PORT has N targets
# and every one is up.
prometheus_targets_up() {
  python3 - "$1" "$2" <<'PY'
import json, sys, urllib.request
answer = json.load(urllib.request.urlopen(
    f"http://127.0.0.1:{sys.argv[1]}/api/v1/query?query=up", timeout=5))
samples = answer["data"]["result"]
print([(s["metric"].get("instance"), s["value"][1]) for s in samples])
sys.exit(0 if len(samples) == int(sys.argv[2]) and all(s["value"][1] == "1" for s in samples) else 1)
PY
}

# The Prometheus image the tests run (tests/deploy/prometheus.Dockerfile),
# built once.
PROMETHEUS_TEST_IMAGE=localhost/chimera-test-prometheus:latest
ensure_prometheus_image() {
  local here
  here=$(dirname "${BASH_SOURCE[0]}")
  podman image exists "$PROMETHEUS_TEST_IMAGE" ||
    podman build -q -f "$here/prometheus.Dockerfile" -t "$PROMETHEUS_TEST_IMAGE" "$here" >/dev/null
}
