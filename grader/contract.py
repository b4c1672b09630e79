"""The facts of each component, stated once: its track, files, owned names, stand-ins and planner cost.

`FACTS` is the table, one row per component in teaching order; every other list of components, files
or owners in the grader is derived from it (TRACKS, COMPONENTS, MODULES, OWNERS, FILES here, the
stand-ins' PIECES, the planner's COST and SHARED_WORKERS). Course content stays in course.yml (titles,
points, hints, the checks' weights), the checks in tests/, the figures in grader/figures.py; README.md,
README.zh-CN.md and the stubs' package docstrings state the table to learners, and
selftests/test_facts.py holds them to it (docs/contributors.md, "Adding a component").
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Facts:
    """One component's row.

    - `files`: where the student writes it (shared/CONTRACT.md's table), its own file first; a missing file,
      or one that fails to import, scores 0 for the component. Not every file of a name it owns: kv_cache owns
      block.TransformerBlock with pre_ln_block, but its code is in kv_cache.py and attention.py.
    - `pieces`: stand-in piece (grader/sandbox/standins/<piece>.py) -> the contract names it stands in for,
      as "module.qualname"; these names are the component's own.
    - `also`: names whose row is another, earlier component's (which gives their piece), graded by this
      component's checks too.
    - `cost`: seconds its checks take on the reference (benchmarks/component_costs.py); the planner shares
      components out between grading processes by it.
    - `worker`: the SHARED_WORKERS group whose members share one worker (components whose checks reach none
      of each other's code; grader/engine/planning.py); "" for a worker of its own.
    """

    id: str
    track: str
    files: tuple[str, ...]
    pieces: dict[str, tuple[str, ...]] = field(hash=False)
    also: tuple[str, ...] = ()
    cost: float = 0.1
    worker: str = ""

    @property
    def names(self) -> tuple[str, ...]:
        """Every contract name its checks grade, as "module.qualname": its own, then `also`."""
        return tuple(name for names in self.pieces.values() for name in names) + self.also


# The worker groups (Facts.worker). sampling's checks build a TinyLM (RMSNorm, SwiGLU, RoPE, GQA, KVCache);
# GQA calls the attention.py functions; so neither shares with those.
FACTS: tuple[Facts, ...] = (
    # the core track
    Facts("qkv_projection", "core", ("attention.py",),
          {"projections": ("attention.MultiHeadAttention.__init__", "attention.MultiHeadAttention.project_qkv")},
          cost=0.076, worker="parts"),
    Facts("scaling", "core", ("attention.py",), {"scores": ("attention.attention_scores",)},
          cost=0.028, worker="parts"),
    Facts("masking", "core", ("attention.py",), {"masks": ("attention.causal_mask", "attention.apply_mask")},
          cost=0.042, worker="parts"),
    Facts("head_splitting", "core", ("attention.py",), {"heads": ("attention.split_heads", "attention.merge_heads")},
          cost=0.034, worker="parts"),
    Facts("multi_head_attention", "core", ("attention.py",),
          {"sdpa": ("attention.scaled_dot_product_attention",),
           "attention_forward": ("attention.MultiHeadAttention.forward",)},
          cost=0.152, worker="attention_and_sampling"),
    Facts("sinusoidal_encoding", "core", ("positional.py",),
          {"positional": ("positional.sinusoidal_positional_encoding",)}, cost=0.040, worker="parts"),
    Facts("pre_ln_block", "core", ("block.py",), {"block": ("block.TransformerBlock",)},
          cost=0.153, worker="blocks"),
    Facts("patch_embedding", "core", ("vit.py",), {"patches": ("vit.patchify", "vit.PatchEmbedding")},
          cost=0.058, worker="parts"),
    Facts("kv_cache", "core", ("kv_cache.py", "attention.py"), {"kv_cache": ("kv_cache.KVCache",)},
          also=("attention.MultiHeadAttention.forward", "block.TransformerBlock"), cost=0.274),
    # the LLM track
    Facts("layer_norm", "llm", ("norms.py",), {"layernorm": ("norms.LayerNorm",)}, cost=0.038, worker="llm_parts"),
    Facts("rms_norm", "llm", ("norms.py",), {"rmsnorm": ("norms.RMSNorm",)}, cost=0.039, worker="llm_parts"),
    Facts("rope", "llm", ("rope.py",), {"rope": ("rope.rope_angles", "rope.apply_rope")},
          cost=0.065, worker="llm_parts"),
    Facts("swiglu", "llm", ("ffn.py",), {"swiglu": ("ffn.SwiGLU",)}, cost=0.020, worker="llm_parts"),
    # attention.py, rope.py, kv_cache.py: stand-ins while graded
    Facts("grouped_query_attention", "llm", ("gqa.py",), {"gqa": ("gqa.repeat_kv", "gqa.GroupedQueryAttention")},
          cost=0.130, worker="blocks"),
    Facts("cross_entropy", "llm", ("training.py",),
          {"losses": ("training.softmax", "training.log_softmax", "training.cross_entropy")},
          cost=0.060, worker="llm_parts"),
    Facts("optimizer", "llm", ("training.py",), {"optim": ("training.AdamW", "training.clip_grad_norm")},
          cost=0.127, worker="llm_parts"),
    Facts("lr_schedule", "llm", ("training.py",), {"schedule": ("training.lr_at",)}, cost=0.037, worker="llm_parts"),
    Facts("sampling", "llm", ("sampling.py",),
          {"sampling": ("sampling.filter_logits", "sampling.sample_next_token", "sampling.generate")},
          cost=0.275, worker="attention_and_sampling"),
    Facts("tiny_lm", "llm", ("gpt.py",), {"gpt": ("gpt.DecoderBlock", "gpt.TinyLM")}, cost=0.272, worker="models"),
    # the vision track; patch_embedding and block.py: stand-ins while vit_classifier is graded
    Facts("vit_classifier", "vision", ("vit.py",), {"vit_model": ("vit.ViT",)}, cost=0.305, worker="models"),
    Facts("swin_windows", "vision", ("swin.py",),
          {"windows": ("swin.window_partition", "swin.window_reverse", "swin.shifted_window_mask")},
          cost=0.111, worker="parts"),
    # the window functions: stand-ins while graded
    Facts("window_attention", "vision", ("swin.py",),
          {"window_attention": ("swin.WindowAttention", "swin.SwinBlock")}, cost=0.134, worker="models"),
    # the seq2seq track; each tokenizer component's checks build their own vocabularies: they reach no other code
    Facts("bpe_training", "seq2seq", ("tokenizer.py",), {"bpe_trainer": ("tokenizer.train_bpe",)},
          cost=0.170, worker="parts"),
    Facts("bpe_encoding", "seq2seq", ("tokenizer.py",), {"bpe_tokenizer": ("tokenizer.BPETokenizer",)},
          cost=0.110, worker="parts"),
    # the interview track. alignment.py: a worker group of its own, since the release's reading of the reference
    # takes torch.log_softmax in sequence_logprobs for training.log_softmax (cross_entropy's); costs from a run on a
    # loaded machine, scaled by its figures for scaling and sinusoidal_encoding against theirs here
    Facts("dpo_loss", "interview", ("alignment.py",),
          {"dpo": ("alignment.sequence_logprobs", "alignment.dpo_loss")}, cost=0.025, worker="alignment"),
    Facts("grpo_loss", "interview", ("alignment.py",),
          {"grpo": ("alignment.group_advantages", "alignment.grpo_loss")}, cost=0.033, worker="alignment"),
)

# Derived from FACTS. The tracks (shared/CONTRACT.md), each in teaching order; the course holds them one after the
# other.
TRACKS: dict[str, tuple[str, ...]] = {}
for _row in FACTS:
    TRACKS[_row.track] = (*TRACKS.get(_row.track, ()), _row.id)
COMPONENTS: tuple[str, ...] = tuple(c for track in TRACKS.values() for c in track)

# The contract's files (modules), in the order the course first has the student write in them.
MODULES: tuple[str, ...] = tuple(dict.fromkeys(f.removesuffix(".py") for row in FACTS for f in row.files))

# module -> public name -> the components whose checks grade that name (names in teaching order).
OWNERS: dict[str, dict[str, frozenset[str]]] = {module: {} for module in MODULES}
for _row in FACTS:
    for _name in _row.names:
        _module, _, _qualname = _name.partition(".")
        OWNERS[_module][_qualname] = OWNERS[_module].get(_qualname, frozenset()) | {_row.id}

# component -> the files where the student writes it (Facts.files).
FILES: dict[str, tuple[str, ...]] = {row.id: row.files for row in FACTS}
del _row, _name, _module, _qualname


def facts(component: str) -> Facts:
    """The row of `component` (KeyError for a name that is not one)."""
    for row in FACTS:
        if row.id == component:
            return row
    raise KeyError(component)


def module_components(module: str) -> frozenset[str]:
    """Every component with graded code in `module`."""
    return frozenset().union(*OWNERS[module].values())


def component_modules(component: str) -> tuple[str, ...]:
    """The files a component's code lives in."""
    return tuple(m for m in MODULES if component in module_components(m))


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
