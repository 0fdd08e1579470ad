#!/usr/bin/env bash
# Run N app processes behind nginx, sticky sessions; Ctrl-C stops everything. An app process that stops (a crash,
# a kill) is started again; meanwhile nginx sends its students to the others, and their browsers reconnect there.
#   deploy/serve.sh [N] [PORT]        the arguments, when given, win over VIZ_PROCESSES and VIZ_PORT
# Environment (README "Serving a class", docs/serving-a-class.md):
#   VIZ_PROCESSES   app processes (default 2)           VIZ_PORT      nginx's port (default 8500)
#   VIZ_LISTEN      nginx's address: 0.0.0.0 (every interface) when VIZ_PUBLIC_URL is set, else 127.0.0.1
#   VIZ_APP_ADDRESS the app processes' address (default 127.0.0.1: only nginx faces the network)
#   VIZ_APP_PORT    the first app process's port (default 8601; the others follow it)
#   VIZ_PUBLIC_URL  the address students' phones open (join links, QR codes), e.g. http://192.168.1.20:8500
#   VIZ_CHECKPOINTS (checkpoints folder), RUN_DIR (logs and nginx state; default a temp folder),
#   VIZ_THREADS or OMP_NUM_THREADS (torch's threads per process; default 1, the app's own policy:
#   viz_explorer/server/threads.py, as N processes share the cores).
set -euo pipefail
N=${1:-${VIZ_PROCESSES:-2}}
PORT=${2:-${VIZ_PORT:-8500}}
if [ -n "${VIZ_PUBLIC_URL:-}" ]; then LISTEN=${VIZ_LISTEN:-0.0.0.0}; else LISTEN=${VIZ_LISTEN:-127.0.0.1}; fi
APP_ADDRESS=${VIZ_APP_ADDRESS:-127.0.0.1}
APP_PORT=${VIZ_APP_PORT:-8601}
case "$LISTEN" in *:*) LISTEN_AT="[$LISTEN]:$PORT" ;; *) LISTEN_AT="$LISTEN:$PORT" ;; esac     # IPv6 in brackets
case "$APP_ADDRESS" in *:*) APP_HOST="[$APP_ADDRESS]" ;; *) APP_HOST="$APP_ADDRESS" ;; esac
case "$APP_ADDRESS" in 0.0.0.0) APP_HOST=127.0.0.1 ;; ::) APP_HOST="[::1]" ;; esac       # nginx reaches them here
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
RUN=${RUN_DIR:-$(mktemp -d /tmp/viz-deploy.XXXXXX)}
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
mkdir -p "$RUN/tmp"
pids=()
STATIC=""
stop() {
  touch "$RUN/stopping"
  [ -n "$STATIC" ] && rm -rf "$STATIC"
  "$NGINX" -p "$RUN" -c "$RUN/nginx.conf" -s stop 2>/dev/null || true
  for p in "${pids[@]}"; do pkill -TERM -P "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap stop EXIT INT TERM
rm -f "$RUN/stopping"
keep_running() {      # one app process on port $1, started again whenever it stops, until the deploy stops
  local p=$1 status
  while :; do
    status=0
    (cd "$ROOT" && exec python -m streamlit run serve.py --server.headless true --server.address "$APP_ADDRESS" \
       --server.port "$p" >> "$RUN/app-$p.log" 2>&1) || status=$?
    [ -e "$RUN/stopping" ] && return 0
    echo "serve.sh: the app on port $p stopped (status $status); starting it again" | tee -a "$RUN/app-$p.log" >&2
    sleep 1
  done
}
servers=""
for i in $(seq 0 $((N - 1))); do
  p=$((APP_PORT + i))
  keep_running "$p" &
  pids+=($!)
  servers+="        server $APP_HOST:$p max_fails=0;"$'\n'
done
for i in $(seq 0 $((N - 1))); do
  p=$((APP_PORT + i))
  for _ in $(seq 1 240); do
    curl -fs "http://$APP_HOST:$p/_stcore/health" > /dev/null && break
    sleep 0.5
  done
  curl -fs "http://$APP_HOST:$p/_stcore/health" > /dev/null || { echo "app on port $p did not start: $RUN/app-$p.log" >&2; exit 1; }
done
# Streamlit's page files, copied where nginx's workers (an unprivileged user) may read them: the installed package,
# and RUN_DIR, may sit in folders they cannot enter; removed when the deploy stops. Only a folder that is Streamlit's
# (its index.html beside it) is copied; without one, nginx passes /static/ to the app processes as before.
PAGE_FILES=$(cd "$ROOT" && python -c "import os, streamlit; print(os.path.join(os.path.dirname(streamlit.__file__), 'static', 'static'))" 2>/dev/null) || PAGE_FILES=""
if [ -n "$PAGE_FILES" ] && [ -d "$PAGE_FILES/js" ] && [ -f "$PAGE_FILES/../index.html" ]; then
  STATIC=$(mktemp -d /tmp/viz-static.XXXXXX)
  cp -r "$PAGE_FILES/." "$STATIC/"
  chmod -R a+rX "$STATIC"
  keep_static=1
else
  echo "serve.sh: Streamlit's page files not found; the app processes serve them" >&2
  keep_static=0
fi
sed -e "s#@RUN@#$RUN#g" -e "s#@LISTEN@#$LISTEN_AT#g" -e "s#@STATIC@#$STATIC#g" "$ROOT/deploy/nginx.conf.template" |
  awk -v servers="$servers" -v keep="$keep_static" '
    /# page files: begin/ { skip = !keep } 
    !skip { if ($0 == "@SERVERS@") printf "%s", servers; else print }
    /# page files: end/ { skip = 0 }' > "$RUN/nginx.conf"
"$NGINX" -t -p "$RUN" -c "$RUN/nginx.conf" 2> "$RUN/nginx-test.log" || { cat "$RUN/nginx-test.log" >&2; exit 1; }
"$NGINX" -p "$RUN" -c "$RUN/nginx.conf" -g "daemon off;" &
pids+=($!)
echo "serving on $LISTEN_AT with $N app processes (logs: $RUN); students open ${VIZ_PUBLIC_URL:-http://$LISTEN_AT (set VIZ_PUBLIC_URL for phones)}"
wait -n "${pids[@]}"
echo "nginx stopped; stopping the app processes" >&2
