"""What both sides of the process boundary agree on, besides the codec (wire.py).

The errors a check sees when student code fails (carried across as plain
text), how a request is named in messages, the limits a worker runs under,
and how long a message may be.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ..pristine import translated_stubs_dir
from ..results import MESSAGE_LIMIT
from ..text import Phrase, data, from_data
from .wire import Ref, WireError


# the class name of the error a guard of the from-scratch rule raises in a worker (forbid.py; scoring.py's gate)
FORBIDDEN_CALL_CLASS = "ForbiddenCall"
# a spawned worker's first message (worker.py `main`), once it has imported torch: the handle's deadlines start then
READY = {"ready": True}


@dataclass(frozen=True)
class Limits:
    """What one worker may use. The defaults are course.yml's `defaults:` (grader/course.py reads them)."""

    timeout_s: float  # per check
    memory_mb: int  # address space a worker may add to what torch already maps
    output_bytes: int = 64 * 1024  # output kept per worker; the rest is drained and dropped
    startup_s: float = 10.0  # a fresh worker's own set-up (sandbox, imports, warm-up): not the first check's time
    # component -> the library calls course.yml forbids it (its `forbidden:`), which its worker guards (forbid.py)
    forbidden: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def forbidden_for(self, component: str | None) -> tuple[str, ...]:
        return next((names for owner, names in self.forbidden if owner == component), ())


class StudentError(Exception):
    """Student code raised; carried as text (type name, message, where, the call that raised).

    Its str() is what a student reads (see `describe`, a grader.text.Phrase): never a grader module or class
    name. `where` is the student's frames that led to it, innermost last: each (file, line, function, source
    line), or a text.
    """

    def __init__(self, type_name: str, message: str, where: "str | list" = "", kinds: tuple[str, ...] = (),
                 call: str = "") -> None:
        self.frames = checked_frames(where) if isinstance(where, (list, tuple)) else []
        self.where = where_text(self.frames) if isinstance(where, (list, tuple)) else where
        self.type_name, self.message, self.call = type_name, message, call
        self.kinds = kinds or (type_name,)
        super().__init__(self.describe())

    def describe(self) -> str:
        error = _public(f"{self.type_name}: {self.message}" if self.message else self.type_name)
        text = Phrase("your code raised {error} while running `{call}`", error=error, call=self.call) if self.call \
            else Phrase("your code raised {error}", error=error)
        return text + "\n" + self.where if self.where else text


NEWLINE = "\n"
FRAMES_LIMIT = 8  # the student's frames an error may carry


def checked_frames(frames: Any) -> list[tuple[str, int, str, str]]:
    """The frames (file, line, function, source line) an error says, as the grader keeps them: texts cut, anything
    else dropped (a worker's reply is untrusted)."""
    kept = []
    for frame in list(frames)[-FRAMES_LIMIT:] if isinstance(frames, (list, tuple)) else []:
        if isinstance(frame, (list, tuple)) and len(frame) == 4 and type(frame[1]) is int:
            kept.append((student_text(frame[0], 200), frame[1], student_text(frame[2], 200),
                         student_text(frame[3])))  # (a source line as long as a message may be)
    return kept


def where_text(frames: list[tuple[str, int, str, str]]) -> str:
    """The lines that say where the error was, a frame a line ("" for none)."""
    return Phrase.joined(NEWLINE, [Phrase("  at {file}:{line} in {function}: {source}", file=file, line=line,
                                          function=function, source=source)
                                   for file, line, function, source in frames]) if frames else ""


class NotStarted(StudentError):
    """Student code raised NotImplementedError: the exercise has not been started."""

    def describe(self) -> str:
        if isinstance(self.message, Phrase):  # the grader's own words (tests/checklib/scratch.py: untouched stubs)
            return Phrase("not started: {what}", what=self.message)
        words = _public(self.message)
        if words in stub_words():  # a shipped stub's own words, as it raises them
            component, name = stub_words()[words]
            return Phrase("not started: {component}: write {name}", component=component, name=name)
        return Phrase("not started: {message}", message=words or "NotImplementedError")


@lru_cache(maxsize=1)
def stub_words() -> dict[str, tuple[str, str]]:
    """What the shipped stubs raise, `NotImplementedError("<component>: write <name>")`: each text with its component
    and name. The grader's own texts: code whose error says exactly one of them reads as not started in the reader's
    language; any other text is the code's own, quoted as it came. Read from the package's own copy of the stubs'
    code (the Chinese stubs: the English stubs' code, selftests/test_i18n holds them so), which every install
    ships and no learner edits, not from exercises/."""
    found = {}
    stubs = translated_stubs_dir("zh")
    for path in sorted(stubs.glob("*.py")) if stubs is not None and stubs.is_dir() else []:
        for words, component, name in STUB_RAISES.findall(path.read_text(encoding="utf-8")):
            found[words] = (component, name)
    return found


STUB_RAISES = re.compile(r'raise NotImplementedError\(\s*"(([a-z_]+): write ([^"]+))"\s*\)')


class LoadFailed(StudentError):
    """A file of the implementation is missing or failed to import."""

    def describe(self) -> str:
        return _public(self.message)


class StudentTimeout(StudentError):
    """Student code did not finish before the check's deadline."""

    def describe(self) -> str:
        return self.message


class StudentCrash(StudentError):
    """The process running student code died (segfault, os._exit, out of memory)."""

    def describe(self) -> str:
        return self.message


class WeightsMismatch(StudentError):
    """The checks' weights (named by the contract) do not fit the student's module: a KeyError."""

    def describe(self) -> str:
        return self.message


class CrossedOver(BaseException):
    """Code graded for one component reached a name of another that shares its worker (and whose stand-in the
    worker therefore does not hold): the grader grades that component again in a worker of its own. Raised in
    the worker (a BaseException, past student code's `except Exception`) and again on the grader's side, where
    no check takes it for the student's error."""


def _public(text: str) -> str:
    """`text` without the name of the package the grader imports the implementation as (a Phrase: in each field)."""
    if isinstance(text, Phrase) and text.fields:
        return Phrase(text.template, **{name: _public(value) for name, value in text.fields.items()})
    return re.sub(r"\b_drills_impl_\d+\.(?:_own_|_trusted_\w+\.)?", "", text)


class BadResult(StudentError):
    """Student code returned something that cannot cross to the grader (not tensors, numbers or strings)."""

    def describe(self) -> str:
        if self.call:
            return Phrase("your code returned something that is not tensors, numbers or strings from `{call}`: {error}",
                        call=self.call, error=_public(self.message))
        return Phrase("your code returned something that is not tensors, numbers or strings: {error}",
                    error=_public(self.message))


ERROR_CLASSES = {cls.__name__: cls for cls in (StudentError, LoadFailed, StudentTimeout, StudentCrash,
                                                   WeightsMismatch, BadResult)}
ERROR_CLASSES["not_started"] = NotStarted


def call_label(op: str, request: dict) -> str:
    """What a request is reported as: the implementation's name it calls ('attention.split_heads')."""
    name = request.get("name")
    call = "call" if op == "call_many" else op  # the same function either way
    label = name if isinstance(name, str) else f"{name.type_name}.{call}" if isinstance(name, Ref) else op
    if op in ("method", "getattr", "tensor_info", "load_weights") and isinstance(request.get("ref"), Ref):
        label = f"{request['ref'].type_name}.{name or op}"
    return label



KINDS_LIMIT = 64  # the names of an error's classes (its MRO) that a reply may carry
REPLY_FIELDS = frozenset({"id", "ok", "error", "meta_loaded"})
SWITCH_FIELDS = frozenset({"id", "ok", "crossed", "meta_loaded"})
ERROR_FIELDS = frozenset({"class", "type", "message", "where", "kinds"})
# What the result of a request is, by its op (the executor's `_op_*`), where that is one type; others may be any data.
RESULT_TYPES: dict[str, type] = {"load": type(None), "reset": type(None), "load_weights": type(None), "new": Ref,
                                 "tensor_info": dict, "grad": dict, "backward": dict, "call_many": list}


def student_text(value: Any, limit: int = MESSAGE_LIMIT) -> str:
    """A text that student code decided (an error's message, a name its code reached), as the grader keeps it:
    a str of at most `limit` characters. The one cut: everything a worker says passes here (`checked_reply`)."""
    return value[:limit] if type(value) is str else f"<not text: {type(value).__name__}>"


def wire_text(value: Any) -> Any:
    """A text as a worker sends it: a Phrase as its data (grader/text.py), anything else cut by `student_text`."""
    return data(value) if isinstance(value, Phrase) else student_text(value)


def checked_reply(reply: Any, op: str, expected_id: int) -> dict:
    """A worker's reply as the grader takes it: the answer to request `expected_id` (an `op`), with no field
    but those that answer says (`ok`, or an `error` of known fields, every text cut by `student_text`), else
    WireError. What a worker sends is untrusted: student code can write to the worker's end of the pipe."""
    if type(reply) is not dict:
        raise WireError("a reply that is not a dict")
    fields = SWITCH_FIELDS if op == "switch" else REPLY_FIELDS
    if not set(reply) <= fields or reply.get("id") != expected_id or type(reply.get("id")) is not int:
        raise WireError(f"a reply that does not answer request {expected_id} ({op})")
    checked: dict[str, Any] = {}
    if reply.get("meta_loaded", False) is not False:
        if reply["meta_loaded"] is not True:
            raise WireError("a malformed flag")
        checked["meta_loaded"] = True
    if op == "switch":
        if type(reply.get("ok")) is not bool or "crossed" not in reply:
            raise WireError("a malformed answer to a switch")
        checked["ok"] = reply["ok"]
        checked["crossed"] = None if reply["crossed"] is None else student_text(reply["crossed"], 200)
        return checked
    if ("ok" in reply) == ("error" in reply):
        raise WireError("a reply that is neither a result nor an error")
    if "ok" in reply:
        if op in RESULT_TYPES and type(reply["ok"]) is not RESULT_TYPES[op]:
            raise WireError(f"a result that no {op} request has")
        checked["ok"] = reply["ok"]
        return checked
    error = reply["error"]
    if type(error) is not dict or not set(error) <= ERROR_FIELDS or type(error.get("class")) is not str:
        raise WireError("a malformed error")
    kinds = error.get("kinds", [])
    if type(kinds) not in (list, tuple) or len(kinds) > KINDS_LIMIT:
        raise WireError("a malformed error")
    checked["error"] = {"class": student_text(error["class"], 40), "type": student_text(error.get("type", ""), 200),
                        "message": from_data(error.get("message", ""), student_text),
                        "where": checked_frames(error["where"]) if isinstance(error.get("where"), list) else
                        student_text(error.get("where", "")),
                        "kinds": [student_text(k, 200) for k in kinds]}
    return checked
