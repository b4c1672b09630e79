"""sampling: `filter_logits`, `sample_next_token`, `generate` in sampling.py.

`filter_logits` is compared with a brute-force filter written here token by token:
top-k by counting, for each entry, the entries strictly greater than it; top-p by
summing, for each token, the probabilities strictly greater than its own. Draws are
judged by their distribution (many draws from one seeded generator against the
filtered softmax, a bound several standard deviations wide) and by their
determinism. Generators and the global random state are those of the process that
runs the submission (the `Randomness` tool). `generate` drives the trusted `TinyLM`,
wrapped in a recorder that logs every forward call (`RecordingLM`), and is compared
with greedy decoding by the full, uncached model.
"""
from __future__ import annotations

import pytest
import torch

from checklib import adapters
from checklib.compare import assert_close, assert_equal, check_tensor, diagnosed, fail, message_of
from checklib.mistakes import sampling as mistakes
from checklib.mistakes.general import judged_whole
from checklib.student import expect_value_error, naming_errors
from checklib.weights import randn
from grader.sandbox.protocol import StudentError
from grader.text import Phrase

NEG_INF = float("-inf")
WHERE = ("divide by temperature; keep the entries at or above each row's top_k-th largest value; on the softmax "
         "of what is left keep each token whose mass of strictly more probable tokens is below top_p; -inf elsewhere")


# --- the brute-force filter ---------------------------------------------------------------------------

def brute_filter(logits: torch.Tensor, temperature: float = 1.0, top_k=None, top_p=None) -> torch.Tensor:
    """The contract's filter, row by row and token by token."""
    x = logits / temperature
    out = x.clone()
    rows, flat = out.reshape(-1, x.shape[-1]), x.reshape(-1, x.shape[-1])
    for r in range(flat.shape[0]):
        row = flat[r].tolist()
        kept = list(range(len(row)))
        if top_k is not None:
            kept = [i for i in kept if sum(1 for v in row if v > row[i]) < top_k]
        if top_p is not None:
            probs = torch.tensor([row[i] for i in kept], dtype=torch.float64).softmax(0).tolist()
            p = dict(zip(kept, probs))
            kept = [i for i in kept if sum(q for q in p.values() if q > p[i]) < top_p]
        for i in range(len(row)):
            if i not in kept:
                rows[r, i] = NEG_INF
    return out


def masses_above(logits: torch.Tensor, temperature: float, top_k) -> list[float]:
    """Every row's, every kept token's mass of strictly more probable tokens (what top_p is compared with)."""
    x = brute_filter(logits, temperature, top_k).double().reshape(-1, logits.shape[-1])
    values = []
    for row in x.softmax(-1):
        values += [float(row[row > q].sum()) for q in row if q > 0]
    return values


def pick_top_p(logits: torch.Tensor, target: float, temperature: float = 1.0, top_k=None) -> float:
    """A top_p near `target` far from every token's mass above (no boundary decided by rounding)."""
    above = masses_above(logits, temperature, top_k)
    grid = sorted((round(target + d / 1000, 3) for d in range(-150, 151)), key=lambda p: abs(p - target))
    margin: dict[float, float] = {}
    for p in (p for p in grid if 0 < p < 1):  # nearest the target first: the first clear one is taken
        margin[p] = min(abs(a - p) for a in above)
        if margin[p] > 0.01:
            best = p
            break
    else:
        best = max(margin, key=margin.get)
    assert margin[best] > 1e-3, "the check's inputs leave no top_p away from a boundary"
    return best


def quantised(*shape: int, gen: torch.Generator, dtype=torch.float32) -> torch.Tensor:
    """Logits on a coarse grid: many exact ties."""
    return (randn(*shape, gen=gen, dtype=torch.float64) * 2).round().div(2).to(dtype)


def kept(x) -> torch.Tensor:
    return x > NEG_INF


def filter_call(impl, logits: torch.Tensor, **kw):
    return adapters.filter_logits(impl)(logits, **kw)


def settings(kw: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in kw.items())


def check_filter(impl, logits: torch.Tensor, **kw) -> None:
    what = Phrase("filter_logits(logits {tuple_logits_shape} {str_logits_dtype_6}, {settings_kw})",
                  tuple_logits_shape=tuple(logits.shape), str_logits_dtype_6=str(logits.dtype)[6:],
                  settings_kw=settings(kw))
    with naming_errors(what, mistakes.KTH_WITHOUT_ITS_DIMENSION, lambda exc: bool(kw.get("top_k")) and
                       mistakes.kth_without_its_dimension(exc.message, tuple(logits.shape))), \
            naming_errors(what, mistakes.TOP_K_ABOVE_VOCAB, lambda exc: mistakes.top_k_above_vocab(
                exc.message, kw.get("top_k"), logits.shape[-1])):
        got = filter_call(impl, logits, **kw)
    want = brute_filter(logits, **kw)
    check_tensor(got, what=what, shape=logits.shape, dtype=logits.dtype,
                 hint="the output has the logits' shape and dtype: -inf where a filter removed an entry")
    models = mistakes.filter_mistakes(logits, got, want, **kw)
    assert_equal(kept(got), kept(want), what=Phrase("which entries {what} keeps (True: kept, False: -inf)",
                                                    what=what), hint=WHERE,
                 mistakes=judged_whole(models, got, kept))
    assert_close(got, want, what=Phrase('{what} vs a brute-force filter', what=what), hint=WHERE, mistakes=models)


# --- filter_logits --------------------------------------------------------------------------------------

@pytest.mark.parametrize("temperature", [0.5, 0.8, 1.7, 3.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_filter_temperature(impl, gen, temperature, dtype):
    check_filter(impl, randn(4, 9, gen=gen, dtype=dtype, scale=2.0), temperature=temperature)


# (logits kind, shape, temperature, top_k): ties at the boundary, top_k of 1, V and above V
TOP_K = [
    ("random", (4, 10), 1.0, 3),
    ("ties", (6, 9), 1.0, 3),
    ("ties", (5, 8), 1.0, 1),
    ("ties", (2, 3, 7), 0.7, 4),
    ("random", (3, 6), 0.9, 6),
    ("random", (3, 6), 1.3, 9),
    ("ties", (12,), 1.0, 5),
]


def logits_of(kind: str, shape, gen, dtype=torch.float32) -> torch.Tensor:
    return quantised(*shape, gen=gen, dtype=dtype) if kind == "ties" else randn(*shape, gen=gen, dtype=dtype, scale=2.0)


@pytest.mark.parametrize("kind, shape, temperature, top_k", TOP_K,
                         ids=[f"{k}-{'x'.join(map(str, s))}-t{t}-k{n}" for k, s, t, n in TOP_K])
def test_filter_top_k(impl, gen, kind, shape, temperature, top_k):
    logits = logits_of(kind, shape, gen)
    check_filter(impl, logits, temperature=temperature, top_k=top_k)


# (logits kind, shape, temperature, target top_p, dtype): ties, a nucleus of one, top_p = 1 (keeps all)
TOP_P = [
    ("random", (4, 10), 1.0, 0.6, torch.float32),
    ("random", (3, 12), 1.0, 0.9, torch.float64),
    ("random", (2, 3, 8), 1.0, 0.75, torch.float32),
    ("ties", (6, 9), 1.0, 0.5, torch.float32),
    ("ties", (4, 8), 1.0, 0.8, torch.float64),
    ("random", (4, 10), 1.0, 0.02, torch.float32),
    ("random", (3, 7), 0.8, 1.0, torch.float32),
    ("random", (11,), 1.0, 0.7, torch.float32),
]


@pytest.mark.parametrize("kind, shape, temperature, target, dtype", TOP_P,
                         ids=[f"{k}-{'x'.join(map(str, s))}-t{t}-p{p}-{str(d)[6:]}" for k, s, t, p, d in TOP_P])
def test_filter_top_p(impl, gen, kind, shape, temperature, target, dtype):
    logits = logits_of(kind, shape, gen, dtype).clamp(-4, 4)  # every probability well above float32's rounding
    top_p = 1.0 if target == 1.0 else pick_top_p(logits, target, temperature)
    check_filter(impl, logits, temperature=temperature, top_p=top_p)


# (logits kind, shape, temperature, top_k, target top_p)
COMBINED = [
    ("random", (4, 12), 0.7, 6, 0.7),
    ("ties", (6, 10), 1.4, 5, 0.6),
    ("random", (2, 2, 9), 1.2, 4, 0.85),
    ("ties", (3, 8), 0.9, 20, 0.5),
]


@pytest.mark.parametrize("kind, shape, temperature, top_k, target", COMBINED,
                         ids=[f"{k}-{'x'.join(map(str, s))}-t{t}-k{n}-p{p}" for k, s, t, n, p in COMBINED])
def test_filter_combined(impl, gen, kind, shape, temperature, top_k, target):
    """Temperature, then top-k, then top-p on the softmax of what top-k left."""
    logits = logits_of(kind, shape, gen)
    top_p = pick_top_p(logits, target, temperature, top_k)
    check_filter(impl, logits, temperature=temperature, top_k=top_k, top_p=top_p)


def test_filter_does_not_modify_input(impl, gen):
    logits = randn(3, 8, gen=gen, scale=2.0)
    _, (after,) = adapters.filter_logits(impl).call_returning_args(logits, temperature=0.5, top_k=3,
                                                                         top_p=0.8)
    assert_equal(after, logits, what="the caller's logits after filter_logits(logits, temperature=0.5, ...)",
                 hint="divide into a new tensor (logits / temperature) and fill with masked_fill, not masked_fill_",
                 mistakes=mistakes.divided_in_place_mistakes(logits, 0.5))


@pytest.mark.parametrize("kw", [dict(temperature=0.0), dict(temperature=-1.0), dict(top_k=0), dict(top_k=-2),
                                dict(top_p=0.0), dict(top_p=1.5), dict(top_p=-0.1)],
                         ids=["temperature0", "temperature-1", "top_k0", "top_k-2", "top_p0", "top_p1.5", "top_p-0.1"])
def test_filter_rejects_bad_arguments(impl, gen, kw):
    message = expect_value_error(adapters.filter_logits(impl), randn(2, 5, gen=gen), **kw,
                                 what=f"filter_logits(logits, {settings(kw)})")
    assert message, "the ValueError should say which argument is wrong"


# --- sample_next_token ----------------------------------------------------------------------------------

def draw(impl, logits: torch.Tensor, *, what: str, **kw):
    """sample_next_token(logits, **kw); torch.multinomial's complaint gets the diagnosis of what fed it."""
    try:
        return adapters.sample_next_token(impl)(logits, **kw)
    except StudentError as exc:
        if type(exc) is not StudentError:
            raise
        try:
            rows = filter_call(impl, logits, **{k: v for k, v in kw.items() if k != "generator"})
        except StudentError:
            rows = None
        diagnosis = mistakes.draw_error_diagnosis(exc.message, rows)
        if diagnosis is None:
            raise
        raise diagnosed(Phrase("{what}: {problem}", what=what, problem=exc.describe()), diagnosis) from None


def first_argmax(logits: torch.Tensor) -> torch.Tensor:
    return torch.tensor([row.tolist().index(max(row.tolist())) for row in logits], dtype=torch.int64)


@pytest.mark.parametrize("kind, kw, rows", [("random", {}, 7), ("ties", {}, 7), ("ties", dict(top_k=2, top_p=0.5), 7),
                                            ("random", dict(top_k=1), 7), ("random", {}, 1)],
                         ids=["random", "ties", "ties-with-filters", "top_k1", "batch-of-one"])
def test_greedy_is_first_argmax(impl, gen, kind, kw, rows):
    logits = logits_of(kind, (rows, 9), gen)
    logits[0, :3] = logits[0].max() + 1  # a tie at the top of row 0
    if rows == 1:  # a lone row whose largest logit is not at index 0 (zeros are no answer)
        logits[0, 5] = logits[0].max() + 1
    what = Phrase("sample_next_token(logits ({rows}, 9), temperature=0{if_kw_else}{settings_kw})", rows=rows,
                  if_kw_else=', ' if kw else '', settings_kw=settings(kw))
    with naming_errors(what, mistakes.GREEDY_FILTERS, lambda exc: "ValueError" in exc.kinds):
        got = adapters.sample_next_token(impl)(logits, temperature=0.0, **kw)
    want = first_argmax(logits)
    hint = "temperature 0 is greedy: each row's index of its largest logit, the first one on a tie (argmax(dim=-1))"
    models = mistakes.greedy_mistakes(logits, got)
    check_tensor(got, what=what, shape=(rows,), dtype=torch.int64, hint=hint, mistakes=models)
    assert_equal(got, want, what=what, hint=hint, mistakes=models)


N_DRAWS = 6000
ATOL = 0.035  # 5.4 standard deviations of a frequency at p = 1/2 with 6000 draws (rows may be drawn one by one)

# (logits kind, temperature, top_k, target top_p)
DISTRIBUTIONS = [
    ("random", 1.0, None, None),
    ("random", 0.6, None, None),
    ("random", 1.5, 5, None),
    ("random", 0.9, None, 0.8),
    ("ties", 0.8, 4, 0.9),
    ("random", 1.2, 6, 0.7),
]


@pytest.mark.parametrize("kind, temperature, top_k, target", DISTRIBUTIONS,
                         ids=[f"{k}-t{t}-k{n}-p{p}" for k, t, n, p in DISTRIBUTIONS])
def test_draws_match_filtered_softmax(impl, gen, kind, temperature, top_k, target):
    vocab = 8
    row = logits_of(kind, (1, vocab), gen).clamp(-3, 3)
    top_p = None if target is None else pick_top_p(row, target, temperature, top_k)
    kw = dict(temperature=temperature, top_k=top_k, top_p=top_p)
    what = Phrase("{N_DRAWS} draws of sample_next_token(one logits row repeated, {settings_kw})", N_DRAWS=N_DRAWS,
                  settings_kw=settings(kw))
    generator = impl.new_trusted("Randomness").generator(int(torch.randint(2**31, (1,), generator=gen)))
    draws = draw(impl, row.repeat(N_DRAWS, 1), **kw, generator=generator, what=what)
    check_tensor(draws, what=what, shape=(N_DRAWS,), dtype=torch.int64,
                 hint="one int64 token index per row, (B,)", mistakes=mistakes.draw_shape_mistakes(N_DRAWS, vocab))
    if not bool(((draws >= 0) & (draws < vocab)).all()):
        fail(what, Phrase("drew indices outside 0 .. {vocab_1}", vocab_1=vocab - 1), hint="draw indices into the vocabulary (the last dim)")
    allowed = kept(brute_filter(row, **kw))[0]
    removed = sorted(set(draws[~allowed[draws]].tolist()))
    if removed:
        fail(what, Phrase('drew token(s) {removed}, which the filters remove', removed=removed),
             hint="draw from softmax(filter_logits(logits, ...)): a removed token has probability exactly 0")
    want = brute_filter(row.double(), **kw).softmax(-1)[0]
    freq = torch.bincount(draws, minlength=vocab).double() / N_DRAWS
    assert_close(freq, want, what=Phrase('the frequencies of the tokens in {what} vs the filtered softmax', what=what),
                 rtol=0.0, atol=ATOL, hint="draw each row's token with probabilities softmax(filter_logits(...))",
                 mistakes=mistakes.distribution_mistakes(row[0], temperature, top_k, top_p))


def test_equal_generator_states_give_equal_draws(impl, gen):
    logits = randn(500, 6, gen=gen)
    sample = adapters.sample_next_token(impl)
    randomness = impl.new_trusted("Randomness")
    seed = int(torch.randint(2**31, (1,), generator=gen))
    what = "sample_next_token(logits (500, 6), temperature=0.9, top_k=5, generator=...)"
    first = sample(logits, temperature=0.9, top_k=5, generator=randomness.generator(seed))
    check_tensor(first, what=what, shape=(500,), dtype=torch.int64, hint="one int64 token index per row, (B,)",
                 mistakes=mistakes.draw_shape_mistakes(500, 6))
    single = sample(logits[:1], temperature=0.9, top_k=5, generator=randomness.generator(seed))
    check_tensor(single, what="sample_next_token(logits (1, 6), temperature=0.9, top_k=5, generator=...)", shape=(1,),
                 dtype=torch.int64, hint="a batch of one is one row: (1,), not a 0-dim tensor",
                 mistakes=mistakes.draw_shape_mistakes(1, 6))
    again = sample(logits, temperature=0.9, top_k=5, generator=randomness.generator(seed))
    if not torch.equal(again, first):
        fail(Phrase('{what} with two generators seeded {seed}', what=what, seed=seed), "the draws differ",
             hint="take all the randomness from `generator` (torch.multinomial(..., generator=generator))",
             actual=True, mistakes={mistakes.GLOBAL_RANDOMNESS: True})
    other = sample(logits, temperature=0.9, top_k=5, generator=randomness.generator(seed + 1))
    if torch.equal(other, first):
        fail(Phrase("{what} with generators seeded {seed} and {seed_1}", what=what, seed=seed, seed_1=seed + 1), "the 500 draws are the same",
             hint="draw with the generator you are given", actual=True, mistakes={mistakes.GENERATOR_IGNORED: True})
    shared = randomness.generator(seed)
    one, two = (sample(logits, temperature=0.9, top_k=5, generator=shared) for _ in range(2))
    if torch.equal(one, two):
        fail(Phrase('{what}, called twice with the same generator', what=what), "both calls drew the same tokens",
             hint="draw from the generator as it is: do not seed it again (the second call goes on where the first "
                  "stopped)")


@pytest.mark.parametrize("temperature", [1.0, 0.0])
def test_global_random_state_untouched(impl, gen, temperature):
    logits = randn(64, 7, gen=gen)
    randomness = impl.new_trusted("Randomness")
    generator = randomness.generator(int(torch.randint(2**31, (1,), generator=gen)))
    before = randomness.global_state()
    draws = adapters.sample_next_token(impl)(logits, temperature=temperature, top_p=0.9, generator=generator)
    after = randomness.global_state()
    check_tensor(draws, what=Phrase("sample_next_token(logits (64, 7), temperature={temperature}, ...)",
                                    temperature=temperature), shape=(64,),
                 dtype=torch.int64, hint="one int64 token index per row, (B,)")
    if not torch.equal(before, after):
        fail(Phrase("torch's global random state after sample_next_token(..., temperature={temperature}, "
                    "generator=g)", temperature=temperature),
             "it changed", hint="every random number comes from `generator`; never call torch.manual_seed",
             actual=True, mistakes={mistakes.GLOBAL_RANDOMNESS: True})


# --- generate -----------------------------------------------------------------------------------------

VOCAB, MAX_LEN = 11, 16
CONFIG = dict(vocab_size=VOCAB, max_len=MAX_LEN, d_model=16, n_heads=4, n_kv_heads=2, n_layers=2, d_ff=24)


class Model:
    """The trusted TinyLM on the submission's side, with injected weights, and its uncached logits."""

    def __init__(self, impl, gen: torch.Generator) -> None:
        self.impl = impl
        self.lm = adapters.TinyLM(impl, *CONFIG.values())
        self.lm.eval()
        self.lm.load_weights({k: self.weight(k, v.shape, gen) for k, v in self.lm.state_dict().items()})

    @staticmethod
    def weight(name: str, shape, gen: torch.Generator) -> torch.Tensor:
        if name.endswith("norm.weight"):
            return 1.0 + randn(*shape, gen=gen, scale=0.2)
        return randn(*shape, gen=gen, scale=1.0 if "emb" in name else 1.5 / shape[-1] ** 0.5)

    def logits(self, seq: torch.Tensor) -> torch.Tensor:
        return self.lm(seq)

    def greedy(self, idx: torch.Tensor, new: int) -> tuple[torch.Tensor, float]:
        """Greedy decoding without caches, and the smallest gap between a step's two largest logits."""
        seq, gap = idx, float("inf")
        for _ in range(new):
            last = self.logits(seq)[:, -1]
            top = last.topk(2, dim=-1).values
            gap = min(gap, float((top[:, 0] - top[:, 1]).min()))
            seq = torch.cat([seq, last.argmax(-1, keepdim=True)], dim=1)
        return seq, gap

    def recorder(self):
        return self.impl.new_trusted("RecordingLM", self.lm.ref)


def prompt(gen: torch.Generator, batch: int, length: int) -> torch.Tensor:
    return torch.randint(VOCAB, (batch, length), generator=gen)


def generate_call(impl, model, idx: torch.Tensor, new: int, what: str, **kw):
    def raised_at_max_len(exc) -> bool:
        last = exc.where.strip().splitlines()[-1] if exc.where.strip() else ""
        return "ValueError" in exc.kinds and idx.shape[1] + new == MAX_LEN and " in generate: raise" in last

    with naming_errors(what, mistakes.LENGTH_AT_MAX_LEN, raised_at_max_len):
        return adapters.generate(impl)(model, idx, new, **kw)


GENERATE_DEFAULTS = dict(temperature=0.0, top_k=None, top_p=None)  # the contract's
# (batch, prompt length, new tokens): the last one fills max_len exactly
LENGTHS = [(2, 5, 6), (3, 1, 5), (1, 7, MAX_LEN - 7)]


@pytest.mark.parametrize("batch, length, new", LENGTHS, ids=[f"B{b}-T{t}-new{n}" for b, t, n in LENGTHS])
def test_generate_greedy_matches_uncached_decoding(impl, gen, batch, length, new):
    for _ in range(5):  # weights whose greedy choices no rounding can flip
        model = Model(impl, gen)
        idx = prompt(gen, batch, length)
        want, gap = model.greedy(idx, new)
        if gap > 1e-3:
            break
    what = Phrase("generate(TinyLM, idx ({batch}, {length}), {new}) (greedy, max_len {MAX_LEN})", batch=batch,
                  length=length, new=new, MAX_LEN=MAX_LEN)
    got = generate_call(impl, model.lm, idx, new, what)
    hint = ("the prompt, then each token the argmax of the last position's logits, fed back with the caches; "
            "the result is (B, T + max_new_tokens)")
    models = mistakes.generate_mistakes(model.logits, idx, new)
    check_tensor(got, what=what, shape=want.shape, dtype=torch.int64, hint=hint, mistakes=models)
    if not bool((got == want).all()):  # the same call with the contract's defaults spelled out
        try:
            spelled = adapters.generate(impl)(model.lm, idx, new, **GENERATE_DEFAULTS)
        except StudentError:
            spelled = None
        models.update(mistakes.default_mistakes("generate", GENERATE_DEFAULTS, spelled, want, got))
    assert_equal(got, want, what=Phrase("{what} vs greedy decoding by the full model without caches", what=what), hint=hint,
                 mistakes=models)


@pytest.mark.parametrize("batch, length, new", [(2, 4, 5), (1, 6, 1), (3, 1, 4)], ids=["B2-T4-new5", "B1-T6-new1",
                                                                                        "B3-T1-new4"])
def test_generate_feeds_prompt_once_then_one_token(impl, gen, batch, length, new):
    model = Model(impl, gen)
    recorder = model.recorder()
    idx = prompt(gen, batch, length)
    what = Phrase('generate(model, idx ({batch}, {length}), {new})', batch=batch, length=length, new=new)
    hint = ("make the caches once (model.new_caches()), run the prompt through once with them, then feed each new "
            "token alone, (B, 1), with the same caches; the last token need not be fed")
    out, error = None, None
    try:
        out = adapters.generate(impl)(recorder, idx, new)
    except StudentError as exc:
        if type(exc) is not StudentError:
            raise
        error = exc
    calls = recorder.calls()
    if not isinstance(out, torch.Tensor) or out.shape != (batch, length + new):
        # no output to read the calls against: the prompt and the token each later call ended with
        out = torch.cat([idx] + [c["tokens"][:, -1:] for c in calls[1:new + 1]], dim=1)
    pattern = mistakes.call_pattern(calls, out, length)
    want = mistakes.expected_pattern(length, new)
    optional = (length + new - 1, 0, (length + new - 1, length + new))
    if len(pattern) == len(want) + 1 and pattern[-1] == optional:
        pattern = pattern[:-1]
    if pattern != want:
        shown = Phrase.joined("; ", [Phrase("call {i}: held {h}, caches {c}, fed {s}", i=i, h=h, c=c, s=s)
                                     for i, (h, c, s) in enumerate(pattern[:6])])
        fail(Phrase('the model calls of {what}', what=what), Phrase("expected {len_want} calls, the prompt once "
                                                                    "with fresh caches, then one token each with "
                                                                    "the same caches; got {len_pattern}: "
                                                                    "{shown_or_none}", len_want=len(want),
                                                                    len_pattern=len(pattern),
                                                                    shown_or_none=shown or 'none')
             + ("" if error is None else Phrase("; then {what_happened}", what_happened=error.describe())),
             hint=hint + " (held: positions the caches held before the call; caches 0: the first list new_caches "
                         "made; fed: the slice of the output the call fed)",
             actual=pattern, mistakes=mistakes.generate_call_mistakes(length, new, MAX_LEN))
    if error is not None:
        raise error
    # a second generate on the same model: its own, fresh caches
    again = prompt(gen, batch, length)
    out = adapters.generate(impl)(recorder, again, new)
    calls = recorder.calls()[len(calls):]
    pattern = mistakes.call_pattern(calls, out, length)[:len(want)]
    want = mistakes.expected_pattern(length, new, caches=1)
    if pattern != want:
        shown = Phrase.joined("; ", [Phrase("call {i}: held {h}, caches {c}, fed {s}", i=i, h=h, c=c, s=s)
                                     for i, (h, c, s) in enumerate(pattern[:3])])
        fail(Phrase("the model calls of a second {what} on the same model", what=what), Phrase("expected the prompt with fresh caches "
                                                                                               "(the second list new_caches made, 1), "
                                                                                               "held 0; got {shown_or_no_calls}",
                                                                                               shown_or_no_calls=shown or 'no calls'), hint=hint,
             actual=pattern, mistakes=mistakes.reused_caches_mistakes(pattern))


def test_generate_samples_with_sample_next_token(impl, gen):
    """With sampling on, each token is sample_next_token's draw from the last logits, with the same generator."""
    model = Model(impl, gen)
    idx = prompt(gen, 3, 4)
    kw = dict(temperature=0.9, top_k=6, top_p=0.9)
    randomness = impl.new_trusted("Randomness")
    seed = int(torch.randint(2**31, (1,), generator=gen))
    what = Phrase('generate(TinyLM, idx (3, 4), 6, {settings_kw}, generator=g)', settings_kw=settings(kw))
    before = randomness.global_state()
    got = adapters.generate(impl)(model.lm, idx, 6, **kw, generator=randomness.generator(seed))
    after = randomness.global_state()
    check_tensor(got, what=what, shape=(3, 10), dtype=torch.int64, hint="(B, T + max_new_tokens)")
    replay, g = idx, randomness.generator(seed)
    sample = adapters.sample_next_token(impl)
    for _ in range(6):
        replay = torch.cat([replay, sample(model.logits(replay)[:, -1], **kw, generator=g)[:, None]], dim=1)
    assert_equal(got, replay, what=Phrase("{what} vs sample_next_token(model(seq)[:, -1], {settings_kw}, "
                                          "generator=g) step by step", what=what, settings_kw=settings(kw)), hint="choose each token with sample_next_token, passing on temperature, top_k, "
                 "top_p and the generator, from the last position's logits")
    if not torch.equal(before, after):
        fail(Phrase("torch's global random state after {what}", what=what), "it changed",
             hint="every random number comes from `generator`", actual=True,
             mistakes={mistakes.GLOBAL_RANDOMNESS: True})


def test_generate_zero_new_tokens(impl, gen):
    model = Model(impl, gen)
    idx = prompt(gen, 2, 5)
    got = adapters.generate(impl)(model.lm, idx, 0)
    assert_equal(got, idx, what="generate(TinyLM, idx (2, 5), 0)", hint="no new tokens: return the prompt itself")


def test_generate_does_not_modify_prompt(impl, gen):
    model = Model(impl, gen)
    idx = prompt(gen, 2, 5)
    _, (_, after, _) = adapters.generate(impl).call_returning_args(model.lm, idx, 4)
    assert_equal(after, idx, what="the caller's idx after generate(TinyLM, idx (2, 5), 4)",
                 hint="build the output in a new tensor (torch.cat); never write into idx")


@pytest.mark.parametrize("length, new", [(4, -1), (5, MAX_LEN - 4), (MAX_LEN, 3), (MAX_LEN + 1, 0)],
                         ids=["negative", "one_past_max_len", "full_prompt", "prompt_past_max_len"])
def test_generate_rejects_bad_lengths(impl, gen, length, new):
    model = Model(impl, gen)
    idx = prompt(gen, 2, length)
    what = Phrase("generate(TinyLM with max_len {MAX_LEN}, idx (2, {length}), {new})", MAX_LEN=MAX_LEN,
                  length=length, new=new)
    try:
        message = expect_value_error(adapters.generate(impl), model.lm, idx, new, what=what)
    except AssertionError as exc:
        if length + new == MAX_LEN + 1 and "but it returned" in str(exc):
            raise diagnosed(message_of(exc), mistakes.LENGTH_PAST_MAX_LEN) from None
        raise
    assert message, "the ValueError should say which length is wrong"
