"""kv_cache: `KVCache` in kv_cache.py, and the cache branch of `MultiHeadAttention.forward` / `TransformerBlock.forward`.

The uncached forward of MultiHeadAttention and the block are graded elsewhere, yet they are the
student's code here too. So cached decoding is compared with the student's own uncached forward,
run without a mask over each prefix x[:, :t+1] and read at its last position: for a causal layer
that is what decoding position t must give, whatever the mask handling of the uncached path. A
stack is built the same way layer by layer: the second block runs over the first block's causal
outputs.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from checklib import adapters
from checklib.compare import assert_close, assert_equal, check_tensor, fail
from checklib.mistakes import kv_cache as mistakes
from checklib.mistakes.qkv_projection import linear
from checklib.student import expect_value_error, naming_errors
from checklib.weights import block_state, linear_state, mha_state, randn
from grader.sandbox.protocol import StudentError
from grader.text import Phrase

# (B, T, D, H): T = 1, H = 1, one head per feature, usual sizes.
SHAPES = [(2, 5, 8, 2), (1, 1, 4, 1), (3, 6, 12, 3), (2, 4, 6, 6)]
CACHES = ["KVCache", "trusted"]  # the student's KVCache, or the grader's (isolates forward)
CACHED_FORWARD = ("with a cache, forward projects only the new positions, appends their keys and values "
                  "(after the head split) with cache.update, and lets the new queries attend to everything "
                  "update returns")


def shape_ids(shape) -> str:
    return "B{}-T{}-D{}-H{}".format(*shape)


def heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, T, D) -> (B, H, T, Dh), head h holding features h*Dh .. (h+1)*Dh - 1."""
    batch, length, d_model = x.shape
    return x.reshape(batch, length, n_heads, d_model // n_heads).transpose(1, 2)


# The grader's own caches work as a KVCache, so they live in a worker of their own (`trusted_impl`), never
# beside the student's KVCache: a case with kind "trusted" or "RecordingKVCache" runs there.
TRUSTED = ("KVCache",)


@pytest.fixture
def impl(request, impl):
    """The student's implementation: in the trusted caches' worker for the cases that use them."""
    kind = request.node.callspec.params.get("kind") if hasattr(request.node, "callspec") else None
    return request.getfixturevalue("trusted_impl") if kind in ("trusted", "RecordingKVCache") else impl


def cached_call(module, x: torch.Tensor, start: int, stop: int, cache, what: str):
    """module(x[:, start:stop], cache=cache) after x[:, :start] was cached; an error that says the mask covers
    the new positions only is named."""
    with naming_errors(what, lambda exc: mistakes.cached_mask_error(exc, stop - start, stop)):
        return module(x[:, start:stop], cache=cache)


def new_cache(impl, kind: str):
    return adapters.KVCache(impl) if kind == "KVCache" else impl.new_trusted("KVCache")


def attention(impl, gen, d_model: int, n_heads: int, dtype=torch.float32, state=None):
    """The student's MultiHeadAttention carrying injected weights, in eval mode."""
    module = adapters.MultiHeadAttention(impl, d_model, n_heads)
    if dtype != torch.float32:
        module.to(dtype)
    state = mha_state(d_model, gen=gen, dtype=dtype) if state is None else state
    module.load_weights(state)
    module.eval()
    return module, state


def block_stack(impl, gen, d_model: int, n_heads: int, d_ff: int, dtype=torch.float32, states=None):
    """Two of the student's TransformerBlocks with injected weights, in eval mode, without dropout.

    The injected weights are appended to `states` when it is a list.
    """
    stack = []
    for _ in range(2):
        block = adapters.TransformerBlock(impl, d_model, n_heads, d_ff, 0.0)
        if dtype != torch.float32:
            block.to(dtype)
        state = block_state(d_model, d_ff, gen=gen, dtype=dtype)
        block.load_weights(state)
        if states is not None:
            states.append(state)
        block.eval()
        stack.append(block)
    return stack


def causal(forward, x: torch.Tensor) -> torch.Tensor:
    """Position t is the student's own uncached, unmasked forward over x[:, :t+1], at its last position."""
    prefixes = forward.map([(x[:, :t + 1],) for t in range(x.shape[1])])
    return torch.stack([out[:, -1] for out in prefixes], dim=1)


# --- the KVCache class ---------------------------------------------------------------


def test_cache_starts_empty(impl):
    cache = adapters.KVCache(impl)
    with naming_errors("len(KVCache())", mistakes.EMPTY_LEN_FAILS):
        got = len(cache)
    if got != 0:
        fail("len(KVCache())", Phrase('expected 0, got {got}', got=repr(got)), hint="a new cache holds no positions")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
# Every case appends twice at least: a first update may return its own k and v, which costs no work.
@pytest.mark.parametrize("chunks", [(3, 1, 2), (1, 1, 1, 1), (4, 2), (2, 0, 3)], ids=lambda c: "-".join(map(str, c)))
def test_cache_update_appends_along_the_sequence(impl, gen, chunks, dtype):
    batch, n_heads, d_head = 2, 3, 4
    cache = adapters.KVCache(impl)
    keys, values = [], []
    for step, length in enumerate(chunks):
        k = randn(batch, n_heads, length, d_head, gen=gen, dtype=dtype)
        v = randn(batch, n_heads, length, d_head, gen=gen, dtype=dtype)
        keys.append(k)
        values.append(v)
        result = cache.update(k, v)
        what = Phrase("cache.update(k, v) call {step_1}, after appending chunks of lengths {list_chunks_step_1}",
                      step_1=step + 1, list_chunks_step_1=list(chunks[:step + 1]))
        assert isinstance(result, (tuple, list)) and len(result) == 2, (
            Phrase("{what}: expected a pair (k_all, v_all), got {type_result___name__}", what=what,
                   type_result___name__=type(result).__name__))
        hint = ("update appends the new keys and values after the cached ones along the sequence "
                "dimension (dim -2 of (B, H, T, Dh)) and returns everything cached so far")
        assert_equal(result[0], torch.cat(keys, dim=-2), what=Phrase('k_all from {what}', what=what), hint=hint,
                     mistakes=mistakes.cache_update_mistakes(keys, values, "k"))
        assert_equal(result[1], torch.cat(values, dim=-2), what=Phrase('v_all from {what}', what=what), hint=hint,
                     mistakes=mistakes.cache_update_mistakes(values, keys, "v"))
        cached = sum(chunks[:step + 1])
        got = len(cache)
        if not got == cached:
            fail(Phrase("len(cache) after appending chunks of lengths {list_chunks_step_1}",
                        list_chunks_step_1=list(chunks[:step + 1])),
                 Phrase('expected {cached}, got {got}', cached=cached, got=repr(got)),
                 hint="len counts the cached positions (the size of dim -2), not the calls, batches or heads",
                 actual=got, expected=cached, mistakes=mistakes.cache_len_mistakes(tuple(k.shape), step + 1, cached, chunks[0]))


# --- decoding through MultiHeadAttention -----------------------------------------------


@pytest.mark.parametrize("kind", CACHES)
@pytest.mark.parametrize("shape", SHAPES, ids=shape_ids)
def test_token_by_token_matches_full_forward(impl, gen, shape, kind):
    batch, length, d_model, n_heads = shape
    module, state = attention(impl, gen, d_model, n_heads)
    x = randn(batch, length, d_model, gen=gen)
    cache = new_cache(impl, kind)
    expected = causal(module, x)
    for t in range(length):
        step = module(x[:, t:t + 1], cache=cache)
        check_tensor(step, what=f"MultiHeadAttention(x[:, {t}:{t + 1}], cache=cache)", shape=(batch, 1, d_model),
                     hint="with a cache, x holds only the new positions and so does the output")
        assert_close(step[:, 0], expected[:, t],
                     what=Phrase("decoding position {t} one token at a time (cache: {kind}), against the last "
                                 "position of your uncached forward over x[:, :{t_1}]", t=t, kind=kind, t_1=t + 1),
                     hint=CACHED_FORWARD, mistakes=mistakes.decoding_mistakes(state, x, t, t + 1, n_heads, t))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kind", CACHES)
@pytest.mark.parametrize("prefill", [3, 1])
def test_prefill_then_steps_match_full_forward(impl, gen, prefill, kind, dtype):
    batch, length, d_model, n_heads = 2, 6, 8, 2
    module, state = attention(impl, gen, d_model, n_heads, dtype)
    x = randn(batch, length, d_model, gen=gen, dtype=dtype)
    cache = new_cache(impl, kind)
    expected = causal(module, x)
    out = module(x[:, :prefill], cache=cache)
    check_tensor(out, what=Phrase("MultiHeadAttention(x[:, :{prefill}], cache=empty cache)", prefill=prefill), shape=(batch, prefill, d_model),
                 dtype=dtype)
    for t in range(prefill):
        assert_close(out[:, t], expected[:, t],
                     what=Phrase("position {t} of a {prefill}-token prefill through an empty cache (cache: "
                                 "{kind}), against the last position of your uncached forward over x[:, :{t_1}]",
                                 t=t, prefill=prefill, kind=kind, t_1=t + 1),
                     hint="the new positions attend causally among themselves: build the mask with "
                          "causal_mask(q_len, k_len), even when the cache was empty",
                     mistakes=mistakes.decoding_mistakes(state, x, 0, prefill, n_heads, t))
    for t in range(prefill, length):
        step = module(x[:, t:t + 1], cache=cache)
        assert_close(step[:, 0], expected[:, t],
                     what=Phrase("decoding position {t} after a {prefill}-token prefill (cache: {kind}), against "
                                 "the last position of your uncached forward over x[:, :{t_1}]", t=t,
                                 prefill=prefill, kind=kind, t_1=t + 1),
                     hint=CACHED_FORWARD, mistakes=mistakes.decoding_mistakes(state, x, t, t + 1, n_heads, t))


# One module decodes two sequences of the same length, one after the other, each with a fresh cache of its own:
# nothing it keeps from the first (the cache it was first handed) may change the second's answers.
AGAIN_CHUNKS = [(0, 2), (2, 3), (3, 4), (4, 5)]


def test_same_module_decodes_two_sequences(impl, gen):
    batch, length, d_model, n_heads = 2, AGAIN_CHUNKS[-1][1], 8, 2
    module, state = attention(impl, gen, d_model, n_heads)
    earlier = None
    for name in ("x1", "x2"):
        x = randn(batch, length, d_model, gen=gen)
        expected = causal(module, x)
        cache = adapters.KVCache(impl)
        for start, stop in AGAIN_CHUNKS:
            what = (Phrase("the same MultiHeadAttention({d_model}, {n_heads})({name}[:, {start}:{stop}], "
                           "cache=cache), a fresh KVCache for {name}, after {start} cached positions",
                           d_model=d_model, n_heads=n_heads, name=name, start=start, stop=stop))
            out = cached_call(module, x, start, stop, cache, what)
            check_tensor(out, what=what, shape=(batch, stop - start, d_model),
                         hint="with a cache, x holds only the new positions and so does the output")
            for t in range(start, stop):
                assert_close(out[:, t - start], expected[:, t],
                             what=Phrase("{what}, position {t} against the last position of your uncached forward "
                                         "over {name}[:, :{t_1}]", what=what, t=t, name=name, t_1=t + 1),
                             hint="one module decodes many sequences, each with its own cache: update the cache "
                                  "passed to each call, and keep nothing from one call to the next",
                             mistakes=mistakes.decoding_again_mistakes(state, x, start, stop, n_heads, t, earlier))
        earlier = x


@pytest.mark.parametrize("kind", CACHES)
def test_two_chunks_after_prefill(impl, gen, kind):
    """A later call may bring several positions too: they see the cache and, causally, each other."""
    batch, d_model, n_heads = 2, 8, 4
    module, state = attention(impl, gen, d_model, n_heads)
    x = randn(batch, 7, d_model, gen=gen)
    cache = new_cache(impl, kind)
    module(x[:, :2], cache=cache)
    out = cached_call(module, x, 2, 5, cache, Phrase("MultiHeadAttention(x[:, 2:5], cache) after a 2-token prefill "
                                                     "(cache: {kind})", kind=kind))
    expected = causal(module, x[:, :5])
    for t in range(2, 5):
        assert_close(out[:, t - 2], expected[:, t],
                     what=Phrase("position {t} from the chunk x[:, 2:5] after a 2-token prefill (cache: {kind})",
                                 t=t, kind=kind),
                     hint="the new queries attend to every cached position and to the new positions up to "
                          "their own: causal_mask(q_len, k_len) with k_len = cached + new",
                     mistakes=mistakes.decoding_mistakes(state, x, 2, 5, n_heads, t))


@pytest.mark.parametrize("kind", CACHES)
@pytest.mark.parametrize("prefill", [1, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_block_stack_decoding_matches_full_forward(impl, gen, dtype, prefill, kind):
    batch, length, d_model, n_heads, d_ff = 2, 5, 8, 2, 16
    states: list = []
    first, second = block_stack(impl, gen, d_model, n_heads, d_ff, dtype, states=states)
    x = randn(batch, length, d_model, gen=gen, dtype=dtype)

    def stack(inputs, caches):
        return second(first(inputs, cache=caches[0]), cache=caches[1])

    caches = (new_cache(impl, kind), new_cache(impl, kind))
    expected = causal(second, causal(first, x))
    chunks = [(0, prefill)] + [(t, t + 1) for t in range(prefill, length)]
    for start, stop in chunks:
        out = stack(x[:, start:stop], caches)
        check_tensor(out, what=Phrase("two TransformerBlocks on x[:, {start}:{stop}], one cache each", start=start,
                                      stop=stop),
                     shape=(batch, stop - start, d_model), dtype=dtype)
        for t in range(start, stop):
            assert_close(out[:, t - start], expected[:, t],
                         what=Phrase("position {t} decoded through two TransformerBlocks with one cache each "
                                     "(chunk x[:, {start}:{stop}], cache: {kind}), against your uncached blocks "
                                     "run causally (each block over every prefix, read at its last position)", t=t,
                                     start=start, stop=stop, kind=kind),
                         hint="TransformerBlock.forward must hand its cache to self.attention; each block "
                              "has a cache of its own",
                         mistakes=mistakes.block_decoding_mistakes(states, x, start, stop, n_heads, t))


def test_cache_length_grows_with_tokens(impl, gen):
    batch, d_model, n_heads = 2, 8, 2
    module, _ = attention(impl, gen, d_model, n_heads)
    x = randn(batch, 8, d_model, gen=gen)
    cache = adapters.KVCache(impl)
    chunks = [(0, 3), (3, 4), (4, 6), (6, 7)]
    lengths = []
    for start, stop in chunks:  # every call's length first: their sequence tells some mistakes apart
        cached_call(module, x, start, stop, cache, f"MultiHeadAttention(x[:, {start}:{stop}], cache=cache)")
        lengths.append(len(cache))
    totals = [stop for _, stop in chunks]
    for (start, stop), got, total in zip(chunks, lengths, totals):
        if not got == total:
            fail(Phrase("len(cache) after MultiHeadAttention(x[:, {start}:{stop}], cache=cache)", start=start,
                        stop=stop), Phrase("expected {total}, got {got}",
                                                                                                                                  total=total,
                                                                                                                                  got=repr(got)),
                 hint="each forward call appends its new positions once; len counts positions, not calls",
                 actual=tuple(lengths), expected=tuple(totals),
                 mistakes=mistakes.cache_len_sequence_mistakes((batch, n_heads, totals[-1], d_model // n_heads), totals))


def test_appends_projected_keys_and_values(trusted_impl, gen):
    """What forward hands to cache.update: the new positions' keys and values, after projection and head split."""
    impl = trusted_impl
    batch, d_model, n_heads = 2, 12, 3
    module, state = attention(impl, gen, d_model, n_heads)
    x = randn(batch, 6, d_model, gen=gen)
    recorder = impl.new_trusted("RecordingKVCache")
    chunks = [(0, 3), (3, 4), (4, 6)]
    for start, stop in chunks:
        module(x[:, start:stop], cache=recorder)
    updates = recorder.updates()
    if len(updates) != len(chunks):
        fail(Phrase('cache.update calls for {len_chunks} forward calls with a cache', len_chunks=len(chunks)),
             Phrase('expected {len_chunks}, got {len_updates}', len_chunks=len(chunks), len_updates=len(updates)),
             hint="each forward call appends its new keys and values with exactly one cache.update(k, v)")
    for (start, stop), (k, v) in zip(chunks, updates):
        # from the weights, not the student's project_qkv (their own in a release, where it may do no work)
        keys, values = (linear(x[:, start:stop], state, f"w_{n}").to(x.dtype) for n in "kv")
        hint = ("the cache holds keys and values after projection and head split, (B, H, T_new, Dh), "
                "and only those of the new positions")
        assert_close(k, heads(keys, n_heads), what=Phrase("k passed to cache.update by forward(x[:, "
                                                          "{start}:{stop}])", start=start, stop=stop), hint=hint,
                     mistakes=mistakes.appended_mistakes(keys, values, n_heads, "k", x[:, start:stop]))
        assert_close(v, heads(values, n_heads), what=Phrase("v passed to cache.update by forward(x[:, "
                                                            "{start}:{stop}])", start=start, stop=stop), hint=hint,
                     mistakes=mistakes.appended_mistakes(keys, values, n_heads, "v", x[:, start:stop]))


@pytest.mark.parametrize("kind", ["RecordingKVCache", "KVCache"])
def test_past_positions_are_not_reprojected(impl, gen, kind):
    """Change w_k and w_v after the prefill: the cached keys and values must stay those of the old weights."""
    batch, d_model, n_heads, prefill = 2, 8, 2, 4
    module, state = attention(impl, gen, d_model, n_heads)
    x = randn(batch, prefill + 1, d_model, gen=gen)
    cache = impl.new_trusted(kind) if kind == "RecordingKVCache" else adapters.KVCache(impl)
    module(x[:, :prefill], cache=cache)
    new_weights = {**linear_state("w_k", d_model, d_model, gen=gen, dtype=torch.float32),
                   **linear_state("w_v", d_model, d_model, gen=gen, dtype=torch.float32)}
    module.load_weights(new_weights)
    out = module(x[:, prefill:], cache=cache)

    def projected(name, weights, inputs):
        return heads(F.linear(inputs, weights[f"{name}.weight"], weights[f"{name}.bias"]), n_heads)

    old_keys, old_values = projected("w_k", state, x[:, :prefill]), projected("w_v", state, x[:, :prefill])
    new_keys, new_values = projected("w_k", new_weights, x[:, prefill:]), projected("w_v", new_weights, x[:, prefill:])
    hint = ("a cached position is projected once, when it is new; later calls project only their own "
            "positions and reuse the cached keys and values")
    if kind == "RecordingKVCache":
        updates = cache.updates()
        if len(updates) != 2:
            fail("cache.update calls for 2 forward calls with a cache", Phrase("expected 2, got {len_updates}",
                                                                               len_updates=len(updates)), hint=hint)
        assert_close(updates[1][0], new_keys, what="k appended by the step after the prefill", hint=hint,
                     mistakes=mistakes.reprojected_mistakes(new_weights, x, n_heads, "w_k"))
        assert_close(updates[1][1], new_values, what="v appended by the step after the prefill", hint=hint,
                     mistakes=mistakes.reprojected_mistakes(new_weights, x, n_heads, "w_v"))
    else:
        empty = torch.zeros(batch, n_heads, 0, d_model // n_heads)
        keys, values = cache.update(empty, empty)
        assert_close(keys, torch.cat([old_keys, new_keys], dim=-2),
                     what="the keys in the cache after the prefill and one step (weights changed in between)", hint=hint,
                     mistakes=mistakes.reprojected_mistakes(new_weights, x, n_heads, "w_k"))
        assert_close(values, torch.cat([old_values, new_values], dim=-2),
                     what="the values in the cache after the prefill and one step (weights changed in between)", hint=hint,
                     mistakes=mistakes.reprojected_mistakes(new_weights, x, n_heads, "w_v"))
    # The same step through a fresh module with the new weights and a cache holding the old keys (the
    # student's own cache where that is what is graded, so the grader's never sits beside it).
    fresh, _ = attention(impl, gen, d_model, n_heads, state={**state, **new_weights})
    reference_cache = new_cache(impl, "KVCache" if kind == "KVCache" else "trusted")
    reference_cache.update(old_keys, old_values)
    assert_close(out, fresh(x[:, prefill:], cache=reference_cache),
                 what="the step after the prefill (w_k, w_v changed in between), against a forward over a cache "
                      "that holds the prefill's keys and values from the old weights",
                 hint=hint)


@pytest.mark.parametrize("kind", CACHES)
def test_mask_with_cache_raises(impl, gen, kind):
    module, _ = attention(impl, gen, 8, 2)
    x = randn(2, 3, 8, gen=gen)
    mask = torch.ones(3, 3, dtype=torch.bool).tril()
    message = expect_value_error(module, x, mask=mask, cache=new_cache(impl, kind),
                                 what="MultiHeadAttention(x, mask=mask, cache=cache)")
    assert message, "the ValueError should say what is wrong (a cache implies the causal mask; pass one or the other)"


def kept_attention(module):
    """The module's last_attention; None where it keeps none (no such attribute, or None)."""
    try:
        return module.attr("last_attention")
    except StudentError as exc:
        if "AttributeError" in exc.kinds:
            return None
        raise


@pytest.mark.parametrize("kind", CACHES)
@pytest.mark.parametrize("prefill", [1, 4])
def test_last_attention_after_cached_step(impl, gen, prefill, kind):
    batch, d_model, n_heads = 2, 8, 2
    module, _ = attention(impl, gen, d_model, n_heads)
    x = randn(batch, prefill + 2, d_model, gen=gen)
    cache = new_cache(impl, kind)
    module(x[:, :prefill], cache=cache)
    for t in range(prefill, prefill + 2):
        module(x[:, t:t + 1], cache=cache)
        got = kept_attention(module)
        # The last row of what the same module keeps for the whole sequence without a cache: whether and how
        # it keeps the weights is multi_head_attention's to judge (a head-averaged layout, or none at all,
        # costs points there, not here).
        module(x[:, :t + 1])
        whole = kept_attention(module)
        if whole is None:
            continue
        kept = isinstance(whole, torch.Tensor) and whole.dim() >= 2 and whole.shape[-2:] == (t + 1, t + 1)
        what = Phrase('last_attention after decoding position {t} with a cache (cache: {kind})', t=t, kind=kind)
        check_tensor(got, what=what, shape=(*whole.shape[:-2], 1, t + 1) if kept else (batch, n_heads, 1, t + 1),
                     hint="one new query attends to every position so far: (B, H, 1, T_cached + 1)")
        if kept:
            assert_close(got, whole[..., -1:, :], what=Phrase("{what} vs the last row of the same module's "
                                                              "last_attention for positions 0 .. {t} without a "
                                                              "cache", what=what, t=t),
                         hint="the new query's weights over every position so far, the cached ones included")
