#!/usr/bin/env bash
# What one request costs sluice-node: starts the fixed-response upstream
# (nginx, as bench/http_compare.sh) and ONE sluice-node variant governing
# it, then runs wrk against the node while `perf stat -e
# task-clock,context-switches,cpu-migrations -p PID` counts on the node for
# the same time (perf runs wrk as its workload, so both windows are one).
# Prints the requests wrk completed, the node's threads, and per request:
# the node's CPU µs (task-clock / requests) and its context switches.
#
#   bench/node_perf.sh VARIANT [seconds] [connections]
#     VARIANT      loops=1 | loops=2  (node.scheduler = "loops", node.loops)
#                  loops=2-handoff    (one listener handing connections out:
#                                      node.accept = "handoff")
#                  loops=2-log        (loops=2 with node.access_log on a
#                                      file, $work/access.log)
#                  sharing            (node.scheduler = "sharing": CAF
#                                      workers + 2 HTTP front threads)
#                  nginx              nginx proxy_pass instead of the node
#                                      (its one worker counted): the peer's
#                                      figures in the same run
#     seconds      of the measured run (default 5; a 1 s warm-up before it)
#     connections  wrk's (default 16; wrk -t2, or -t1 for one connection)
#   SLUICE_BENCH_PORT=N  first port (default 18200; uses N and N+1)
#   SLUICE_NODE_BIN=PATH  that sluice-node binary instead of building one
#   SLUICE_BENCH_CLOSE=1 each request on a new connection (wrk sends
#                        `Connection: close`): what accepting costs
#   SLUICE_PERF_EVENTS=E1,E2  more perf events to count, printed per request
#                        (e.g. a uprobe on malloc: `perf probe -x
#                        /lib/x86_64-linux-gnu/libc.so.6 malloc`, then
#                        SLUICE_PERF_EVENTS=probe_libc:malloc)
#   SLUICE_PERF_RECORD=FILE  then profiles the node during a second run of
#                        the same length (`perf record -g`, written to FILE;
#                        read it with `perf report -i FILE --no-children`)
#
# Needs perf (Debian linux-perf, installed when missing) allowed to count
# on another process: exits non-zero, saying how to allow it, when not.
# Installs nginx-light and wrk when missing; builds sluice-node; uses only
# 127.0.0.1; stops every process it started, also on Ctrl-C.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
usage() {
  echo "usage: $0 loops=1|loops=2|loops=2-handoff|loops=2-log|sharing|nginx [seconds] [connections]" >&2
  exit 2
}
[ $# -ge 1 ] || usage
variant=$1
secs=${2:-5}
conns=${3:-16}
case $variant in
  loops=2 | loops=2-handoff | loops=2-log | loops=1 | sharing | nginx) ;;
  *) usage ;;
esac

# shellcheck source=bench/common.sh
source "$root/bench/common.sh"
install_missing nginx=nginx-light wrk=wrk perf=linux-perf
PATH=$PATH:/usr/sbin

work=$(mktemp -d)
pids=()
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# perf must be allowed to count on another process: try it on a sleep.
sleep 10 &
check_pid=$!
pids+=("$check_pid")
perf_ok=1
perf stat -e task-clock,context-switches,cpu-migrations -p "$check_pid" \
  -o "$work/perf-check.txt" -- sleep 0.2 > /dev/null \
  2> "$work/perf-check.err" || perf_ok=0
kill "$check_pid" 2>/dev/null || true
if [ "$perf_ok" -eq 0 ]; then
  paranoid=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null || echo "?")
  {
    echo "node_perf: perf may not count on another process here" \
      "(kernel.perf_event_paranoid = $paranoid, uid $(id -u)). perf said:"
    sed 's/^/  | /' "$work/perf-check.err" | head -n 8
    echo "To allow it (until reboot):"
    echo "  sudo sysctl -w kernel.perf_event_paranoid=1"
    echo "or run this script as root. In a container, perf_event_open also"
    echo "needs CAP_PERFMON (or CAP_SYS_ADMIN) and a seccomp profile that"
    echo "allows it, e.g. docker run --cap-add PERFMON ... (or --privileged)."
  } >&2
  exit 1
fi

node_binary

base=${SLUICE_BENCH_PORT:-18200}
up=$base sl=$((base + 1))
for port in "$up" "$sl"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "node_perf: 127.0.0.1:$port is already in use (an earlier run" \
      "still running?); stop it or set SLUICE_BENCH_PORT" >&2
    exit 1
  fi
done

mkdir -p "$work/logs"
upstream_conf "$work/upstream.conf" "$up"
label="sluice-node $variant"
if [ "$variant" = nginx ]; then
  label="nginx proxy_pass (its worker)"
  proxy_conf "$work/proxy.conf" "$sl" "$up"
else
  sluice_conf "$work/sluice.toml" "$sl" "$variant" "$up"
  if [ "$variant" = loops=2-log ]; then
    sed -i "s|^access_log = \"off\".*|access_log = \"$work/access.log\"|" \
      "$work/sluice.toml"
  fi
fi
post_lua "$work/post.lua"

nginx -c "$work/upstream.conf" -p "$work" > "$work/logs/upstream.out" 2>&1 &
up_pid=$!
pids+=("$up_pid")
if [ "$variant" = nginx ]; then
  nginx -c "$work/proxy.conf" -p "$work" > "$work/logs/sluice.out" 2>&1 &
else
  "$node_bin" --config "$work/sluice.toml" > "$work/logs/sluice.out" 2>&1 &
fi
node_pid=$!
pids+=("$node_pid")

# ready NAME PID PORT LOG: waits up to 10 s for an HTTP answer; exits with
# a clear line (and the end of the log) when the process ends or is silent.
ready() {
  local code
  if ! code=$(await_answer "$2" "$3"); then
    echo "node_perf: FAILED: $1 $(why_down "$2" "$3" "$code"). End of" \
      "its log:" >&2
    tail -n 5 "$4" | sed 's/^/  | /' >&2
    exit 1
  fi
  case $code in
    2??) ;;
    *) echo "node_perf: WARNING: $1 answers HTTP $code to the test request" ;;
  esac
}
ready upstream "$up_pid" "$up" "$work/logs/upstream.out"
ready "$label" "$node_pid" "$sl" "$work/logs/sluice.out"
if [ "$variant" = nginx ]; then
  # Its worker does the proxying (the master only waits).
  node_pid=$(pgrep -P "$node_pid" | head -n 1)
fi

# still_alive WHEN: exits with the end of the node's log if it died during
# WHEN.
still_alive() {
  alive "$node_pid" && return 0
  echo "node_perf: FAILED: $label died during $1." \
    "End of its log:" >&2
  tail -n 5 "$work/logs/sluice.out" | sed 's/^/  | /' >&2
  exit 1
}

url="http://127.0.0.1:$sl/v1/chat/completions"
wrk_extra=()
wrk_threads=2
[ "$conns" -lt 2 ] && wrk_threads=1 # one connection: one wrk thread
[ "${SLUICE_BENCH_CLOSE:-0}" = 1 ] && wrk_extra=(-H "Connection: close")
# Warm-up: the node's connections to the upstream and every thread it
# starts lazily exist before perf attaches (perf -p counts the threads
# that exist when it attaches).
wrk -t"$wrk_threads" -c"$conns" -d1s "${wrk_extra[@]}" -s "$work/post.lua" "$url" > /dev/null 2>&1 || true
still_alive "the warm-up"
threads_before=$(find "/proc/$node_pid/task" -mindepth 1 -maxdepth 1 | wc -l)

rc=0
perf stat -x, -o "$work/perf.csv" \
  -e "task-clock,context-switches,cpu-migrations${SLUICE_PERF_EVENTS:+,$SLUICE_PERF_EVENTS}" \
  -p "$node_pid" -- wrk -t"$wrk_threads" -c"$conns" -d"${secs}s" --latency "${wrk_extra[@]}" -s "$work/post.lua" "$url" \
  > "$work/wrk.out" 2>&1 || rc=$?
still_alive "the run"
threads_after=$(find "/proc/$node_pid/task" -mindepth 1 -maxdepth 1 | wc -l)
if [ "$rc" -ne 0 ]; then
  echo "node_perf: FAILED: perf stat / wrk exited with status $rc:" >&2
  sed 's/^/  | /' "$work/wrk.out" "$work/perf.csv" | tail -n 12 >&2
  exit 1
fi

read -r requests rps p50 p99 bad err < <(awk '
  function us(v) {
    if (v ~ /us$/) return v + 0; if (v ~ /ms$/) return v * 1000;
    if (v ~ /s$/) return v * 1000000; return v }
  / requests in / { n = $1 }
  /Requests\/sec/ { rps = $2 }
  /^ +50%/ { p50 = us($2) }
  /^ +99%/ { p99 = us($2) }
  /Non-2xx/ { bad = $5 }
  /Socket errors/ { gsub(",", ""); err = $4 + $6 + $8 + $10 }
  END { printf "%d %.0f %.0f %.0f %d %d\n", n, rps, p50, p99, bad + 0, err + 0 }
' "$work/wrk.out")
# perf -x, lines: value,unit,event,run time,percentage,...; the value is
# "<not counted>" or "<not supported>" when it could not count.
read -r task_ms cs mig < <(awk -F, '
  $3 ~ /^task-clock/ { t = $1 }
  $3 ~ /^context-switches/ { c = $1 }
  $3 ~ /^cpu-migrations/ { m = $1 }
  END { printf "%s %s %s\n", (t == "" ? "?" : t), (c == "" ? "?" : c), (m == "" ? "?" : m) }
' "$work/perf.csv")
for v in "$task_ms" "$cs" "$mig"; do
  if ! [[ $v =~ ^[0-9.]+$ ]]; then
    echo "node_perf: FAILED: perf did not count (task-clock $task_ms," \
      "context-switches $cs, cpu-migrations $mig). Its output:" >&2
    sed 's/^/  | /' "$work/perf.csv" >&2
    exit 1
  fi
done
if [ "$requests" -le 0 ]; then
  echo "node_perf: FAILED: wrk completed no request. Its output:" >&2
  sed 's/^/  | /' "$work/wrk.out" >&2
  exit 1
fi

echo "node_perf: $label, wrk -t$wrk_threads -c$conns -d${secs}s${wrk_extra[*]:+ ${wrk_extra[*]}}," \
  "$(nproc) cores, $(date -u +%F)"
if [ "$threads_before" -eq "$threads_after" ]; then
  echo "$label threads: $threads_after"
else
  echo "$label threads: $threads_before when perf attached," \
    "$threads_after after (perf counted only the first $threads_before)"
fi
echo "requests: $requests ($rps req/s, p50 $p50 us, p99 $p99 us," \
  "non-2xx $bad, socket errors $err)"
awk -v t="$task_ms" -v c="$cs" -v m="$mig" -v n="$requests" -v s="$secs" '
  BEGIN {
    printf "node totals: task-clock %.1f ms (%.2f CPUs), context switches %d, cpu-migrations %d\n",
      t, t / (s * 1000), c, m
    printf "per request: CPU %.1f us, context switches %.2f, cpu-migrations %.4f\n",
      t * 1000 / n, c / n, m / n
  }'
if [ -f "$work/access.log" ]; then
  # Lines queued and not yet written (at most the flush interval's) are
  # not counted here.
  echo "access log: $(wc -l < "$work/access.log") line(s) written so far"
fi
if [ -n "${SLUICE_PERF_EVENTS:-}" ]; then
  awk -F, -v n="$requests" -v want="$SLUICE_PERF_EVENTS" '
    BEGIN { k = split(want, w, ",") }
    { for (i = 1; i <= k; i++) if ($3 == w[i])
        printf "per request: %s %.2f\n", w[i], ($1 ~ /^[0-9.]+$/ ? $1 / n : -1) }
  ' "$work/perf.csv"
fi
# Where the node's answers came from (loops only): results handed to a
# connection from another thread than its loop's.
if loops=$(curl -s "http://127.0.0.1:$sl/status" |
  python3 -c 'import json,sys; l=json.load(sys.stdin)["loops"]; print(l["count"], l["cross_loop_posts"])' 2>/dev/null); then
  read -r count cross <<<"$loops"
  [ "$count" -gt 0 ] &&
    awk -v c="$cross" -v n="$requests" -v k="$count" 'BEGIN {
      printf "loops: %d, cross-loop posts %d (%.3f per request)\n", k, c, c / n }'
fi
if [ -n "${SLUICE_PERF_RECORD:-}" ]; then
  perf record -q -g -o "$SLUICE_PERF_RECORD" -p "$node_pid" -- \
    wrk -t"$wrk_threads" -c"$conns" -d"${secs}s" "${wrk_extra[@]}" -s "$work/post.lua" "$url" \
    > "$work/wrk-profiled.out" 2>&1 || rc=$?
  still_alive "the profiled run"
  if [ "$rc" -ne 0 ]; then
    echo "node_perf: FAILED: perf record / wrk exited with status $rc:" >&2
    sed 's/^/  | /' "$work/wrk-profiled.out" | tail -n 12 >&2
    exit 1
  fi
  echo "profile: $SLUICE_PERF_RECORD ($(awk '/ requests in / { print $1 }' \
    "$work/wrk-profiled.out") requests)"
fi
exit 0
