#!/bin/bash
# Measures `rap bench-runtime --store postgres://…` with several processes
# on one database (the scaling measurement): PROCS processes run at once,
# each with THREADS/PROCS threads, on a fresh schema. It prints each
# process's cycles/s, p99 and CPU (its cpu/cycle × cycles/s), their sum,
# and over the measured run the CPU of the PostgreSQL server (the backends
# of this database and the WAL writer, checkpointer and background writer)
# and the commits/s pg_stat_database counted for the database. Run it on a
# database no one else uses meanwhile. Needs psql, bc and Linux /proc.
#
#   runtime/bench/pg-processes.sh RAP_BIN 'postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable' PROCS [THREADS] [DURATION]
set -euo pipefail
bin=$1 url=$2 procs=$3 threads=${4:-18} duration=${5:-10s}
schema=bench_procs_$$
db=$(psql "$url" -Atc 'SELECT current_database()')
psql "$url" -qc "CREATE SCHEMA $schema"
trap 'psql "$url" -qc "SET client_min_messages = warning; DROP SCHEMA $schema CASCADE"' EXIT
sep='?'
case $url in *\?*) sep='&' ;; esac
surl="$url${sep}search_path=$schema"

# pgticks prints "pid ticks" (utime+stime) of the server's processes that
# work for this database.
pgticks() {
	local p f
	for p in $(pgrep -f "postgres: .*(: [^ ]+ $db |checkpointer|background writer|walwriter)" || true); do
		{ read -r -a f <"/proc/$p/stat"; } 2>/dev/null && echo "$p $((f[13] + f[14]))"
	done
	true
}
commits() { psql "$url" -Atc "SELECT xact_commit FROM pg_stat_database WHERE datname = '$db'"; }

out=$(mktemp -d)
pids=()
for i in $(seq 1 "$procs"); do
	n=$((threads / procs))
	[ "$i" -le $((threads % procs)) ] && n=$((n + 1))
	"$bin" bench-runtime --threads "$n" --duration "$duration" --warmup 2s --store "$surl" >"$out/$i.txt" 2>&1 &
	pids+=($!)
done
sleep 3 # start and warm-up (2 s)
pgticks >"$out/pg0"
c0=$(commits) t0=$(date +%s.%N)
sleep $((${duration%s} - 2)) # measure while every process runs
pgticks >"$out/pg1"
c1=$(commits) t1=$(date +%s.%N)
wait "${pids[@]}" || { cat "$out"/*.txt; exit 1; }
hz=$(getconf CLK_TCK)
secs=$(echo "$t1 - $t0" | bc -l)
# Ticks of each server process at the end, less its ticks at the start
# (none for one that started meanwhile).
pgdelta=$(awk 'FILENAME == ARGV[1] {t0[$1] = $2; next} {d += $2 - t0[$1]} END {print d + 0}' "$out/pg0" "$out/pg1")
echo "postgres processes: $(wc -l <"$out/pg0") at the start, $(wc -l <"$out/pg1") at the end" >&2
total=0 cpu=0 p99=""
for i in $(seq 1 "$procs"); do
	cps=$(awk '$1 == "cycles/s" {print $2}' "$out/$i.txt")
	p=$(awk '$1 == "latency" && $2 == "p99" {print $3}' "$out/$i.txt")
	per=$(awk '$1 == "cpu/cycle" {print $2}' "$out/$i.txt" | sed 's/µs/*0.000001/; s/ms/*0.001/; s/s$//')
	c=$(echo "$cps * $per * 100" | bc -l)
	printf 'process %d: cycles/s %s, p99 %s, cpu %.0f%%\n' "$i" "$cps" "$p" "$c"
	total=$(echo "$total + $cps" | bc -l)
	cpu=$(echo "$cpu + $c" | bc -l)
	p99="$p99 $p"
done
printf 'processes %d, threads %d: cycles/s %s (sum), gorap cpu %.0f%% (sum), p99 per process:%s\n' "$procs" "$threads" "$total" "$cpu" "$p99"
printf 'postgres cpu %.0f%%, commits/s %.0f (100%% = one core)\n' "$(echo "$pgdelta / $hz / $secs * 100" | bc -l)" "$(echo "($c1 - $c0) / $secs" | bc -l)"
# What one cycle costs the database server: its CPU and its commits per
# cycle of the sum (the processes' rates are over nearly the same seconds).
printf 'postgres per cycle: cpu %.0f µs, commits %.2f\n' "$(echo "$pgdelta / $hz / $secs / $total * 1000000" | bc -l)" "$(echo "($c1 - $c0) / $secs / $total" | bc -l)"
rm -rf "$out"
