#!/bin/sh
# Start N `rap serve` replicas on this machine, all on one PostgreSQL
# database (see docs/scaling.md). Each replica gets its own
# port, public URL and data directory; they share the database, hence every
# thread, inbox, lease and the callback key. Put a load balancer in front
# of them, or post to any of them: any replica answers any thread.
#
#   RAP_STORE=postgres://postgres@127.0.0.1:5432/rap?sslmode=disable \
#     examples/replicas/run.sh --model openai:gpt-4.1-mini --config rap.json
#
# Arguments are passed to every `rap serve`. Settings (environment):
#   RAP_STORE  the shared database (required)
#   N          how many replicas (3)
#   BASE_PORT  the first replica's port; replica i listens on BASE_PORT+i (8081)
#   HOST       the address they listen on and are reached at (127.0.0.1);
#              beyond loopback, set RAP_TOKEN too (rap serve requires it)
#   DATA_ROOT  the parent of each replica's data directory (./replicas-data)
#   RAP_BIN    the rap command (rap)
#
# Each replica logs to DATA_ROOT/replica-I/serve.log. Probe readiness at
# http://HOST:PORT/readyz. Ctrl-C (or SIGTERM) stops every replica
# gracefully: each hands the threads it holds back to the database.
set -eu

: "${RAP_STORE:?set RAP_STORE to the shared database, such as postgres://postgres@127.0.0.1:5432/rap?sslmode=disable}"
export RAP_STORE
N=${N:-3}
BASE_PORT=${BASE_PORT:-8081}
HOST=${HOST:-127.0.0.1}
DATA_ROOT=${DATA_ROOT:-./replicas-data}
RAP_BIN=${RAP_BIN:-rap}

pids=""
stop() {
	for p in $pids; do
		kill -TERM "$p" 2>/dev/null || true
	done
	wait
}
trap 'stop; exit 0' INT TERM

i=0
while [ "$i" -lt "$N" ]; do
	port=$((BASE_PORT + i))
	dir="$DATA_ROOT/replica-$i"
	mkdir -p "$dir"
	chmod 700 "$dir"
	"$RAP_BIN" serve --listen "$HOST:$port" --public-url "http://$HOST:$port" --data-dir "$dir" "$@" >"$dir/serve.log" 2>&1 &
	pids="$pids $!"
	echo "replica $i: http://$HOST:$port (log $dir/serve.log)"
	i=$((i + 1))
done
echo "replicas started; Ctrl-C stops them"
wait
