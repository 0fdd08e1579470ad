#!/usr/bin/env bash
# Run N app processes behind nginx on loopback, sticky sessions; Ctrl-C stops everything.
#   deploy/serve.sh [N] [PORT]        N processes (default 2) on ports 8601.., nginx on PORT (default 8500)
# Environment: VIZ_CHECKPOINTS (checkpoints folder), RUN_DIR (logs and nginx state; default a temp folder),
# VIZ_THREADS or OMP_NUM_THREADS (torch's threads per process; default 1, the app's own policy:
#   views/server/threads.py, as N processes share the cores).
set -euo pipefail
N=${1:-2}
PORT=${2:-8500}
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
RUN=${RUN_DIR:-$(mktemp -d /tmp/viz-deploy.XXXXXX)}
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
mkdir -p "$RUN/tmp"
pids=()
stop() {
  "$NGINX" -p "$RUN" -c "$RUN/nginx.conf" -s stop 2>/dev/null || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap stop EXIT INT TERM
servers=""
for i in $(seq 1 "$N"); do
  p=$((8600 + i))
  (cd "$ROOT" && exec python -m streamlit run serve.py --server.headless true --server.address 127.0.0.1 \
     --server.port "$p" > "$RUN/app-$p.log" 2>&1) &
  pids+=($!)
  servers+="        server 127.0.0.1:$p max_fails=0;"$'\n'
done
for i in $(seq 1 "$N"); do
  p=$((8600 + i))
  for _ in $(seq 1 240); do
    curl -fs "http://127.0.0.1:$p/_stcore/health" > /dev/null && break
    sleep 0.5
  done
  curl -fs "http://127.0.0.1:$p/_stcore/health" > /dev/null || { echo "app on port $p did not start: $RUN/app-$p.log" >&2; exit 1; }
done
sed -e "s#@RUN@#$RUN#g" -e "s#@PORT@#$PORT#g" "$ROOT/deploy/nginx.conf.template" |
  awk -v servers="$servers" '{ if ($0 == "@SERVERS@") printf "%s", servers; else print }' > "$RUN/nginx.conf"
"$NGINX" -t -p "$RUN" -c "$RUN/nginx.conf" 2> "$RUN/nginx-test.log" || { cat "$RUN/nginx-test.log" >&2; exit 1; }
"$NGINX" -p "$RUN" -c "$RUN/nginx.conf" -g "daemon off;" &
pids+=($!)
echo "serving http://127.0.0.1:$PORT with $N app processes (logs: $RUN)"
wait -n "${pids[@]}"
echo "a process stopped; stopping the rest" >&2
