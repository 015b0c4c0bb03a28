#!/usr/bin/env bash
# The GPU bundle's acceptance run (built by `go run ./cmd/gpubundle DIR`): on a bare machine with an
# NVIDIA GPU, from any directory, `DIR/run.sh` runs every part below and writes at most 8 files,
# Markdown and JSON, into $OUT (default ./out):
#
#   env.md       the machine: nvidia-smi, driver, GPU, python3 and torch, the CUDA libraries found
#   doctor.md    `ooc doctor -sweep=false` (its checks, and the kernel and model parts where it has them)
#   doctor.json  the same as JSON, where `ooc doctor -h` lists -json
#   sweep.json   ResNet-50 224 under a 16 GiB budget, baseline and window + VA, batches increasing until
#                each row runs out of memory (ooc sweep -until-stop -stop-at-oom), written after every point
#   hybrid.json  the same for hybrid (+ VA), from the batches where in core no longer fits
#   torch.json   PyTorch on the same GPU: in core, save_on_cpu and checkpoint (torch_resnet50.py)
#   log.md       the two sweeps' Markdown tables and progress logs, and the PyTorch script's log
#   summary.md   all of it joined (ooc gpu-summary): ours against PyTorch, the issue's targets checked
#
# Each part runs under `timeout` with its own share of 9 minutes (540 s); a part that fails or times
# out is recorded and the next one still runs. The shares, in seconds (OOC_BUNDLE_T_* override them):
#   env 25 + doctor 150 + sweep 150 + hybrid 90 + torch 105 + summary 10 = 530, leaving 10 s of margin
# The doctor's three parts (checks, kernels, models) each get a third of its share less 10 s
# (-part-timeout), so a slow models part times out inside the doctor and is recorded as TIMEOUT.
# (and a minute more before the device tool's 10-minute limit on one command).
# The sweep and the PyTorch script are also told to start no new point near their share's end, so
# that `timeout` seldom has to kill them; what they measured before is in their JSON either way.
#
# Knobs (the tests run this script on a fake driver with tiny sizes through them):
#   OOC_BUNDLE_MODEL (resnet50), OOC_BUNDLE_IMAGE (224), OOC_BUNDLE_CLASSES (1000),
#   OOC_BUNDLE_BATCHES (64,128,192,256,512,768,1024,1536), OOC_BUNDLE_MAX_BATCH (2048),
#   OOC_BUNDLE_BUDGET (16GiB), OOC_BUNDLE_CHUNK (40MiB), OOC_BUNDLE_STEPS (3),
#   OOC_BUNDLE_SCHEDULERS (baseline,window), OOC_BUNDLE_HYBRID_BATCHES (256,512,1024,1536),
#   OOC_BUNDLE_ALLOCATOR (va, or bestfit where the doctor says the GPU has no VMM), OOC_BUNDLE_DEVICE (cuda),
#   OOC_BUNDLE_TORCH_DEVICE (cuda), OOC_BUNDLE_PYTHON (python3), OOC_BUNDLE_DOCTOR_ARGS (none),
#   OOC_BUNDLE_T_ENV, _T_DOCTOR, _T_SWEEP, _T_HYBRID, _T_TORCH, _T_SUMMARY (the shares above).
set -u

here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-./out}
mkdir -p "$OUT" || { echo "run.sh: cannot make $OUT" >&2; exit 1; }
OUT=$(cd "$OUT" && pwd)
export OUT
ooc="$here/ooc"

model=${OOC_BUNDLE_MODEL:-resnet50}
image=${OOC_BUNDLE_IMAGE:-224}
classes=${OOC_BUNDLE_CLASSES:-1000}
# Few batches: each costs a budget search per row on the GPU. In core stops near 128-192 in 16 GiB
# (the simulated V100 sweep of docs/results.md), so 7.5x that is 960-1440.
batches=${OOC_BUNDLE_BATCHES:-64,128,192,256,512,768,1024,1536}
max_batch=${OOC_BUNDLE_MAX_BATCH:-2048}
budget=${OOC_BUNDLE_BUDGET:-16GiB}
chunk=${OOC_BUNDLE_CHUNK:-40MiB}
steps=${OOC_BUNDLE_STEPS:-3}
schedulers=${OOC_BUNDLE_SCHEDULERS:-baseline,window}
hybrid_batches=${OOC_BUNDLE_HYBRID_BATCHES:-256,512,1024,1536}
device=${OOC_BUNDLE_DEVICE:-cuda}
torch_device=${OOC_BUNDLE_TORCH_DEVICE:-cuda}
python=${OOC_BUNDLE_PYTHON:-python3}
doctor_args=${OOC_BUNDLE_DOCTOR_ARGS:-}
t_env=${OOC_BUNDLE_T_ENV:-25}
t_doctor=${OOC_BUNDLE_T_DOCTOR:-150}
t_sweep=${OOC_BUNDLE_T_SWEEP:-150}
t_hybrid=${OOC_BUNDLE_T_HYBRID:-90}
t_torch=${OOC_BUNDLE_T_TORCH:-105}
t_summary=${OOC_BUNDLE_T_SUMMARY:-10}

parts=""   # name:exit status:seconds, comma-separated, for ooc gpu-summary

# part NAME SECONDS CMD...: runs CMD under timeout with SECONDS, records its exit status and time.
# timeout's 124 means the share ran out (137: killed after the grace period).
part() {
	name=$1 limit=$2
	shift 2
	echo "run.sh: $name (at most ${limit}s)" >&3
	start=$(date +%s)
	timeout -k 5 "$limit" "$@"
	rc=$?
	secs=$(($(date +%s) - start))
	echo "run.sh: $name exit $rc after ${secs}s" >&3
	parts="${parts:+$parts,}$name:$rc:$secs"
	return 0
}

# fence FILE TITLE: wraps a log as a Markdown document, FILE.md.
fence() {
	{
		echo "# $2"
		echo
		echo '```'
		cat "$1" 2>/dev/null
		echo '```'
	} >"$1.md"
}

# env_part writes what the machine is; every probe has its own short timeout.
env_part() {
	{
		echo "# Environment"
		echo
		echo "bundle: $(cat "$here/VERSION" 2>/dev/null | tr '\n' ' ')"
		echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
		echo "host: $(uname -srm), $(nproc 2>/dev/null) CPUs, $(awk '/MemTotal|MemAvailable/ {printf "%s %.1f GiB ", $1, $2/1048576}' /proc/meminfo 2>/dev/null)"
		echo
		echo "## GPU"
		echo
		echo '```'
		if command -v nvidia-smi >/dev/null 2>&1; then
			timeout 5 nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,compute_cap,pci.bus_id,pstate,clocks.sm,clocks.max.sm,power.limit --format=csv 2>&1
			echo
			timeout 5 nvidia-smi -q 2>&1 | grep -E -i '^ *(Driver Version|CUDA Version|Product Name|Product Architecture|Persistence Mode|Addressing Mode|MIG Mode|Current|Pending|Virtualization Mode|Host VGPU Mode|Total|Used|Free|Reserved|Performance State|Compute Mode) *:' | sed 's/^  *//' | head -40
		else
			echo "nvidia-smi: not found"
		fi
		echo '```'
		echo
		echo "## Python"
		echo
		echo '```'
		echo "$python: $(command -v "$python" || echo not found)"
		timeout 15 "$python" -c 'import sys, torch; print("python", sys.version.split()[0]); print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available()); print("gpu", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "-")' 2>&1 | tail -5
		echo '```'
		echo
		echo "## CUDA libraries"
		echo
		echo '```'
		echo "OOC_CUDA_LIBRARY=${OOC_CUDA_LIBRARY:-} OOC_CUBLAS_LIBRARY=${OOC_CUBLAS_LIBRARY:-} OOC_NCCL_LIBRARY=${OOC_NCCL_LIBRARY:-} CUDA_HOME=${CUDA_HOME:-}"
		timeout 5 ldconfig -p 2>/dev/null | grep -E 'libcuda\.so|libcublas\.so|libnccl\.so' | head -10
		ls -d /usr/local/cuda*/lib64/libcublas.so* 2>/dev/null | head -5
		timeout 5 "$python" -c 'import glob, site, sys; [print(p) for d in site.getsitepackages() + [site.getusersitepackages()] for p in sorted(glob.glob(d + "/nvidia/*/lib/lib*.so*")) if "cublas" in p or "nccl" in p]' 2>/dev/null | head -10
		echo '```'
		echo
		echo "(ooc doctor names the libraries it loaded: doctor.md)"
	} >"$OUT/env.md"
}

# The environment part runs as this script again (timeout runs programs, not shell functions).
if [ "${1:-}" = "--env-part" ]; then
	env_part
	exit 0
fi
if [ ! -x "$ooc" ]; then
	echo "run.sh: $ooc is missing or not executable: build the bundle with go run ./cmd/gpubundle DIR" >&2
	exit 1
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ooc-bundle.XXXXXX") || exit 1
# A file of an earlier run left in $OUT would pass for this run's.
for f in env.md doctor.md doctor.json sweep.json hybrid.json torch.json log.md summary.md; do
	rm -f "$OUT/$f"
done
trap 'rm -rf "$tmp"' EXIT
exec 3>&2 # part's own lines go to the terminal, not into a part's log

part env "$t_env" bash "$here/run.sh" --env-part

# Doctor: its checks, with -json where this build has it (after the doctor's parts were merged).
doctor_json=""
if "$ooc" doctor -h 2>&1 | grep -q -- '-json'; then
	doctor_json="-json $OUT/doctor.json"
fi
# A share too short to split (the tests' 1 s) is left to timeout alone.
if [ "$t_doctor" -ge 40 ] && "$ooc" doctor -h 2>&1 | grep -q -- '-part-timeout'; then
	doctor_json="$doctor_json -part-timeout $(((t_doctor - 10) / 3))s"
fi
# shellcheck disable=SC2086 # the optional flags split on purpose
part doctor "$t_doctor" "$ooc" doctor -device "$device" -sweep=false $doctor_json $doctor_args >"$tmp/doctor" 2>&1
fence "$tmp/doctor" "ooc doctor -device $device -sweep=false $doctor_json $doctor_args"
mv "$tmp/doctor.md" "$OUT/doctor.md"

# The VA allocator needs the driver's virtual memory management; where the doctor found none (a
# VM's GPU proxy may refuse it), the sweeps use the best-fit allocator rather than fail every point.
allocator=${OOC_BUNDLE_ALLOCATOR:-va}
if [ -z "${OOC_BUNDLE_ALLOCATOR:-}" ] && grep -Eq '^VMM +no' "$tmp/doctor"; then
	allocator=bestfit
fi

# sweep_part NAME SHARE SCHEDULERS BATCHES: one ooc sweep into $OUT/NAME.json, its table and log
# into log.md. It starts no point after its share less a margin for the point under way.
sweep_part() {
	sname=$1 share=$2 sscheds=$3 sbatches=$4
	limit=$((share > 90 ? share - 45 : share * 2 / 3))
	part "$sname" "$share" "$ooc" sweep -device "$device" -model "$model" -image "$image" -classes "$classes" \
		-batches "$sbatches" -until-stop -stop-at-oom -max-batch "$max_batch" -budget "$budget" \
		-schedulers "$sscheds" -allocators "$allocator" -chunk "$chunk" -steps "$steps" -time-limit "${limit}s" \
		-markdown -json "$OUT/$sname.json" >"$tmp/$sname-table" 2>"$tmp/$sname-log"
	rm -f "$OUT/$sname.json.tmp" # ooc writes through it; left only where it was killed mid-write
	{
		echo "## ooc sweep: $model ${image}x${image}, budget $budget, $sscheds ($allocator allocator, VA chunks of $chunk), batches $sbatches and on"
		echo
		cat "$tmp/$sname-table"
		echo
		echo '```'
		cat "$tmp/$sname-log"
		echo '```'
		echo
	} >>"$OUT/log.md"
}
echo "# The sweeps' tables and logs, and PyTorch's log" >"$OUT/log.md"
echo >>"$OUT/log.md"
# The paper's rows first; hybrid (which plans for seconds per budget tried) in its own share,
# from the batches where in core no longer fits.
sweep_part sweep "$t_sweep" "$schedulers" "$batches"
sweep_part hybrid "$t_hybrid" hybrid "$hybrid_batches"

# PyTorch, at the batches ours trained (read from sweep.json).
torch_limit=$((t_torch > 40 ? t_torch - 20 : t_torch * 2 / 3))
part torch "$t_torch" "$python" "$here/torch_resnet50.py" --out "$OUT/torch.json" --device "$torch_device" \
	--image "$image" --classes "$classes" --batches "$batches" --ours "$OUT/sweep.json,$OUT/hybrid.json" --cap "$budget" \
	--steps "$steps" --time-limit "$torch_limit" --max-batch "$max_batch" >"$tmp/torch" 2>&1
{
	echo "## PyTorch: torch_resnet50.py"
	echo
	echo '```'
	cat "$tmp/torch"
	echo '```'
} >>"$OUT/log.md"
rm -f "$OUT/torch.json.tmp"
if [ ! -s "$OUT/torch.json" ]; then
	echo '{"status": "error", "reason": "the PyTorch script wrote no JSON (no python3? see torch.md)", "results": []}' >"$OUT/torch.json"
fi

part summary "$t_summary" "$ooc" gpu-summary -dir "$OUT" -parts "$parts" -budget "$budget" >"$tmp/summary" 2>&1
if [ ! -s "$OUT/summary.md" ]; then
	{
		echo "# GPU bundle summary"
		echo
		echo "ooc gpu-summary failed; the parts (name:exit status:seconds) were: $parts"
		echo
		echo '```'
		cat "$tmp/summary"
		echo '```'
	} >"$OUT/summary.md"
fi
echo "run.sh: parts $parts; files in $OUT:" >&2
ls -l "$OUT" >&2
cat "$OUT/summary.md"
