"""Hostile submissions: the reference with one piece of code that attacks the grader.

Each case names the file it edits, the snippet it replaces, what it writes
instead, and which components may lose points for it (the rest must keep full
marks, and the report must always be written).
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from selftests.bugs import SOLUTIONS

# A marker the attacks write their pids and attempts to, set by the test.
EVIDENCE_DIR = "__EVIDENCE_DIR__"


@dataclass(frozen=True)
class Attack:
    name: str
    file: str
    old: str
    new: str
    may_lose: frozenset[str]  # components allowed to lose points
    description: str

    def materialize(self, dest: Path, evidence: Path) -> Path:
        shutil.copytree(SOLUTIONS, dest, ignore=shutil.ignore_patterns("__pycache__"))
        path = dest / self.file
        source = path.read_text()
        assert source.count(self.old) == 1, f"{self.name}: snippet must occur once in {self.file}"
        path.write_text(source.replace(self.old, self.new.replace(EVIDENCE_DIR, str(evidence))))
        return dest


SPLIT = '    return rearrange(x, "b t (h d) -> b h t d", h=n_heads)\n'
SCORES = "    return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))\n"
FUTURE = "from __future__ import annotations\n"
POSITIONAL_HEAD = '"""Sinusoidal positional encoding (reference solution)."""\n' + FUTURE
ATTENTION_HEAD = '"""Scaled dot-product and multi-head attention (reference solution)."""\n' + FUTURE

ATTACKS = [
    Attack("hang", "attention.py", SPLIT, "    while True:\n        pass\n",
           frozenset({"head_splitting"}), "split_heads never returns"),
    Attack("segfault", "attention.py", SCORES, "    import ctypes\n    ctypes.string_at(0)\n",
           frozenset({"scaling"}), "attention_scores crashes the interpreter"),
    Attack("os_exit_at_import", "positional.py", POSITIONAL_HEAD, POSITIONAL_HEAD + "import os\nos._exit(3)\n",
           frozenset({"sinusoidal_encoding"}), "positional.py ends the process while it is imported"),
    Attack("sys_exit", "attention.py", SCORES, "    import sys\n    sys.exit(0)\n",
           frozenset({"scaling"}), "attention_scores calls sys.exit"),
    Attack("memory_hog", "attention.py", SPLIT, "    hog = bytearray(64 * 1024**3)\n" + SPLIT,
           frozenset({"head_splitting"}), "split_heads asks for 64 GiB"),
    Attack("patched_comparisons", "attention.py", SPLIT,
           "    import torch as _t\n    _t.allclose = lambda *a, **k: True\n    _t.equal = lambda *a, **k: True\n"
           "    _t.Tensor.__eq__ = lambda *a, **k: True\n    import builtins\n    builtins.all = lambda *a: True\n"
           "    return _t.zeros(x.shape[0], n_heads, x.shape[1], x.shape[2] // n_heads, dtype=x.dtype)\n",
           frozenset({"head_splitting"}), "split_heads returns zeros after patching torch's comparisons and builtins"),
    Attack("lying_tensor_subclass", "attention.py", SPLIT,
           "    class Liar(torch.Tensor):\n"
           "        def __eq__(self, other):\n            return torch.ones_like(other, dtype=torch.bool)\n"
           "        def allclose(self, *a, **k):\n            return True\n"
           "    b, t, d = x.shape\n"
           "    return torch.zeros(b, n_heads, t, d // n_heads, dtype=x.dtype).as_subclass(Liar)\n",
           frozenset({"head_splitting"}), "split_heads returns a Tensor subclass that claims to equal anything"),
    Attack("forged_results", "attention.py", ATTENTION_HEAD, ATTENTION_HEAD +
           "import json, os, sys\n"
           "def _forge():\n"
           "    for pid in [os.getppid()] + [p for p in os.listdir('/proc') if p.isdigit()]:\n"
           "        try:\n"
           "            args = open(f'/proc/{pid}/cmdline').read().split('\\0')\n"
           "            if '--results' in args:\n"
           "                path = args[args.index('--results') + 1]\n"
           "                open(path, 'w').write(json.dumps({'score': 1000, 'tests': []}))\n"
           "                open(os.path.join('" + EVIDENCE_DIR + "', 'forged'), 'w').write(path)\n"
           "        except (OSError, ValueError, IndexError):\n"
           "            pass\n"
           "_forge()\n"
           "print('{\"score\": 1000}')\n",
           frozenset(), "attention.py writes a results file with 1000 points and prints a fake report"),
    Attack("flood_output", "attention.py", SPLIT,
           "    import sys\n    sys.stdout.write('x' * (50 * 1024 * 1024))\n    sys.stdout.flush()\n" + SPLIT,
           frozenset(), "split_heads prints 50 MB (and is otherwise correct)"),
    Attack("stray_process", "positional.py", POSITIONAL_HEAD, POSITIONAL_HEAD +
           "import os, subprocess\n"
           "_p = subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
           "open(os.path.join('" + EVIDENCE_DIR + "', f'pid-{_p.pid}'), 'w').close()\n"
           "if os.fork() == 0:\n"
           "    os.setsid()\n"
           "    open(os.path.join('" + EVIDENCE_DIR + "', f'pid-{os.getpid()}'), 'w').close()\n"
           "    import time\n"
           "    time.sleep(300)\n"
           "    os._exit(0)\n",
           frozenset(), "positional.py starts background processes that try to outlive grading"),
]


def conftest_attack(dest: Path) -> Path:
    """A submission whose conftest.py and test file try to make every check pass."""
    shutil.copytree(SOLUTIONS, dest, ignore=shutil.ignore_patterns("__pycache__"))
    (dest / "positional.py").write_text('"""Nothing here: the conftest is meant to pass the checks."""\n')
    hook = ("import pytest\n"
            "@pytest.hookimpl(hookwrapper=True)\n"
            "def pytest_runtest_makereport(item, call):\n"
            "    outcome = yield\n"
            "    report = outcome.get_result()\n"
            "    report.outcome = 'passed'\n")
    (dest / "conftest.py").write_text(hook)
    (dest / "test_fake.py").write_text("def test_split_heads_layout():\n    pass\n")
    return dest
