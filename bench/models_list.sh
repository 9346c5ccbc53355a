#!/usr/bin/env bash
# What `GET /v1/models` costs sluice-node with many models (issue 30,
# finding 8): starts one sluice-node whose chat route names N models (a
# simulated source behind them), asks for the list R times in a row on one
# keep-alive connection, and prints the answer's size, the node's CPU
# milliseconds per list (from /proc/PID/stat, so the client's time is not
# in it) and the wall-clock p50 of one list as the client saw it.
#
#   bench/models_list.sh [models] [requests]   (defaults: 10000, 50)
#   SLUICE_NODE_BIN=PATH  that sluice-node binary (default: build/examples)
#   SLUICE_BENCH_PORT=N   its port (default 18260)
#
# Uses only 127.0.0.1; stops the node it started, also on Ctrl-C.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
models=${1:-10000}
requests=${2:-50}
bin=${SLUICE_NODE_BIN:-$root/build/examples/sluice-node}
port=${SLUICE_BENCH_PORT:-18260}
work=$(mktemp -d)
pids=()
# shellcheck source=bench/common.sh
source "$root/bench/common.sh"
trap cleanup EXIT

{
  printf '[node]\naccess_log = "off"\n'
  printf '[sources.a]\ntype = "simulated"\n'
  printf '[routes."/v1/chat/completions"]\n'
  printf '  [routes."/v1/chat/completions".models]\n'
  for i in $(seq 1 "$models"); do printf '  "model-%05d" = ["a"]\n' "$i"; done
} > "$work/models.toml"
"$bin" --config "$work/models.toml" --listen "127.0.0.1:$port" \
  > "$work/node.out" 2>&1 &
pids+=($!)
pid=$!
for _ in $(seq 300); do
  curl -sf "http://127.0.0.1:$port/healthz" > /dev/null 2>&1 && break
  sleep 0.1
done
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
hz=$(getconf CLK_TCK)
curl -s "http://127.0.0.1:$port/v1/models" -o "$work/first.json"
before=$(ticks)
args=()
for _ in $(seq 1 "$requests"); do
  args+=(-o /dev/null "http://127.0.0.1:$port/v1/models")
done
# One curl: its requests share one keep-alive connection.
curl -s -w '%{time_total} %{http_code} %{size_download}\n' "${args[@]}" > "$work/times"
after=$(ticks)
if awk -v size="$(stat -c %s "$work/first.json")" \
  '$2 != 200 || $3 != size {bad = 1} END {exit !bad}' "$work/times"; then
  echo "a list came back with another status or size" >&2
  exit 1
fi
p50=$(sort -n "$work/times" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
printf 'models %s, list %s bytes, %s requests: node CPU %.1f ms per list, client p50 %.1f ms\n' \
  "$models" "$(stat -c %s "$work/first.json")" "$requests" \
  "$(echo "($after - $before) * 1000 / $hz / $requests" | bc -l)" \
  "$(echo "$p50 * 1000" | bc -l)"
