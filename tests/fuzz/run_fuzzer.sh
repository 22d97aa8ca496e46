#!/usr/bin/env bash
# Runs one libFuzzer target as a test: for SECONDS, from the seed folders
# (read, never written) and the corpus it grew in WORK_DIR on earlier runs.
# A crash, a sanitizer report, a hang (one input running over 20 s) or a
# leak fails it; the input that did is kept under WORK_DIR/findings and
# printed in base64, so that a CI log alone reproduces it:
#   base64 -d > input; FUZZER input
#
#   run_fuzzer.sh FUZZER SECONDS WORK_DIR [SEED_DIR...]
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: run_fuzzer.sh FUZZER SECONDS WORK_DIR [SEED_DIR...]" >&2
  exit 2
fi
fuzzer=$1 seconds=$2 work=$3
shift 3
rm -rf "$work/findings"
mkdir -p "$work/corpus" "$work/findings"
status=0
"$fuzzer" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 \
  -print_final_stats=1 -artifact_prefix="$work/findings/" \
  "$work/corpus" "$@" || status=$?
if [ "$status" -eq 0 ]; then exit 0; fi
echo "run_fuzzer: $(basename "$fuzzer") failed (exit $status); the inputs it kept:" >&2
for input in "$work/findings"/*; do
  [ -e "$input" ] || continue
  echo "$input (base64):" >&2
  base64 "$input" >&2
done
exit 1
