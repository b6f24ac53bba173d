#!/usr/bin/env bash
# fedprior's GPU session, prepared (issues 32 and 43): on the GPU image as it is (Python 3.12, its own CUDA build of
# torch, no network), install fedprior from the carried wheels and this working tree, then, within a time budget and
# in this order: the papers' settings at paper scale in bf16 against a plain PyTorch loop of the same network
# (plain_loop_ratio), the FLOP bound and the paper's budget, FedDB with fixed and varying shapes, profiled, with
# run.concurrent_clients and run.compile against eager; FedBM, MFCL's server epoch and the semi-supervised baselines;
# then the registry-wide CUDA test, the fp32 settings, one preset end to end on CUDA beside the CPU run of the same
# seed, and the commands of benchmarks/device_extra.txt (the GPU setting: best a call of its own,
# DEVICE_CHECK_STEPS="install env extra_gpu-setting"). docs/runtime.md, "On a GPU".
#
#   bash benchmarks/device_check.sh [--dry-run] [RESULTS]
#
# RESULTS: the folder for the results (default benchmarks/results/device-DATE, -dry-run added in a dry run): one
# log per step (STEP.log), its JSON (paper_scale_*.json, env.json, e2e_*.json, ...), summary.json (every step:
# passed, failed, timed_out or skipped, its seconds). Where $OUT is set (the device tool, which returns at most 8
# files) the folder is also packed there after each step: $OUT/device-check.tar.gz and $OUT/summary.json; unpack
# the archive into benchmarks/results/ to commit it. DEVICE_CHECK_PACK=DIR packs elsewhere.
#
# Before: here, `bash benchmarks/device_wheels.sh` (wheels/, gitignored); the device call carries "wheels".
# --dry-run: the same steps on this machine's CPU at a tiny size (paper_scale --scale small, one timed round),
# in the environment as it is (no install; DEVICE_CHECK_INSTALL=1 installs anyway), within DEVICE_CHECK_BUDGET
# seconds (default 600; on the device 540, so that the device call's 600 s hold it). Each step has its own time
# limit too (3 times longer in a dry run: a shared CPU), cut to what the budget has left; a step that would start
# with under 15 s left is skipped.
#
# Other settings: PYTHON (default python3), DEVICE_CHECK_STEPS (the steps to run, by name, space-separated;
# default all), DEVICE_CHECK_MINILM=standin (build benchmarks/device_minilm.py's stand-in even where MiniLM is
# installed), DEVICE_CHECK_EXTRA (another extra-commands file), DEVICE_CHECK_WHEELS (another wheel folder: one
# built with PYTHON_VERSION=3.11 rehearses the install here, with DEVICE_CHECK_INSTALL=1).
#
# benchmarks/device_extra.txt (optional; absent, the step is skipped): one command a line, `NAME SECONDS COMMAND`,
# NAME in letters, digits, '-' and '_', '#' starting a comment. Each runs with `bash -c` in the repository root
# under its own limit, its output in extra_NAME.log, with RESULTS (the results folder: write RESULTS/NAME.json),
# DEVICE (cuda, or cpu in a dry run), SCALE (paper or small), DRY_RUN (0 or 1), PYTHON and STEP_SECONDS (the
# limit it runs under, after the budget's cut) set. DEVICE_CHECK_RESERVE=SECONDS keeps that much of the budget
# for the extra commands: the steps before them see a budget that much smaller. For example:
#   feddb-gpu-setting 120 $PYTHON -m fedprior table feddb-table2 --gpu-setting --json > $RESULTS/feddb-gpu-setting.json
set -uo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
root=$PWD

dry_run=0
if [[ ${1:-} == --dry-run ]]; then
  dry_run=1
  shift
fi
if (( dry_run )); then
  device=cpu scale=small rounds=1 fedbm_rounds=1 e2e_rounds=3 budget=${DEVICE_CHECK_BUDGET:-600} install=${DEVICE_CHECK_INSTALL:-0} slower=3
  results=${1:-benchmarks/results/device-$(date +%Y-%m-%d)-dry-run}
else
  device=cuda scale=paper rounds=2 fedbm_rounds=1 e2e_rounds=10 budget=${DEVICE_CHECK_BUDGET:-540} install=${DEVICE_CHECK_INSTALL:-1} slower=1
  results=${1:-benchmarks/results/device-$(date +%Y-%m-%d)}
fi
python=${PYTHON:-python3}
pack=${DEVICE_CHECK_PACK:-${OUT:-}}
extra=${DEVICE_CHECK_EXTRA:-benchmarks/device_extra.txt}
wheels=${DEVICE_CHECK_WHEELS:-wheels}
wanted=" ${DEVICE_CHECK_STEPS:-all} "
reserve=${DEVICE_CHECK_RESERVE:-0}
mkdir -p "$results" && results=$(cd "$results" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -f "$results/steps.jsonl"
started=$EPOCHREALTIME
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)

export PYTHONPATH="$root/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 FEDPRIOR_CACHE="$work/cache" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export RESULTS=$results DEVICE=$device SCALE=$scale DRY_RUN=$dry_run PYTHON=$python

elapsed() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

write_summary() {
  {
    printf '{"what": "benchmarks/device_check.sh (issue 32)", "mode": "%s", "device": "%s", "scale": "%s", "commit": "%s",' \
      "$([[ $dry_run == 1 ]] && echo dry-run || echo device)" "$device" "$scale" "$commit"
    printf ' "started": "%s", "budget_seconds": %s, "elapsed_seconds": %s, "steps": [' "$(date -u -d "@${started%.*}" +%Y-%m-%dT%H:%M:%SZ)" "$budget" "$(elapsed "$started")"
    [[ -f $results/steps.jsonl ]] && paste -sd, "$results/steps.jsonl"
    printf ']}\n'
  } >"$results/summary.json"
  if [[ -n $pack && -d $pack ]]; then
    tar -czf "$pack/device-check.tar.gz" -C "$(dirname "$results")" "$(basename "$results")" && cp "$results/summary.json" "$pack/summary.json"
  fi
}

record() {  # record STEP STATUS RC SECONDS LIMIT NOTE (the note escaped for JSON: backslashes, quotes, control characters)
  local note=${6//\\/\\\\}
  note=${note//\"/\\\"}
  note=$(printf '%s' "$note" | tr '\000-\037' ' ')
  printf '{"step": "%s", "status": "%s", "rc": %s, "seconds": %s, "limit": %s, "note": "%s"}\n' "$1" "$2" "$3" "$4" "$5" "$note" >>"$results/steps.jsonl"
  printf '%-16s %-9s %6ss  %s\n' "$1" "$2" "$4" "$6"
  write_summary
}

# step NAME LIMIT [--stdout FILE] COMMAND...: run COMMAND under min(LIMIT, what the budget has left); its output (or
# its stderr, with --stdout) in NAME.log.
step() {
  local name=$1 limit=$2 stdout=""
  shift 2
  if [[ ${1:-} == --stdout ]]; then
    stdout=$2
    shift 2
  fi
  if [[ $wanted != *" all "* && $wanted != *" $name "* ]]; then
    return 0
  fi
  local left kept=$reserve
  [[ $name == extra_* ]] && kept=0
  left=$(awk -v b="$budget" -v k="$kept" -v e="$(elapsed "$started")" 'BEGIN { printf "%d", b - k - e }')
  if (( left < 15 )); then
    record "$name" skipped 0 0 0 "out of time: ${left}s of the ${budget}s budget left$( (( kept )) && echo " (${kept}s kept for the extra commands)")"
    return 0
  fi
  limit=$(( limit * slower ))
  (( limit > left )) && limit=$left
  export STEP_SECONDS=$limit
  local t0=$EPOCHREALTIME rc
  if [[ -n $stdout ]]; then
    timeout -k 10 "$limit" "$@" >"$stdout" 2>"$results/$name.log"
  else
    timeout -k 10 "$limit" "$@" >"$results/$name.log" 2>&1
  fi
  rc=$?
  local status=passed
  if (( rc == 124 || rc == 137 )); then
    status=timed_out
  elif (( rc != 0 )); then
    status=failed
  fi
  record "$name" "$status" "$rc" "$(elapsed "$t0")" "$limit" "$*"
}

skip() {  # skip NAME WHY
  if [[ $wanted == *" all "* || $wanted == *" $1 "* ]]; then
    record "$1" skipped 0 0 0 "$2"
  fi
}

echo "device_check: $([[ $dry_run == 1 ]] && echo 'dry run, CPU' || echo 'device, CUDA'), budget ${budget}s, results in $results"
nvidia-smi >"$results/nvidia-smi.txt" 2>&1 || rm -f "$results/nvidia-smi.txt"

# 1. Install: the carried wheels where the image lacks a package (pip keeps the image's torch and every package it
# has that satisfies), then fedprior itself from this tree (PYTHONPATH=src serves if that fails).
if (( install )); then
  step install 120 bash -c "$python -m pip install --no-index --find-links $(printf %q "$wheels") --no-cache-dir --quiet -r benchmarks/device_wheels.txt \
    && $python -m pip install --no-index --no-deps --no-build-isolation --no-cache-dir --quiet -e ."
else
  skip install "dry run: the environment as it is"
fi

# 2. The environment: Python, torch, CUDA, the GPU, fedprior's requirements; MiniLM or its stand-in.
step env 60 "$python" benchmarks/device_env.py --out "$results/env.json"
if [[ -d $wheels/fashion-mnist ]]; then  # the carried Fashion-MNIST files, where fedprior looks (its cache)
  mkdir -p "$FEDPRIOR_CACHE/datasets" && cp -r "$wheels/fashion-mnist" "$FEDPRIOR_CACHE/datasets/"
fi

# 3. Issue 43 first (the steps run in this order; the budget skips what it cannot hold, so the rest follow): the papers'
# settings against a plain PyTorch loop of the same network in the same run (plain_loop_ratio) and the FLOP bound
# (benchmarks/paper_scale.py): FedDB in bf16 with every unlabeled image (the upper bound, profiled: launches per round
# and per piece of a client step) and with a share drawn per client and round (the shapes tau = 0.95 gives), then
# run.concurrent_clients = 2 and run.compile against eager on those varying shapes, FedBM (the small-batch setting),
# MFCL's server epoch, and the semi-supervised baselines that share FedDB's engine.
paper_scale() {  # paper_scale NAME LIMIT ARGS...
  local name=$1 limit=$2
  shift 2
  step "$name" "$limit" "$python" benchmarks/paper_scale.py --device "$device" --scale "$scale" --out "$results/$name.json" "$@"
}
paper_scale paper_scale_feddb_bf16 90 --only feddb --precision bf16 --rounds "$rounds" --profile
paper_scale paper_scale_feddb_bf16_varying 75 --only feddb --precision bf16 --rounds "$rounds" --shapes varying --no-evaluation
paper_scale paper_scale_feddb_variants 150 --only feddb --precision bf16 --rounds "$rounds" --shapes varying --concurrent 2 --compile --no-evaluation
step minilm 120 --stdout "$results/minilm.json" "$python" benchmarks/device_minilm.py "$work/minilm" --source "$wheels/minilm" ${DEVICE_CHECK_MINILM:+--standin}
if [[ -d $work/minilm/site ]]; then
  export PYTHONPATH="$work/minilm/site:$PYTHONPATH"
fi
paper_scale paper_scale_fedbm_bf16 150 --only fedbm --precision bf16 --rounds "$fedbm_rounds" --no-evaluation
# MFCL without its linear evaluation (23 s of a small-scale run on the CPU here, unknown at paper scale): the server epoch is what is timed.
paper_scale paper_scale_mfcl_fp32 90 --only mfcl --precision fp32 --rounds "$rounds" --no-evaluation
paper_scale paper_scale_semi_baselines 150 --only fixmatch fedmatch semifl fedrgd --precision bf16 --rounds 1 --shapes varying --no-evaluation

# 4. What the first GPU sessions measured already (2026-11-27/28), after issue 43's steps: every registered algorithm,
# one round on the GPU with its data resident (skips without CUDA), and the fp32 settings.
step test_device 150 "$python" -m pytest -q -rA -p no:cacheprovider tests/runtime/test_device.py -k real_gpu --junitxml="$results/test_device.xml"
paper_scale paper_scale_feddb_fp32 90 --only feddb --precision fp32 --rounds "$rounds"
paper_scale paper_scale_fedbm_fp32 120 --only fedbm --precision fp32 --rounds "$fedbm_rounds"

# 5. One preset end to end on the device and on the CPU, same seed: FedDB on the digits scikit-learn ships, 10 rounds
# (3 in a dry run).
e2e=(feddb --set data.dataset=digits --set partition.num_labeled=200 --set partition.num_unlabeled=0 --set federation.num_clients=10
  --set federation.fraction=0.5 --set federation.local_epochs=2 --set federation.rounds="$e2e_rounds" --set federation.evaluate_every=1 --json)
step e2e_device 90 --stdout "$results/e2e_device.json" "$python" -m fedprior run "${e2e[@]}" --set run.device="$device" --run-dir "$work/e2e-device"
step e2e_cpu 90 --stdout "$results/e2e_cpu.json" "$python" -m fedprior run "${e2e[@]}" --set run.device=cpu --run-dir "$work/e2e-cpu"
step e2e_compare 30 "$python" benchmarks/device_compare_runs.py "$work/e2e-device" "$work/e2e-cpu" --out "$results/e2e_compare.json"

# 6. The extra commands (the GPU setting of the FedDB/MFCL issue, when it exists).
if [[ -f $extra ]]; then
  while read -r name seconds command; do
    [[ -z $name || $name == \#* ]] && continue
    if [[ ! $name =~ ^[A-Za-z0-9_-]+$ || ! $seconds =~ ^[0-9]+$ || -z $command ]]; then
      record "extra_bad_line" failed 2 0 0 "$extra: want NAME SECONDS COMMAND, got: ${name//\"/} ${seconds//\"/}"
      continue
    fi
    step "extra_$name" "$seconds" bash -c "$command" </dev/null
  done <"$extra"
else
  skip extra "no $extra"
fi

write_summary
echo "device_check: $(elapsed "$started")s; summary in $results/summary.json"
failed=$(grep -c -E '"status": "(failed|timed_out)"' "$results/steps.jsonl" || true)
exit $(( failed > 0 ))
