"""Feedback that names the bug, in every channel, in the student's terms.

One submission with several kinds of failure (a crash, weights that do not fit
the module's parameter names, an exception raised by student code, a stub not
started, a missing file) is graded once and rendered in every channel; no
message may show a grader module, class or traceback. Plain pytest prints the
grader's message too, and the comparisons print values that can be told apart.
"""
from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from grader.channels.batch.records import RECORD_VERSION, error_record, record_status, write_gradebook
from grader.sandbox.protocol import LoadFailed, NotStarted, StudentCrash, StudentError, WeightsMismatch
from selftests.bugs import ROOT, all_bugs
from selftests.hostile import ATTACKS
from tests.checklib.compare import assert_close, assert_equal

INTERNALS = re.compile(r"grader\.|checklib|Traceback|StudentError|StudentCrash|_drills_impl")

RENDER = """\
import io, json, sys
from grader.channels.render.formats import FORMATTERS, print_terminal
from grader.engine.runner import run_checks
report = run_checks(sys.argv[1], processes=1)
out = {name: render(report) for name, render in FORMATTERS.items()}
terminal = io.StringIO()
print_terminal(report, verbose=True, file=terminal)
out["terminal"] = terminal.getvalue()
print(json.dumps(out))
"""


def _env() -> dict:
    # as on a learner's machine: CI and BUILD_NUMBER make pytest print each failure's whole message twice
    return {**{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DRILLS_TARGET", "CI", "BUILD_NUMBER")},
            "PYTHONDONTWRITEBYTECODE": "1"}


def _failing_submission(dest: Path) -> Path:
    """The reference, except: attention_scores segfaults (scaling), w_q is named q_proj (qkv_projection's
    weights do not load), apply_mask fails on mask=None (masking), positional.py is the stub, vit.py is missing."""
    next(a for a in ATTACKS if a.name == "segfault").materialize(dest, dest.parent / "evidence")
    attention = dest / "attention.py"
    source = attention.read_text().replace("self.w_q = nn.Linear", "self.q_proj = nn.Linear")
    source = source.replace("self.w_q(x)", "self.q_proj(x)")
    bug = next(b for b in all_bugs() if b.id == "masking:mask_none_crashes")
    attention.write_text(source.replace(bug.old, bug.new))
    shutil.copy(ROOT / "exercises" / "positional.py", dest / "positional.py")
    (dest / "vit.py").unlink()
    return dest


@pytest.fixture(scope="module")
def channels(tmp_path_factory) -> dict[str, str]:
    folder = _failing_submission(tmp_path_factory.mktemp("messages") / "submission")
    result = subprocess.run([sys.executable, "-c", RENDER, str(folder)], cwd=ROOT, env=_env(), capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


def _messages(channels: dict[str, str]) -> list[str]:
    """Every message a student reads, in every channel."""
    gradescope = json.loads(channels["gradescope"])
    report = json.loads(channels["json"])
    texts = [gradescope["output"], *(t["output"] for t in gradescope["tests"])]
    texts += [c["message"] for c in report["components"]]
    texts += [check["message"] for c in report["components"] for check in c["checks"]]
    return texts + [channels["junit"], channels["markdown"], channels["terminal"]]


@pytest.mark.timeout(300)
def test_no_message_in_any_channel_shows_grader_internals(channels):
    leaks = [text for text in _messages(channels) if INTERNALS.search(text)]
    assert not leaks, leaks[0][:2000]


@pytest.mark.timeout(300)
def test_each_failure_is_said_in_the_students_terms(channels):
    report = {c["id"]: c for c in json.loads(channels["json"])["components"]}
    assert "crashed with SIGSEGV" in report["scaling"]["message"]
    assert "`attention.attention_scores`" in report["scaling"]["message"]
    weights = next(c["message"] for c in report["qkv_projection"]["checks"] if c["name"] == "test_project_qkv_values")
    assert "no parameters named ['w_q.bias', 'w_q.weight']" in weights and "q_proj.weight" in weights, weights
    raised = report["masking"]["message"]
    assert "your code raised TypeError" in raised and "`attention.apply_mask`" in raised, raised
    assert re.search(r"at attention\.py:\d+ in apply_mask", raised), raised
    assert report["sinusoidal_encoding"]["status"] == "not started"
    assert "vit.py is missing" in report["patch_embedding"]["message"]


@pytest.mark.timeout(300)
def test_gradescope_summarises_components_and_names_a_missing_file_once(channels):
    results = json.loads(channels["gradescope"])
    top = results["output"]
    assert top.count("vit.py is missing") == 1, top
    for component in json.loads(channels["json"])["components"]:
        assert re.search(rf"^{component['id']}\s+\S+/\S+\s+{component['status']}", top, re.M), (component["id"], top)
    assert "crashed with SIGSEGV" in top and "your code raised TypeError" in top  # first failures, whole
    vit = [t for t in results["tests"] if t["tags"][0] in ("patch_embedding", "vit_classifier")]
    assert vit and all(t["output"].startswith("not graded: vit.py is missing") and t["output"].endswith("(see the top)")
                       for t in vit), vit[0]


def _plain_pytest(*args: str) -> tuple[str, int]:
    result = subprocess.run([sys.executable, "-m", "pytest", "tests/test_masking.py", "-p", "no:cacheprovider", *args],
                            cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120)
    output = result.stdout + result.stderr
    return output, len(re.findall(r"^FAILED ", output, re.M))


@pytest.mark.timeout(200)
def test_plain_pytest_on_the_stubs_is_concise():
    output, failed = _plain_pytest()
    assert failed > 0
    assert len(output.splitlines()) <= 5 * failed + 15, output[:3000]
    assert "not started: masking: write causal_mask" in output
    assert not INTERNALS.search(output) and "grader/" not in output and "tensor(" not in output, output[:3000]


@pytest.mark.timeout(200)
def test_plain_pytest_on_a_bug_prints_the_graders_message(tmp_path):
    folder = tmp_path / "impl"
    shutil.copytree(ROOT / "solutions", folder, ignore=shutil.ignore_patterns("__pycache__"))
    bug = next(b for b in all_bugs() if b.id == "masking:mask_none_crashes")
    (folder / bug.file).write_text((folder / bug.file).read_text().replace(bug.old, bug.new))
    output, failed = _plain_pytest(f"--target={folder}")
    assert failed == 1, output
    assert "your code raised TypeError" in output and re.search(r"at attention\.py:\d+ in apply_mask", output), output
    assert len(output.splitlines()) <= 5 * failed + 15, output
    assert not INTERNALS.search(output) and "grader/" not in output, output


def test_student_errors_read_as_what_the_code_did():
    error = StudentError("KeyError", "'x'", "  at attention.py:3 in f: return d['x']", call="attention.f")
    assert str(error) == "your code raised KeyError: 'x' while running `attention.f`\n  at attention.py:3 in f: return d['x']"
    assert str(NotStarted("NotImplementedError", "scaling: write attention_scores")) == \
        "not started: scaling: write attention_scores"
    assert str(StudentCrash("Crash", "the process crashed with SIGSEGV")) == "the process crashed with SIGSEGV"
    assert str(WeightsMismatch("KeyError", "no parameters named ['a']")) == "no parameters named ['a']"
    assert str(LoadFailed("ImportError", "block.py failed: No module named '_drills_impl_3.attention'")) == \
        "block.py failed: No module named 'attention'"


def _failure(check, *args, **kwargs) -> str:
    with pytest.raises(AssertionError) as info:
        check(*args, **kwargs)
    return str(info.value)


def _shown(message: str) -> tuple[str, str]:
    found = re.search(r"expected (\S+), got (\S+)", message)
    assert found, message
    return found.group(1), found.group(2)


def test_a_difference_past_the_tolerance_that_four_digits_hide_shows_two_numbers_and_the_dtype():
    # 0.56641 and 0.56649 both read 0.5664 at four digits, yet differ by more than rtol * 0.566 + atol * 1.0
    expected = torch.tensor([1.0, 0.56641], dtype=torch.float64)
    actual = torch.tensor([1.0, 0.56649], dtype=torch.float64)
    message = _failure(assert_close, actual, expected, what="f(x)")
    shown = _shown(message)
    assert "float64" in message and shown[0] != shown[1], message
    assert float(shown[0]) == pytest.approx(0.56641, abs=1e-7) and float(shown[1]) == pytest.approx(0.56649, abs=1e-7)
    assert "index [1]" in message
    message = _failure(assert_equal, actual, expected, what="f(x)")
    shown = _shown(message)
    assert "float64" in message and shown[0] != shown[1], message


def test_a_float32_difference_reads_as_before():
    message = _failure(assert_close, torch.tensor([0.5, 0.25]), torch.tensor([0.5, 0.75]), what="f(x)")
    assert "1 of 2 float32 values differ" in message and "expected 0.75, got 0.25" in message, message


def test_gradebook_status_tells_stubs_from_an_empty_folder_and_errors(tmp_path):
    out = tmp_path / "out"
    (out / "results").mkdir(parents=True)

    def graded(statuses: list[str]) -> dict:
        return {"version": RECORD_VERSION, "status": "graded", "score": 0.0, "components": {},
                "report": {"components": [{"status": s} for s in statuses]}}

    records = {"stubs": graded(["not started", "not started"]), "partial": graded(["passed", "not started"]),
               "empty": error_record("empty", "f", "no exercise files found (attention.py, ...)"),
               "crashed": error_record("crashed", "f", "the grader's process crashed\nwhile grading")}
    for name, record in records.items():
        (out / "results" / f"{name}.json").write_text(json.dumps(record))
    with open(write_gradebook(out)) as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0])[:3] == ["student", "total", "status"]
    assert {row["student"]: row["status"] for row in rows} == {
        "stubs": "not started", "partial": "graded", "empty": "no exercise files",
        "crashed": "error: the grader's process crashed"}
    assert all(record_status(record) == {r["student"]: r["status"] for r in rows}[name]
               for name, record in records.items())


def test_a_tensor_in_a_message_is_shown_by_dtype_and_shape():
    from tests.checklib.compare import shown

    assert shown(torch.zeros(2, 5, 24)) == "a float32 tensor of shape (2, 5, 24)"
    assert shown((torch.zeros(1, dtype=torch.float64), 3)) == "a tuple of 2 (a float64 tensor of shape (1), 3)"
