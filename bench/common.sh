# shellcheck shell=bash disable=SC2154,SC2034
# Shared by bench/http_compare.sh, node_perf.sh and stream_compare.sh
# (sourced, not run): the process bookkeeping, the fixed-response nginx
# upstream, the sluice-node binary, variants and config, the request wrk
# sends, and reading and measuring a wrk run. The caller sets `work` (a
# temporary folder) and `pids` (an array) first; the variables set here
# for the caller (node_bin, m_line) are read only there.

# alive PID: the process runs (a child that exited is a zombie until waited
# for, and kill -0 would still succeed on it).
alive() {
  local st
  st=$(sed 's/.*) //; s/ .*//' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$st" ] && [ "$st" != Z ]
}

# Stops every process in `pids` (TERM, then KILL after 5 s) and removes
# `work`. For `trap cleanup EXIT`.
cleanup() {
  local p _
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for _ in $(seq 50); do
    local left=0
    for p in "${pids[@]}"; do alive "$p" && left=1; done
    [ "$left" -eq 1 ] || break
    sleep 0.1
  done
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}

# install_missing COMMAND=PACKAGE...: installs from Debian the packages of
# the commands not found (on PATH or in /usr/sbin).
install_missing() {
  local need=() pair cmd
  for pair in "$@"; do
    cmd=${pair%%=*}
    command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] ||
      need+=("${pair#*=}")
  done
  [ ${#need[@]} -gt 0 ] || return 0
  local sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}"
}

# variant_toml NAME: the [node] lines of a sluice-node variant.
variant_toml() {
  case $1 in
    loops=2) printf 'scheduler = "loops"\nloops = 2\n' ;;
    loops=2-handoff) printf 'scheduler = "loops"\nloops = 2\naccept = "handoff"\n' ;;
    loops=1) printf 'scheduler = "loops"\nloops = 1\n' ;;
    shipped) ;; # the scheduler and loops as shipped
    # loops=2 with the access log on a file: node_perf.sh points
    # sluice_conf's access_log line at $work/access.log (TOML refuses a
    # second access_log key here).
    loops=2-log) printf 'scheduler = "loops"\nloops = 2\n' ;;
    sharing) printf 'scheduler = "sharing"\nactor_threads = 0            # half the cores, >= 1 (its default)\n' ;;
    *) return 1 ;;
  esac
}

# nginx_head NAME: the start of an nginx config of ours, up to inside its
# http block (pid and error log named NAME, everything under `work`).
nginx_head() {
  cat <<CONF
worker_processes 1;
daemon off;
pid $work/$1.pid;
error_log $work/logs/$1.err warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $work; proxy_temp_path $work;
  fastcgi_temp_path $work; uwsgi_temp_path $work; scgi_temp_path $work;
CONF
}

# upstream_conf FILE PORT: nginx answering every request with a fixed
# chat completion on 127.0.0.1:PORT.
upstream_conf() {
  {
    nginx_head upstream
    cat <<CONF
  server {
    listen 127.0.0.1:$2;
    keepalive_requests 1000000;
    location / {
      default_type application/json;
      return 200 '{"id":"fixed","object":"chat.completion","choices":[]}';
    }
  }
}
CONF
  } > "$1"
}

# proxy_conf FILE PORT UPSTREAM_PORT [ACCESS_LOG]: nginx proxy_pass to the
# upstream on 127.0.0.1:PORT, with a keep-alive pool to it; with
# ACCESS_LOG, its access log (nginx's `combined` lines) to that file.
proxy_conf() {
  {
    nginx_head "proxy${4:+-log}"
    cat <<CONF
  upstream up { server 127.0.0.1:$3; keepalive 128; }
  server {
    listen 127.0.0.1:$2;
    keepalive_requests 1000000;
    ${4:+access_log $4;}
    location / {
      proxy_pass http://up;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
CONF
  } > "$1"
}

# sluice_conf FILE PORT VARIANT UPSTREAM_PORT: a sluice-node governing the
# upstream, without access log (as the other proxies here).
sluice_conf() {
  cat > "$1" <<CONF
[node]
listen = "127.0.0.1:$2"
access_log = "off"            # as the other proxies here
$(variant_toml "$3")
[admission]
session_cap = 1024
connection_cap = 1024
global_cap = 4096
[sources.up]
type = "http"
base_url = "http://127.0.0.1:$4"
max_idle_connections = 256
  [sources.up.aimd]
  initial = 256
  max = 1024
[routes."/v1/chat/completions"]
kind = "chat"
sources = ["up"]
CONF
}

# sluice_default_conf FILE PORT UPSTREAM_PORT [ACCESS_LOG]: a sluice-node
# as a user runs it from the README: only node.listen, one http source with
# its base_url and the chat route; everything else (admission caps, AIMD,
# the keep-alive pool, the scheduler, the access log to stdout unless
# ACCESS_LOG names a file) as shipped.
sluice_default_conf() {
  cat > "$1" <<CONF
[node]
listen = "127.0.0.1:$2"
${4:+access_log = \"$4\"}
[sources.up]
type = "http"
base_url = "http://127.0.0.1:$3"
[routes."/v1/chat/completions"]
kind = "chat"
sources = ["up"]
CONF
}

# The request every target gets (a small chat completion).
body='{"model":"m","messages":[{"role":"user","content":"hi"}]}'

# post_lua FILE: wrk's script sending `body`.
post_lua() {
  cat > "$1" <<LUA
wrk.method = "POST"
wrk.body = '$body'
wrk.headers["Content-Type"] = "application/json"
LUA
}

# await_answer PID PORT: waits (up to 10 s) until the server PID answers the
# test request on 127.0.0.1:PORT and prints the HTTP status; prints
# "exited" (PID ended: the caller `wait`s for its status, a command
# substitution cannot) or "silent" and fails otherwise.
await_answer() {
  local code=000 _
  for _ in $(seq 100); do
    if ! alive "$1"; then
      echo exited
      return 1
    fi
    code=$(curl -s -o /dev/null -w '%{http_code}' -X POST \
      -H 'Content-Type: application/json' -d "$body" \
      "http://127.0.0.1:$2/v1/chat/completions" || true)
    [ "$code" = 000 ] || break
    sleep 0.1
  done
  if [ "$code" = 000 ]; then
    echo silent
    return 1
  fi
  echo "$code"
}

# why_down PID PORT WHAT: the reason for a failed `await_answer` WHAT.
why_down() {
  local rc=0
  if [ "$3" = exited ]; then
    wait "$1" || rc=$?
    echo "exited at start (status $rc)"
  else
    echo "not answering on 127.0.0.1:$2 after 10 s"
  fi
}

# node_binary: sets `node_bin` to $SLUICE_NODE_BIN (e.g. an earlier build,
# for a before/after), or builds sluice-node and takes that.
node_binary() {
  if [ -n "${SLUICE_NODE_BIN:-}" ]; then
    node_bin=$SLUICE_NODE_BIN
  else
    SLUICE_TARGETS=sluice-node bash "$root/scripts/build.sh" >/dev/null
    node_bin=$root/build/examples/sluice-node
  fi
}

# wrk_figures: reads wrk --latency's output and prints "requests rps
# p50_us p99_us non2xx socket_errors", or nothing when wrk printed no rate.
wrk_figures() {
  awk '
    function us(v) {
      if (v ~ /us$/) return v + 0; if (v ~ /ms$/) return v * 1000;
      if (v ~ /s$/) return v * 1000000; return v }
    / requests in / { n = $1 }
    /Requests\/sec/ { rps = $2; seen = 1 }
    /^ +50%/ { p50 = us($2) }
    /^ +99%/ { p99 = us($2) }
    /Non-2xx/ { bad = $5 }
    /Socket errors/ { gsub(",", ""); err = $4 + $6 + $8 + $10 }
    END { if (seen) printf "%d %.2f %.0f %.0f %d %d\n", n, rps, p50, p99,
                          bad + 0, err + 0 }'
}

# measure I CONNECTIONS [MORE...]: sets m_line to the caller's
# `run I CONNECTIONS MORE...` line, or to "" (with a FAILED line from the
# caller's `fail`, the target marked down) when target I is down, died
# meanwhile (the caller's `target_alive I`) or gave wrk no result. Reads
# the caller's `state`, `names` and `me`. Not in $(...): the mark must stay.
m_line=
measure() {
  local i=$1
  m_line=
  [ "${state[i]}" = ok ] || return 0
  m_line=$(run "$@")
  if ! target_alive "$i"; then
    m_line=
    fail "$i" "died during the run at $2 connection(s)"
    return 0
  fi
  [ -n "$m_line" ] || echo "$me: FAILED: wrk got no result from" \
    "${names[i]} at $2 connection(s)"
}
