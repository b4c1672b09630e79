"""The known mistakes of `sampling` (Temperature, top-k, top-p and generation): its entries, simulators and bundles
(see `checklib/mistakes/__init__.py`)."""
from __future__ import annotations

import math
from typing import Any, Callable

import torch
from torch import Tensor

from ..catalogue import Mistake, Mistakes, bind, mistake, recognised, simulated, variants
from .general import mismatched_sizes, plus, same_output, unambiguous
from .masking import masked_value


# filter_logits' models keep the input's dtype up to the top-k boundary (ties are exact there) and take
# top-p's probabilities in float64.

NEG_INF = float("-inf")


def _sorted_mass(p: Tensor, inclusive: bool) -> Tensor:
    """For each token, the mass sorted before it (ties in index order), with or without its own."""
    ordered, order = torch.sort(p, dim=-1, descending=True, stable=True)
    cum = ordered.cumsum(-1) if inclusive else ordered.cumsum(-1) - ordered
    return torch.empty_like(p).scatter(-1, order, cum)


def filtered(logits: Tensor, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
             variant: str = "", k_offset: int = 0) -> Tensor | None:
    """filter_logits with the mistake `variant` switched on, or top-k keeping top_k + k_offset entries (None
    where that is not a count of entries below the vocabulary's)."""
    if variant == "temperature_times":
        x = logits * temperature
    elif variant in ("no_temperature", "temperature_last"):
        x = logits.clone()
    else:
        x = logits / temperature
    scaled = x
    if k_offset:
        if top_k is None or not 1 <= top_k + k_offset < x.shape[-1] or top_k >= x.shape[-1]:
            return None
        top_k += k_offset
    if top_k is not None and top_k < x.shape[-1]:
        if variant == "topk_exact":
            keep = torch.zeros_like(x, dtype=torch.bool).scatter(-1, x.topk(top_k, dim=-1).indices, True)
            x = x.masked_fill(~keep, NEG_INF)
        else:
            kth = x.topk(top_k, dim=-1).values[..., -1:]
            x = x.masked_fill(x <= kth if variant == "topk_strict" else x < kth, NEG_INF)
    if top_p is not None:
        p = (scaled if variant == "topp_before_topk" else x).double().softmax(-1)
        if variant == "topp_inclusive":
            above = (p.unsqueeze(-2) * (p.unsqueeze(-2) >= p.unsqueeze(-1))).sum(-1)
        elif variant == "topp_sorted_ties":
            above = _sorted_mass(p, inclusive=False)
        elif variant == "topp_unsorted":
            above = p.cumsum(-1) - p
        else:
            above = (p.unsqueeze(-2) * (p.unsqueeze(-2) > p.unsqueeze(-1))).sum(-1)
        x = x.masked_fill(above >= top_p, NEG_INF)
    if variant == "temperature_last":
        x = x / temperature
    return x


FILTER_MISTAKES = variants("sampling", {
    "your filter multiplies the logits by the temperature: divide them by it (a temperature below 1 sharpens "
    "the distribution)": "temperature_times",
    "your filter ignores the temperature: the kept entries are logits / temperature": "no_temperature",
    "you divide by the temperature after top-p: top-p's probabilities are those of logits / temperature, so "
    "divide first": "temperature_last",
    "your top-k keeps only the entries strictly above the top_k-th largest value: keep those at or above it "
    "(fill where logits < kth)": "topk_strict",
    "your top-k keeps exactly top_k entries (the indices torch.topk returns), dropping entries tied with the "
    "top_k-th largest value: keep every entry at or above that value": "topk_exact",
    "your top-p counts each token's own probability in the mass above it (a cumulative sum without the shift), "
    "so it removes the token that crosses top_p: a token stays while the mass strictly more probable than it "
    "is below top_p": "topp_inclusive",
    "your top-p keeps only some of the tokens tied at the boundary (a cumulative sum over the sorted order "
    "tells tied tokens apart): a token's mass counts only the tokens strictly more probable than it, so tied "
    "tokens stay or go together": "topp_sorted_ties",
    "your top-p sums the probabilities in vocabulary order: sort them from most to least probable first "
    "(or sum, for each token, the probabilities greater than its own)": "topp_unsorted",
    "your top-p works on the probabilities before top-k: take the softmax of what top-k left": "topp_before_topk",
})
TOP_K_OFF_BY_ONE = mistake("sampling", "top_k_off_by_one",
                           "your top-k keeps the {kept} largest logits: it keeps the top_k largest (and any tied "
                           "with the top_k-th), logits.topk(top_k).values[..., -1:] being the smallest kept", dict())
FINITE_FILL = mistake("sampling", "finite_fill",
                      "your filter fills the removed entries with {fill:g}: the contract's are -inf, so that their "
                      "softmax weight is exactly 0", lambda want, fill: want.masked_fill(want == NEG_INF, fill))
LOGITS_DIVIDED_IN_PLACE = mistake("sampling", "logits_divided_in_place",
                                  "filter_logits divided the caller's logits in place (logits /= temperature): "
                                  "compute a new tensor", lambda logits, temperature: logits / temperature)
DRAW_MISTAKES = (
    mistake("sampling", "softmax_twice",
            "you take the softmax before filter_logits and again after it: filter the logits, then take the "
            "softmax once",
            lambda row, temperature, top_k, top_p: filtered(row.double().softmax(-1), temperature, top_k,
                                                            top_p).softmax(-1)),
    mistake("sampling", "unfiltered_softmax",
            "you draw from the unfiltered softmax: the probabilities are softmax(filter_logits(logits, ...))",
            lambda row, temperature, top_k, top_p: row.double().softmax(-1)),
    mistake("sampling", "softmax_over_rows",
            "your softmax runs over the rows (dim=0), not over the vocabulary: each row's probabilities are "
            "softmax(filter_logits(logits, ...), dim=-1)",
            lambda row, temperature, top_k, top_p: _uniform_over_kept(filtered(row, temperature, top_k, top_p))),
)


def _uniform_over_kept(kept_row: Tensor) -> Tensor:
    """What draws from one row repeated give with a softmax over the rows: every kept token alike (its column is
    one value repeated); None where a removed token makes NaN of its column."""
    finite = torch.isfinite(kept_row).double()
    return None if not bool(finite.all()) else finite / finite.sum()


def _finite_fill(got: Tensor, want: Tensor) -> float | None:
    """The one finite constant `got` holds wherever `want` is -inf, if it is low or 0 (a fill that is not -inf:
    a large negative constant, or the zero a learner takes for "nothing")."""
    removed = want == NEG_INF
    if not isinstance(got, Tensor) or got.shape != want.shape or not bool(removed.any()):
        return None
    fill = masked_value(got[removed])
    return fill if fill is not None and math.isfinite(fill) and (fill <= -1e4 or fill == 0) else None


EMPTY_ROW = recognised("sampling", "empty_row",
                       "your filter removed every token of a row: the most probable token has no mass above it, so it "
                       "always stays (a token stays while the mass strictly more probable than it is below top_p)")


# A filter done in sorted order (torch.sort's values) and returned so, without putting each entry back at its
# token's index: the sorted values of what the filter keeps, its top-k or top-p worked out either way that sorted
# order suggests (every tie kept, or the boundary's ties cut by position: topk_exact, topp_sorted_ties).
SORTED_ORDER = mistake(
    "sampling", "sorted_order",
    "your filter returns its result in sorted order (the values of torch.sort, most probable first), not in the "
    "vocabulary's: entry j must stay token j's logit; filter in sorted order if you like, then put the entries back "
    "at their indices (torch.empty_like(logits).scatter(-1, sorted_idx, sorted_logits)), or scatter the sorted "
    "mask back and fill the original logits with it",
    lambda logits, got, temperature, top_k, top_p: _in_sorted_order(logits, got, temperature, top_k, top_p))
SORTED_ORDER_VARIANTS = ("", "topk_exact", "topp_sorted_ties")


def _in_sorted_order(logits: Tensor, got: Any, temperature: float, top_k: int | None, top_p: float | None) -> Tensor:
    """The filter's result sorted along the vocabulary, its filters worked out as SORTED_ORDER_VARIANTS do: the one
    that is what came back (`got`), else the contract's filter sorted (which rules the mistake out)."""
    results = [filtered(logits, temperature, top_k, top_p, variant) for variant in SORTED_ORDER_VARIANTS]
    ordered = [r.sort(dim=-1, descending=True).values for r in results if r is not None]
    return next((r for r in ordered if same_output(got, r)), ordered[0])


# A top-p mask worked out in sorted order and applied to the logits as they are: it keeps the first tokens of the
# vocabulary, as many as top-p keeps.
SORTED_MASK_UNSORTED = mistake(
    "sampling", "sorted_mask_unsorted",
    "your top-p mask is worked out in sorted order (the cumsum of the sorted probabilities) but applied to the "
    "logits in the vocabulary's order, so it keeps the first tokens of the vocabulary instead of the most probable: "
    "put the mask back at the tokens' indices (mask.scatter(-1, sorted_idx, sorted_mask)) before masked_fill",
    lambda logits, temperature, top_k, top_p: _sorted_mask_unsorted(logits, temperature, top_k, top_p))


def _sorted_mask_unsorted(logits: Tensor, temperature: float, top_k: int | None, top_p: float | None
                          ) -> Tensor | None:
    before = filtered(logits, temperature, top_k, None)  # what the top-p step is given
    if top_p is None or before is None:
        return None
    probs = before.double().softmax(dim=-1).sort(dim=-1, descending=True).values
    kept = ((probs.cumsum(dim=-1) - probs) < top_p).sum(dim=-1, keepdim=True)  # by position in sorted order
    return before.masked_fill(torch.arange(logits.shape[-1]) >= kept, float("-inf"))


def filter_mistakes(logits: Tensor, got: Any, want: Tensor, temperature: float = 1.0, top_k: int | None = None,
                    top_p: float | None = None) -> Mistakes:
    """For filter_logits(logits, ...): `got` is what came back, `want` the right answer; also the result left in
    sorted order (SORTED_ORDER, fitted to `got` among the ways a sorted filter goes)."""
    family = {TOP_K_OFF_BY_ONE.text(kept=plus("top_k", k)): (lambda k=k: filtered(logits, temperature, top_k, top_p,
                                                                                  k_offset=k)) for k in (-1, 1)}
    family.update(bind([SORTED_ORDER], logits, got, temperature, top_k, top_p))
    family.update(bind([SORTED_MASK_UNSORTED], logits, temperature, top_k, top_p))
    mistakes = unambiguous({**simulated(FILTER_MISTAKES, lambda variant: filtered(logits, temperature, top_k, top_p,
                                                                                variant)), **family})
    fill = _finite_fill(got, want)
    if fill is not None:
        mistakes.update(bind([FINITE_FILL], want, fill, fill=fill))
    return mistakes


def divided_in_place_mistakes(logits: Tensor, temperature: float) -> Mistakes:
    return bind([LOGITS_DIVIDED_IN_PLACE], logits, temperature)


def distribution_mistakes(row: Tensor, temperature: float, top_k: int | None, top_p: float | None) -> Mistakes:
    """For the frequencies of many draws from one logits row (V,): the distributions mistakes draw from.

    All of them, even those that share a distribution here: frequencies are compared loosely, so hiding
    two that coincide could leave a third, merely near, to be named alone (the engine says when several fit):
    a top-k of top_k - 1 draws what a strict top-k draws where no value ties, so both are weighed."""
    def drawn(k: int) -> Tensor | None:
        kept = filtered(row, temperature, top_k, top_p, k_offset=k)
        return None if kept is None else kept.double().softmax(-1)
    return {**simulated(FILTER_MISTAKES,
                        lambda variant: filtered(row, temperature, top_k, top_p, variant).double().softmax(-1)),
            **{TOP_K_OFF_BY_ONE.text(kept=plus("top_k", k)): (lambda k=k: drawn(k)) for k in (-1, 1)},
            **bind(DRAW_MISTAKES, row, temperature, top_k, top_p)}


MULTINOMIAL_OF_LOGITS = recognised("sampling", "multinomial_of_logits",
                                   "you handed the logits to torch.multinomial, which takes probabilities "
                                   "(non-negative weights, no -inf): take the softmax of the filtered logits first")


def draw_error_diagnosis(message: str, filtered_rows: Any) -> Mistake | None:
    """For torch.multinomial's complaint about its input: which mistake fed it, given what the submission's own
    filter_logits returns for the same logits and settings."""
    if "probability tensor contains" not in message or not isinstance(filtered_rows, Tensor):
        return None
    if bool((filtered_rows == NEG_INF).all(-1).any()):
        return EMPTY_ROW
    if filtered_rows.dim() > 1 and bool((filtered_rows == NEG_INF).all(0).any()):
        return None  # a softmax over the rows (dim 0) makes NaN of a token every row removed, as the logits would
    return MULTINOMIAL_OF_LOGITS


KTH_WITHOUT_ITS_DIMENSION = recognised(
    "sampling", "kth_without_its_dimension",
    "your top-k threshold lost its dimension: topk(...).values[..., -1] is (B,), which lines up with the "
    "vocabulary axis when compared with (B, V) logits; keep it, values[..., -1:], (B, 1)")


TOP_K_ABOVE_VOCAB = recognised(
    "sampling", "top_k_above_vocab",
    "your filter calls topk(top_k) with a top_k larger than the vocabulary, which torch refuses: a top_k of V or "
    "more keeps every entry, so filter only when top_k < V (or use min(top_k, V))")


def top_k_above_vocab(message: str, top_k: int | None, vocab: int) -> bool:
    """Whether an error is torch.topk's refusal of a k beyond the vocabulary."""
    return top_k is not None and top_k > vocab and "selected index k out of range" in message


def kth_without_its_dimension(message: str, logits_shape: tuple[int, ...]) -> bool:
    """Whether an error says that a (B,) threshold met (B, V) logits."""
    return len(logits_shape) == 2 and mismatched_sizes(message) == {logits_shape[0], logits_shape[-1]}


GREEDY_FILTERS = recognised("sampling", "greedy_filters",
                            "with temperature 0, sample_next_token called filter_logits, which rejects it: "
                            "temperature 0 is the argmax of the logits, with no filter and no draw")


KEPT_DIMENSION = mistake("sampling", "kept_dimension",
                        "you returned shape (B, 1): torch.multinomial(probs, 1) and argmax(keepdim=True) keep a "
                        "dimension; squeeze it to (B,)", lambda batch, vocab: torch.Size((batch, 1)))


def _first_of_tied(logits: Tensor, got: Any) -> Any:
    """`got` if it is a maximum of each row of `logits` (not necessarily the first), else None."""
    batch, vocab = logits.shape
    if not isinstance(got, Tensor) or got.shape != (batch,) or got.dtype != torch.int64:
        return None
    if not bool(((got >= 0) & (got < vocab)).all()):
        return None
    is_max = logits == logits.amax(-1, keepdim=True)
    return got if bool(is_max.gather(1, got[:, None]).all()) else None


GREEDY_MISTAKES = (
    mistake("sampling", "argmax_over_batch",
            "you took the argmax over dim 0 (the batch): the vocabulary is the last dimension",
            lambda logits, got: torch.Size((logits.shape[1],)) if logits.shape[1] != logits.shape[0] else None),
    mistake("sampling", "last_of_tied", "your greedy pick takes the last of tied maxima: argmax's is the first",
            lambda logits, got: logits.shape[1] - 1 - logits.flip(-1).argmax(-1)),
    mistake("sampling", "argmax_flat",
            "your greedy pick is argmax() without a dim, one index into the whole flattened batch: take each "
            "row's, logits.argmax(dim=-1), (B,)",
            lambda logits, got: torch.Size(())),
    mistake("sampling", "some_maximum",
            "your greedy pick is a maximum, but not always the first of tied maxima (a draw at a tiny "
            "temperature?): temperature 0 is the argmax, which takes the first", _first_of_tied),
)
DREW_OVER_BATCH = mistake("sampling", "drew_over_batch",
                          "you drew along dim 0 (the batch): the vocabulary is the last dimension",
                          lambda batch, vocab: torch.Size((vocab,)) if vocab != batch else None)


def greedy_mistakes(logits: Tensor, got: Any) -> Mistakes:
    """For sample_next_token(logits (B, V), temperature=0)."""
    first, *rest = GREEDY_MISTAKES
    return {**bind([first], logits, got), **bind([KEPT_DIMENSION], *logits.shape), **bind(rest, logits, got)}


def draw_shape_mistakes(batch: int, vocab: int) -> Mistakes:
    return bind([KEPT_DIMENSION, DREW_OVER_BATCH], batch, vocab)


GLOBAL_RANDOMNESS = recognised("sampling", "global_randomness",
                               "your draws use torch's global random state (torch.multinomial, torch.rand or "
                               "torch.manual_seed without generator=): take every random number from `generator`")
GENERATOR_IGNORED = recognised("sampling", "generator_ignored",
                               "your draws do not depend on `generator`: two generators seeded differently gave the "
                               "same tokens (a generator of your own, seeded the same at every call?)")


# generate: each forward call as (positions the caches held before it, which cache list (0: the first that
# new_caches made during generate), the slice [start, stop) of the output that it fed)

def fed_slice(tokens: Tensor, out: Tensor, held: int | None, call: int, prompt: int) -> tuple[int, int] | None:
    length = tokens.shape[-1]
    starts = [held if held is not None else 0, 0, prompt + call - 1] + list(range(out.shape[-1] - length + 1))
    for start in starts:
        if 0 <= start and start + length <= out.shape[-1] and tokens.shape == out[:, start:start + length].shape \
                and bool((tokens == out[:, start:start + length]).all()):
            return start, start + length
    return None


def call_pattern(calls: list[dict], out: Tensor, prompt: int) -> list[tuple]:
    return [(c["held"], c["caches"], fed_slice(c["tokens"], out, c["held"], i, prompt)) for i, c in enumerate(calls)]


def expected_pattern(prompt: int, new: int, caches: int = 0) -> list[tuple]:
    """What generate's calls look like, without the optional call that feeds the last token; `caches` is the
    index of the cache list this generate made (one per call of generate)."""
    return [(0, caches, (0, prompt))] + [(prompt + i - 1, caches, (prompt + i - 1, prompt + i))
                                         for i in range(1, new)]


OLD_CACHES_REUSED = mistake("sampling", "old_caches_reused",
                            "your second generate reused the caches of the first one, so the new prompt came after the "
                            "old sequence: make fresh caches (model.new_caches()) at every call of generate",
                            lambda pattern: pattern if pattern and pattern[0][1] == 0 and pattern[0][0] else None)
PROMPT_WITHOUT_CACHES = mistake("sampling", "prompt_without_caches",
                                "you ran the prompt without caches: make them once with model.new_caches() and pass "
                                "caches=caches on every call", lambda prompt, new, max_len: [(None, None, (0, prompt))])


def _refed(prompt: int, new: int, max_len: int) -> list[tuple]:
    refed, held = [], 0
    for i in range(new):
        refed.append((held, 0, (0, prompt + i)))
        held += prompt + i
        if held > max_len:
            break
    return refed


GENERATE_CALL_MISTAKES = (
    mistake("sampling", "no_caches",
            "your generate runs the whole sequence through the model at every step, without caches: make the caches "
            "once (model.new_caches()), run the prompt through once, then feed only the newest token with "
            "caches=caches", lambda prompt, new, max_len: [(None, None, (0, prompt + i)) for i in range(new)]),
    mistake("sampling", "sequence_refed",
            "you feed the whole sequence again at every step although the caches already hold it: the model then sees "
            "those tokens a second time, at new positions; after the prompt, feed only the newest token, (B, 1)",
            _refed),
    mistake("sampling", "fresh_caches_every_step",
            "you make fresh caches at every step (and feed the whole sequence into them): make them once, before the "
            "prompt, and keep them for the whole loop",
            lambda prompt, new, max_len: [(0, i, (0, prompt + i)) for i in range(new)]),
    mistake("sampling", "newest_token_without_caches",
            "you feed the newest token alone but without the caches, so the model sees a one-token sequence and "
            "forgets the prompt: pass caches=caches (made once by model.new_caches()) on every call",
            lambda prompt, new, max_len: [(None, None, (0, prompt))]
            + [(None, None, (prompt + i - 1, prompt + i)) for i in range(1, new)]),
    mistake("sampling", "fresh_caches_newest_token",
            "you make fresh caches at every step (model.new_caches() inside the loop), so each new token meets empty "
            "caches and sees no context: make them once, before the prompt, and pass the same list on every call",
            lambda prompt, new, max_len: [(0, 0, (0, prompt))]
            + [(0, i, (prompt + i - 1, prompt + i)) for i in range(1, new)]),
)


def reused_caches_mistakes(pattern: list[tuple]) -> Mistakes:
    """For the calls of a second generate on the same model: the first call found the old caches."""
    return bind([OLD_CACHES_REUSED], pattern)


def generate_call_mistakes(prompt: int, new: int, max_len: int) -> Mistakes:
    if new < 2:  # one call: only whether it had the caches shows
        return bind([PROMPT_WITHOUT_CACHES], prompt, new, max_len)
    return bind(GENERATE_CALL_MISTAKES, prompt, new, max_len)


def decoded(logits_of: Callable[[Tensor], Tensor], idx: Tensor, new: int, first: int = -1) -> Tensor:
    """Greedy decoding by the full, uncached model (`logits_of(seq) -> (B, L, V)`), the first token chosen from
    position `first` of the prompt's logits (later calls feed one token, whose only position is the last)."""
    seq = idx
    for step in range(new):
        logits = logits_of(seq)[:, first if step == 0 else -1]
        seq = torch.cat([seq, logits.argmax(-1, keepdim=True)], dim=1)
    return seq


GENERATE_MISTAKES = (
    mistake("sampling", "first_position_logits",
            "you choose each token from the logits of the first position ([:, 0]): the next token follows the last "
            "one, [:, -1]",
            lambda logits_of, idx, new: decoded(logits_of, idx, new, first=0) if idx.shape[1] > 1 else None),
    mistake("sampling", "new_tokens_only",
            "you returned only the new tokens: generate returns the prompt followed by them, (B, T + max_new_tokens)",
            lambda logits_of, idx, new: torch.Size((idx.shape[0], new)) if idx.shape[1] else None),
    mistake("sampling", "new_tokens_prepended",
            "you put each new token in front of the sequence (torch.cat([step, out])), so the result holds the new "
            "tokens last to first, then the prompt: append each one, torch.cat([out, step], dim=1)",
            lambda logits_of, idx, new: _prepended(decoded(logits_of, idx, new), idx.shape[1]) if new > 1 else None),
)


def _prepended(seq: Tensor, prompt: int) -> Tensor:
    """`seq` as a generate that puts each new token in front of what it has: the new tokens reversed, the prompt."""
    return torch.cat([seq[:, prompt:].flip(1), seq[:, :prompt]], dim=1)


def generate_mistakes(logits_of: Callable[[Tensor], Tensor], idx: Tensor, new: int) -> Mistakes:
    return bind(GENERATE_MISTAKES, logits_of, idx, new)


LENGTH_AT_MAX_LEN = recognised("sampling", "length_at_max_len",
                               "your length check rejects T + max_new_tokens == model.max_len, which fits (the last "
                               "token is never fed): raise only when it is greater")
LENGTH_PAST_MAX_LEN = recognised("sampling", "length_past_max_len",
                                 "you accept T + max_new_tokens == model.max_len + 1: the output must fit max_len "
                                 "positions (raise when T + max_new_tokens > model.max_len)")


DEFAULT_DIFFERS = mistake("sampling", "default_differs",
                          "your {function} does not default to the contract's {defaults}: called with them spelled out "
                          "it gives the right result, called without them it does not; give its keyword arguments "
                          "the contract's defaults", dict())


def default_mistakes(function: str, defaults: dict[str, Any], spelled: Any, want: Any, got: Any) -> Mistakes:
    """For a call that relied on `function`'s defaults and gave `got`: a default that differs from the contract's
    explains it where the same call with the contract's `defaults` spelled out gave `spelled`, the right result
    `want`. The model is then the call as made (`got`); elsewhere it is `want`, which rules it out."""
    text = DEFAULT_DIFFERS.text(function=function, defaults=", ".join(f"{k}={v!r}" for k, v in defaults.items()))
    right = isinstance(spelled, Tensor) and isinstance(want, Tensor) and spelled.shape == want.shape and \
        bool((spelled == want).all())
    return {text: got if right else want}
