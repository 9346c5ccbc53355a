#!/usr/bin/env bash
# The HTTP comparison of issue 6, in one run on loopback: a fixed-response
# upstream (nginx), then wrk at the same connection counts against
#   (a) the upstream directly,
#   (b) nginx proxy_pass to it,
#   (c) HAProxy to it, with maxconn + queue timeout (its admission control),
#   (d) sluice-node governing it (an http source).
# Prints requests/s, p50 and p99 for each, and each rate's ratio to (b);
# then the latency sluice-node adds over (a) at low load (1 connection).
#
#   bench/http_compare.sh [seconds_per_run] [connections...]
#                          (defaults: 5 s; 16 and 64 connections)
#
# Installs nginx-light, haproxy and wrk from Debian when missing; builds
# sluice-node; uses only 127.0.0.1; stops every process it started.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-5}
shift || true
conns=("$@")
[ ${#conns[@]} -gt 0 ] || conns=(16 64)

need=()
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || need+=(haproxy)
command -v wrk >/dev/null 2>&1 || need+=(wrk)
if [ ${#need[@]} -gt 0 ]; then
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
PATH=$PATH:/usr/sbin
SLUICE_TARGETS=sluice-node bash "$root/scripts/build.sh" >/dev/null

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

up=18100 px=18101 hp=18102 sl=18103
mkdir -p "$work/logs"
cat > "$work/upstream.conf" <<CONF
worker_processes 1;
daemon off;
pid $work/upstream.pid;
error_log $work/logs/upstream.err warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $work; proxy_temp_path $work;
  fastcgi_temp_path $work; uwsgi_temp_path $work; scgi_temp_path $work;
  server {
    listen 127.0.0.1:$up;
    keepalive_requests 1000000;
    location / {
      default_type application/json;
      return 200 '{"id":"fixed","object":"chat.completion","choices":[]}';
    }
  }
}
CONF
cat > "$work/proxy.conf" <<CONF
worker_processes 1;
daemon off;
pid $work/proxy.pid;
error_log $work/logs/proxy.err warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $work; proxy_temp_path $work;
  fastcgi_temp_path $work; uwsgi_temp_path $work; scgi_temp_path $work;
  upstream up { server 127.0.0.1:$up; keepalive 128; }
  server {
    listen 127.0.0.1:$px;
    keepalive_requests 1000000;
    location / {
      proxy_pass http://up;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
CONF
cat > "$work/haproxy.cfg" <<CONF
global
  maxconn 4096
defaults
  mode http
  timeout connect 5s
  timeout client 30s
  timeout server 30s
  timeout queue 3s
  option http-keep-alive
frontend fe
  bind 127.0.0.1:$hp
  default_backend be
backend be
  http-reuse always
  server up 127.0.0.1:$up maxconn 64
CONF
cat > "$work/sluice.toml" <<CONF
[node]
listen = "127.0.0.1:$sl"
access_log = "off"            # as nginx and haproxy here
[admission]
session_cap = 1024
connection_cap = 1024
global_cap = 4096
[sources.up]
type = "http"
base_url = "http://127.0.0.1:$up"
max_idle_connections = 256
  [sources.up.aimd]
  initial = 256
  max = 1024
[routes."/v1/chat/completions"]
kind = "chat"
sources = ["up"]
CONF
cat > "$work/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"model":"m","messages":[{"role":"user","content":"hi"}]}'
wrk.headers["Content-Type"] = "application/json"
LUA

nginx -c "$work/upstream.conf" -p "$work" & pids+=($!)
nginx -c "$work/proxy.conf" -p "$work" & pids+=($!)
haproxy -f "$work/haproxy.cfg" -q & pids+=($!)
"$root/build/examples/sluice-node" --config "$work/sluice.toml" \
  > "$work/logs/sluice.out" 2>&1 & pids+=($!)
for port in $up $px $hp $sl; do
  for _ in $(seq 100); do
    curl -s -o /dev/null -X POST -d '{}' "http://127.0.0.1:$port/v1/chat/completions" && break
    sleep 0.1
  done
done

# run NAME PORT CONNECTIONS -> "rps p50_us p99_us non2xx"
run() {
  local out
  out=$(wrk -t2 -c"$3" -d"${secs}s" --latency -s "$work/post.lua" \
    "http://127.0.0.1:$2/v1/chat/completions" 2>&1)
  awk -v name="$1" '
    function us(v) {
      if (v ~ /us$/) return v + 0; if (v ~ /ms$/) return v * 1000;
      if (v ~ /s$/) return v * 1000000; return v }
    /Requests\/sec/ { rps = $2 }
    /^ +50%/ { p50 = us($2) }
    /^ +99%/ { p99 = us($2) }
    /Non-2xx/ { bad = $5 }
    END { printf "%s %.0f %.0f %.0f %d\n", name, rps, p50, p99, bad + 0 }
  ' <<<"$out"
}

echo "http_compare: ${secs} s per run, wrk -t2, $(nproc) cores, $(date -u +%F)"
for c in "${conns[@]}"; do
  echo
  echo "connections: $c"
  printf "%-24s %10s %10s %10s %8s %10s\n" target req/s p50_us p99_us non2xx vs_nginx
  declare -A rps=()
  results=()
  for t in "upstream:$up" "nginx-proxy_pass:$px" "haproxy-maxconn:$hp" \
    "sluice-node:$sl"; do
    line=$(run "${t%%:*}" "${t##*:}" "$c")
    results+=("$line")
    read -r name r _ <<<"$line"
    rps[$name]=$r
  done
  for line in "${results[@]}"; do
    read -r name r p50 p99 bad <<<"$line"
    ratio=$(awk -v a="$r" -v b="${rps[nginx-proxy_pass]}" \
      'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
    printf "%-24s %10s %10s %10s %8s %10s\n" "$name" "$r" "$p50" "$p99" \
      "$bad" "$ratio"
  done
  unset rps
done

echo
echo "low load (1 connection): latency added over the upstream, p50"
direct=$(wrk -t1 -c1 -d"${secs}s" --latency -s "$work/post.lua" \
  "http://127.0.0.1:$up/v1/chat/completions" | awk '/^ +50%/ {print $2}')
governed=$(wrk -t1 -c1 -d"${secs}s" --latency -s "$work/post.lua" \
  "http://127.0.0.1:$sl/v1/chat/completions" | awk '/^ +50%/ {print $2}')
echo "upstream p50 $direct, sluice-node p50 $governed"
