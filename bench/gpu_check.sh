#!/usr/bin/env bash
# A GPU check that fits in minutes (run by hand on a machine with one CUDA GPU; the suite never
# needs one):
#
#     bash bench/gpu_check.sh                # ~3-5 min on one GPU
#     DEVICE=cpu bash bench/gpu_check.sh     # the same commands on CPU (a dry run of the script)
#
# 1. ppir's runtime on CUDA through `ppir launch -n 1` (one rank, NCCL process group with
#    device_id, every stage on the one device: NCCL between ranks needs a GPU per rank), for
#    1F1B, looped BFS (4 stages, local hand-offs), ZB-H1 and ZB-V (split backward), each with
#    --verify-grads against single-process training, then timed steps.
# 2. The I/W benchmark (bench/bench_split_backward.py) on the GPU: I + W against B for
#    8 x (Linear + GELU), at two sizes.
# 3. `ppir profile` on the GPU (one rank, the model in 4 pieces), its self-check line, and the
#    estimate of `1f1b -D P=1 -D M=8` from that cost file beside the step time that
#    `ppir launch -n 1` measured in part 1.
# Prints every figure; exits non-zero if a verification fails.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
DEVICE=${DEVICE:-cuda}
if [ "$DEVICE" = cuda ]; then
  $PY -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA GPU')"
  $PY -c "import torch; print('gpu:', torch.cuda.get_device_name(0), '| torch', torch.__version__)"
fi
GPT="--module examples/gpt_model.py --module-opt d_model=256 --module-opt heads=8 \
  --module-opt layers=8 --module-opt seq=128 --module-opt batch=32 --module-opt vocab=256"
for sched in "1f1b -D M=8" "looped_bfs -D M=8 -D v=4" "zb_h1 -D M=8" "zbv -D M=8"; do
  echo "== ppir launch -n 1 $sched on $DEVICE"
  # shellcheck disable=SC2086
  $PY -m ppir.cli launch -n 1 $sched $GPT --steps 20 --verify-grads --tolerance 1e-4 \
    --device "$DEVICE" | grep -E "verify-grads|mean step time"
done
echo "== I + W against B ($DEVICE)"
$PY bench/bench_split_backward.py --device "$DEVICE" --width 1024 --batch 4096 --repeats 30
$PY bench/bench_split_backward.py --device "$DEVICE" --width 4096 --batch 1024 --repeats 30
echo "== ppir profile --ranks 1 --stages 4 on $DEVICE, then the estimate from its cost file"
COSTS=${TMPDIR:-/tmp}/ppir_gpu_check_costs.toml
# shellcheck disable=SC2086
$PY -m ppir.cli profile $GPT --ranks 1 --stages 4 --microbatches 8 --steps 10 --device "$DEVICE" \
  --quiet -o "$COSTS"
grep -E "^# (check|assumptions)" "$COSTS" || true
$PY -m ppir.cli compile 1f1b -D P=1 -D M=8 --backend cost --config "$COSTS" | grep -E -i "step"
