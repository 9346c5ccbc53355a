#!/usr/bin/env bash
# The HTTP comparison of issues 6 and 14, in one run on loopback: a
# fixed-response upstream (nginx), then wrk at the same connection counts
# against
#   (a) the upstream directly,
#   (b) nginx proxy_pass to it, and (b') the same with an access log to a
#       file (`access_log FILE;`, nginx's combined lines),
#   (c) HAProxy to it, with maxconn + queue timeout (its admission control),
#   (d) Caddy reverse_proxy to it,
#   (e) sluice-node governing it (an http source), in three variants, each
#       its own process on its own port with its own config:
#         sluice-node loops=2   node.scheduler = "loops", node.loops = 2
#         sluice-node loops=1   node.scheduler = "loops", node.loops = 1
#         sluice-node sharing   node.scheduler = "sharing" (the design before
#                               issue 14: CAF workers + 2 HTTP front threads)
#       all three tuned (sluice_conf: access log off, caps, AIMD `initial`
#       and the keep-alive pool raised), and
#         sluice-node default   as a user runs it (sluice_default_conf: only
#                               listen, the source's base_url and the route;
#                               its access log to stdout, into a file)
# Prints requests/s, p50, p99, non-2xx answers and socket errors for each,
# and each rate's ratio to (b) -- the default node's to (b'), like with
# like; then, at low load (1 connection), p50 and
# p99 of the upstream directly and through each proxy (nginx, HAProxy and
# Caddy too: what any hop costs on this machine), and the microseconds each
# adds over the upstream.
#
#   bench/http_compare.sh [seconds_per_run] [connections...]
#                          (defaults: 5 s; 16 and 64 connections)
#   SLUICE_BENCH_PORT=N    first port (default 18100; uses N .. N+13)
#
# Installs nginx-light, haproxy, wrk and caddy from Debian when missing
# (without caddy its row is skipped); builds sluice-node; uses only
# 127.0.0.1; stops every process it started, also on Ctrl-C. A target that
# does not start, or dies during the run, gets a FAILED line (with the end
# of its log) and "-" in its rows; the run goes on with the others.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
me=http_compare
secs=${1:-5}
shift || true
conns=("$@")
[ ${#conns[@]} -gt 0 ] || conns=(16 64)

sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
apt_updated=0
apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  if [ "$apt_updated" -eq 0 ]; then
    "${sudo_cmd[@]}" apt-get update -qq
    apt_updated=1
  fi
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "$@"
}
need=()
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || need+=(haproxy)
command -v wrk >/dev/null 2>&1 || need+=(wrk)
[ ${#need[@]} -eq 0 ] || apt_install "${need[@]}"
# Caddy is one row among several: without it the run goes on.
if ! command -v caddy >/dev/null 2>&1 && ! [ -x /usr/bin/caddy ]; then
  apt_install caddy ||
    echo "http_compare: could not install caddy; its row is skipped" >&2
fi
PATH=$PATH:/usr/sbin
SLUICE_TARGETS=sluice-node bash "$root/scripts/build.sh" >/dev/null
node_bin=$root/build/examples/sluice-node

work=$(mktemp -d)
pids=()
source "$root/bench/common.sh"
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM


base=${SLUICE_BENCH_PORT:-18100}
up=$base px=$((base + 1)) hp=$((base + 2)) cd=$((base + 3))
pl=$((base + 4))
# The sluice-node variants: name, port, the [node] lines of its config;
# then the one with the shipped defaults.
variants=("loops=2" "loops=1" "sharing")
dp=$((base + 10 + ${#variants[@]}))
all_ports=("$up" "$px" "$pl" "$hp" "$cd" "$dp")
for i in "${!variants[@]}"; do all_ports+=($((base + 10 + i))); done
for port in "${all_ports[@]}"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "http_compare: 127.0.0.1:$port is already in use (an earlier run" \
      "still running?); stop it or set SLUICE_BENCH_PORT" >&2
    exit 1
  fi
done

mkdir -p "$work/logs" "$work/caddy"
upstream_conf "$work/upstream.conf" "$up"
proxy_conf "$work/proxy.conf" "$px" "$up"
proxy_conf "$work/proxy-log.conf" "$pl" "$up" "$work/logs/proxy-log.access"
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
# Caddy: no admin endpoint, no automatic HTTPS (http:// site, auto_https
# off), no access log (none without a log directive in the site), its own
# log at ERROR only; keep-alive to the upstream as nginx's (128 idle).
cat > "$work/Caddyfile" <<CONF
{
	admin off
	auto_https off
	log {
		output stderr
		level ERROR
	}
}

http://127.0.0.1:$cd {
	bind 127.0.0.1
	reverse_proxy 127.0.0.1:$up {
		transport http {
			keepalive 60s
			keepalive_idle_conns 256
			keepalive_idle_conns_per_host 128
		}
	}
}
CONF
post_lua "$work/post.lua"

# The targets, in the order of the table. state: ok | down; ref: the
# index of the nginx row its rate is compared with (set below).
names=() ports=() tpids=() tlogs=() state=() refs=()
# start NAME PORT LOG COMMAND...
start() {
  local name=$1 port=$2 log=$3
  shift 3
  "$@" > "$log" 2>&1 &
  pids+=($!)
  names+=("$name") ports+=("$port") tpids+=($!) tlogs+=("$log") state+=(down)
}
# fail I WHY: a clear line, the end of its log; its rows show "-".
fail() {
  state[$1]=down
  echo "http_compare: FAILED: ${names[$1]}: $2; its rows are skipped." \
    "End of its log:"
  tail -n 5 "${tlogs[$1]}" 2>/dev/null | sed 's/^/  | /'
}
# ready I: waits up to 10 s for target I to answer HTTP.
ready() {
  local i=$1 code
  if ! code=$(await_answer "${tpids[i]}" "${ports[i]}"); then
    fail "$i" "$(why_down "${tpids[i]}" "${ports[i]}" "$code")"
    return 1
  fi
  case $code in
    2??) ;;
    *) echo "http_compare: WARNING: ${names[i]} answers HTTP $code to the" \
         "test request (counted as non-2xx below)" ;;
  esac
  state[i]=ok
}

start upstream "$up" "$work/logs/upstream.out" \
  nginx -c "$work/upstream.conf" -p "$work"
px_i=${#names[@]}
start nginx-proxy_pass "$px" "$work/logs/proxy.out" \
  nginx -c "$work/proxy.conf" -p "$work"
pl_i=${#names[@]}
start nginx+access_log "$pl" "$work/logs/proxy-log.out" \
  nginx -c "$work/proxy-log.conf" -p "$work"
start haproxy-maxconn "$hp" "$work/logs/haproxy.out" \
  haproxy -f "$work/haproxy.cfg" -q
if command -v caddy >/dev/null 2>&1; then
  start caddy-reverse_proxy "$cd" "$work/logs/caddy.out" \
    env XDG_CONFIG_HOME="$work/caddy" XDG_DATA_HOME="$work/caddy" \
    caddy run --config "$work/Caddyfile" --adapter caddyfile
else
  echo "http_compare: caddy not installed; its row is skipped"
fi
for i in "${!variants[@]}"; do
  v=${variants[i]}
  port=$((base + 10 + i))
  conf="$work/sluice-${v/=/}.toml"
  sluice_conf "$conf" "$port" "$v" "$up"
  start "sluice-node $v" "$port" "$work/logs/sluice-${v/=/}.out" \
    "$node_bin" --config "$conf"
done
sluice_default_conf "$work/sluice-default.toml" "$dp" "$up"
dn_i=${#names[@]}
start "sluice-node default" "$dp" "$work/logs/sluice-default.out" \
  "$node_bin" --config "$work/sluice-default.toml"
for i in "${!names[@]}"; do refs[i]=$px_i; done
refs[dn_i]=$pl_i
for i in "${!names[@]}"; do ready "$i" || true; done
if [ "${state[0]}" != ok ]; then
  echo "http_compare: the upstream did not start; nothing to measure" >&2
  exit 1
fi

# run I CONNECTIONS THREADS -> "rps p50_us p99_us non2xx socket_errors",
# empty when wrk printed no rate.
run() {
  local out
  out=$(wrk -t"$3" -c"$2" -d"${secs}s" --latency -s "$work/post.lua" \
    "http://127.0.0.1:${ports[$1]}/v1/chat/completions" 2>&1) || true
  wrk_figures <<<"$out" |
    awk '{ printf "%.0f %.0f %.0f %d %d\n", $2, $3, $4, $5, $6 }'
}
# target_alive I: target I still runs, for measure.
target_alive() { alive "${tpids[$1]}"; }

echo "http_compare: ${secs} s per run, wrk -t2, $(nproc) cores, $(date -u +%F)"
echo "sluice-node variants: ${variants[*]} (tuned, ports $((base + 10))-$((base + 9 + ${#variants[@]}))), default (port $dp)"
echo "vs_nginx: req/s over nginx-proxy_pass's; sluice-node default's over nginx+access_log's"
for c in "${conns[@]}"; do
  echo
  echo "connections: $c"
  results=()
  for i in "${!names[@]}"; do
    measure "$i" "$c" 2
    results[i]=$m_line
  done
  printf "%-24s %10s %10s %10s %8s %8s %10s\n" target req/s p50_us p99_us \
    non2xx sock_err vs_nginx
  for i in "${!names[@]}"; do
    if [ -z "${results[i]}" ]; then
      printf "%-24s %10s %10s %10s %8s %8s %10s\n" "${names[i]}" - - - - - \
        FAILED
      continue
    fi
    read -r r p50 p99 bad err <<<"${results[i]}"
    ref_rps=
    read -r ref_rps _ <<<"${results[refs[i]]}"
    ratio=$(awk -v a="$r" -v b="${ref_rps:-0}" \
      'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "-" }')
    printf "%-24s %10s %10s %10s %8s %8s %10s\n" "${names[i]}" "$r" "$p50" \
      "$p99" "$bad" "$err" "$ratio"
  done
done

echo
echo "low load (1 connection, wrk -t1): latency, and what each proxy adds over the upstream"
printf "%-24s %10s %10s %12s %12s\n" target p50_us p99_us added_p50_us \
  added_p99_us
measure 0 1 1
direct=$m_line
if [ -z "$direct" ]; then
  echo "http_compare: FAILED: no low-load result from the upstream" >&2
  exit 1
fi
read -r _ d50 d99 _ <<<"$direct"
printf "%-24s %10s %10s %12s %12s\n" upstream "$d50" "$d99" - -
for i in "${!names[@]}"; do
  [ "$i" -ne 0 ] || continue # the upstream itself, above
  measure "$i" 1 1
  line=$m_line
  if [ -z "$line" ]; then
    printf "%-24s %10s %10s %12s %12s\n" "${names[i]}" - - - FAILED
    continue
  fi
  read -r _ p50 p99 _ <<<"$line"
  printf "%-24s %10s %10s %12s %12s\n" "${names[i]}" "$p50" "$p99" \
    $((p50 - d50)) $((p99 - d99))
done
