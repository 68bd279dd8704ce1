#!/bin/bash
# Side-by-side run of ../shared/bench/harness against one runtime (docs/benchmarks.md).
# Needs /tmp/harness, /tmp/peer-node (npm install done), /tmp/bench-rap.json, /tmp/rap11 (this
# branch) and /tmp/rap-base (the baseline build), as ../shared/bench/README.md builds them.
# usage: ab.sh KIND(peer|gorap|base) THREADS DURATION
# RAP_BIN overrides the gorap binary; RAP_SERVE_ARGS adds arguments to rap serve (e.g. --cpuprofile FILE).
kind=$1; threads=$2; dur=$3
waitport() { for i in $(seq 1 200); do (echo > /dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.05; done; return 1; }
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
/tmp/harness -serve-only >/dev/null 2>&1 & H=$!
waitport 7001; waitport 7002
if [ $kind = peer ]; then
  (cd /tmp/peer-node && ANTHROPIC_BASE_URL=http://127.0.0.1:7001 ANTHROPIC_API_KEY=x PORT=3000 exec node index.mjs) >/dev/null 2>&1 & P=$!
  api=seed
else
  bin=${RAP_BIN:-/tmp/rap11}; [ $kind = base ] && bin=/tmp/rap-base
  D=$(mktemp -d)
  ANTHROPIC_BASE_URL=http://127.0.0.1:7001 ANTHROPIC_API_KEY=x $bin serve --config /tmp/bench-rap.json \
    --listen 127.0.0.1:3000 --model anthropic:x --data-dir "$D" $RAP_SERVE_ARGS >/tmp/serve-$kind.log 2>&1 & P=$!
  api=gorap
fi
waitport 3000
sleep 1   # the runtime discovers the tool server at start
kill $H; wait $H 2>/dev/null
load=$(cut -d' ' -f1-3 /proc/loadavg)
c0=$(cpu $P)
out=$(/tmp/harness -api $api -threads $threads -budget 50 -duration $dur 2>&1)
c1=$(cpu $P)
kill $P; wait $P 2>/dev/null
[ -n "$D" ] && rm -rf "$D"
tot=$(echo "$out" | grep -o 'total-cycles=[0-9]*' | cut -d= -f2)
cps=$(echo "$out" | grep -o 'in-window-cycles/s[=: ]*[0-9.]*' | grep -o '[0-9.]*$')
ticks=$((c1-c0))
echo "$kind threads=$threads load=[$load] in-window-cycles/s=$cps total-cycles=$tot cpu=$(awk "BEGIN{printf \"%.2f\", $ticks/100}")s cpu/cycle=$(awk "BEGIN{printf \"%.0f\", $ticks*10000/$tot}")µs"
echo "$out" | tail -3 | sed 's/^/    /'
