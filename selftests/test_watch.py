"""`check --watch`: a fresh table on every save of the component's files, none for another component's, Ctrl-C ends it."""
from __future__ import annotations

import io
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import grader.engine.runner
from grader.channels.watch import Watcher
from grader.paths import ROOT, SOLUTIONS
from grader.results import PASSED, ComponentResult, Report
from grader.source import SUBMISSION_FILES

BROKEN_MASK = '''

def causal_mask(q_len, k_len=None, *, device=None):  # no offset: wrong whenever k_len > q_len
    return torch.ones(q_len, k_len or q_len, dtype=torch.bool, device=device).tril()
'''


class Output:
    """The watcher's stdout, read line by line in a thread; a table ends with its "watching ..." line."""

    def __init__(self, stream) -> None:
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.reader = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.reader.start()

    def _read(self, stream) -> None:
        for line in stream:
            self.lines.put(line)
        self.lines.put(None)

    def next_table(self, timeout: float) -> str | None:
        """The next whole table printed within `timeout` seconds, else None."""
        deadline, block = time.monotonic() + timeout, []
        while True:
            try:
                line = self.lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                return None
            if line is None:
                return None
            block.append(line)
            if line.startswith("watching "):
                return "".join(block)


def save(path: Path, text: str) -> None:
    """As an editor saves: a new file renamed over the old one."""
    tmp = path.with_name(f".{path.name}.swp")
    tmp.write_text(text)
    os.replace(tmp, path)


def test_watch_grades_each_save_of_the_components_files_only(tmp_path: Path):
    folder = tmp_path / "submission"
    folder.mkdir()
    for name in SUBMISSION_FILES:
        shutil.copy(SOLUTIONS / name, folder / name)
    attention = folder / "attention.py"
    original = attention.read_text()
    proc = subprocess.Popen([sys.executable, "-m", "grader", "check", "masking", "--watch", "--target", str(folder)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    output = Output(proc.stdout)
    try:
        first = output.next_table(120)
        assert first is not None and "first grading" in first, first
        assert re.search(r"masking\s+12/12\s+passed", first), first

        save(attention, original + BROKEN_MASK)
        broken = output.next_table(30)
        assert broken is not None and "attention.py saved" in broken, broken
        assert re.search(r"masking\s+\S+/12\s+failed", broken), broken

        attention.write_text(original)  # saved in place this time
        fixed = output.next_table(30)
        assert fixed is not None and re.search(r"masking\s+12/12\s+passed", fixed), fixed

        positional = folder / "positional.py"
        positional.write_text(positional.read_text() + "\n# another component's file\n")
        assert output.next_table(2) is None, "a file masking does not depend on re-graded it"

        save(attention, original + "\ndef oops(:\n")
        syntax_error = output.next_table(30)
        assert syntax_error is not None and "attention.py saved" in syntax_error, syntax_error
        assert re.search(r"masking\s+0/12\s+error", syntax_error) and "SyntaxError" in syntax_error, syntax_error

        attention.unlink()
        deleted = output.next_table(30)
        assert deleted is not None and "attention.py deleted" in deleted, deleted
        assert re.search(r"masking\s+0/12", deleted) and "missing" in deleted, deleted
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    output.reader.join(timeout=10)
    proc.stdout.close()
    stderr = proc.stderr.read()
    proc.stderr.close()
    assert proc.returncode in (0, 130), (proc.returncode, stderr)
    assert "Traceback" not in stderr, stderr


def test_check_without_watch_does_not_import_watchfiles():
    code = ("import sys; from grader.cli import main; code = main(['check', 'masking', '--target', 'solutions']); "
            "assert 'watchfiles' not in sys.modules, 'watchfiles imported'; sys.exit(code)")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr


def test_a_save_during_a_grading_is_graded_next_and_the_stale_table_is_not_shown(tmp_path: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch):
    for name in SUBMISSION_FILES:
        shutil.copy(SOLUTIONS / name, tmp_path / name)
    saves_while_grading = ["\n# saved while the first grading ran\n"]

    def run_checks(target, components, **kwargs):
        if saves_while_grading:
            (tmp_path / "attention.py").write_text((tmp_path / "attention.py").read_text() + saves_while_grading.pop())
        return Report(str(target), [ComponentResult(c, c, PASSED, 12, 12) for c in components], 0.01, "namespaces")

    monkeypatch.setattr(grader.engine.runner, "run_checks", run_checks)
    out = io.StringIO()
    watcher = Watcher(str(tmp_path), ["masking"], out=out)
    tasks = watcher.tasks()
    watcher.grade(next(tasks), None)
    assert out.getvalue() == ""  # that table was of the files before the save
    reason, components = next(tasks)  # at once: the files differ from what was graded
    assert (reason, components) == ("attention.py saved", ["masking"])
    watcher.grade((reason, components), None)
    assert "attention.py saved" in out.getvalue() and re.search(r"masking\s+12/12\s+passed", out.getvalue())
