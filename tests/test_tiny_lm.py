"""tiny_lm: `DecoderBlock` and `TinyLM` in gpt.py, the capstone of the LLM track.

Expected values come from a composition of PyTorch operations carrying the same
injected weights, in float64: `F.rms_norm`, `F.scaled_dot_product_attention` with
the key/value heads repeated, RoPE as a complex multiplication, SwiGLU from
`F.linear` and `F.silu`. In the worker every other component (RMSNorm, RoPE,
GQA, SwiGLU, KVCache, lr_at, generate) is a trusted stand-in.

The training check trains the model on the task of `checklib.training.tiny_lm` (the one
`python -m grader train` runs): the grader holds the weights and steps them with
`torch.optim.AdamW`, the learning rates from the trusted `lr_at`.
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from checklib import adapters
from checklib.compare import assert_close, check_tensor, fail, message_of
from checklib.masks import self_attention_mask
from checklib.mistakes import tiny_lm as mistakes
from checklib.mistakes.general import mapped
from checklib.scratch import assert_from_scratch
from checklib.student import where, expect_value_error
from checklib.training.tiny_lm import TASK, TrainingFailed, expected_continuation, prompts, schedule, train
from checklib.weights import randn
from grader.engine.target import RemoteObject
from grader.sandbox.protocol import StudentError
from grader.sandbox.wire import Ref
from grader.text import Phrase

BLOCK, LM = adapters.DecoderBlock, adapters.TinyLM
WHERE = ("h = x + attn(attn_norm(x), mask, rope=rope, cache=cache), out = h + ffn(ffn_norm(h)); TinyLM: "
         "tok_emb, the blocks with the RoPE tables (and a causal mask without caches), norm, head")


# --------------------------------------------------------------------------- weights and the reference

def block_state(d_model: int, n_heads: int, n_kv_heads: int, d_ff: int, *, gen, dtype, prefix: str = "") -> dict:
    kv = n_kv_heads * (d_model // n_heads)
    shapes = {"attn.w_q.weight": (d_model, d_model), "attn.w_k.weight": (kv, d_model),
              "attn.w_v.weight": (kv, d_model), "attn.out_proj.weight": (d_model, d_model),
              "ffn.w_gate.weight": (d_ff, d_model), "ffn.w_up.weight": (d_ff, d_model),
              "ffn.w_down.weight": (d_model, d_ff)}
    state = {prefix + k: randn(*s, gen=gen, dtype=dtype, scale=1 / math.sqrt(s[1])) for k, s in shapes.items()}
    for norm in ("attn_norm", "ffn_norm"):
        state[f"{prefix}{norm}.weight"] = 1.0 + randn(d_model, gen=gen, dtype=dtype, scale=0.4)
    return state


def lm_state(cfg: dict, *, gen, dtype) -> dict:
    d, v = cfg["d_model"], cfg["vocab_size"]
    state = {"tok_emb.weight": randn(v, d, gen=gen, dtype=dtype)}
    for i in range(cfg["n_layers"]):
        state.update(block_state(d, cfg["n_heads"], cfg["n_kv_heads"], cfg["d_ff"], gen=gen, dtype=dtype,
                                 prefix=f"blocks.{i}."))
    state["norm.weight"] = 1.0 + randn(d, gen=gen, dtype=dtype, scale=0.4)
    state["head.weight"] = randn(v, d, gen=gen, dtype=dtype, scale=1 / math.sqrt(d))
    return state


def ref_rope(x: Tensor, cos: Tensor, sin: Tensor, start: int) -> Tensor:
    """Adjacent pairs as complex numbers, turned by cos + i sin of their position."""
    turn = torch.complex(cos.double(), sin.double())[start:start + x.size(-2)]
    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(pairs * turn).reshape(x.shape)


def ref_block(s: dict, x: Tensor, n_heads: int, n_kv_heads: int, rope, mask, prefix: str = "", eps: float = 1e-5
              ) -> Tensor:
    B, T, D = x.shape
    dh = D // n_heads
    w = {k.removeprefix(prefix): v.double() for k, v in s.items() if k.startswith(prefix)}
    n = F.rms_norm(x, (D,), w["attn_norm.weight"], eps=eps)
    q = F.linear(n, w["attn.w_q.weight"]).view(B, T, n_heads, dh).transpose(1, 2)
    k = F.linear(n, w["attn.w_k.weight"]).view(B, T, n_kv_heads, dh).transpose(1, 2)
    v = F.linear(n, w["attn.w_v.weight"]).view(B, T, n_kv_heads, dh).transpose(1, 2)
    if rope is not None:
        q, k = ref_rope(q, *rope, 0), ref_rope(k, *rope, 0)
    k, v = (t.repeat_interleave(n_heads // n_kv_heads, dim=1) for t in (k, v))
    attended = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    h = x + F.linear(attended.transpose(1, 2).reshape(B, T, D), w["attn.out_proj.weight"])
    m = F.rms_norm(h, (D,), w["ffn_norm.weight"], eps=eps)
    return h + F.linear(F.silu(F.linear(m, w["ffn.w_gate.weight"])) * F.linear(m, w["ffn.w_up.weight"]),
                        w["ffn.w_down.weight"])


def ref_lm(s: dict, idx: Tensor, cfg: dict) -> Tensor:
    """TinyLM's logits (B, T, V) in float64, causal over positions 0 .. T-1."""
    T = idx.size(1)
    rope = mistakes.lm_rope_tables(cfg["max_len"], cfg["d_model"] // cfg["n_heads"], cfg["rope_base"])
    x = F.embedding(idx, s["tok_emb.weight"].double())
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for i in range(cfg["n_layers"]):
        x = ref_block(s, x, cfg["n_heads"], cfg["n_kv_heads"], rope, mask, prefix=f"blocks.{i}.")
    x = F.rms_norm(x, (cfg["d_model"],), s["norm.weight"].double(), eps=1e-5)
    return F.linear(x, s["head.weight"].double())


# --------------------------------------------------------------------------- the student's models

def config(vocab_size, max_len, d_model, n_heads, n_kv_heads, n_layers, d_ff, rope_base=10000.0) -> dict:
    return dict(vocab_size=vocab_size, max_len=max_len, d_model=d_model, n_heads=n_heads, n_kv_heads=n_kv_heads,
                n_layers=n_layers, d_ff=d_ff, rope_base=rope_base)


def lm_call(cfg: dict) -> str:
    args = ", ".join(str(cfg[k]) for k in ("vocab_size", "max_len", "d_model", "n_heads", "n_kv_heads", "n_layers",
                                            "d_ff"))
    return f"TinyLM({args}" + (f", rope_base={cfg['rope_base']:g})" if cfg["rope_base"] != 10000.0 else ")")


def new_lm(impl, cfg: dict, state: dict) -> RemoteObject:
    m = LM(impl, cfg["vocab_size"], cfg["max_len"], cfg["d_model"], cfg["n_heads"], cfg["n_kv_heads"],
                 cfg["n_layers"], cfg["d_ff"], rope_base=cfg["rope_base"])
    if state["tok_emb.weight"].dtype == torch.float64:
        m.to(torch.float64)
    m.load_weights(state)
    return m


def model_kwargs(cfg: dict) -> dict:
    return {k: cfg[k] for k in ("n_heads", "n_kv_heads", "n_layers", "max_len", "rope_base")}


def run(call, what: str, cfg: dict, *args, fills_max_len: bool = False, fresh_caches: list | None = None, **kwargs):
    """A call of the student's model; an error that a known mistake makes gets its diagnosis.

    `fills_max_len`: the call's last position is max_len - 1, which is allowed. `fresh_caches`: the empty caches
    the call gets (RemoteObjects), whose count (one per block) taken for the first position would overrun
    max_len: a ValueError raised before any block filled one names START_FROM_CACHE_COUNT.
    """
    try:
        return call(*args, **kwargs)
    except StudentError as exc:
        if type(exc) is not StudentError:
            raise
        problem = Phrase("your code raised {exc_type_name}: {exc_message}", exc_type_name=exc.type_name,
                         exc_message=exc.message) + where(exc)
        width = mistakes.rope_width(exc.message)
        if width is not None:  # the tables' width against what each divisor mistake makes it
            fail(what, problem, hint=WHERE, actual=width, expected=cfg["d_model"] // cfg["n_heads"],
                 mistakes=mistakes.rope_width_mistakes(cfg["d_model"], cfg["n_heads"], cfg["n_kv_heads"]))
        counted = (fresh_caches is not None and "ValueError" in exc.kinds
                   and len(fresh_caches) + args[0].shape[-1] > cfg["max_len"] and still_empty(fresh_caches))
        sentence = (mistakes.mask_with_cache_mistake(exc.message)
                    or (mistakes.START_FROM_CACHE_COUNT.text() if counted else None)
                    or (mistakes.max_len_off_by_one_mistake(cfg["max_len"]) if fills_max_len
                        and "ValueError" in exc.kinds else None))
        if sentence is None:
            raise
        fail(what, problem, hint=WHERE, mistakes={sentence: True}, actual=True)


def still_empty(caches: list) -> bool:
    """Whether every cache (a RemoteObject) holds no position yet."""
    try:
        return all(len(cache) == 0 for cache in caches)
    except (StudentError, TypeError):
        return False


def tokens(batch: int, length: int, vocab_size: int, gen) -> Tensor:
    return torch.randint(0, vocab_size, (batch, length), generator=gen)


def remote_caches(impl, caches) -> list:
    return [RemoteObject(impl, c) if isinstance(c, Ref) else c for c in caches]


# --------------------------------------------------------------------------- layout

LAYOUT_CFG = config(11, 16, 12, 3, 1, 2, 20)


def expected_shapes(cfg: dict) -> dict[str, tuple[int, ...]]:
    d, v, ff = cfg["d_model"], cfg["vocab_size"], cfg["d_ff"]
    kv = cfg["n_kv_heads"] * (d // cfg["n_heads"])
    shapes = {"tok_emb.weight": (v, d), "norm.weight": (d,), "head.weight": (v, d)}
    for i in range(cfg["n_layers"]):
        p = f"blocks.{i}."
        shapes.update({p + "attn_norm.weight": (d,), p + "attn.w_q.weight": (d, d), p + "attn.w_k.weight": (kv, d),
                       p + "attn.w_v.weight": (kv, d), p + "attn.out_proj.weight": (d, d), p + "ffn_norm.weight": (d,),
                       p + "ffn.w_gate.weight": (ff, d), p + "ffn.w_up.weight": (ff, d),
                       p + "ffn.w_down.weight": (d, ff)})
    return shapes


def test_state_dict_layout(impl):
    cfg = LAYOUT_CFG
    m = LM(impl, *(cfg[k] for k in ("vocab_size", "max_len", "d_model", "n_heads", "n_kv_heads", "n_layers",
                                         "d_ff")))
    got = m.state_dict()
    shapes = expected_shapes(cfg)
    what = f"{lm_call(cfg)}.state_dict()"
    if set(got) != set(shapes):
        fail(what, Phrase("missing keys {sorted_set_shapes_set_got}, unexpected keys {sorted_set_got_set_shapes}",
                          sorted_set_shapes_set_got=sorted(set(shapes) - set(got)),
                          sorted_set_got_set_shapes=sorted(set(got) - set(shapes))),
             hint="tok_emb = nn.Embedding(vocab_size, d_model), blocks = nn.ModuleList of DecoderBlock (attn_norm, "
                  "attn, ffn_norm, ffn), norm = RMSNorm(d_model), head = nn.Linear(d_model, vocab_size, bias=False); "
                  "the RoPE tables are buffers with persistent=False",
             mistakes={s: True for s in [mistakes.tiny_lm_key_diagnosis(got, set(shapes), cfg["max_len"])] if s},
             actual=True)
    for key, shape in shapes.items():
        check_tensor(got[key], what=f"{what}['{key}']", shape=shape, dtype=torch.float32,
                     hint="w_k and w_v have n_kv_heads * (d_model // n_heads) outputs; the head maps d_model to "
                          "vocab_size (nn.Linear stores (out_features, in_features))",
                     mistakes=mistakes.kv_heads_mistakes(key, cfg["d_model"], cfg["n_heads"], cfg["n_kv_heads"]))
    for name in ("vocab_size", "max_len"):
        value = m.attr(name)
        if value != cfg[name]:
            fail(f"{lm_call(cfg)}.{name}", Phrase("expected {cfg_name}, got {value}", cfg_name=repr(cfg[name]),
                                                  value=repr(value)),
                 hint="keep vocab_size and max_len as attributes (generate reads max_len)")


def test_new_caches_gives_one_empty_cache_per_block(impl):
    cfg = LAYOUT_CFG
    m = new_lm(impl, cfg, lm_state(cfg, gen=torch.Generator().manual_seed(0), dtype=torch.float32))
    caches = m.new_caches()
    what = f"{lm_call(cfg)}.new_caches()"
    if not isinstance(caches, list) or len(caches) != cfg["n_layers"]:
        fail(what, Phrase("expected a list of {cfg_n_layers} KVCache (one per block), got "
                          "{type_caches___name__}{f_of_len_caches_if_isinstance_caches_list_tuple_else}",
                          cfg_n_layers=cfg['n_layers'], type_caches___name__=type(caches).__name__,
                          f_of_len_caches_if_isinstance_caches_list_tuple_else=Phrase(" of {len_caches}",
                                                                                      len_caches=len(caches)) if isinstance(caches, (list, tuple)) else ''),
             hint="make a new KVCache for each block, in the blocks' order")
    ids = [c.id if isinstance(c, Ref) else None for c in caches]
    sentence = mistakes.shared_caches_mistake(ids)
    if sentence or None in ids:
        fail(what, "expected a different KVCache object for each block",
             hint="make a new KVCache for each block, in the blocks' order",
             mistakes={sentence: True} if sentence else None, actual=True)
    for i, cache in enumerate(remote_caches(impl, caches)):
        if cache.type_name != "KVCache" or len(cache) != 0:
            fail(f"{what}[{i}]", Phrase("expected an empty KVCache, got a {cache_type_name} of length {len_cache}",
                                        cache_type_name=cache.type_name, len_cache=len(cache)),
                 hint="each block starts from a new, empty KVCache (from kv_cache.py)")


# --------------------------------------------------------------------------- values

# (B, T, D, H, Hkv, d_ff, mask kind, with rope, dtype, eps: None for the default); an eps far from the default
# shows a norm that is not given it
BLOCK_CASES = [
    (2, 6, 16, 4, 2, 24, "causal", True, torch.float64, None),
    (1, 5, 12, 3, 1, 16, "none", True, torch.float32, 0.5),
    (2, 4, 8, 2, 2, 12, "causal", False, torch.float32, None),
    (3, 7, 16, 4, 4, 20, "batch", True, torch.float64, 0.05),
    (2, 5, 16, 8, 2, 16, "2d", True, torch.float32, None),
]


@pytest.mark.parametrize("case", BLOCK_CASES, ids=lambda c: "B{}-T{}-D{}-H{}-kv{}-ff{}-{}-{}-{}{}".format(
    *c[:7], "rope" if c[7] else "norope", str(c[8])[6:], "" if c[9] is None else f"-eps{c[9]:g}"))
def test_decoder_block_matches_reference(impl, gen, case):
    B, T, D, H, Hkv, d_ff, mask_kind, with_rope, dtype, eps = case
    state = block_state(D, H, Hkv, d_ff, gen=gen, dtype=dtype)
    m = BLOCK(impl, D, H, Hkv, d_ff) if eps is None else BLOCK(impl, D, H, Hkv, d_ff, eps=eps)
    if dtype == torch.float64:
        m.to(torch.float64)
    m.load_weights(state)
    x = randn(B, T, D, gen=gen, dtype=dtype)
    mask = self_attention_mask(mask_kind, B, H, T, gen)
    rope = mistakes.lm_rope_tables(T + 3, D // H) if with_rope else None
    if rope is not None and dtype == torch.float64:
        rope = tuple(t.double() for t in rope)
    args = f"{D}, {H}, {Hkv}, {d_ff}" + ("" if eps is None else f", eps={eps:g}")
    what = (Phrase("DecoderBlock({args})(x {tuple_x_shape}, mask={mask_kind}, "
                   "rope={tables_if_with_rope_else_None}, {str_dtype_6}) vs the reference with the same weights",
                   args=args, tuple_x_shape=tuple(x.shape), mask_kind=mask_kind,
                   tables_if_with_rope_else_None='tables' if with_rope else None, str_dtype_6=str(dtype)[6:]))
    got = m(x, mask, rope=rope)
    expected = ref_block(state, x.double(), H, Hkv, rope, mask, eps=eps or 1e-5).to(dtype)
    assert_close(got, expected, what=what, hint=WHERE,
                 mistakes=mistakes.decoder_block_mistakes(state, x, H, Hkv, rope, mask, eps=eps))


def test_decoder_block_leaves_input_alone(impl, gen):
    """Functions never modify their inputs: the residuals are new tensors, not additions into the caller's x."""
    B, T, D, H, Hkv, d_ff = 2, 5, 8, 2, 1, 12
    m = BLOCK(impl, D, H, Hkv, d_ff)
    m.load_weights(block_state(D, H, Hkv, d_ff, gen=gen, dtype=torch.float32))
    x = randn(B, T, D, gen=gen)
    _, (after, _) = m.call_returning_args(x, self_attention_mask("causal", B, H, T, gen))
    assert_close(after, x, what=Phrase("x {tuple_x_shape} after DecoderBlock({D}, {H}, {Hkv}, {d_ff})'s forward",
                                       tuple_x_shape=tuple(x.shape), D=D, H=H, Hkv=Hkv, d_ff=d_ff),
                 hint="forward must not modify the caller's x: add each residual into a new tensor, "
                      "h = x + self.attn(...), not x += ... (an in-place add writes into the tensor the caller "
                      "passed)")


# vocab_size, max_len, d_model, n_heads, n_kv_heads, n_layers, d_ff, rope_base; then B, T, dtype
LM_CASES = [
    (config(11, 16, 16, 4, 2, 2, 24), 2, 9, torch.float32),
    (config(7, 12, 12, 3, 3, 1, 20, rope_base=500.0), 3, 12, torch.float64),  # T == max_len
    (config(13, 20, 16, 4, 1, 3, 16), 2, 7, torch.float64),
    (config(9, 10, 8, 2, 2, 2, 12, rope_base=100.0), 1, 1, torch.float32),
]
LM_IDS = [f"{lm_call(c)}-B{b}-T{t}-{str(d)[6:]}".replace(" ", "") for c, b, t, d in LM_CASES]


@pytest.mark.parametrize("cfg, B, T, dtype", LM_CASES, ids=LM_IDS)
def test_tiny_lm_matches_reference(impl, gen, cfg, B, T, dtype):
    state = lm_state(cfg, gen=gen, dtype=dtype)
    m = new_lm(impl, cfg, state)
    idx = tokens(B, T, cfg["vocab_size"], gen)
    what = Phrase("{lm_call_cfg}(idx {tuple_idx_shape}), {str_dtype_6}, vs the reference with the same weights",
                  lm_call_cfg=lm_call(cfg), tuple_idx_shape=tuple(idx.shape), str_dtype_6=str(dtype)[6:])
    got = run(m, what, cfg, idx, fills_max_len=T == cfg["max_len"])
    assert_close(got, ref_lm(state, idx, cfg).to(dtype), what=what, hint=WHERE,
                 mistakes=mistakes.tiny_lm_mistakes(state, [idx], **model_kwargs(cfg)))


# chunk sizes fed with caches: a prompt, then steps of odd sizes
CACHE_CASES = [
    (config(11, 16, 16, 4, 2, 2, 24), 2, [5, 1, 3, 1, 2], torch.float32),
    (config(7, 12, 12, 3, 1, 3, 20, rope_base=500.0), 1, [4, 1, 1, 3, 1, 2], torch.float64),  # fills max_len
    (config(9, 10, 8, 2, 2, 2, 12), 3, [1, 1, 2, 1], torch.float64),
]


@pytest.mark.parametrize("cfg, B, chunks, dtype", CACHE_CASES,
                         ids=[f"{lm_call(c)}-B{b}-{'+'.join(map(str, ch))}-{str(d)[6:]}".replace(" ", "")
                              for c, b, ch, d in CACHE_CASES])
def test_cached_equals_uncached(impl, gen, cfg, B, chunks, dtype):
    state = lm_state(cfg, gen=gen, dtype=dtype)
    m = new_lm(impl, cfg, state)
    idx = tokens(B, sum(chunks), cfg["vocab_size"], gen)
    expected = ref_lm(state, idx, cfg).to(dtype)
    caches = m.new_caches()
    pieces = list(torch.split(idx, chunks, dim=1))
    for i, piece in enumerate(pieces):
        offset = sum(chunks[:i])
        what = (f"{lm_call(cfg)}(idx[:, {offset}:{offset + chunks[i]}], caches) "
                + (Phrase("with empty caches (the prompt)") if i == 0 else Phrase("after {offset} cached positions",
                                                                          offset=offset)))
        out = run(m, what, cfg, piece, caches=caches, fills_max_len=offset + chunks[i] == cfg["max_len"])
        check_tensor(out, what=what, shape=(B, chunks[i], cfg["vocab_size"]), dtype=dtype,
                     hint="with caches the logits are those of the new positions only")
        all_mistakes = mistakes.tiny_lm_mistakes(state, pieces[:i + 1], cached=True, **model_kwargs(cfg))
        assert_close(out, expected[:, offset:offset + chunks[i]],
                     what=Phrase("{what} vs the reference's logits at those positions", what=what),
                     hint="each block gets its own cache (caches[i]), the new positions start at len(caches[0]); "
                          "with caches the attention masks by itself: pass mask=None",
                     mistakes=mapped(all_mistakes, lambda full, o=offset, n=chunks[i]: full[:, o:o + n]))
    total = sum(chunks)
    for i, cache in enumerate(remote_caches(impl, caches)):
        if len(cache) != total:
            fail(Phrase("len(caches[{i}]) after {len_chunks} calls of {total} positions in all", i=i,
                        len_chunks=len(chunks), total=total),
                 Phrase("expected {total}, got {len_cache}", total=total, len_cache=len(cache)), hint="every block appends its keys and values to its own cache")


# The same model on two prompts of the same length: a forward of each without caches, then both decoded in turns
# with caches of their own from new_caches (as a server decodes two requests). Nothing one call keeps (caches
# handed out again, a position counted on the model) may change another call's answer.
AGAIN_CHUNKS = [3, 1, 2]


def test_two_prompts_decoded_in_turns(impl, gen):
    cfg, batch = config(11, 16, 16, 4, 2, 2, 24), 2
    state = lm_state(cfg, gen=gen, dtype=torch.float32)
    m = new_lm(impl, cfg, state)
    length = sum(AGAIN_CHUNKS)
    prompts = {"idx1": tokens(batch, length, cfg["vocab_size"], gen), "idx2": tokens(batch, length, cfg["vocab_size"], gen)}
    expected = {name: ref_lm(state, idx, cfg).float() for name, idx in prompts.items()}
    for name, idx in prompts.items():
        what = Phrase("the same {lm_call_cfg}({name} {tuple_idx_shape}) without caches", lm_call_cfg=lm_call(cfg),
                      name=name, tuple_idx_shape=tuple(idx.shape))
        assert_close(run(m, what, cfg, idx), expected[name], what=Phrase("{what} vs the reference's logits",
                                                                         what=what), hint=WHERE,
                     mistakes=mistakes.tiny_lm_mistakes(state, [idx], **model_kwargs(cfg)))
    caches = {name: m.new_caches() for name in prompts}
    fed: list[Tensor] = []
    for i, n in enumerate(AGAIN_CHUNKS):
        offset = sum(AGAIN_CHUNKS[:i])
        for name, idx in prompts.items():
            piece = idx[:, offset:offset + n]
            fed.append(piece)
            what = (Phrase("the same {lm_call_cfg}({name}[:, {offset}:{offset_n}], caches) with {name}'s own "
                           "caches from new_caches() after {offset} cached positions, the other prompt decoded in "
                           "turns", lm_call_cfg=lm_call(cfg), name=name, offset=offset, offset_n=offset + n))
            out = run(m, what, cfg, piece, caches=caches[name])
            check_tensor(out, what=what, shape=(batch, n, cfg["vocab_size"]), dtype=torch.float32,
                         hint="with caches the logits are those of the new positions only")
            own = [idx[:, sum(AGAIN_CHUNKS[:j]):sum(AGAIN_CHUNKS[:j + 1])] for j in range(i + 1)]
            assert_close(out, expected[name][:, offset:offset + n],
                         what=Phrase("{what} vs the reference's logits at those positions", what=what),
                         hint="each call of new_caches makes new, empty caches, and one model decodes many prompts: "
                              "keep nothing of one prompt's on the model",
                         mistakes=mistakes.tiny_lm_again_mistakes(state, own, list(fed), **model_kwargs(cfg)))


# --------------------------------------------------------------------------- properties


def test_no_future_token_changes_an_earlier_logit(impl, gen):
    cfg = config(11, 16, 16, 4, 2, 2, 24)
    state = lm_state(cfg, gen=gen, dtype=torch.float64)
    m = new_lm(impl, cfg, state)
    idx = tokens(2, 10, cfg["vocab_size"], gen)
    base = run(m, Phrase('{lm_call_cfg}(idx (2, 10))', lm_call_cfg=lm_call(cfg)), cfg, idx)
    check_tensor(base, what=Phrase("{lm_call_cfg}(idx (2, 10))", lm_call_cfg=lm_call(cfg)), shape=(2, 10, cfg["vocab_size"]), dtype=torch.float64,
                 hint="logits are (B, T, vocab_size)")
    for position in range(1, 10):
        changed = idx.clone()
        changed[:, position:] = (idx[:, position:] + 1 + tokens(2, 10 - position, cfg["vocab_size"] - 1, gen)) \
            % cfg["vocab_size"]
        after = m(changed)
        assert_close(after[:, :position], base[:, :position],
                     what=Phrase("logits[:, :{position}] after changing the tokens from position {position} on",
                                 position=position),
                     hint="without caches TinyLM is causal: give the blocks a causal mask (True on and below the "
                          "diagonal), so position t only sees tokens 0 .. t",
                     mistakes={mistakes.TINY_LM_VARIANTS["no_causal_mask"]: lambda c=changed: mistakes.tiny_lm(
                         state, [c], variant="no_causal_mask", **model_kwargs(cfg))[:, :position]})


def test_rejects_positions_beyond_max_len(impl, gen):
    cfg = config(9, 8, 8, 2, 1, 2, 12)
    m = new_lm(impl, cfg, lm_state(cfg, gen=gen, dtype=torch.float32))
    call = lm_call(cfg)
    expect_value_error(m, tokens(1, 9, 9, gen), what=Phrase('{call}(idx (1, 9)): 9 positions, max_len 8', call=call))
    # fresh caches start at position 0: 7 positions fit (len(caches), the 2 blocks, as a start would not)
    fresh = m.new_caches()
    out = run(m, Phrase('{call}(idx (1, 7), fresh caches from new_caches())', call=call), cfg, tokens(1, 7, 9, gen),
              caches=fresh, fresh_caches=remote_caches(impl, fresh))
    check_tensor(out, what=Phrase("{call}(idx (1, 7), fresh caches)", call=call), shape=(1, 7, 9), hint="logits are (B, T, vocab_size)")
    caches = m.new_caches()
    held = [len(cache) for cache in remote_caches(impl, caches)]
    if any(held):
        fail(Phrase('{call}.new_caches() called a second time, after 7 positions through the first caches', call=call),
             Phrase('expected empty caches, got caches holding {held} positions', held=held),
             hint="each call of new_caches makes new, empty caches",
             mistakes={mistakes.CACHES_MADE_ONCE.text(): True}, actual=True)
    out = m(tokens(1, 6, 9, gen), caches=caches)
    check_tensor(out, what=Phrase("{call}(idx (1, 6), caches)", call=call), shape=(1, 6, 9), hint="logits are (B, T, vocab_size)")
    expect_value_error(m, tokens(1, 3, 9, gen), caches=caches,
                       what=Phrase("{call}(idx (1, 3), caches) after 6 cached positions: positions 6 .. 8, max_len "
                                   "8", call=call))
    out = run(m, Phrase("{call}(idx (1, 2), caches) after 6 cached positions (positions 6, 7: exactly max_len)",
                        call=call), cfg,
              tokens(1, 2, 9, gen), caches=caches, fills_max_len=True)
    check_tensor(out, what=Phrase('{call}(idx (1, 2), caches) after 6 cached positions', call=call), shape=(1, 2, 9),
                 hint="positions up to max_len - 1 are allowed: raise only when start + T > max_len")
    out = run(m, Phrase('{call}(idx (1, 8)) without caches (exactly max_len)', call=call), cfg, tokens(1, 8, 9, gen),
              fills_max_len=True)
    check_tensor(out, what=Phrase('{call}(idx (1, 8))', call=call), shape=(1, 8, 9),
                 hint="a sequence of exactly max_len positions is allowed: raise only when start + T > max_len")


def test_from_scratch(target_folder):
    """No library call that does the exercise (course.yml lists them for tiny_lm)."""
    assert_from_scratch(target_folder, "tiny_lm")


# --------------------------------------------------------------------------- training

# A correct TinyLM reaches a mean loss of about 0.04 over the last LAST steps (measured with the reference
# and with every alternative); a guess scores log(vocab_size) = 2.30. The bound leaves room for rounding.
LAST, LOSS_BOUND, REFERENCE_LOSS = 5, 0.5, 0.04


def test_training_lowers_the_loss_and_continues_the_pattern(impl):
    task = TASK
    m = LM(impl, *task.model_args())
    lr = schedule(task, adapters.lr_at(impl))
    what = Phrase("training {task_describe} for {task_steps} steps", task_describe=task.describe(),
                  task_steps=task.steps)
    try:
        losses = train(m, task, lr)
    except TrainingFailed as exc:
        fail(what, message_of(exc), hint="the model must return (B, T, vocab_size) logits and backpropagate into every "
                                  "parameter")
    final = sum(losses[-LAST:]) / LAST
    if not final < LOSS_BOUND:
        fail(what, Phrase("the loss went from {losses_0} to {final} (mean of the last {LAST} steps); a correct "
                          "TinyLM reaches about {REFERENCE_LOSS} in these steps, and the check asks for less than "
                          "{LOSS_BOUND}", losses_0=format(losses[0], '.3f'), final=format(final, '.3f'), LAST=LAST,
                          REFERENCE_LOSS=REFERENCE_LOSS, LOSS_BOUND=LOSS_BOUND), hint=WHERE)
    prompt = prompts(task, 4)
    length = task.seq_len + task.period
    out = adapters.generate(impl)(m, prompt, length - prompt.size(1))
    want = expected_continuation(task, prompt, length)
    check_tensor(out, what=Phrase("generate(trained model, prompts {tuple_prompt_shape}, {length_prompt_size_1})",
                                  tuple_prompt_shape=tuple(prompt.shape),
                                  length_prompt_size_1=length - prompt.size(1)),
                 shape=want.shape, hint="TinyLM(idx, caches=caches) returns the logits of the new positions")
    wrong = [i for i in range(want.size(0)) if not torch.equal(out[i], want[i])]
    if wrong:
        i = wrong[0]
        fail(what, Phrase("after training (loss {final}) greedy decoding with caches does not continue the motif: "
                          "prompt {prompt_i_tolist} gave {out_i_prompt_size_1_tolist}, expected "
                          "{want_i_prompt_size_1_tolist} ({len_wrong} of {want_size_0} prompts wrong)",
                          final=format(final, '.3f'), prompt_i_tolist=prompt[i].tolist(),
                          out_i_prompt_size_1_tolist=out[i, prompt.size(1):].tolist(),
                          want_i_prompt_size_1_tolist=want[i, prompt.size(1):].tolist(), len_wrong=len(wrong),
                          want_size_0=want.size(0)),
             hint="a model that learns with the whole sequence but decodes wrongly with caches: check that "
                  "positions continue from len(caches[0]) and each block has its own cache; a loss far below "
                  "the reference's can mean the model sees the future (no causal mask)")
