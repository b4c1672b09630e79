"""`python -m grader train`: trains the learner's own TinyLM, draws the loss curve, says what is not started."""
from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def train(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grader", "train", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def test_train_on_the_reference_reports_the_loss_and_draws_the_curve(tmp_path):
    out = tmp_path / "curve.png"
    result = train("--target", str(ROOT / "solutions"), "--steps", "12", "--out", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "loss: " in result.stdout and "after 12 steps" in result.stdout
    assert "greedy continuations" in result.stdout
    if importlib.util.find_spec("matplotlib") is None:
        assert "matplotlib is not installed" in result.stdout
        pytest.skip("matplotlib is not installed here: no picture to look for")
    assert out.is_file() and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_train_on_the_stubs_says_not_started(tmp_path):
    result = train("--out", str(tmp_path / "curve.png"))
    assert result.returncode == 1
    assert "not started" in result.stdout and "tiny_lm" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    assert not (tmp_path / "curve.png").exists()


def test_train_stops_code_that_never_returns(tmp_path):
    folder = tmp_path / "impl"
    shutil.copytree(ROOT / "solutions", folder, ignore=shutil.ignore_patterns("__pycache__"))
    gpt = folder / "gpt.py"
    gpt.write_text(gpt.read_text().replace('        """idx (B, T) int64 -> logits (B, T, vocab_size)."""\n',
                                           '        """idx (B, T) int64 -> logits (B, T, vocab_size)."""\n'
                                           '        while True:\n            pass\n'))
    result = train("--target", str(folder), "--steps", "3", "--out", str(tmp_path / "c.png"), "--timeout", "5")
    assert result.returncode == 1
    assert "stopped after 5 s" in result.stderr


def test_a_chinese_training_holds_no_english_prose(tmp_path):
    from selftests.test_i18n import english_prose

    trained = train("--lang", "zh", "--target", str(ROOT / "solutions"), "--steps", "3",
                    "--out", str(tmp_path / "c.png"))
    stubs = train("--lang", "zh", "--out", str(tmp_path / "s.png"))
    assert trained.returncode == 0 and stubs.returncode == 1, trained.stderr + stubs.stderr
    assert "损失" in trained.stdout and "未开始" in stubs.stdout
    for run in (trained, stubs):
        assert english_prose(run.stdout + run.stderr) == [], run.stdout + run.stderr
