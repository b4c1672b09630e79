"""Submissions that break the from-scratch rule in ways no reading of the source follows (issue 29).

Each is the reference with, appended to its files, the contract's code of five components
(multi_head_attention, cross_entropy, layer_norm, rms_norm, optimizer) redone with the library calls that
course.yml forbids them, each reached one way (`EVASIONS`): through a module-level helper, `getattr` with a
built string, `torch.__dict__[...]`, `importlib.import_module`, `__import__`, (for the classes) a base class
that a helper returns, the C function under its core name (`torch._C._VariableFunctions.layer_norm`), or its
aten operator (`torch.ops.aten.layer_norm`). Appended definitions take the place of the reference's. The library's results are
right, so without the rule's guards (grader/sandbox/forbid.py) each would keep its component's full marks.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from selftests.bugs import ROOT

COMPONENTS = ("multi_head_attention", "cross_entropy", "layer_norm", "rms_norm", "optimizer")


def _split(dotted: str) -> tuple[str, str]:
    module, _, attr = dotted.rpartition(".")
    return module, attr


def _built(text: str) -> str:
    """A string literal the source never holds whole: "Layer" + "Norm"."""
    half = len(text) // 2
    return f'"".join([{text[:half]!r}, {text[half:]!r}])'


# how each evasion spells "the library's object named DOTTED"; `helpers` collects module-level code it needs
def _helper(dotted: str, helpers: list[str]) -> str:
    name = f"_lib_{len(helpers)}"
    helpers.append(f"def {name}():\n    return {dotted}\n")
    return f"{name}()"


def _getattr(dotted: str, helpers: list[str]) -> str:
    module, attr = _split(dotted)
    return f"getattr({module}, {_built(attr)})"


def _dict(dotted: str, helpers: list[str]) -> str:
    module, attr = _split(dotted)
    return f"{module}.__dict__[{_built(attr)}]"


def _importlib(dotted: str, helpers: list[str]) -> str:
    module, attr = _split(dotted)
    return f"__import__('importlib').import_module({module!r}).{attr}"


def _dunder_import(dotted: str, helpers: list[str]) -> str:
    module, attr = _split(dotted)
    return f"__import__({module!r}, fromlist=['_']).{attr}"


def _base(dotted: str, helpers: list[str]) -> str:
    name = f"_base_{len(helpers)}"
    module, attr = _split(dotted)
    helpers.append(f"def {name}():\n    return getattr({module}, {_built(attr)})\n")
    return f"{name}()"


# the same C function under the name torch's core gives it, or its aten operator: no namespace to guard them in
C_NAMES = {"torch.nn.functional.scaled_dot_product_attention": "torch._C._nn.scaled_dot_product_attention",
           "torch.nn.functional.log_softmax": "torch._C._VariableFunctions.log_softmax",
           "torch.nn.functional.softmax": "torch._C.TensorBase.softmax",
           "torch.nn.functional.cross_entropy": "torch._C._nn.cross_entropy_loss",
           "torch.nn.functional.layer_norm": "torch._C._VariableFunctions.layer_norm",
           "torch.nn.functional.rms_norm": "torch._VF.rms_norm"}


def _c_name(dotted: str, helpers: list[str]) -> str:
    return C_NAMES.get(dotted) or _helper(dotted, helpers)  # a Python class or function has no C name


def _aten(dotted: str, helpers: list[str]) -> str:
    return f"torch.ops.aten.{dotted.rpartition('.')[2]}" if dotted in C_NAMES else _helper(dotted, helpers)


EVASIONS = {"helper": _helper, "getattr": _getattr, "torch_dict": _dict, "importlib": _importlib,
            "dunder_import": _dunder_import, "base_class": _base, "c_name": _c_name, "aten": _aten}

# file -> code appended, `{L:dotted}` standing for the library's function, `{B:dotted}` for its class
FUNCTIONS = {
    "attention.py": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    weights = apply_mask(attention_scores(q, k), mask).softmax(dim=-1)
    return {L:torch.nn.functional.scaled_dot_product_attention}(q, k, v, attn_mask=mask), weights
''',
    "training.py": '''
def log_softmax(x, dim=-1):
    return {L:torch.nn.functional.log_softmax}(x, dim=dim)


def softmax(x, dim=-1):
    return {L:torch.nn.functional.softmax}(x, dim=dim)


def cross_entropy(logits, targets, *, ignore_index=-100):
    if targets.shape != logits.shape[:-1]:
        raise ValueError("targets do not match the logits")
    return {L:torch.nn.functional.cross_entropy}(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                                                 ignore_index=ignore_index)


class AdamW({L:torch.optim.AdamW}):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        if lr < 0 or eps < 0 or weight_decay < 0 or not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError("bad hyperparameters")
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=False)


def clip_grad_norm(parameters, max_norm):
    return {L:torch.nn.utils.clip_grad_norm_}(list(parameters), max_norm)
''',
    "norms.py": '''
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        return {L:torch.nn.functional.layer_norm}(x, (x.shape[-1],), self.weight, self.bias, self.eps)


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        return {L:torch.nn.functional.rms_norm}(x, (x.shape[-1],), self.weight, self.eps)
''',
}
# the classes' spelling: the library's class as a base, returned by a helper
CLASSES = {
    "training.py": '''
class _Softmax({B:torch.nn.Softmax}):
    pass


class _LogSoftmax({B:torch.nn.LogSoftmax}):
    pass


class _Loss({B:torch.nn.CrossEntropyLoss}):
    pass


def log_softmax(x, dim=-1):
    return _LogSoftmax(dim)(x)


def softmax(x, dim=-1):
    return _Softmax(dim)(x)


def cross_entropy(logits, targets, *, ignore_index=-100):
    if targets.shape != logits.shape[:-1]:
        raise ValueError("targets do not match the logits")
    return _Loss(ignore_index=ignore_index)(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


class AdamW({B:torch.optim.AdamW}):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        if lr < 0 or eps < 0 or weight_decay < 0 or not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError("bad hyperparameters")
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=False)
''',
    "norms.py": '''
class LayerNorm({B:torch.nn.LayerNorm}):
    def __init__(self, d_model, eps=1e-5):
        super().__init__(d_model, eps=eps)


class RMSNorm({B:torch.nn.RMSNorm}):
    def __init__(self, d_model, eps=1e-5):
        super().__init__(d_model, eps=eps)
''',
}


def _fill(template: str, spell, helpers: list[str]) -> str:
    out, rest = [], template
    while "{" in rest and ("{L:" in rest or "{B:" in rest):
        start = min(i for i in (rest.find("{L:"), rest.find("{B:")) if i >= 0)
        end = rest.index("}", start)
        out.append(rest[:start])
        out.append(spell(rest[start + 3:end], helpers))
        rest = rest[end + 1:]
    return "".join(out) + rest


def materialize(evasion: str, folder: Path) -> Path:
    """The reference, its five components redone with forbidden calls reached by `evasion`; returns the folder."""
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(ROOT / "solutions", folder, ignore=shutil.ignore_patterns("__pycache__"))
    spell = EVASIONS[evasion]
    templates = dict(FUNCTIONS)
    if evasion == "base_class":
        templates.update(CLASSES)
    for file, template in templates.items():
        helpers: list[str] = []
        code = _fill(template, spell, helpers)
        path = folder / file
        path.write_text(path.read_text() + "\n\n# --- the library's, reached by " + evasion + "\n"
                        + "\n".join(helpers) + code)
    return folder


# --- stand-ins carried out of a worker and handed in as the component's own code (issue 29's thief, replayed)
# (the contract file, the piece appended to it, the component whose names the piece implements)
REPLAYED = (("gqa.py", "gqa", "grouped_query_attention"), ("gpt.py", "gpt", "tiny_lm"),
            ("norms.py", "layernorm", "layer_norm"), ("norms.py", "rmsnorm", "rms_norm"),
            ("training.py", "losses", "cross_entropy"), ("training.py", "optim", "optimizer"),
            ("attention.py", "sdpa", "multi_head_attention"), ("attention.py", "attention_forward", "multi_head_attention"))
BINDS = {"attention_forward": "MultiHeadAttention.forward = forward\n"}  # a piece that is a method, not a name
REPLAY_PRELUDE = '''
import importlib as _importlib


class _Modules:
    def __getattr__(self, name):
        return _importlib.import_module("." + name, __package__)


_impl = _Modules()
'''


def materialize_replay(how: str, folder: Path) -> Path:
    """The reference, with the stand-ins of the components in REPLAYED appended to their files, as source
    (`how="source"`) or executed from a string under a name of its own (`how="exec"`, which no reading sees)."""
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(ROOT / "solutions", folder, ignore=shutil.ignore_patterns("__pycache__"))
    for file, piece, _ in REPLAYED:
        source = (ROOT / "grader" / "sandbox" / "standins" / f"{piece}.py").read_text()
        source = source.replace("from __future__ import annotations\n", "").replace("impl.", "_impl.")
        path = folder / file
        if how == "source":
            code = REPLAY_PRELUDE + source.replace("impl = None", "")
        else:
            code = (REPLAY_PRELUDE + f"exec(compile({source!r}, '<stolen>', 'exec'), globals())\n"
                    "impl = _impl\n")
        path.write_text(path.read_text() + "\n\n# --- a stand-in, replayed\n" + code + BINDS.get(piece, ""))
    return folder
