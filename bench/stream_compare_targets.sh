# shellcheck shell=bash disable=SC2154
# Part of bench/stream_compare.sh (sourced, not run): the targets of one
# section and their measurement -- the nginx streaming proxy's config,
# starting a target, marking it FAILED, stopping them all, the readiness
# check of a complete streamed answer, the CPU a target used, one wrk run
# and its line, and the median of the rounds. Reads the caller's `work`,
# `body`, `events`, `tag`, `secs`, `clk_tck`, `me` and `pids`, and needs
# bench/common.sh (alive, why_down, nginx_head, wrk_figures, measure) sourced
# first.

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
  local i=$1 code _ out=$work/logs/check-$1-$tag.out
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
  wrk_figures <<<"$out" | awk -v cpu=$((t1 - t0)) -v hz="$clk_tck" -v ev="$events" '
    { n = $1
      per = n > 0 ? cpu * 1000000 / hz / (n * ev) : -1
      tick = n > 0 ? 1000000 / hz / (n * ev) : -1
      printf "%d %.1f %.0f %.0f %d %d %.4f %d %.4f\n", n, $2, $3, $4, $5, $6,
        per, cpu, tick }'
}
# target_alive I: target I still runs (nginx: a worker too), for measure.
target_alive() {
  alive "${tpids[$1]}" &&
    { [ "${kinds[$1]}" != nginx ] || [ -n "$(cpu_pids "$1")" ]; }
}

# median: the median of the numbers on stdin ("" when none).
median() {
  sort -g | awk '{ v[NR] = $1 } END {
    if (NR == 0) exit
    if (NR % 2) m = v[(NR + 1) / 2]; else m = (v[NR / 2] + v[NR / 2 + 1]) / 2
    print m }'
}
