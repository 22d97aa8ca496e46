#!/usr/bin/env bash
# Writes a coordinator_requests_fuzzer input: one byte that picks the method,
# then the request in protobuf's binary encoding, from a text-format file.
#
#   encode_request_seed.sh PROTOC PROTO_DIR SELECTOR MESSAGE_TYPE IN OUT
set -euo pipefail
if [ $# -ne 6 ]; then
  echo "usage: encode_request_seed.sh PROTOC PROTO_DIR SELECTOR MESSAGE_TYPE IN OUT" >&2
  exit 2
fi
protoc=$1 proto_dir=$2 selector=$3 type=$4 in=$5 out=$6
{
  printf "\\$(printf '%03o' "$selector")"
  "$protoc" --encode="$type" -I "$proto_dir" chimera/v1/service.proto < "$in"
} > "$out"
