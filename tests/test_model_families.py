"""Paper model families through the transformers runner (issue 10 item 4).

Tiny randomly initialised checkpoints are built from configs (no download) with a local
byte-level tokenizer (``tokenizers`` BPE over the 256 byte symbols plus each family's special
tokens) and each family's own processor, saved to a temporary folder and run by path through
``run_model`` on two image rows (svg, canvas) and one text row (table) in one batch:

- LLaVA with a Phi-3 text backbone (``LlavaForConditionalGeneration`` + ``Phi3Config``;
  ``LlavaProcessor`` expands ``<image>`` to 16 image tokens);
- Idefics3 / SmolVLM (``Idefics3ForConditionalGeneration``; ``Idefics3Processor`` without
  image splitting wraps 4 image tokens as
  ``<fake_token_around_image><global-img><image>x4<fake_token_around_image>``, 7 tokens).

The prompt-token counts prove that the image went through the processor's chat template
(the image slot expanded by exactly the family's image tokens, and none for the table
row); the scores are the scorer's records for the outputs.

- Qwen2.5-VL (``Qwen2_5_VLForConditionalGeneration``) and Qwen3-VL
  (``Qwen3VLForConditionalGeneration``): ``Qwen2VLImageProcessor`` (PIL backend) resizes a
  440x360 row to 64x48 pixels under ``max_pixels=4096`` (multiples of patch 8 x merge 2), a
  8x6 patch grid merged 2x2 into 12 ``<|image_pad|>`` tokens between
  ``<|vision_start|>``/``<|vision_end|>`` (14 tokens).

The Qwen checkpoints carry a video processor entry, as released ones do; its class needs
``torchvision``, which is not installed beside the CPU torch wheel, so ``AutoProcessor``
raises ``ImportError`` and the runner's ``load_processor`` loads the family's processor
without the video processor (a test pins that path).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from exbind_scoring import score_prediction
from generator.prompt import build_prompt
from predictors.io import per_case_row
from predictors.runner import RunnerError, load_processor, run_model

CASES = ["broad_relational_0000__svg", "broad_relational_0000__canvas", "broad_table_0000__table"]
TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% if m['content'] is string %}{{ m['content'] }}"
            "{% else %}{% for c in m['content'] %}{% if c['type'] == 'image' %}<image>{% elif c['type'] == 'text' %}"
            "{{ c['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def _tokenizer(specials: list[str]):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_end|>", "<|im_start|>"] + specials
    vocab = {t: i for i, t in enumerate(specials + sorted(pre_tokenizers.ByteLevel.alphabet()))}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(specials)
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<|endoftext|>", eos_token="<|im_end|>",
                                  chat_template=TEMPLATE)
    return tok, vocab


def _text_config(vocab_size: int) -> dict:
    return dict(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=16384, pad_token_id=0,
                bos_token_id=1, eos_token_id=1)


def _save(model, processor, path: Path) -> Path:
    model.generation_config.eos_token_id = 1
    model.generation_config.pad_token_id = 0
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path


def build_llava_phi3(path: Path) -> Path:
    from transformers import (CLIPImageProcessor, CLIPVisionConfig, LlavaConfig, LlavaForConditionalGeneration,
                              LlavaProcessor, Phi3Config)

    tok, vocab = _tokenizer(["<image>"])
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}),
        tokenizer=tok, patch_size=8, vision_feature_select_strategy="default", chat_template=TEMPLATE,
        image_token="<image>", num_additional_image_tokens=1)
    config = LlavaConfig(
        vision_config=CLIPVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                       num_attention_heads=2, image_size=32, patch_size=8),
        text_config=Phi3Config(**_text_config(len(vocab))),
        image_token_index=vocab["<image>"], image_seq_length=16, vision_feature_layer=-1)
    torch.manual_seed(0)
    return _save(LlavaForConditionalGeneration(config).eval(), processor, path)


def build_idefics3(path: Path) -> Path:
    from transformers import Idefics3Config, Idefics3ForConditionalGeneration, Idefics3Processor
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

    tok, vocab = _tokenizer(["<fake_token_around_image>", "<image>", "<global-img>", "<end_of_utterance>"])
    image_processor = Idefics3ImageProcessorPil(do_image_splitting=False, size={"longest_edge": 32},
                                                max_image_size={"longest_edge": 32})
    # (32 / 8) ** 2 = 16 patches, pixel-shuffled by scale_factor 2 -> 4 image tokens
    processor = Idefics3Processor(image_processor=image_processor, tokenizer=tok, image_seq_len=4,
                                  chat_template=TEMPLATE)
    config = Idefics3Config(
        vision_config=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
                           image_size=32, patch_size=8),
        text_config=dict(model_type="llama", **_text_config(len(vocab))),
        image_token_id=vocab["<image>"], scale_factor=2, pad_token_id=0)
    torch.manual_seed(0)
    return _save(Idefics3ForConditionalGeneration(config).eval(), processor, path)


QWEN_SPECIALS = ["<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
QWEN_TEMPLATE = TEMPLATE.replace("<image>", "<|vision_start|><|image_pad|><|vision_end|>")


def _save_qwen(model, processor_class, vocab_tok, path: Path, video_processor_type: str) -> Path:
    """Save a Qwen-family checkpoint whose processor_config.json names a video processor.

    The processor object is built without its video processor (whose class needs torchvision)
    and the video processor entry is written beside the image processor's, as in released
    checkpoints, so that loading exercises the runner's torchvision-free path.
    """
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    tok, _ = vocab_tok
    tok.chat_template = QWEN_TEMPLATE

    class Processor(processor_class):
        @classmethod
        def get_attributes(cls):
            return [a for a in super().get_attributes() if a != "video_processor"]

    Processor.__name__ = processor_class.__name__
    image_processor = Qwen2VLImageProcessorPil(patch_size=8, merge_size=2, temporal_patch_size=2,
                                               min_pixels=256, max_pixels=4096)
    _save(model, Processor(image_processor=image_processor, tokenizer=tok, chat_template=QWEN_TEMPLATE), path)
    config_path = path / "processor_config.json"
    stored = json.loads(config_path.read_text())
    video = {k: v for k, v in stored["image_processor"].items() if k != "image_processor_type"}
    stored["video_processor"] = dict(video, video_processor_type=video_processor_type)
    config_path.write_text(json.dumps(stored, indent=2))
    return path


def _qwen_vision(**extra) -> dict:
    return dict(depth=2, hidden_size=16, intermediate_size=32, num_heads=2, out_hidden_size=32, patch_size=8,
                spatial_merge_size=2, temporal_patch_size=2, **extra)


def _qwen_text(vocab_size: int, **extra) -> dict:
    return dict(_text_config(vocab_size), rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                           "mrope_section": [2, 1, 1]}, **extra)


def build_qwen2_5_vl(path: Path) -> Path:
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration, Qwen2_5_VLProcessor

    tok, vocab = _tokenizer(QWEN_SPECIALS)
    config = Qwen2_5_VLConfig(
        text_config=_qwen_text(len(vocab)),
        vision_config=_qwen_vision(window_size=16, fullatt_block_indexes=[1]),
        image_token_id=vocab["<|image_pad|>"], video_token_id=vocab["<|video_pad|>"],
        vision_start_token_id=vocab["<|vision_start|>"], vision_end_token_id=vocab["<|vision_end|>"])
    torch.manual_seed(0)
    model = Qwen2_5_VLForConditionalGeneration(config).eval()
    return _save_qwen(model, Qwen2_5_VLProcessor, (tok, vocab), path, "Qwen2VLVideoProcessor")


def build_qwen3_vl(path: Path) -> Path:
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration, Qwen3VLProcessor

    tok, vocab = _tokenizer(QWEN_SPECIALS)
    config = Qwen3VLConfig(
        text_config=_qwen_text(len(vocab), head_dim=8),
        vision_config=_qwen_vision(num_position_embeddings=16, deepstack_visual_indexes=[1]),
        image_token_id=vocab["<|image_pad|>"], video_token_id=vocab["<|video_pad|>"],
        vision_start_token_id=vocab["<|vision_start|>"], vision_end_token_id=vocab["<|vision_end|>"])
    torch.manual_seed(0)
    model = Qwen3VLForConditionalGeneration(config).eval()
    return _save_qwen(model, Qwen3VLProcessor, (tok, vocab), path, "Qwen3VLVideoProcessor")


# family -> (builder, tokens one image adds to the prompt)
FAMILIES = {"llava_phi3": (build_llava_phi3, 16), "idefics3": (build_idefics3, 7),
            "qwen2_5_vl": (build_qwen2_5_vl, 14), "qwen3_vl": (build_qwen3_vl, 14)}
MODEL_TYPES = {"llava_phi3": "llava", "idefics3": "idefics3", "qwen2_5_vl": "qwen2_5_vl", "qwen3_vl": "qwen3_vl"}


@pytest.fixture(autouse=True)
def _restore_torch_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_family_runs_image_and_text_rows(family, export_dir, rows, tmp_path):
    from transformers import AutoConfig, AutoTokenizer

    build, image_tokens = FAMILIES[family]
    checkpoint = build(tmp_path / family)
    manifest = run_model(checkpoint, "broad", tmp_path / "run", export_dir=export_dir, case_ids=CASES,
                         batch_size=3, threads=1, progress=False)
    assert (manifest["kind"], manifest["variant"], manifest["cases_done"]) == ("vlm", "image", 3)
    assert AutoConfig.from_pretrained(checkpoint).model_type == MODEL_TYPES[family]
    preds = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    assert [p["case_id"] for p in preds] == CASES
    tok = AutoTokenizer.from_pretrained(checkpoint)
    by_id = {r["case_id"]: r for r in rows["broad"]}
    expected = []
    for case_id, extra in zip(CASES, (image_tokens, image_tokens, 0)):
        text = "<|im_start|>user\n" + build_prompt(by_id[case_id], "image") + "<|im_end|>\n<|im_start|>assistant\n"
        expected.append(len(tok(text, add_special_tokens=False)["input_ids"]) + extra)
    assert [p["prompt_tokens"] for p in preds] == expected
    assert all(1 <= p["output_tokens"] <= 96 for p in preds)
    scores = [json.loads(line) for line in (tmp_path / "run" / "scores.jsonl").read_text().splitlines()]
    assert scores == [per_case_row(score_prediction(p["output"], by_id[p["case_id"]]["reference"]), p["output"],
                                   by_id[p["case_id"]]["reference"]) for p in preds]


@pytest.mark.skipif(importlib.util.find_spec("torchvision") is not None,
                    reason="with torchvision, AutoProcessor loads the video processor itself")
def test_qwen_processor_loads_without_torchvision(tmp_path):
    from PIL import Image
    from transformers import AutoProcessor, Qwen2_5_VLProcessor

    checkpoint = build_qwen2_5_vl(tmp_path / "qwen2_5_vl")
    with pytest.raises(ImportError, match="Qwen2VLVideoProcessor requires the Torchvision library"):
        AutoProcessor.from_pretrained(str(checkpoint), local_files_only=True)
    processor = load_processor(checkpoint, local_files_only=True)
    assert isinstance(processor, Qwen2_5_VLProcessor) and not hasattr(processor, "video_processor")
    assert type(processor).__name__ == "Qwen2_5_VLProcessorImageOnly"
    text = processor.apply_chat_template([{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "a"}]}],
                                         add_generation_prompt=True, tokenize=False)
    assert text == "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>a<|im_end|>\n<|im_start|>assistant\n"
    inputs = processor(text=[text], images=[Image.new("RGB", (440, 360))], return_tensors="pt")
    assert inputs["image_grid_thw"].tolist() == [[1, 6, 8]]
    assert tuple(inputs["pixel_values"].shape) == (48, 3 * 2 * 8 * 8)
    assert inputs["input_ids"][0].tolist().count(processor.image_token_id) == 12


def test_processor_without_video_support_names_torchvision(tmp_path, monkeypatch):
    from transformers import AutoProcessor

    checkpoint = build_llava_phi3(tmp_path / "llava_phi3")

    def fail(*args, **kwargs):
        raise ImportError("LlavaProcessor requires the Torchvision library but it was not found in your environment.")

    monkeypatch.setattr(AutoProcessor, "from_pretrained", fail)
    with pytest.raises(RunnerError, match=r"needs torchvision \(LlavaProcessor requires the Torchvision library"):
        load_processor(checkpoint, local_files_only=True)
