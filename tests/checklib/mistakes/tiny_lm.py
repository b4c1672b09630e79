"""The known mistakes of `tiny_lm` (A tiny language model that learns): its entries, simulators and bundles (see
`checklib/mistakes/__init__.py`)."""
from __future__ import annotations

import math
import re
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from ..catalogue import Known, Mistakes, bind, mistake, recognised, simulated, variants
from .general import besides, mapped


# A LLaMA-style model in float64 from plain operations, with the mistake `variant` switched on. `chunks`
# feed the model the way a cached decode does (one call per chunk, keys and values kept per block).

def lm_rope_tables(max_len: int, head_dim: int, base: float = 10000.0) -> tuple[Tensor, Tensor]:
    """The contract's tables, computed in float32 as rope_angles does: (max_len, head_dim // 2) each."""
    freqs = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.arange(max_len, dtype=torch.float32)[:, None] * freqs
    return torch.cos(angles), torch.sin(angles)


def _rotate(x: Tensor, cos: Tensor, sin: Tensor, start: int) -> Tensor:
    """Adjacent pairs (2i, 2i+1) of x (B, H, T, Dh) rotated at positions start .. start + T - 1."""
    c, s = cos[start:start + x.size(-2)].double(), sin[start:start + x.size(-2)].double()
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * c - odd * s, even * s + odd * c], dim=-1).flatten(-2)


def _rms(x: Tensor, weight: Tensor, eps: float = 1e-5) -> Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.double()


def _attention(s: dict[str, Tensor], p: str, x: Tensor, n_heads: int, n_kv_heads: int, rope, mask, cache,
               causal: bool) -> Tensor:
    B, T, D = x.shape
    dh = D // n_heads

    def heads(t: Tensor, n: int) -> Tensor:
        return t.view(B, T, n, dh).transpose(1, 2)

    q = heads(x @ s[p + "w_q.weight"].double().T, n_heads)
    k = heads(x @ s[p + "w_k.weight"].double().T, n_kv_heads)
    v = heads(x @ s[p + "w_v.weight"].double().T, n_kv_heads)
    start = 0 if cache is None else sum(t.size(-2) for t in cache[0])
    if rope is not None:
        q, k = _rotate(q, *rope, start), _rotate(k, *rope, start)
    if cache is not None:
        cache[0].append(k)
        cache[1].append(v)
        k, v = torch.cat(cache[0], dim=-2), torch.cat(cache[1], dim=-2)
    rep = n_heads // n_kv_heads
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if cache is not None and causal:
        mask = torch.ones(T, k.size(-2), dtype=torch.bool).tril(k.size(-2) - T)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v
    return out.transpose(1, 2).reshape(B, T, D) @ s[p + "out_proj.weight"].double().T


def _swiglu(s: dict[str, Tensor], p: str, x: Tensor) -> Tensor:
    gate = F.silu(x @ s[p + "w_gate.weight"].double().T)
    return (gate * (x @ s[p + "w_up.weight"].double().T)) @ s[p + "w_down.weight"].double().T


def decoder_block(state: dict[str, Tensor], x: Tensor, n_heads: int, n_kv_heads: int, *, rope=None, mask=None,
                  cache=None, variant: str = "", prefix: str = "", causal: bool = True, eps: float = 1e-5) -> Tensor:
    """DecoderBlock(..., eps) in float64; `cache` a pair of lists (keys, values) that this call appends to."""
    s, x = state, x.double()
    eps1 = 1e-5 if variant in ("attn_norm_without_eps", "norms_without_eps") else eps
    eps2 = 1e-5 if variant in ("ffn_norm_without_eps", "norms_without_eps") else eps
    second_norm = prefix + ("attn_norm" if variant == "shared_norm" else "ffn_norm") + ".weight"

    def attn(inp: Tensor) -> Tensor:
        return _attention(s, prefix + "attn.", inp, n_heads, n_kv_heads, rope, None if variant == "no_mask" else mask,
                          cache, causal)

    first_norm = prefix + ("ffn_norm" if variant == "one_norm_object" else "attn_norm") + ".weight"

    def norm1(inp: Tensor) -> Tensor:
        return _rms(inp, s[first_norm], eps1)

    def norm2(inp: Tensor) -> Tensor:
        return _rms(inp, s[second_norm], eps2)

    def ffn(inp: Tensor) -> Tensor:
        return _swiglu(s, prefix + "ffn.", inp)

    if variant == "post_norm":
        h = norm1(x + attn(x))
        return norm2(h + ffn(h))
    if variant in BLOCK_READS:  # a branch that reads another tensor in scope
        n = norm1(x)
        a = attn(x if variant == "reads_attn_x" else n)
        h = a if variant == "reads_attn_without_residual" else x + a
        inputs = {"reads_ffn_norm_x": lambda: norm2(x), "reads_ffn_h": lambda: h, "reads_ffn_norm_attn": lambda: norm2(a)}
        return h + ffn(inputs.get(variant, lambda: norm2(h))())
    if variant == "attn_residual_from_normed":
        n = norm1(x)
        h = n + attn(n)
    else:
        h = x + attn(norm1(x))
    if variant == "ffn_residual_from_x":
        return x + ffn(norm2(h))
    if variant == "ffn_without_residual":
        return ffn(norm2(h))
    return h + ffn(norm2(h))


DECODER_BLOCK_MISTAKES = variants("tiny_lm", ((sentence, variant) for variant, sentence in {
    "post_norm": "your block normalises after each residual addition (post-norm, as the 2017 Transformer): "
                 "a pre-norm block normalises the input of each branch, h = x + attn(attn_norm(x)), "
                 "out = h + ffn(ffn_norm(h))",
    "attn_residual_from_normed": "your attention residual adds the normalised input: h = attn_norm(x) + "
                                 "attn(attn_norm(x)); the residual carries x itself, h = x + attn(attn_norm(x))",
    "ffn_residual_from_x": "your feed-forward residual adds x, not h: the second branch is added to the first's "
                           "result, out = h + ffn(ffn_norm(h))",
    "ffn_without_residual": "your block returns ffn(ffn_norm(h)) without adding h back (the second residual is "
                            "missing)",
    "shared_norm": "your feed-forward branch is normalised by attn_norm: it has its own, ffn_norm",
    "one_norm_object": "your attn_norm and ffn_norm are one RMSNorm object (self.ffn_norm = self.attn_norm): "
                       "loading ffn_norm's weight overwrote attn_norm's, so both branches use it; create two "
                       "separate RMSNorm(d_model, eps)",
    "no_mask": "your block does not pass the mask on to the attention",
}.items()))
# An eps the block is given but does not hand on to a norm (RMSNorm(d_model) keeps the default 1e-5).
BLOCK_EPS_MISTAKES = variants("tiny_lm", (
    ("your DecoderBlock does not pass its eps on to attn_norm: RMSNorm(d_model, eps)", "attn_norm_without_eps"),
    ("your DecoderBlock does not pass its eps on to ffn_norm: RMSNorm(d_model, eps)", "ffn_norm_without_eps"),
    ("your DecoderBlock does not pass its eps on to its norms: attn_norm = RMSNorm(d_model, eps), likewise "
     "ffn_norm", "norms_without_eps"),
))
BLOCK_VARIANTS = {m.name: m for m in DECODER_BLOCK_MISTAKES}  # variant -> entry
# A family: one branch reading another tensor in scope than the pre-norm block's (x, attn_norm(x), the attention's
# output, h, ffn_norm of any of them); the residuals from the wrong tensor are named entries.
BLOCK_READ = mistake("tiny_lm", "block_reads",
                     "your block computes {h}, then {out}: a pre-norm block is h = x + attn(attn_norm(x)), then "
                     "out = h + ffn(ffn_norm(h)), each branch reading what the one before gave "
                     "(ffn_norm(x) would make a parallel block)", dict())
BLOCK_READS = {  # variant -> (h, out) as the sentence writes them
    "reads_attn_x": ("h = x + attn(x)", "out = h + ffn(ffn_norm(h))"),
    "reads_attn_without_residual": ("h = attn(attn_norm(x))", "out = h + ffn(ffn_norm(h))"),
    "reads_ffn_norm_x": ("h = x + attn(attn_norm(x))", "out = h + ffn(ffn_norm(x))"),
    "reads_ffn_h": ("h = x + attn(attn_norm(x))", "out = h + ffn(h)"),
    "reads_ffn_norm_attn": ("h = x + attn(attn_norm(x))", "out = h + ffn(ffn_norm(attn(attn_norm(x))))"),
}


def block_read_family(model: Callable[[str], Tensor]) -> Mistakes:
    """BLOCK_READ's members, `model(variant)` the output of the block (or the model) with that variant."""
    return {BLOCK_READ.text(h=h, out=out): (lambda v=variant: model(v)) for variant, (h, out) in BLOCK_READS.items()}


def decoder_block_mistakes(state: dict[str, Tensor], x: Tensor, n_heads: int, n_kv_heads: int, rope, mask,
                           eps: float | None = None) -> Mistakes:
    """For DecoderBlock(..., eps) (None: the default) on x."""
    def model(variant: str) -> Tensor:
        return decoder_block(state, x, n_heads, n_kv_heads, rope=rope, mask=mask, variant=variant, eps=eps or 1e-5)
    entries = DECODER_BLOCK_MISTAKES + (BLOCK_EPS_MISTAKES if eps is not None else ())
    return besides(simulated(entries, model), block_read_family(model))


def tiny_lm(state: dict[str, Tensor], chunks: list[Tensor], *, n_heads: int, n_kv_heads: int, n_layers: int,
            max_len: int, rope_base: float = 10000.0, cached: bool = False, variant: str = "") -> Tensor:
    """TinyLM's logits (B, total T, V) in float64 for the token chunks fed one call each (with caches when
    `cached`, else a single chunk)."""
    d_model = state["tok_emb.weight"].size(1)
    base = 10000.0 if variant == "default_base" else rope_base
    rope = None if variant == "no_rope" else lm_rope_tables(max_len, d_model // n_heads, base)
    emb, head = state["tok_emb.weight"].double(), state["head.weight"].double()
    if variant == "tied_to_head":
        emb = head
    elif variant == "tied_to_embedding":
        head = emb
    caches = [([], []) for _ in range(n_layers)]
    if variant == "shared_cache":
        caches = [caches[0]] * n_layers
    out = []
    for chunk in chunks:
        x = emb[chunk]
        if variant == "scaled_embedding":
            x = x * math.sqrt(d_model)
        T = chunk.size(1)
        causal = variant != "no_causal_mask"
        mask = None if cached or not causal else torch.ones(T, T, dtype=torch.bool).tril()
        for i in range(n_layers):
            block_variant = variant if variant in BLOCK_VARIANTS or variant in BLOCK_READS else ""
            x = decoder_block(state, x, n_heads, n_kv_heads, rope=rope, mask=mask, variant=block_variant,
                              cache=caches[i] if cached else None, causal=causal,
                              prefix=f"blocks.{n_layers - 1 if variant == 'shared_block' else i}.")
        logits = (x if variant == "no_final_norm" else _rms(x, state["norm.weight"])) @ head.T
        out.append(logits[:, -1:] if variant == "last_position_only" else logits)
    return torch.cat(out, dim=1)


TINY_LM_MISTAKES = tuple(m for m in DECODER_BLOCK_MISTAKES if m.name != "no_mask") + variants("tiny_lm", (
    (sentence, variant) for variant, sentence in {
    "no_final_norm": "your TinyLM applies the head to the last block's output directly: the final RMSNorm "
                     "(norm) comes first, head(norm(x))",
    "shared_block": "your blocks are one module repeated (nn.ModuleList([DecoderBlock(...)] * n_layers) holds the "
                    "same block n_layers times, so every layer has the last one's weights): make a new DecoderBlock "
                    "per layer",
    "last_position_only": "your TinyLM returns the logits of the last position only, (B, 1, vocab_size): forward "
                          "returns every position's, (B, T, vocab_size); generate picks the last one itself",
    "no_causal_mask": "your TinyLM attends to future positions without caches: give the blocks a causal mask "
                      "(True on and below the diagonal) when there are no caches",
    "no_rope": "your TinyLM does not give the blocks the RoPE tables (rope=(cos, sin)), so attention cannot "
               "tell positions apart",
    "default_base": "your RoPE tables ignore rope_base (they use 10000): pass it on to rope_angles",
    "tied_to_head": "your tok_emb and head share one weight (tied embeddings): the contract's are two separate "
                    "parameters, the head an nn.Linear(d_model, vocab_size, bias=False) of its own",
    "tied_to_embedding": "your head and tok_emb share one weight (tied embeddings): the contract's are two "
                         "separate parameters, the head an nn.Linear(d_model, vocab_size, bias=False) of its own",
    "scaled_embedding": "your TinyLM scales the embeddings by sqrt(d_model); the contract's feeds tok_emb(idx) "
                        "to the first block as it is",
}.items()))
TINY_LM_VARIANTS = {m.name: m for m in TINY_LM_MISTAKES}  # variant -> entry
SHARED_CACHE = mistake("tiny_lm", "shared_cache", "your blocks share one KV cache: each block keeps the keys and values "
                       "of its own layer, so block i must get caches[i]", dict(variant="shared_cache"))


CACHES_MADE_ONCE = mistake(
    "tiny_lm", "caches_made_once",
    "your new_caches hands out the same caches on every call (made once and kept on the model): two prompts "
    "decoded with caches from two calls of new_caches fill one set of caches, so each one's new positions see the "
    "other's keys and values; make new, empty KVCaches on every call",
    lambda state, fed, config: tiny_lm(state, fed, cached=True, **config))


def tiny_lm_again_mistakes(state: dict[str, Tensor], chunks: list[Tensor], fed: list[Tensor], **config: Any
                           ) -> Mistakes:
    """For the logits of the last of `chunks` (one prompt's calls with its own caches so far), where `fed` holds
    every chunk the model was given with any caches, in order (this prompt's and another's, in turns)."""
    last = chunks[-1].shape[1]
    own = mapped(tiny_lm_mistakes(state, chunks, cached=True, **config), lambda full: full[:, -last:])
    stale = {} if len(fed) == len(chunks) else \
        mapped(bind([CACHES_MADE_ONCE], state, fed, config), lambda full: full[:, -last:])
    return {**own, **stale}


def tiny_lm_mistakes(state: dict[str, Tensor], chunks: list[Tensor], *, cached: bool = False, **config: Any
                     ) -> Mistakes:
    def model(variant: str) -> Tensor:
        return tiny_lm(state, chunks, cached=cached, variant=variant, **config)
    return besides(simulated([*TINY_LM_MISTAKES, *([SHARED_CACHE] if cached else [])], model), block_read_family(model))


# The attention's keys and values sized for another number of key/value heads than the block is given.
KV_HEADS_NOT_PASSED = mistake("tiny_lm", "kv_heads_not_passed",
                              "your blocks' attention has {count} key/value heads: build it as "
                              "GroupedQueryAttention(d_model, n_heads, n_kv_heads, bias=False), and TinyLM gives "
                              "each DecoderBlock its n_kv_heads",
                              lambda d_model, n_heads, heads: torch.Size((heads * (d_model // n_heads), d_model)))


def kv_heads_mistakes(key: str, d_model: int, n_heads: int, n_kv_heads: int) -> Mistakes:
    """For the shape of a TinyLM's (or DecoderBlock's) attn.w_k / attn.w_v weight: n_heads or one key/value
    head where n_kv_heads are meant."""
    if not key.endswith(("attn.w_k.weight", "attn.w_v.weight")):
        return {}
    return {KV_HEADS_NOT_PASSED.text(count=words): KV_HEADS_NOT_PASSED.on(d_model, n_heads, heads)
            for words, heads in (("n_heads", n_heads), ("1", 1)) if heads != n_kv_heads}


HEAD_BIAS = recognised("tiny_lm", "head_bias", "your head has a bias: nn.Linear(d_model, vocab_size, bias=False)")
ROPE_TABLES_SAVED = recognised("tiny_lm", "rope_tables_saved",
                               "the RoPE tables are in your state dict: register them with register_buffer(name, table, "
                               "persistent=False); they are computed from max_len, not learned, so a checkpoint need "
                               "not hold them")
# The width the RoPE tables were built for, read from the stand-in's error, against what a divisor mistake gives.
ROPE_WIDTH_MISTAKES = (
    mistake("tiny_lm", "rope_for_d_model", "your RoPE tables are for head_dim = d_model: they rotate each head, so "
            "build them with rope_angles(max_len, d_model // n_heads)", lambda d_model, n_heads, n_kv_heads: d_model),
    mistake("tiny_lm", "rope_for_kv_heads", "your RoPE tables are for d_model // n_kv_heads features: they rotate "
            "each head, d_model // n_heads wide (the key/value heads are fewer, not wider)",
            lambda d_model, n_heads, n_kv_heads: d_model // n_kv_heads),
)
MAX_LEN_OFF_BY_ONE = recognised("tiny_lm", "max_len_off_by_one",
                                "your TinyLM rejects a sequence that ends at position max_len - 1 ({last}): positions "
                                "0 .. max_len - 1 all have RoPE tables; raise only when start + T > max_len")
MASK_WITH_CACHE = recognised("tiny_lm", "mask_with_cache",
                             "your TinyLM passes a causal mask together with the caches: with caches the attention "
                             "builds its own mask over the cached positions, so pass mask=None then")
SHARED_CACHES = recognised("tiny_lm", "shared_caches",
                           "new_caches returns the same KVCache object for every block ([KVCache()] * n repeats one "
                           "object): make a new one per block")


def tiny_lm_key_diagnosis(got: dict[str, Tensor], expected: set[str], max_len: int) -> "Known | None":
    """The diagnosis of a TinyLM state dict whose keys are not the contract's (`got`: key -> tensor)."""
    extra, missing = set(got) - expected, expected - set(got)
    if missing:
        return None
    if extra == {"head.bias"}:
        return HEAD_BIAS.text()
    if extra and all(got[k].dim() == 2 and got[k].size(0) == max_len for k in extra):
        return ROPE_TABLES_SAVED.text()
    return None


def rope_width(message: str) -> int | None:
    """The width the RoPE tables are for, from the error the stand-in apply_rope raised inside the model."""
    found = re.search(r"the tables are for (\d+)", message)
    return int(found[1]) if found else None


def rope_width_mistakes(d_model: int, n_heads: int, n_kv_heads: int) -> Mistakes:
    """Against `rope_width`: each mistake's width (the expected one is d_model // n_heads)."""
    return bind(ROPE_WIDTH_MISTAKES, d_model, n_heads, n_kv_heads)


def max_len_off_by_one_mistake(max_len: int) -> "Known":
    return MAX_LEN_OFF_BY_ONE.text(last=max_len - 1)


START_FROM_CACHE_COUNT = recognised("tiny_lm", "start_from_cache_count",
                                    "your first position with caches is len(caches), the number of blocks: it is the "
                                    "number of positions cached so far, len(caches[0])")


def mask_with_cache_mistake(message: str) -> "Known | None":
    return MASK_WITH_CACHE.text() if "mask" in message and "cache" in message else None


def shared_caches_mistake(ids: list[int]) -> "Known | None":
    return SHARED_CACHES.text() if len(ids) > 1 and len(set(ids)) == 1 else None
