"""The result cache's key: what a component's results depend on, and nothing else."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from grader.engine.cache import component_key

ROOT = Path(__file__).resolve().parent.parent
CHECKS = ROOT / "tests"
SCALED = "return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))\n"


@pytest.fixture
def submission(tmp_path: Path) -> Path:
    folder = tmp_path / "submission"
    shutil.copytree(ROOT / "solutions", folder, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def key(folder: Path, component: str) -> str:
    return component_key(folder, component, CHECKS, "settings")


def edit(folder: Path, old: str, new: str) -> None:
    path = folder / "attention.py"
    source = path.read_text()
    assert old in source
    path.write_text(source.replace(old, new))


def test_comments_and_layout_do_not_count(submission):
    before = key(submission, "scaling")
    edit(submission, SCALED, SCALED.replace("return", "# the scores\n    return  ") + "\n\n")
    assert key(submission, "scaling") == before


def test_a_change_anywhere_counts_for_every_component(submission):
    """Every file can run while any component is graded (a sibling imports it, code reads and runs it by path, a
    worker-mate or the loader runs it in the same process): so every file is in every key."""
    from grader.contract import COMPONENTS

    before = {c: key(submission, c) for c in COMPONENTS}
    edit(submission, SCALED, SCALED.replace("math.sqrt(q.size(-1))", "q.size(-1)"))
    after = {c: key(submission, c) for c in COMPONENTS}
    assert all(after[c] != before[c] for c in COMPONENTS)


def test_a_helper_class_method_named_like_a_contract_method_counts(submission):
    """A helper class's `forward` or `__init__` (short names other components own) used to be left out of keys."""
    path = submission / "positional.py"
    path.write_text(path.read_text() + "\n\nclass _Helper:\n    def forward(self, x):\n        return x\n")
    before = {c: key(submission, c) for c in ("sinusoidal_encoding", "scaling", "rope")}
    path.write_text(path.read_text().replace("        return x\n", "        return x * 2\n"))
    assert all(key(submission, c) != before[c] for c in before)


def test_identical_code_shares_keys_whoever_hands_it_in(submission, tmp_path):
    twin = tmp_path / "twin"
    shutil.copytree(submission, twin)
    (twin / "vit.py").write_text((twin / "vit.py").read_text() + "\n# my own comment\n")
    assert key(twin, "scaling") == key(submission, "scaling") and key(twin, "rope") == key(submission, "rope")


def test_a_body_reached_other_than_by_its_name_counts(submission):
    edit(submission, "def causal_mask(", "scores_fn = attention_scores\n\n\ndef causal_mask(")
    before = key(submission, "masking")
    edit(submission, SCALED, SCALED.replace("math.sqrt(q.size(-1))", "q.size(-1)"))
    assert key(submission, "masking") != before  # the alias may run the student's own attention_scores


def test_missing_and_unparsable_files_have_keys_of_their_own(submission):
    keys = {key(submission, "scaling")}
    (submission / "attention.py").write_text("def attention_scores(q, k):\n    return (\n")
    keys.add(key(submission, "scaling"))
    (submission / "attention.py").unlink()
    keys.add(key(submission, "scaling"))
    assert len(keys) == 3
