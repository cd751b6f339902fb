#!/usr/bin/env bash
# The install the README recommends, and nothing else: a fresh venv with torch and ppir[torch]
# only (no numpy, no matplotlib, no test tools) launches 2 ranks and verifies the gradients,
# then profiles the same model on 2 ranks.
# Run by .ci/run after the suite; `make fresh-venv-check` runs it by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
VENV=$(mktemp -d /tmp/ppir-fresh-XXXXXX)
trap 'rm -rf "$VENV"' EXIT
$PY -m venv "$VENV"
bash .ci/install_torch.sh "$VENV/bin/pip"   # CPU torch: a local wheel here, never CUDA
"$VENV/bin/pip" install -q -e ".[torch]"
for mod in numpy matplotlib pytest; do
  if "$VENV/bin/python" -c "import $mod" 2>/dev/null; then
    echo "fresh-venv: $mod is installed, but ppir[torch] must not need it" >&2
    exit 1
  fi
done
cd /tmp  # run from outside the source tree, as a user would
"$VENV/bin/ppir" launch -n 2 1f1b -D M=4 --module "$OLDPWD/examples/gpt_model.py" \
  --module-opt layers=2 --module-opt d_model=32 --module-opt seq=8 --module-opt batch=8 \
  --steps 2 --verify-grads --device cpu 2>&1 | tee "$VENV/out.txt"
grep -q "verify-grads: .*: OK" "$VENV/out.txt"
if grep -q "Failed to initialize NumPy" "$VENV/out.txt"; then  # ppir[torch] needs no numpy
  echo "fresh-venv: torch's missing-numpy warning reached the user" >&2
  exit 1
fi
# and profiles on 2 ranks (the ranks' samples reach rank 0 without numpy: ppir.torch.objects)
"$VENV/bin/ppir" profile --module "$OLDPWD/examples/gpt_model.py" --module-opt layers=2 \
  --module-opt d_model=32 --module-opt seq=8 --module-opt batch=8 --ranks 2 --steps 2 \
  --warmup 1 --quiet -o "$VENV/costs.toml" 2>&1 | tee "$VENV/profile.txt"
grep -q "^\[measured\]" "$VENV/costs.toml"
echo "fresh-venv: ppir[torch] alone launched 2 ranks and verified the gradients, and profiled"
