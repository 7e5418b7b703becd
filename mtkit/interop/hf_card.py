"""The model card (README.md) of `mtkit export --format hf`: the Hub's metadata in YAML front matter
(languages, license, pipeline_tag, the test scores given), how the model was trained, and how to run it
with the Auto classes (a multilingual model's tag before the source or as the decoder's start)."""

from __future__ import annotations

from typing import Any

from mtkit import __version__
from mtkit.data.corpora import tag
from mtkit.data.meta import DataMeta


def model_card(cfg: Any, meta: DataMeta, saved: dict[str, Any], architecture: str, license: str,
               scores: dict[str, float] | None) -> str:
    """README.md with the Hub's metadata (YAML front matter): languages, pipeline_tag, license, the
    test scores given, how the model was trained, mtkit's version."""
    m, t = cfg.model, cfg.training
    languages = meta.languages.get("src", []) + meta.languages.get("tgt", []) or [meta.src_lang,
                                                                                   meta.tgt_lang]
    front = ["---", "language:", *(f"- {x}" for x in dict.fromkeys(languages)), f"license: {license}",
             "pipeline_tag: translation", "library_name: transformers", "tags:", "- translation", "- mtkit",
             f"- {'pegasus' if m.norm == 'pre' else 'marian'}"]
    lines = []
    if scores:
        pair = f"{meta.src_lang}-{meta.tgt_lang}"
        front += ["model-index:", f"- name: {pair}", "  results:", "  - task:", "      type: translation",
                  f"      name: Translation {pair}", "    metrics:"]
        for name, value in scores.items():
            front += [f"    - type: {name.lower()}", f"      value: {float(value):.2f}",
                      f"      name: {name}"]
        lines.append("Test scores (fp32 `mtkit translate`): "
                     + ", ".join(f"{k} {float(v):.2f}" for k, v in scores.items()) + ".")
    front.append("---")
    valid = (saved.get("metrics") or {}).get("valid")
    steps = saved.get("step")
    body = [f"# {meta.src_lang}→{meta.tgt_lang} translation ({architecture})", "",
            f"Trained with mtkit {meta.mtkit_version or '(version not recorded)'}; exported by mtkit "
            f"{__version__} (`mtkit export --format hf`).", "",
            f"- model: Transformer, {m.norm}-norm, d_model {m.d_model}, {m.heads} heads, FFN {m.d_ff} "
            f"({m.activation}), {m.encoder_layers}+{m.decoder_layers} layers",
            f"- vocabulary: sentencepiece, {'joint' if meta.joint else 'separate'} "
            f"({meta.src_vocab_size}/{meta.tgt_vocab_size} pieces)",
            f"- training: {t.optimizer}, lr {t.lr}, {t.schedule}, max_tokens {t.max_tokens}, label smoothing "
            f"{t.label_smoothing}" + (f", {steps} updates" if steps else ""),
            f"- data: {cfg.data.train_src or '(not recorded)'}"]
    if isinstance(valid, dict) and valid:
        shown = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in valid.items())
        body.append(f"- validation at this checkpoint: {shown}")
    side, targets = meta.languages.get("tag"), meta.languages.get("tgt") or [""]
    text, start = "A sentence.", ""
    if side == "source":
        text = f"{tag(targets[0])} A sentence."
        lines.append(f"Multilingual: put the tag of the target language before the source text "
                     f"({', '.join(tag(x) for x in targets)}).")
    elif side == "decoder":
        start = f", decoder_start_token_id=tok.convert_tokens_to_ids({tag(targets[0])!r})"
        lines.append(f"Multilingual: start the decoder from the tag of the target language "
                     f"({', '.join(tag(x) for x in targets)}): `decoder_start_token_id`.")
    body += ["", *lines, "", "```python",
             "from transformers import AutoModelForSeq2SeqLM, AutoTokenizer",
             'tok = AutoTokenizer.from_pretrained("THIS_DIRECTORY")',
             'model = AutoModelForSeq2SeqLM.from_pretrained("THIS_DIRECTORY")',
             f'out = model.generate(**tok([{text!r}], return_tensors="pt"){start})',
             "print(tok.batch_decode(out, skip_special_tokens=True))", "```", ""]
    return "\n".join(front + [""] + body)


__all__ = ["model_card"]
