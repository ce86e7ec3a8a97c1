"""Wall time of the inspect-ai ``exbind`` task with ``mockllm/model`` (issue 10).

Usage (from the repository root; needs an export, ``python exbind.py build``)::

    python scripts/benchmark_inspect.py [--export ./exbind] [--config targeted_table]

Prints the time to build the samples (rows, PNG data URLs, prompts) and the time of one
``inspect_ai.eval`` over every sample with a canned mock answer (the first candidate id of
each row's reference inventory; token usage set so inspect loads no tokenizer), plus the exact accuracy inspect
reports next to the one ``exbind_scoring`` gives for the same answers (they must agree).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--export", default="exbind")
    parser.add_argument("--config", default="targeted_table")
    args = parser.parse_args(argv)

    from inspect_ai import Task, eval as inspect_eval
    from inspect_ai.dataset import MemoryDataset
    from inspect_ai.model import GenerateConfig, ModelOutput, ModelUsage, get_model
    from inspect_ai.solver import generate

    from exbind_scoring import score_prediction
    from exbind_scoring import OUTPUT_KEYS
    from predictors.inspect_task import exbind_samples, exbind_scorer

    t0 = time.perf_counter()
    samples = exbind_samples(args.export, args.config)
    t_samples = time.perf_counter() - t0
    answers = {}
    for s in samples:
        ref = json.loads(s.metadata["reference"])
        first = ref["candidates"][0]["id"]
        answers[s.id] = json.dumps({k: first for k in OUTPUT_KEYS[s.metadata["format"]]})
    by_prompt = {}
    for s in samples:
        content = s.input[0].content
        text = content if isinstance(content, str) else "".join(getattr(c, "text", "") for c in content)
        by_prompt[text] = answers[s.id]

    def answer(messages, tools, tool_choice, config):
        content = messages[-1].content
        text = content if isinstance(content, str) else "".join(getattr(c, "text", "") for c in content)
        out = ModelOutput.from_content("mockllm/model", by_prompt[text])
        out.usage = ModelUsage(input_tokens=0, output_tokens=0, total_tokens=0)
        return out

    task = Task(dataset=MemoryDataset(samples, name=f"exbind/{args.config}"), solver=generate(),
                scorer=exbind_scorer(), config=GenerateConfig(temperature=0.0, seed=42, max_tokens=96))
    with tempfile.TemporaryDirectory(prefix="exbind-inspect-") as tmp:
        t0 = time.perf_counter()
        (log,) = inspect_eval(task, model=get_model("mockllm/model", custom_outputs=answer), log_dir=tmp,
                              display="none")
        t_eval = time.perf_counter() - t0
    metrics = {k: v.value for k, v in log.results.scores[0].metrics.items()}
    expected = sum(score_prediction(answers[s.id], s.metadata["reference"])["first_violation"] == "none"
                   for s in samples) / len(samples)
    print(f"{args.config}: {len(samples)} samples; build {t_samples:.2f} s; inspect eval {t_eval:.2f} s "
          f"({len(samples) / t_eval:.1f} samples/s); total {t_samples + t_eval:.2f} s")
    print(f"exact (inspect) {metrics['exact']:.4f}; exact (exbind_scoring) {expected:.4f}; status {log.status}")
    return 0 if log.status == "success" and abs(metrics["exact"] - expected) < 1e-12 else 1


if __name__ == "__main__":
    sys.exit(main())
