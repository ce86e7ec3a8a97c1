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

Qwen2.5-VL and Qwen3-VL are not covered here: their processors require a video processor,
which needs ``torchvision``, not installed with the CPU torch wheel of this project.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from exbind_scoring import score_prediction
from generator.prompt import build_prompt
from predictors.runner import run_model

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


# family -> (builder, tokens one image adds to the prompt)
FAMILIES = {"llava_phi3": (build_llava_phi3, 16), "idefics3": (build_idefics3, 7)}


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
    assert AutoConfig.from_pretrained(checkpoint).model_type == {"llava_phi3": "llava", "idefics3": "idefics3"}[family]
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
    assert scores == [score_prediction(p["output"], by_id[p["case_id"]]["reference"]) for p in preds]
