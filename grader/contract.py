"""Which component owns which public name of the contract (see shared/CONTRACT.md)."""
from __future__ import annotations

import difflib

# The tracks (shared/CONTRACT.md), each in teaching order; the course holds them one after the other.
TRACKS: dict[str, tuple[str, ...]] = {
    "core": ("qkv_projection", "scaling", "masking", "head_splitting", "multi_head_attention", "sinusoidal_encoding",
             "pre_ln_block", "patch_embedding", "kv_cache"),
    "llm": ("layer_norm", "rms_norm", "rope", "swiglu", "grouped_query_attention", "cross_entropy", "optimizer",
            "lr_schedule", "sampling", "tiny_lm"),
    "vision": ("vit_classifier", "swin_windows", "window_attention"),
}
COMPONENTS: tuple[str, ...] = tuple(c for track in TRACKS.values() for c in track)

MODULES: tuple[str, ...] = ("attention", "positional", "block", "vit", "kv_cache", "norms", "rope", "ffn", "gqa",
                            "training", "sampling", "gpt", "swin")

# module -> public name -> the components whose checks grade that name.
OWNERS: dict[str, dict[str, frozenset[str]]] = {
    "attention": {
        "split_heads": frozenset({"head_splitting"}),
        "merge_heads": frozenset({"head_splitting"}),
        "attention_scores": frozenset({"scaling"}),
        "causal_mask": frozenset({"masking"}),
        "apply_mask": frozenset({"masking"}),
        "scaled_dot_product_attention": frozenset({"multi_head_attention"}),
        "MultiHeadAttention.__init__": frozenset({"qkv_projection"}),
        "MultiHeadAttention.project_qkv": frozenset({"qkv_projection"}),
        "MultiHeadAttention.forward": frozenset({"multi_head_attention", "kv_cache"}),
    },
    "positional": {"sinusoidal_positional_encoding": frozenset({"sinusoidal_encoding"})},
    "block": {"TransformerBlock": frozenset({"pre_ln_block", "kv_cache"})},
    "vit": {
        "patchify": frozenset({"patch_embedding"}),
        "PatchEmbedding": frozenset({"patch_embedding"}),
        "ViT": frozenset({"vit_classifier"}),
    },
    "kv_cache": {"KVCache": frozenset({"kv_cache"})},
    "norms": {"LayerNorm": frozenset({"layer_norm"}), "RMSNorm": frozenset({"rms_norm"})},
    "rope": {"rope_angles": frozenset({"rope"}), "apply_rope": frozenset({"rope"})},
    "ffn": {"SwiGLU": frozenset({"swiglu"})},
    "gqa": {
        "repeat_kv": frozenset({"grouped_query_attention"}),
        "GroupedQueryAttention": frozenset({"grouped_query_attention"}),
    },
    "training": {
        "softmax": frozenset({"cross_entropy"}),
        "log_softmax": frozenset({"cross_entropy"}),
        "cross_entropy": frozenset({"cross_entropy"}),
        "AdamW": frozenset({"optimizer"}),
        "clip_grad_norm": frozenset({"optimizer"}),
        "lr_at": frozenset({"lr_schedule"}),
    },
    "sampling": {
        "filter_logits": frozenset({"sampling"}),
        "sample_next_token": frozenset({"sampling"}),
        "generate": frozenset({"sampling"}),
    },
    "gpt": {"DecoderBlock": frozenset({"tiny_lm"}), "TinyLM": frozenset({"tiny_lm"})},
    "swin": {
        "window_partition": frozenset({"swin_windows"}),
        "window_reverse": frozenset({"swin_windows"}),
        "shifted_window_mask": frozenset({"swin_windows"}),
        "WindowAttention": frozenset({"window_attention"}),
        "SwinBlock": frozenset({"window_attention"}),
    },
}


def module_components(module: str) -> frozenset[str]:
    """Every component with graded code in `module`."""
    return frozenset().union(*OWNERS[module].values())


def component_modules(component: str) -> tuple[str, ...]:
    """The files a component's code lives in."""
    return tuple(m for m in MODULES if component in module_components(m))

# component -> the files where the student writes it (the contract's table). A
# missing file, or one that fails to import, scores 0 for these components.
FILES: dict[str, tuple[str, ...]] = {
    "qkv_projection": ("attention.py",),
    "scaling": ("attention.py",),
    "masking": ("attention.py",),
    "head_splitting": ("attention.py",),
    "multi_head_attention": ("attention.py",),
    "sinusoidal_encoding": ("positional.py",),
    "pre_ln_block": ("block.py",),
    "patch_embedding": ("vit.py",),
    "kv_cache": ("kv_cache.py", "attention.py"),
    "layer_norm": ("norms.py",),
    "rms_norm": ("norms.py",),
    "rope": ("rope.py",),
    "swiglu": ("ffn.py",),
    "grouped_query_attention": ("gqa.py",),  # attention.py, rope.py, kv_cache.py: stand-ins while graded
    "cross_entropy": ("training.py",),
    "optimizer": ("training.py",),
    "lr_schedule": ("training.py",),
    "sampling": ("sampling.py",),
    "tiny_lm": ("gpt.py",),
    "vit_classifier": ("vit.py",),  # patch_embedding and block.py: stand-ins while graded
    "swin_windows": ("swin.py",),
    "window_attention": ("swin.py",),  # the window functions: stand-ins while graded
}


def unknown_components(names: list[str], known: tuple[str, ...] | list[str] = COMPONENTS) -> str | None:
    """The error for the names that are not components (None when all are), with a "did you mean" for each."""
    from .i18n import _

    unknown = [n for n in names if n not in known]
    if not unknown:
        return None
    parts = []
    for name in unknown:
        close = difflib.get_close_matches(name, known, n=1)
        parts.append(_("{name} (did you mean {close}?)").format(name=name, close=close[0]) if close else name)
    return _("unknown component(s): {names}; choose from {known}").format(names=", ".join(parts),
                                                                         known=", ".join(known))
