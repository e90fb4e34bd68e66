#!/usr/bin/env bash
# On a GPU machine, from the repo root (OUT=/some/dir PROMETHEUS=/path/to/prometheus bash grafana/dashgen/check_stack_on_gpu.sh):
# real-NVML exporter + simulated engines (vllm :8000, sglang :30000 personalities) + real Prometheus
# (1 s scrape, the shipped rules) + a bf16 matmul load on GPU 0 + a 40 s loadgen run; then every
# dashboard query through grafana.dashgen.check. Needs python3 with the project's dependencies + torch.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/stackout}; mkdir -p "$OUT"; LOG=$OUT/log.txt
py=${PY:-python3}
$py -c 'import sys, aiohttp, click, prometheus_client, yaml, numpy, rich, psutil, pynvml; print(sys.version)' >>"$LOG" 2>&1 || { echo "deps missing" >>"$LOG"; }
PROM_BIN=${PROMETHEUS:-prometheus}
$py -m simengine --host 127.0.0.1 --port 8000 --personality vllm --max-num-seqs 128 --model sim-llama >>"$LOG" 2>&1 &
SIM=$!
$py -m simengine --host 127.0.0.1 --port 30000 --personality sglang --max-running-requests 64 --model sim-qwen --enable-metrics >>"$LOG" 2>&1 &
SIM2=$!
$py -m exporter --host 127.0.0.1 --port 9402 --sample-interval 1 --engine-url http://127.0.0.1:8000 --engine-url http://127.0.0.1:30000 ${EXPORTER_EXTRA:-} >>"$LOG" 2>&1 &
EXP=$!
$py - <<'PY'
import yaml
c = yaml.safe_load(open("prometheus/prometheus.local.yml"))
c["global"].update(scrape_interval="1s", scrape_timeout="1s", evaluation_interval="1s")
c["rule_files"] = ["/tmp/rules/*.yml"]
open("/tmp/prom.yml", "w").write(yaml.safe_dump(c))
PY
rm -rf /tmp/tsdb /tmp/rules; mkdir -p /tmp/rules && cp prometheus/rules/*.yml /tmp/rules/
"$PROM_BIN" --config.file=/tmp/prom.yml --storage.tsdb.path=/tmp/tsdb --web.listen-address=127.0.0.1:9090 --log.level=warn >>"$LOG" 2>&1 &
PROM=$!
sleep 5
$py - >>"$LOG" 2>&1 <<'PY' &
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
held = torch.empty(16 * 2**30, dtype=torch.uint8, device="cuda")
t0, n = time.time(), 0
while time.time() - t0 < 50:
    a @ b; n += 1
    if n % 50 == 0: torch.cuda.synchronize()
print("load: matmuls", n)
PY
LOAD=$!
T0=$(date +%s)
# load for the SGLang personality too (its metrics appear with requests); no /metrics of its own
$py -c "from loadgen.cli.main import main; main()" run --target sglang --rate 5 --duration 30s --profile short \
   --metrics-port 0 --linger 0 --results-dir /tmp/results --quiet >>"$LOG" 2>&1 &
SGRUN=$!
$py -c "from loadgen.cli.main import main; main()" run --target vllm --rate 20 --duration 40s --profile short \
   --max-concurrency 64 --slo ttft=500ms,e2e=10s --linger 5 --results-dir /tmp/results --quiet --json >"$OUT/summary.json" 2>>"$LOG"
echo "loadgen rc=$?" >>"$LOG"
wait $SGRUN
sleep 3
MIN=$(( ( $(date +%s) - T0 + 20 ) / 60 + 1 ))
# every board but Baselines (it needs a `loadgen baseline schedule` and the results store: its own test)
BOARDS="--dashboard infergauge-run-live --dashboard infergauge-run-comparison --dashboard infergauge-gpu-host"
BOARDS="$BOARDS --dashboard infergauge-engine-vllm --dashboard infergauge-engine-sglang"
$py -m grafana.dashgen.check --prometheus http://127.0.0.1:9090 --minutes $MIN --scrape 1 $BOARDS --json "$OUT/check.json" >"$OUT/check.txt" 2>&1
echo "check rc=$?" >>"$OUT/check.txt"
$py - "$OUT" <<'PY'
import sys, urllib.request
for name, q in (("alerts", "query?query=max_over_time(ALERTS%5B3m%5D)"), ("rules", "rules"), ("targets", "targets")):
    open(f"{sys.argv[1]}/{name}.json", "wb").write(urllib.request.urlopen(f"http://127.0.0.1:9090/api/v1/{q}").read())
PY
wait $LOAD
kill $EXP $SIM $SIM2 $PROM 2>/dev/null
nvidia-smi -L >>"$LOG" 2>&1
tail -3 "$OUT/check.txt"; grep -c EMPTY "$OUT/check.txt"; tail -5 "$LOG"
