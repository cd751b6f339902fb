#!/usr/bin/env bash
# Install torch 2.13.0 for CPU with the pip given as $1, never PyPI's default (CUDA) build:
# a local CPU wheel when pip's find-links hold one (this project's machines: no download),
# then its dependencies from the configured indexes; else PyTorch's own CPU index.
set -euo pipefail
pip="$1"
if "$pip" install -q --no-index --no-deps "torch==2.13.0" 2>/dev/null; then
  exec "$pip" install -q "torch==2.13.0"  # its dependencies (torch itself is there)
fi
exec "$pip" install -q "torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu
