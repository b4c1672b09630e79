"""Hostile submissions that speak to the grader in the worker's place, and pairs of students graded together.

A worker answers each request on one end of a pipe; student code runs in the
worker and can reach that end (here through the frame of the worker's loop,
`serve`, whose locals hold it, the request's id and the executor). These attacks
write their own replies there, instead of the real one or ahead of it, or set
the worker's own flags: everything a worker sends is untrusted data to the
grader (grader/sandbox/protocol.py's `checked_reply`).
"""
from __future__ import annotations

import shutil
from pathlib import Path

from grader.contract import FILES
from selftests.bugs import SOLUTIONS
from selftests.hostile import FUTURE, SCORES, Attack

# Put at the top of the edited file (after its `from __future__` line): how the attacks reach the pipe.
PRELUDE = '''
def _serve_frame():
    """The frame of the worker's loop, where it answers requests (None outside a worker)."""
    import sys
    frame = sys._getframe()
    while frame is not None and frame.f_code.co_name != "serve":
        frame = frame.f_back
    return frame


def _forge(reply, instead=True):
    """Send `reply(request_id)` as the answer to the request being run; `instead`: the real answer is never sent."""
    import pickle
    frame = _serve_frame()
    if frame is None:
        return
    conn = frame.f_locals["requests"]
    conn.send_bytes(pickle.dumps(reply(frame.f_locals.get("request_id")), protocol=5))
    if instead:
        def swallow(data, conn=conn):
            del conn.send_bytes  # the real answer goes nowhere; the next ones go out as usual
        conn.send_bytes = swallow

'''
RMS = "        ms = x.pow(2).mean(dim=-1, keepdim=True)  # (..., 1)\n"
CROSSED = '{"class": "CrossedOver", "type": "CrossedOver", "message": %s, "where": "", "kinds": []}'
USING_POSITIONAL = frozenset(c for c, files in FILES.items() if "positional.py" in files)


REPLY_ATTACKS = [
    Attack("crossed_flag_every_call", "norms.py", RMS,
           "        _frame = _serve_frame()\n"
           "        if _frame is not None and _frame.f_locals.get('executor') is not None:\n"
           "            _frame.f_locals['executor'].package.crossed = 'LayerNorm'\n" + RMS,
           frozenset({"rms_norm"}),
           "RMSNorm.forward sets the worker's crossed-over flag on every call (the grader graded it again forever)"),
    Attack("forged_crossed_reply_every_call", "norms.py", RMS,
           f"        _forge(lambda rid: {{'id': rid, 'error': {CROSSED % repr('LayerNorm')}}})\n" + RMS,
           frozenset({"rms_norm"}),
           "RMSNorm.forward answers every request with a forged crossed-over error, in a worker of its own too"),
    Attack("forged_crossed_6mib_at_import", "positional.py", FUTURE, FUTURE +
           "_frame = _serve_frame()\n"
           "if _frame is not None and _frame.f_locals.get('op') == 'load':\n"
           f"    _forge(lambda rid: {{'id': rid, 'error': {CROSSED % repr('x') + ' * (6 << 20)'}}})\n",
           USING_POSITIONAL,
           "positional.py answers the loader's request with a crossed-over error of 6 MiB (it broke every worker start)"),
    Attack("crossed_flag_6mib_at_import", "positional.py", FUTURE, FUTURE +
           "_frame = _serve_frame()\n"
           "if _frame is not None and _frame.f_locals.get('executor') is not None:\n"
           "    _frame.f_locals['executor'].package.crossed = 'x' * (6 << 20)\n",
           USING_POSITIONAL,
           "positional.py sets the worker's crossed-over flag to 6 MiB of text while it is imported"),
    Attack("billion_laughs_reply", "attention.py", SCORES,
           "    _laughs = ['ha' * 32]\n"
           "    for _ in range(40):\n"
           "        _laughs = [_laughs, _laughs]  # 2**40 lists once rebuilt, in a few hundred bytes of pickle\n"
           "    _forge(lambda rid: {'id': rid, 'ok': _laughs})\n" + SCORES,
           frozenset({"scaling"}),
           "attention_scores answers with a pickle of shared references that decodes to terabytes"),
    Attack("reply_for_another_request", "attention.py", SCORES,
           "    _forge(lambda rid: {'id': (rid or 0) + 1, 'ok': None}, instead=False)\n" + SCORES,
           frozenset({"scaling"}),
           "attention_scores writes an answer for the next request ahead of its own answer"),
    Attack("forged_fields", "attention.py", SCORES,
           "    _wire = __import__('sys').modules['grader.sandbox.wire']\n"
           "    _forge(lambda rid: {'id': rid, 'ok': _wire.encode(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))), "
           "'crossed': 'layer_norm', 'meta_loaded': 'yes', 'score': 1000})\n" + SCORES,
           frozenset({"scaling"}),
           "attention_scores answers with its right result and fields that no answer has"),
    Attack("forged_huge_error", "attention.py", SCORES,
           "    _forge(lambda rid: {'id': rid, 'error': {'class': 'StudentError', 'type': 'T' * (1 << 20), "
           "'message': 'm' * (6 << 20), 'where': 'w' * (6 << 20), 'kinds': ['k' * 1000] * 60}})\n" + SCORES,
           frozenset({"scaling"}),
           "attention_scores answers with an error whose texts are 1-6 MiB each (past the worker's own cut)"),
    Attack("forged_many_kinds", "attention.py", SCORES,
           "    _forge(lambda rid: {'id': rid, 'error': {'class': 'StudentError', 'type': 'T', 'message': 'm', "
           "'where': '', 'kinds': ['k'] * 100000}})\n" + SCORES,
           frozenset({"scaling"}),
           "attention_scores answers with an error that names 100,000 classes"),
    Attack("huge_exception", "attention.py", SCORES,
           "    raise type('E' * (1 << 20), (Exception,), {})('m' * (6 << 20))\n",
           frozenset({"scaling"}),
           "attention_scores raises an exception whose class name is 1 MiB and message 6 MiB"),
]


def materialize(attack: Attack, dest: Path) -> Path:
    """The reference with `attack`, and the prelude its code uses."""
    attack.materialize(dest, dest.parent)
    path = dest / attack.file
    source = path.read_text()
    path.write_text(source.replace(FUTURE, FUTURE + PRELUDE, 1))
    return dest


# Students graded together (selftests/test_hostile_replies.py): each must score as when graded alone, in either order.
FAKE_MODULES = ("        self.bias = nn.Parameter(torch.zeros(d_model))\n",
                "        self.bias = nn.Parameter(torch.zeros(d_model))\n"
                "        import sys, types\n"
                "        sys.modules['math'] = types.ModuleType('math')\n"
                "        sys.modules['torch.nn.functional'] = types.ModuleType('torch.nn.functional')\n")
HELPER = ("def attention_scores(",
          "class _Gain(nn.Module):\n    def forward(self, x: Tensor) -> Tensor:\n        return x__GAIN__\n\n\n"
          "def attention_scores(")
HELPER_USE = (SCORES, "    return _Gain()(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)))\n")


def student(dest: Path, kind: str) -> Path:
    """A classmate: "plain" (the reference), "fake_modules" (the reference, but LayerNorm leaves a fake math and
    torch.nn.functional in sys.modules), "helper_ok" / "helper_bug" (the reference with a helper class in
    attention.py whose `forward` attention_scores uses: the two differ only in that method's body, which the
    cache's key for scaling used to leave out, `forward` being the short name of MultiHeadAttention.forward)."""
    shutil.copytree(SOLUTIONS, dest, ignore=shutil.ignore_patterns("__pycache__"))
    file, edits = {"plain": ("norms.py", []), "fake_modules": ("norms.py", [FAKE_MODULES]),
                   "helper_ok": ("attention.py", [(HELPER[0], HELPER[1].replace("__GAIN__", "")), HELPER_USE]),
                   "helper_bug": ("attention.py", [(HELPER[0], HELPER[1].replace("__GAIN__", " * 1.5")), HELPER_USE])}[kind]
    source = (dest / file).read_text()
    for old, new in edits:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    (dest / file).write_text(source)
    return dest
