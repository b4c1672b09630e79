"""The diagnosis engine: a check names a known mistake only when it explains all of the check's failing cases.

Each failing case weighs every mistake its comparison knows (tests/checklib/compare.py's `diagnose`):
matched, or ruled out. The grader (grader/engine/scoring.py) names a mistake that matched somewhere and
was ruled out nowhere; where several are left it says so; a single case never decides alone. These tests
run the comparisons and the scoring directly, and the masking checks on a stand-in for student code in this
process (the catalogue's own code), so that nothing here grades a whole submission.
"""
from __future__ import annotations

import ast
import importlib.util
import itertools
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

from grader.course import load_course
from grader.engine.cache import ResultCache
from grader.engine.scoring import named_mistakes, score_component
from grader.results import FAILED, PASSED, CaseResult, CheckFailure
from selftests.bugs import ROOT, all_bugs, materialize

sys.path.insert(0, str(ROOT / "tests"))  # the check files import `checklib` as the checks' conftest arranges

from checklib.catalogue import CATALOGUE, GENERAL, Mistake, mistake, named  # noqa: E402
from checklib.compare import assert_equal, check_tensor, diagnose  # noqa: E402
from checklib.mistakes import general, masking, multi_head_attention  # noqa: E402

INVERTED, DIAGONAL, KEPT = ({"id": f"masking:{name}", "fields": {}}
                             for name in ("inverted_causal", "diagonal_excluded", "masked_where_allowed"))
# three mistakes of no check's, in the catalogue while a test runs (`three_mistakes`)
A, B, C = (Mistake("masking", f"selftest_{x}", f"mistake {x}", lambda: None) for x in "ABC")
# the mistakes as a failure carries them
Ad, Bd, Cd = (named(m).data() for m in (A, B, C))
# the modules of mistakes, one per component and general.py
MISTAKES = sorted(p for p in (ROOT / "tests" / "checklib" / "mistakes").glob("*.py") if p.stem != "__init__")


@pytest.fixture
def three_mistakes():
    CATALOGUE.update({m.id: m for m in (A, B, C)})
    yield
    for m in (A, B, C):
        del CATALOGUE[m.id]


def case(index: int, matched=(), ruled_out=(), status: str = FAILED, check: str = "test_x",
         message: str = "f(x): wrong\n  hint: look") -> CaseResult:
    return CaseResult(f"tests/test_x.py::{check}[{index}]", check, "masking", status, message,
                      [named(m).data() for m in matched], [named(m).data() for m in ruled_out])


# --- the rules over a check's cases

@pytest.mark.usefixtures("three_mistakes")
def test_a_mistake_matched_once_and_ruled_out_nowhere_is_named():
    assert named_mistakes([case(0, [A], [B]), case(1), case(2, status=PASSED)]) == [Ad]


@pytest.mark.usefixtures("three_mistakes")
def test_a_mistake_ruled_out_by_any_failing_case_is_not_named():
    assert named_mistakes([case(0, [A, B]), case(1, [A], [B])]) == [Ad]
    assert named_mistakes([case(0, [A]), case(1, [], [A])]) == []


@pytest.mark.usefixtures("three_mistakes")
def test_a_passing_case_rules_nothing_out():
    assert named_mistakes([case(0, [A]), case(1, [], [A], status=PASSED)]) == [Ad]


@pytest.mark.usefixtures("three_mistakes")
def test_no_weighed_mistake_names_none():
    assert named_mistakes([case(0), case(1)]) == []


def check_message(cases: list[CaseResult]) -> str:
    component = load_course().component("masking")
    name = next(iter(component.checks))
    for c in cases:
        c.check = name
    result = score_component(component, cases, {})
    return next(c for c in result.checks if c.name == name).message


@pytest.mark.usefixtures("three_mistakes")
def test_the_check_message_carries_the_diagnosis_of_all_its_cases():
    first = "f(1): wrong\n  hint: look"  # (alone, case 0 would be diagnosed as mistake B)
    assert check_message([case(0, [B], message=first), case(1, [], [B])]) == "f(1): wrong\n  hint: look"
    assert check_message([case(0, [B], message=first), case(1, [A], [B])]) == \
        "f(1): wrong\n  diagnosis: mistake A\n  hint: look"
    assert check_message([case(0, message="f(1): wrong"), case(1, [A])]) == "f(1): wrong\n  diagnosis: mistake A"


@pytest.mark.usefixtures("three_mistakes")
def test_two_mistakes_that_no_case_tells_apart_are_both_named_as_such():
    message = check_message([case(0, [A, B]), case(1, [], [C])])
    assert message == ("f(x): wrong\n  diagnosis: this matches more than one known mistake, and these inputs "
                       "cannot tell them apart: mistake A; mistake B\n  hint: look"), message


@pytest.mark.usefixtures("three_mistakes")
def test_what_a_case_weighed_survives_the_result_cache(tmp_path):
    cases = [case(0, [A], [B, C]), case(1, status=PASSED)]
    ResultCache(tmp_path).put("key", cases)
    assert ResultCache(tmp_path).get("key") == cases


# --- one case, in the comparisons

@pytest.mark.usefixtures("three_mistakes")
def test_one_case_with_two_matching_mistakes_says_so():
    models = {A: torch.zeros(2), B: torch.zeros(2), C: torch.ones(2)}
    with pytest.raises(CheckFailure) as failure:
        assert_equal(torch.zeros(2), torch.full((2,), 2.0), what="f(x)", hint="look", mistakes=models)
    assert (failure.value.matched, failure.value.ruled_out) == ([Ad, Bd], [Cd, named(general.FLOAT_DTYPE_CHANGED).data()])
    assert str(failure.value).splitlines()[1] == ("  diagnosis: this matches more than one known mistake, and these "
                                                  "inputs cannot tell them apart: mistake A; mistake B")
    with pytest.raises(CheckFailure) as failure:
        assert_equal(torch.zeros(2), torch.full((2,), 2.0), what="f(x)", hint="look", mistakes={A: torch.zeros(2)})
    assert str(failure.value) == "f(x): 2 of 2 float32 values differ; first at index [0]: expected 2, got 0\n" \
                                 "  diagnosis: mistake A\n  hint: look"


@pytest.mark.usefixtures("three_mistakes")
def test_a_mistake_that_gives_the_expected_output_is_ruled_out_and_one_that_cannot_be_computed_says_nothing():
    """On a failing case, a mistake whose output is the expected one would have passed: the code does
    something else (a proj sized for one channel is right where in_channels is 1, so a proj of the wrong
    size there is not that mistake)."""
    expected = torch.ones(3)
    assert diagnose(torch.zeros(3), {A: expected.clone(), B: torch.zeros(3), C: lambda: 1 / 0},
                    expected=expected) == ([named(B)], [named(A)])


@pytest.mark.usefixtures("three_mistakes")
def test_a_shape_check_rules_out_a_shape_mistake_that_gives_the_expected_shape():
    one_channel = torch.Size((7, 16))  # PatchEmbedding(12, 4, 1, 7): one channel, so 16 is right
    with pytest.raises(CheckFailure) as failure:
        check_tensor(torch.zeros(7, 8), what="proj.weight", shape=(7, 16), mistakes={A: one_channel})
    assert (failure.value.matched, failure.value.ruled_out) == ([], [Ad])


def test_heads_split_by_their_width_are_named_from_last_attention():
    """split_heads(t, d_k) in forward: a bug of both multi_head_attention and kv_cache (one line serves both
    paths), so it has no place in the catalogue, whose bugs cost their own component only."""
    torch.manual_seed(0)
    d_model, n_heads = 8, 2
    state = {f"{n}.{p}": torch.randn(d_model, d_model) if p == "weight" else torch.randn(d_model)
             for n in ("w_q", "w_k", "w_v", "out_proj") for p in ("weight", "bias")}
    x = torch.randn(2, 5, d_model)
    got = multi_head_attention.mha(state, x, None, d_model // n_heads)[1].float()  # (2, 4, 5, 5): d_k = 4 heads
    weighed = diagnose(got, multi_head_attention.mha_weights_mistakes(state, x, None, n_heads, got),
                       expected=torch.Size((2, n_heads, 5, 5)))
    assert weighed.matched == [named(multi_head_attention.HEADS_SWAPPED)]


@pytest.mark.usefixtures("three_mistakes")
def test_an_nn_sequential_numbered_otherwise_is_named_from_the_weights_it_lacks():
    """A feed-forward net without its activation (ff.2 is the student's ff.1), or with a dropout more: bugs of
    the block's __init__, which kv_cache's checks build too, so they cannot be catalogued (their cost is not
    pre_ln_block's alone)."""
    def message(missing, own):
        return (f"the checks load weights by the contract's names into your TransformerBlock, but it has no "
                f"parameters named {sorted(missing)} (its parameters: {sorted(own)})")
    short = general.sequential_shifted(message(["ff.2.bias", "ff.2.weight"], ["ff.0.weight", "ff.0.bias",
                                                                            "ff.1.weight", "ff.1.bias"]))
    assert short == general.SEQUENTIAL_SHORT.text(seq="ff", got=1, want=2)
    long = general.sequential_shifted(message(["ff.2.bias", "ff.2.weight"], ["ff.0.weight", "ff.0.bias",
                                                                           "ff.3.weight", "ff.3.bias"]))
    assert long == general.SEQUENTIAL_LONG.text(seq="ff", got=3, want=2)
    assert general.sequential_shifted(message(["ff.2.weight"], ["ff.0.weight", "w.weight"])) is None


def test_a_float_mask_does_not_match_a_bool_mistake_on_values():
    """Failing on the dtype, a mask of 1.0 and 0.0 is no mask 'that ignores the offset': it is not bool."""
    models = masking.causal_mask_mistakes(2, 4)
    float_mask = torch.ones(2, 4).tril()  # the values of the offset mistake, in float
    with pytest.raises(CheckFailure) as failure:
        check_tensor(float_mask, what="causal_mask(2, 4)", shape=(2, 4), dtype=torch.bool, mistakes=models)
    assert failure.value.matched == [named(general.NOT_BOOL).data()]  # a float mask, not a mask of the wrong values
    with pytest.raises(CheckFailure) as failure:
        assert_equal(float_mask, torch.ones(2, 4, dtype=torch.bool).tril(2), what="causal_mask(2, 4)", mistakes=models)
    assert failure.value.matched == []
    with pytest.raises(CheckFailure) as failure:
        assert_equal(float_mask.bool(), torch.ones(2, 4, dtype=torch.bool).tril(2), what="causal_mask(2, 4)",
                     mistakes=models)
    assert failure.value.matched == [next(named(m).data() for m in models if "offset" in str(named(m)))]


# --- the masking checks, on stand-ins for student code

class InProcess:
    """The `impl` of the checks: the functions of one attention.py, called in this process."""

    def __init__(self, module: ModuleType) -> None:
        self.module = module

    def fn(self, name: str):
        return getattr(self.module, name.split(".")[1])


def load(folder: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_diagnosis_impl_{folder.name}", folder / "attention.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and typing look their module up
    spec.loader.exec_module(module)
    return module


def cases_of(check, impl) -> list[CaseResult]:
    """Every parametrization of `check` run against `impl`, as the grader's Collector records it."""
    marks = [m for m in getattr(check, "pytestmark", []) if m.name == "parametrize"]
    names = [[n.strip() for n in m.args[0].split(",")] for m in marks]
    grids = [[dict(zip(n, v if len(n) > 1 else (v,))) for v in m.args[1]] for n, m in zip(names, marks)]
    results = []
    for index, combination in enumerate(itertools.product(*grids)):
        kwargs = {k: v for part in combination for k, v in part.items()}
        if "gen" in check.__code__.co_varnames[:check.__code__.co_argcount]:
            kwargs["gen"] = torch.Generator().manual_seed(index)
        result = CaseResult(f"{check.__name__}[{index}]", check.__name__, "masking", PASSED)
        try:
            check(impl, **kwargs)
        except CheckFailure as failure:
            result.status, result.message = FAILED, failure.message
            result.matched, result.ruled_out = failure.matched, failure.ruled_out
        results.append(result)
    return results


@pytest.fixture(scope="module")
def masking_checks() -> ModuleType:
    import test_masking

    return test_masking


def test_an_inverted_causal_mask_is_named_inverted_never_diagonal(masking_checks, tmp_path):
    """On a 1x1 mask an inverted mask and one without its diagonal agree; the other cases tell them apart."""
    folder = tmp_path / "inverted_causal"
    folder.mkdir()
    source = (ROOT / "solutions" / "attention.py").read_text()
    snippet = "return ones.tril(diagonal=k_len - q_len)"
    assert source.count(snippet) == 1
    (folder / "attention.py").write_text(source.replace(snippet, "return ~ones.tril(diagonal=k_len - q_len)"))
    impl = InProcess(load(folder))
    for check in (masking_checks.test_causal_mask_square, masking_checks.test_causal_mask_with_k_len):
        cases = cases_of(check, impl)
        assert any(DIAGONAL in c.matched for c in cases), "a case that alone cannot tell the two apart"
        assert named_mistakes(cases) == [INVERTED], (check.__name__, named_mistakes(cases))


def test_the_catalogue_inverted_mask_gets_its_diagnosis(masking_checks, tmp_path):
    bug = next(b for b in all_bugs() if b.id == "masking:inverted_mask")
    impl = InProcess(load(materialize(bug, tmp_path / "impl")))
    for check in (masking_checks.test_apply_mask_values, masking_checks.test_apply_mask_causal):
        cases = cases_of(check, impl)
        assert all(c.status == FAILED for c in cases)
        assert named_mistakes(cases) == [KEPT], (check.__name__, named_mistakes(cases))
        assert not any(DIAGONAL in c.matched for c in cases)


# --- the catalogue

def test_each_mistake_has_its_own_id_and_sentence():
    for path in MISTAKES:  # every module of mistakes declared (their entries registered)
        importlib.import_module(f"checklib.mistakes.{path.stem}")
    entries = list(CATALOGUE.values())
    assert len({e.id for e in entries}) == len(entries)
    assert len({e.sentence for e in entries}) == len(entries)
    components = {c.id for c in load_course().components} | {GENERAL}  # GENERAL: seen by every component's checks
    assert all(e.id == f"{e.component}:{e.name}" and e.component in components for e in entries)
    with pytest.raises(ValueError, match="says what"):
        mistake("masking", "said_again", entries[0].sentence, lambda: None)


def test_every_entry_is_reachable_from_a_bundle():
    """Each entry is bound by a module-level name of a module of mistakes that a bundle (a function) or a check
    uses."""
    modules = {path: importlib.import_module(f"checklib.mistakes.{path.stem}") for path in MISTAKES}
    values, defined, reachable = {}, {}, set()
    loaded = lambda node: {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}  # noqa: E731
    for path, module in modules.items():
        tree = ast.parse(path.read_text())
        for node in tree.body:
            for target in node.targets if isinstance(node, ast.Assign) else ():
                if isinstance(target, ast.Name):  # (two modules may use one name: each module's value counts)
                    values.setdefault(target.id, []).append(node.value)
                    defined.setdefault(target.id, []).append(getattr(module, target.id))
        reachable |= set().union(*(loaded(f) for f in tree.body if isinstance(f, ast.FunctionDef)))
    for check in sorted((ROOT / "tests").glob("test_*.py")):  # the checks name some entries: mistakes.GREEDY_FILTERS
        tree = ast.parse(check.read_text())
        reachable |= {n.attr for n in ast.walk(tree)
                      if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "mistakes"}
        reachable |= {alias.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                      and (n.module or "").startswith("checklib.mistakes.") for alias in n.names}
    todo = list(reachable)
    while todo:
        name = todo.pop()
        for other in set().union(*map(loaded, values[name])) - reachable if name in values else ():
            reachable.add(other)
            todo.append(other)
    entries = set()
    for value in (v for name in reachable & set(values) for v in defined[name]):
        for item in value if isinstance(value, tuple) else (value,):
            if isinstance(item, Mistake):
                entries.add(item.id)
    assert set(CATALOGUE) - entries == set(), "entries no bundle binds"
