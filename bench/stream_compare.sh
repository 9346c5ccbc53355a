#!/usr/bin/env bash
# Streaming through sluice-node and through nginx, in one run on loopback.
# An SSE upstream of ours (bench/sse_upstream.cpp, built here) answers every
# request with EVENTS OpenAI-shaped chunk events, each one HTTP chunk of its
# own send(), then `data: [DONE]`; with a gap (GAP_US) each send after the
# first comes GAP_US microseconds after the one before, as a model's tokens
# would (the first, with the head, at once). For EVENTS = 20 and 200 (gap:
# SLUICE_BENCH_GAP_US, default 0: the whole answer at once) it starts
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
# Then the time to the first event, and what each proxy adds to it: the
# same five targets over an upstream of 20 events 1000 us apart (so the
# first event leaves alone, well before the rest), and per target one
# keep-alive connection sending SLUICE_BENCH_FE_REQUESTS requests one after
# the other (bench/first_event.cpp, built here; connect time not counted:
# the connection is kept). Per request: from just before the request's
# send() to the recv() that brings the first `data: ` of the answer, the
# answer then read to its end before the next request. It prints p50, p99
# and "added": the target's p50 minus the upstream's alone.
#
#   bench/stream_compare.sh [seconds_per_run] [connections...]
#                           (defaults: 5 s; 1, 16 and 64 connections)
#   SLUICE_BENCH_ROUNDS=N   rounds (default 3; the median is reported)
#   SLUICE_BENCH_GAP_US=N   the upstream's gap between the sends of an answer
#                           in the throughput tables, in microseconds
#                           (default 0; e.g. 1000: one event per read at the
#                           proxy; keep 200 x N well under wrk's 10 s timeout)
#   SLUICE_BENCH_FE_REQUESTS=N  measured requests per target for the
#                           first-event table (default 300, after 10 not
#                           measured; 0: no such table)
#   SLUICE_BENCH_PORT=N     first port (default 18300; uses N .. N+14)
#   SLUICE_NODE_BIN=PATH    that sluice-node binary instead of building one
#                           (SLUICE_TARGETS=sluice-node scripts/build.sh)
#
# E.g. a short run, the throughput tables with a paced upstream:
#   SLUICE_BENCH_ROUNDS=1 SLUICE_BENCH_GAP_US=1000 nice \
#     bench/stream_compare.sh 2 1 16
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
gap_us=${SLUICE_BENCH_GAP_US:-0}
fe_requests=${SLUICE_BENCH_FE_REQUESTS:-300}
for n in "$gap_us" "$fe_requests"; do
  if ! [[ $n =~ ^(0|[1-9][0-9]{0,7})$ ]]; then
    echo "$me: SLUICE_BENCH_GAP_US and SLUICE_BENCH_FE_REQUESTS take an" \
      "integer from 0 to 99999999" >&2
    exit 2
  fi
done
events_list=(20 200)
# The first-event table's upstream: 20 events, 1000 us apart.
fe_events=20
fe_gap_us=1000

# shellcheck source=bench/common.sh
source "$root/bench/common.sh"
install_missing nginx=nginx-light wrk=wrk curl=curl
PATH=$PATH:/usr/sbin
if ! command -v g++ >/dev/null 2>&1; then
  echo "$me: g++ is needed to build bench/sse_upstream.cpp and" \
    "bench/first_event.cpp" >&2
  exit 1
fi

node_binary
if ! [ -x "$node_bin" ]; then
  echo "$me: no sluice-node binary at $node_bin" >&2
  exit 1
fi

work=$(mktemp -d)
pids=()
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The request wrk and the checks send (await_answer's and post_lua's too).
body='{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}'

# Ports: per section (each EVENTS, then the first-event one), five (its
# upstream and four proxies), so a section never binds a port the one
# before it just closed.
base=${SLUICE_BENCH_PORT:-18300}
if ! [[ $base =~ ^[1-9][0-9]*$ ]] || [ "$base" -gt 65521 ]; then
  echo "$me: SLUICE_BENCH_PORT takes a port from 1 to 65521" >&2
  exit 2
fi
for port in $(seq "$base" $((base + 5 * ${#events_list[@]} + 4))); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "$me: 127.0.0.1:$port is already in use (an earlier run" \
      "still running?); stop it or set SLUICE_BENCH_PORT" >&2
    exit 1
  fi
done

mkdir -p "$work/logs"
for prog in sse_upstream first_event; do
  if ! g++ -O2 -std=c++17 -o "$work/$prog" "$root/bench/$prog.cpp" \
    > "$work/logs/$prog.build" 2>&1; then
    echo "$me: FAILED: could not build bench/$prog.cpp:" >&2
    sed 's/^/  | /' "$work/logs/$prog.build" | tail -n 20 >&2
    exit 1
  fi
done
post_lua "$work/post.lua"
clk_tck=$(getconf CLK_TCK)

# shellcheck source=bench/stream_compare_targets.sh
source "$root/bench/stream_compare_targets.sh"

fmt="%-20s %10s %10s %9s %9s %7s %8s %12s %7s\n"
echo "$me: ${secs} s per run, $rounds round(s) (medians), wrk --timeout 10s" \
  "(-t2; -t1 for 1 connection), upstream gap $gap_us us between events," \
  "$(nproc) cores, $(date -u '+%F %H:%M') UTC"
echo "sluice-node: $node_bin"
echo "nginx: $(nginx -v 2>&1 | sed 's/.*version: //'), worker_processes 1," \
  "proxy_buffering off"

# col K: column K of the rounds' lines in `lines`.
col() { printf '%s\n' "${lines[@]}" | awk -v k="$1" '{ print $k }'; }

# The current section: `events` per answer, `gap` microseconds between
# the sends of one, `tag` naming its files.
events='' gap='' tag=''
# start_section P0: starts the upstream on port P0 and the four proxies
# to it on P0+1 .. P0+4.
start_section() {
  local p0=$1
  names=() ports=() tpids=() kinds=() refs=() tlogs=() terrs=() state=()
  start upstream "$p0" upstream -1 "$work/logs/upstream-$tag.out" "" \
    "$work/sse_upstream" "$p0" "$events" "$gap"
  stream_proxy_conf "$work/nginx-$tag.conf" "nginx-$tag" $((p0 + 1)) "$p0"
  start nginx $((p0 + 1)) nginx -1 "$work/logs/nginx-$tag.out" \
    "$work/logs/nginx-$tag.err" \
    nginx -c "$work/nginx-$tag.conf" -p "$work"
  stream_proxy_conf "$work/nginxlog-$tag.conf" "nginxlog-$tag" \
    $((p0 + 2)) "$p0" "$work/logs/nginxlog-$tag.access"
  start nginx+log $((p0 + 2)) nginx -1 "$work/logs/nginxlog-$tag.out" \
    "$work/logs/nginxlog-$tag.err" \
    nginx -c "$work/nginxlog-$tag.conf" -p "$work"
  # Tuned as sluice_conf in common.sh (caps and pools raised, no access
  # log), the scheduler and loops as shipped.
  sluice_conf "$work/node-tuned-$tag.toml" $((p0 + 3)) shipped "$p0"
  start "sluice-node tuned" $((p0 + 3)) node 1 \
    "$work/logs/node-tuned-$tag.out" "" \
    "$node_bin" --config "$work/node-tuned-$tag.toml"
  sluice_default_conf "$work/node-default-$tag.toml" $((p0 + 4)) "$p0" \
    "$work/logs/node-default-$tag.access"
  start "sluice-node default" $((p0 + 4)) node 2 \
    "$work/logs/node-default-$tag.out" "" \
    "$node_bin" --config "$work/node-default-$tag.toml"
}
# check_section: `ready` for each target, the upstream first (the proxies'
# checks go through it); exits when the upstream did not start.
check_section() {
  local i ok=()
  ready 0 || true
  if [ "${state[0]}" != ok ]; then
    echo "$me: the upstream did not start; nothing to measure" >&2
    exit 1
  fi
  for i in "${!names[@]}"; do
    [ "$i" -eq 0 ] || ready "$i" || true
  done
  for i in "${!names[@]}"; do
    if [ "${state[i]}" = ok ]; then ok+=("${names[i]}"); fi
  done
  echo "stream check (curl: HTTP 200, $events events, then data: [DONE]):" \
    "complete from ${ok[*]:-none}"
}

declare -A res med_rps
for s in "${!events_list[@]}"; do
  events=${events_list[s]} gap=$gap_us tag=${events_list[s]}
  p0=$((base + 5 * s))
  start_section "$p0"
  echo
  echo "== $events events per stream, $gap us between events (ports" \
    "$p0-$((p0 + 4)))"
  check_section

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

# The time to the first event, per target: one keep-alive connection,
# first_event's requests one after the other.
if [ "$fe_requests" -gt 0 ]; then
  events=$fe_events gap=$fe_gap_us tag=first-event
  p0=$((base + 5 * ${#events_list[@]}))
  start_section "$p0"
  echo
  echo "== time to first event: $events events per stream, $gap us between" \
    "events, 1 keep-alive connection, $fe_requests requests per target after" \
    "10 not counted (ports $p0-$((p0 + 4)))"
  check_section
  declare -A fe
  for i in "${!names[@]}"; do
    [ "${state[i]}" = ok ] || continue
    echo "$me: first event: ${names[i]} ..." >&2
    err=$work/logs/first_event-$i.err
    if line=$("$work/first_event" "${ports[i]}" "$fe_requests" "$events" \
      2> "$err"); then
      fe[$i]=$line
    else
      echo "$me: FAILED: first_event at ${names[i]}:" \
        "$(tail -n 1 "$err" 2>/dev/null)"
    fi
    if ! alive "${tpids[i]}"; then
      fe[$i]=
      fail "$i" "died during the first-event run"
    fi
  done
  echo
  fe_fmt="%-20s %9s %9s %9s %9s %9s %9s\n"
  # shellcheck disable=SC2059
  printf "$fe_fmt" target requests p50_us p99_us min_us max_us added_us
  read -r up50 _ <<<"${fe[0]:-}"
  for i in "${!names[@]}"; do
    if [ -z "${fe[$i]:-}" ]; then
      # shellcheck disable=SC2059
      printf "$fe_fmt" "${names[i]}" - - - - - FAILED
      continue
    fi
    read -r p50 p99 lo hi n reconn <<<"${fe[$i]}"
    added=-
    if [ "$i" -gt 0 ] && [ -n "${up50:-}" ]; then
      added=$(awk -v a="$p50" -v b="$up50" 'BEGIN { printf "%+.0f", a - b }')
    fi
    note=
    [ "$reconn" -eq 0 ] || note=" ($reconn new connections: the target closed)"
    # shellcheck disable=SC2059
    printf "$fe_fmt" "${names[i]}" "$n" "$(printf '%.0f' "$p50")" \
      "$(printf '%.0f' "$p99")" "$(printf '%.0f' "$lo")" \
      "$(printf '%.0f' "$hi")" "$added$note"
  done
  stop_targets
fi

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
time to first event (bench/first_event.cpp): from just before the request's
  send() to the recv() bringing the answer's first "data: ", on a kept
  connection (no connect counted), one request at a time; added_us: the
  target's p50 minus the upstream's alone (the time the proxy adds).
NOTE
