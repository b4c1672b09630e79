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


def test_a_change_counts_for_its_own_component_only(submission):
    before = {c: key(submission, c) for c in ("scaling", "masking", "multi_head_attention")}
    edit(submission, SCALED, SCALED.replace("math.sqrt(q.size(-1))", "q.size(-1)"))
    # masking never runs attention_scores (a stand-in replaces it); multi_head_attention loads it by name too
    assert key(submission, "scaling") != before["scaling"]
    assert key(submission, "masking") == before["masking"]
    assert key(submission, "multi_head_attention") == before["multi_head_attention"]


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
