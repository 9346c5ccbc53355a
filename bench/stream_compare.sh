#!/usr/bin/env bash
# Streaming through sluice-node and through nginx, in one run on loopback.
# An SSE upstream of ours (bench/sse_upstream.cpp, built here) answers every
# request with EVENTS OpenAI-shaped chunk events, each one HTTP chunk of its
# own send(), then `data: [DONE]`. For EVENTS = 20 and 200 it starts
#   upstream               the upstream alone, wrk straight at it (baseline)
#   nginx                  nginx proxy_pass to it, proxy_buffering off,
#                          HTTP/1.1 and a keep-alive pool to it, no access log
#   nginx+log              the same with an access log to a file
#   sluice-node tuned      an http source to it, access log off, caps and
#                          pools raised (as sluice_conf in bench/common.sh),
#                          scheduler and loops as shipped
#   sluice-node default    the shipped defaults: only node.listen, one http
#                          source and the chat route; its access log to a file
# checks once with curl that each streams a complete answer (EVENTS events,
# ending with `data: [DONE]`), then runs wrk (POST of a streaming chat
# request) at each connection count against each target, ROUNDS rounds
# (the targets in turn, their order reversed every other round), and prints
# per target the MEDIAN of the rounds: streams/s, events/s (streams/s x
# EVENTS), p50 and p99 of a whole stream, non-2xx answers and socket errors
# (these two summed over the rounds), the CPU microseconds per event of the
# proxy process (user + system of all its threads, from /proc/PID/stat over
# the wrk run; nginx: its worker process; the upstream row: the upstream
# itself), and streams/s over nginx's in the same run (tuned node over
# nginx, default node over nginx+log).
#
#   bench/stream_compare.sh [seconds_per_run] [connections...]
#                           (defaults: 5 s; 1, 16 and 64 connections)
#   SLUICE_BENCH_ROUNDS=N   rounds (default 3; the median is reported)
#   SLUICE_BENCH_PORT=N     first port (default 18300; uses N .. N+9)
#   SLUICE_NODE_BIN=PATH    that sluice-node binary instead of building one
#                           (SLUICE_TARGETS=sluice-node scripts/build.sh)
#
# Installs nginx-light, wrk and curl when missing; needs g++; uses only
# 127.0.0.1; stops every process it started, also on Ctrl-C. A target that
# does not start, streams an incomplete answer, or dies during the run gets
# a FAILED line (with the end of its log) and "-" in its rows; the run goes
# on with the others.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
me=stream_compare
usage() {
  echo "usage: $0 [seconds_per_run] [connections...]   (positive integers)" >&2
  exit 2
}
secs=${1:-5}
shift || true
conns=("$@")
[ ${#conns[@]} -gt 0 ] || conns=(1 16 64)
rounds=${SLUICE_BENCH_ROUNDS:-3}
for n in "$secs" "${conns[@]}" "$rounds"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || usage
done
events_list=(20 200)

need=()
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
command -v wrk >/dev/null 2>&1 || need+=(wrk)
command -v curl >/dev/null 2>&1 || need+=(curl)
if [ ${#need[@]} -gt 0 ]; then
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
PATH=$PATH:/usr/sbin
if ! command -v g++ >/dev/null 2>&1; then
  echo "$me: g++ is needed to build bench/sse_upstream.cpp" >&2
  exit 1
fi

if [ -n "${SLUICE_NODE_BIN:-}" ]; then
  node_bin=$SLUICE_NODE_BIN # e.g. an earlier build, for a before/after
else
  SLUICE_TARGETS=sluice-node bash "$root/scripts/build.sh" >/dev/null
  node_bin=$root/build/examples/sluice-node
fi
if ! [ -x "$node_bin" ]; then
  echo "$me: no sluice-node binary at $node_bin" >&2
  exit 1
fi

work=$(mktemp -d)
pids=()
source "$root/bench/common.sh"
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The request wrk and the checks send (await_answer's and post_lua's too).
body='{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}'

# Ports: per EVENTS section, five (its upstream and four proxies), so a
# section never binds a port the one before it just closed.
base=${SLUICE_BENCH_PORT:-18300}
for port in $(seq "$base" $((base + 5 * ${#events_list[@]} - 1))); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "$me: 127.0.0.1:$port is already in use (an earlier run" \
      "still running?); stop it or set SLUICE_BENCH_PORT" >&2
    exit 1
  fi
done

mkdir -p "$work/logs"
if ! g++ -O2 -std=c++17 -o "$work/sse_upstream" "$root/bench/sse_upstream.cpp" \
  > "$work/logs/sse_upstream.build" 2>&1; then
  echo "$me: FAILED: could not build bench/sse_upstream.cpp:" >&2
  sed 's/^/  | /' "$work/logs/sse_upstream.build" | tail -n 20 >&2
  exit 1
fi
post_lua "$work/post.lua"
clk_tck=$(getconf CLK_TCK)

# stream_proxy_conf FILE NAME PORT UPSTREAM_PORT [ACCESS_LOG]: nginx
# proxy_pass to the upstream, passing the stream through as it comes.
stream_proxy_conf() {
  {
    nginx_head "$2"
    cat <<CONF
  upstream up {
    server 127.0.0.1:$4;
    keepalive 128;
    keepalive_requests 1000000;
  }
  server {
    listen 127.0.0.1:$3;
    keepalive_requests 1000000;
    ${5:+access_log $5;}
    location / {
      proxy_pass http://up;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
CONF
  } > "$1"
}

# node_tuned_conf FILE PORT UPSTREAM_PORT: as sluice_conf in common.sh (caps
# and pools raised, no access log), scheduler and loops as shipped.
node_tuned_conf() {
  cat > "$1" <<CONF
[node]
listen = "127.0.0.1:$2"
access_log = "off"
[admission]
session_cap = 1024
connection_cap = 1024
global_cap = 4096
[sources.up]
type = "http"
base_url = "http://127.0.0.1:$3"
max_idle_connections = 256
  [sources.up.aimd]
  initial = 256
  max = 1024
[routes."/v1/chat/completions"]
kind = "chat"
sources = ["up"]
CONF
}

# node_default_conf FILE PORT UPSTREAM_PORT ACCESS_LOG: the shipped
# defaults, an access log to a file.
node_default_conf() {
  cat > "$1" <<CONF
[node]
listen = "127.0.0.1:$2"
access_log = "$4"
[sources.up]
type = "http"
base_url = "http://127.0.0.1:$3"
[routes."/v1/chat/completions"]
kind = "chat"
sources = ["up"]
CONF
}

# The targets of the current section. kind: upstream | nginx | node;
# ref: the index of the nginx row a row's streams/s is compared with (-1:
# none); state: ok | down.
names=() ports=() tpids=() kinds=() refs=() tlogs=() terrs=() state=()
# start NAME PORT KIND REF LOG ERRLOG COMMAND...
start() {
  local name=$1 port=$2 kind=$3 ref=$4 log=$5 err=$6
  shift 6
  "$@" > "$log" 2>&1 &
  pids+=($!)
  names+=("$name") ports+=("$port") tpids+=($!) kinds+=("$kind")
  refs+=("$ref") tlogs+=("$log") terrs+=("$err") state+=(down)
}
# fail I WHY: a clear line and the end of the target's logs; its rows
# show "-" from here on.
fail() {
  state[$1]=down
  local f shown=0
  echo "$me: FAILED: ${names[$1]}: $2; it is skipped from here on."
  for f in "${tlogs[$1]}" "${terrs[$1]}"; do
    if [ -n "$f" ] && [ -s "$f" ]; then
      [ "$shown" -eq 1 ] || echo "  end of its log:"
      shown=1
      tail -n 5 "$f" | sed 's/^/  | /'
    fi
  done
  [ "$shown" -eq 1 ] || echo "  (its log is empty)"
  return 0
}
# stop_targets: stops the section's processes (TERM, KILL after 5 s).
stop_targets() {
  local p _ left
  for p in "${tpids[@]}"; do kill "$p" 2>/dev/null || true; done
  for _ in $(seq 50); do
    left=0
    for p in "${tpids[@]}"; do alive "$p" && left=1; done
    [ "$left" -eq 1 ] || break
    sleep 0.1
  done
  for p in "${tpids[@]}"; do
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  pids=()
}

# url I: where wrk and curl send the request.
url() { echo "http://127.0.0.1:${ports[$1]}/v1/chat/completions"; }

# ready I: waits up to 10 s for target I to answer HTTP, then checks with
# curl that one streamed answer arrives complete: status 200, EVENTS
# `data: {` events, the last line `data: [DONE]`. Marks it ok, or FAILED.
ready() {
  local i=$1 code _ out=$work/logs/check-$1-$events.out
  code=000
  for _ in $(seq 100); do
    if ! alive "${tpids[i]}"; then
      fail "$i" "$(why_down "${tpids[i]}" "${ports[i]}" exited)"
      return 1
    fi
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X POST \
      -H 'Content-Type: application/json' -d "$body" "$(url "$i")" || true)
    [ "$code" = 000 ] || break
    sleep 0.1
  done
  if [ "$code" = 000 ]; then
    fail "$i" "$(why_down "${tpids[i]}" "${ports[i]}" silent)"
    return 1
  fi
  code=$(curl -s -N -o "$out" -w '%{http_code}' --max-time 30 -X POST \
    -H 'Content-Type: application/json' -d "$body" "$(url "$i")" || true)
  local got last
  got=$(grep -c '^data: {' "$out" 2>/dev/null || true)
  last=$(grep -v '^[[:space:]]*$' "$out" 2>/dev/null | tail -n 1 || true)
  if [ "$code" != 200 ] || [ "$got" != "$events" ] ||
    [ "$last" != "data: [DONE]" ]; then
    fail "$i" "the streamed answer is not complete (curl: HTTP $code, $got \
of $events events, last line '${last:0:60}')"
    echo "  answer began:"
    head -c 300 "$out" | sed 's/^/  > /'
    echo
    return 1
  fi
  state[i]=ok
}

# cpu_pids I: the processes whose CPU counts for target I.
cpu_pids() {
  if [ "${kinds[$1]}" = nginx ]; then
    pgrep -P "${tpids[$1]}" || true # its worker(s); the master only waits
  else
    echo "${tpids[$1]}"
  fi
}
# ticks PID...: their user + system clock ticks (all threads); fails when
# one is gone.
ticks() {
  local p sum=0 t
  [ $# -gt 0 ] || return 1
  for p in "$@"; do
    t=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null |
      awk '{ print $12 + $13 }') || return 1
    [ -n "$t" ] || return 1
    sum=$((sum + t))
  done
  echo "$sum"
}

# run I CONNECTIONS -> "streams rps p50_us p99_us non2xx socket_errors
# cpu_us_per_event cpu_ticks tick_us_per_event" (the last two: the CPU
# counted, in clock ticks, and what one tick is per event), empty when wrk
# printed no rate or the CPU could not be read.
run() {
  local i=$1 c=$2 threads=2 cp t0 t1 out
  [ "$c" -ge 2 ] || threads=1
  read -r -a cp <<<"$(cpu_pids "$i" | tr '\n' ' ')"
  t0=$(ticks "${cp[@]}") || return 0
  out=$(wrk -t"$threads" -c"$c" -d"${secs}s" --timeout 10s --latency \
    -s "$work/post.lua" "$(url "$i")" 2>&1) || true
  t1=$(ticks "${cp[@]}") || return 0
  awk -v cpu=$((t1 - t0)) -v hz="$clk_tck" -v ev="$events" '
    function us(v) {
      if (v ~ /us$/) return v + 0; if (v ~ /ms$/) return v * 1000;
      if (v ~ /s$/) return v * 1000000; return v }
    / requests in / { n = $1 }
    /Requests\/sec/ { rps = $2; seen = 1 }
    /^ +50%/ { p50 = us($2) }
    /^ +99%/ { p99 = us($2) }
    /Non-2xx/ { bad = $5 }
    /Socket errors/ { gsub(",", ""); err = $4 + $6 + $8 + $10 }
    END {
      if (!seen) exit
      per = n > 0 ? cpu * 1000000 / hz / (n * ev) : -1
      tick = n > 0 ? 1000000 / hz / (n * ev) : -1
      printf "%d %.1f %.0f %.0f %d %d %.4f %d %.4f\n", n, rps, p50, p99,
        bad + 0, err + 0, per, cpu, tick }
  ' <<<"$out"
}
# measure I CONNECTIONS: sets m_line to run's line, or to "" (with a
# FAILED line, the target marked down if it died) when the target is down,
# died meanwhile or gave wrk no result. Not in $(...): the mark must stay.
m_line=
measure() {
  local i=$1
  m_line=
  [ "${state[i]}" = ok ] || return 0
  m_line=$(run "$i" "$2")
  if ! alive "${tpids[i]}" ||
    { [ "${kinds[i]}" = nginx ] && [ -z "$(cpu_pids "$i")" ]; }; then
    m_line=
    fail "$i" "died during the run at $2 connection(s)"
    return 0
  fi
  [ -n "$m_line" ] || echo "$me: FAILED: wrk got no result from" \
    "${names[i]} at $2 connection(s)"
}

# median: the median of the numbers on stdin ("" when none).
median() {
  sort -g | awk '{ v[NR] = $1 } END {
    if (NR == 0) exit
    if (NR % 2) m = v[(NR + 1) / 2]; else m = (v[NR / 2] + v[NR / 2 + 1]) / 2
    print m }'
}

fmt="%-20s %10s %10s %9s %9s %7s %8s %12s %7s\n"
echo "$me: ${secs} s per run, $rounds round(s) (medians), wrk --timeout 10s" \
  "(-t2; -t1 for 1 connection), $(nproc) cores, $(date -u '+%F %H:%M') UTC"
echo "sluice-node: $node_bin"
echo "nginx: $(nginx -v 2>&1 | sed 's/.*version: //'), worker_processes 1," \
  "proxy_buffering off"

# col K: column K of the rounds' lines in `lines`.
col() { printf '%s\n' "${lines[@]}" | awk -v k="$1" '{ print $k }'; }

declare -A res med_rps
for s in "${!events_list[@]}"; do
  events=${events_list[s]}
  p0=$((base + 5 * s))
  names=() ports=() tpids=() kinds=() refs=() tlogs=() terrs=() state=()
  start upstream "$p0" upstream -1 "$work/logs/upstream-$events.out" "" \
    "$work/sse_upstream" "$p0" "$events"
  stream_proxy_conf "$work/nginx-$events.conf" "nginx-$events" $((p0 + 1)) "$p0"
  start nginx $((p0 + 1)) nginx -1 "$work/logs/nginx-$events.out" \
    "$work/logs/nginx-$events.err" \
    nginx -c "$work/nginx-$events.conf" -p "$work"
  stream_proxy_conf "$work/nginxlog-$events.conf" "nginxlog-$events" \
    $((p0 + 2)) "$p0" "$work/logs/nginxlog-$events.access"
  start nginx+log $((p0 + 2)) nginx -1 "$work/logs/nginxlog-$events.out" \
    "$work/logs/nginxlog-$events.err" \
    nginx -c "$work/nginxlog-$events.conf" -p "$work"
  node_tuned_conf "$work/node-tuned-$events.toml" $((p0 + 3)) "$p0"
  start "sluice-node tuned" $((p0 + 3)) node 1 \
    "$work/logs/node-tuned-$events.out" "" \
    "$node_bin" --config "$work/node-tuned-$events.toml"
  node_default_conf "$work/node-default-$events.toml" $((p0 + 4)) "$p0" \
    "$work/logs/node-default-$events.access"
  start "sluice-node default" $((p0 + 4)) node 2 \
    "$work/logs/node-default-$events.out" "" \
    "$node_bin" --config "$work/node-default-$events.toml"

  echo
  echo "== $events events per stream (ports $p0-$((p0 + 4)))"
  # The upstream first: the proxies' checks go through it.
  ready 0 || true
  if [ "${state[0]}" != ok ]; then
    echo "$me: the upstream did not start; nothing to measure" >&2
    exit 1
  fi
  for i in "${!names[@]}"; do
    [ "$i" -eq 0 ] || ready "$i" || true
  done
  ok=()
  for i in "${!names[@]}"; do
    if [ "${state[i]}" = ok ]; then ok+=("${names[i]}"); fi
  done
  echo "stream check (curl: HTTP 200, $events events, then data: [DONE]):" \
    "complete from ${ok[*]:-none}"

  # Warm-up: connections to the upstream and lazily started threads exist
  # before the first measured run.
  maxc=$(printf '%s\n' "${conns[@]}" | sort -n | tail -n 1)
  for i in "${!names[@]}"; do
    [ "${state[i]}" = ok ] || continue
    wt=2
    [ "$maxc" -ge 2 ] || wt=1
    wrk -t"$wt" -c"$maxc" -d1s --timeout 10s -s "$work/post.lua" \
      "$(url "$i")" > /dev/null 2>&1 || true
  done

  order=("${!names[@]}")
  for r in $(seq "$rounds"); do
    echo "$me: round $r of $rounds ..." >&2
    if [ $((r % 2)) -eq 0 ]; then
      mapfile -t run_order < <(printf '%s\n' "${order[@]}" | sort -rn)
    else
      run_order=("${order[@]}")
    fi
    for c in "${conns[@]}"; do
      for i in "${run_order[@]}"; do
        measure "$i" "$c"
        res["$events,$c,$i,$r"]=$m_line
      done
    done
  done

  for c in "${conns[@]}"; do
    echo
    echo "$events events, $c connection(s):"
    # printf "$fmt": the one format of every row.
    # shellcheck disable=SC2059
    printf "$fmt" target streams/s events/s p50_us p99_us non2xx sock_err \
      cpu_us/event vs_ngx
    med_rps=()
    rows=()
    for i in "${!names[@]}"; do
      lines=()
      for r in $(seq "$rounds"); do
        l=${res["$events,$c,$i,$r"]:-}
        [ -z "$l" ] || lines+=("$l")
      done
      if [ ${#lines[@]} -eq 0 ]; then
        rows[i]=
        continue
      fi
      rps=$(col 2 | median)
      p50=$(col 3 | median)
      p99=$(col 4 | median)
      bad=$(col 5 | awk '{ s += $1 } END { print s + 0 }')
      err=$(col 6 | awk '{ s += $1 } END { print s + 0 }')
      cpu=$(col 7 | median)
      cticks=$(col 8 | median)
      tick=$(col 9 | median)
      med_rps[$i]=$rps
      rows[i]="$rps $p50 $p99 $bad $err $cpu $cticks $tick ${#lines[@]}"
    done
    for i in "${!names[@]}"; do
      if [ -z "${rows[i]:-}" ]; then
        # shellcheck disable=SC2059
        printf "$fmt" "${names[i]}" - - - - - - - FAILED
        continue
      fi
      read -r rps p50 p99 bad err cpu cticks tick n <<<"${rows[i]}"
      ref=${refs[i]}
      ratio=-
      if [ "$ref" -ge 0 ] && [ -n "${med_rps[$ref]:-}" ]; then
        ratio=$(awk -v a="$rps" -v b="${med_rps[$ref]}" \
          'BEGIN { if (b <= 0) printf "-"; else if (a / b < 0.1)
            printf "%.3f", a / b; else printf "%.2f", a / b }')
      fi
      # The CPU figure is coarse when few clock ticks were counted: "~"
      # under 20 ticks (one tick either way is 5 % or more), "<" (one
      # tick's worth) when none.
      read -r rps_s eps p50_s p99_s cpu_s < <(awk -v r="$rps" -v e="$events" \
        -v a="$p50" -v b="$p99" -v u="$cpu" -v t="$cticks" -v k="$tick" '
        BEGIN {
          if (u < 0) c = "-"
          else if (t < 0.5) c = sprintf("<%.2f", k)
          else if (t < 20) c = sprintf("~%.2f", u)
          else c = sprintf("%.2f", u)
          printf "%.0f %.0f %.0f %.0f %s\n", r, r * e, a, b, c }')
      note=
      [ "$n" -eq "$rounds" ] || note=" (only $n of $rounds rounds)"
      # shellcheck disable=SC2059
      printf "$fmt" "${names[i]}" "$rps_s" "$eps" "$p50_s" "$p99_s" "$bad" \
        "$err" "$cpu_s" "$ratio$note"
    done
  done
  stop_targets
done

echo
cat <<NOTE
p50_us, p99_us: of a whole stream (wrk: request sent to last byte read).
cpu_us/event: user + system CPU of the proxy's process, all threads (nginx:
  its worker; upstream row: the upstream itself), over the wrk run, per
  event delivered; counted in clock ticks of $((1000 / clk_tck)) ms: "~" under 20
  ticks (+-1 tick is 5 % or more), "<X" none (X: one tick's worth).
vs_ngx: streams/s over nginx's (sluice-node tuned) or nginx+log's
  (sluice-node default) in the same run.
non2xx, sock_err: summed over the rounds; the other columns: medians.
NOTE
