"""The data that crosses the boundary between the grader and a worker.

Messages are nested dicts, lists and tuples of None, bool, int, float, str,
bytes and tensors. A tensor travels as its dtype, shape, device and raw bytes;
it is rebuilt as a plain `torch.Tensor` on the other side. Decoding uses a
pickle unpickler that refuses every class, so nothing but this data can come
back from student code: no objects, no Tensor subclasses, no code.

What a worker sends is bounded after decoding as well as before: pickle can
refer to an object again in two bytes, so a megabyte of references to one
list can stand for gigabytes once rebuilt. `decode` refuses a container met
twice (an honest message, made by `encode`, never shares one) and counts what
it rebuilds, every string and bytes object at each place it occurs, against
DECODED_LIMIT: the decoded message is never larger than that, however its
bytes were made.
"""
from __future__ import annotations

import io
import os
import pickle
from dataclasses import dataclass
from typing import Any

import torch

DTYPES: dict[str, torch.dtype] = {
    str(d).removeprefix("torch."): d
    for d in (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.bool, torch.uint8,
              torch.int8, torch.int16, torch.int32, torch.int64, torch.complex64, torch.complex128)
}
DTYPE_NAMES = {d: name for name, d in DTYPES.items()}
NUMPY_DTYPES = frozenset(DTYPES.values()) - {torch.bfloat16}  # the dtypes numpy has
DEVICES = ("cpu", "meta")
TENSOR, DTYPE, DEVICE, REF = "__tensor__", "__dtype__", "__device__", "__ref__"
DECODED_LIMIT = 256 * 1024 * 1024  # what one message may rebuild: its strings' and bytes' lengths, 16 per other item
NAME_LIMIT = 200  # a dtype's, device's or a Ref's type's name


@dataclass(frozen=True)
class Ref:
    """An object that lives on the implementation's side, known to the grader by id."""

    id: int
    type_name: str


class WireError(Exception):
    """A message is not well-formed data."""


class _NoClasses(pickle.Unpickler):
    def find_class(self, module: str, name: str):  # noqa: D102 - refuse every global
        raise WireError(f"refused to load {module}.{name}: only plain data may cross the boundary")


_PLAIN = frozenset({type(None), bool, int, float, str, bytes})


def encode(value: Any) -> Any:
    kind = type(value)
    if kind in _PLAIN:  # most of a message: tested first
        return value
    if kind is dict:
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, torch.Tensor):
        tensor = value.detach()
        device = tensor.device.type
        if device not in DEVICES:
            tensor, device = tensor.cpu(), "cpu"
        data = b"" if device == "meta" or tensor.numel() == 0 else _raw_bytes(tensor)
        return {TENSOR: DTYPE_NAMES.get(tensor.dtype) or str(tensor.dtype).removeprefix("torch."), "shape": list(tensor.shape),
                "device": device, "data": data}
    if isinstance(value, Ref):
        return {REF: value.id, "type": value.type_name}
    if isinstance(value, torch.dtype):
        return {DTYPE: str(value).removeprefix("torch.")}
    if isinstance(value, torch.device):
        return {DEVICE: str(value)}
    if isinstance(value, torch.Size):
        return tuple(int(v) for v in value)
    if isinstance(value, tuple):
        return tuple(encode(v) for v in value)
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    raise WireError(f"cannot send a {type(value).__name__}")


def _raw_bytes(tensor: torch.Tensor) -> bytes:
    """The values in row-major order, as bytes."""
    if tensor.is_conj() or tensor.is_neg():  # (lazily conjugated or negated views: their values made real)
        tensor = tensor.resolve_conj().resolve_neg()
    if tensor.dtype in NUMPY_DTYPES:  # numpy reads any strides (3x faster than copying in torch first)
        return tensor.numpy().tobytes()
    # a fresh copy: `.contiguous()` keeps odd strides on size-1 dimensions, which `view` refuses
    return tensor.clone(memory_format=torch.contiguous_format).reshape(-1).view(torch.uint8).numpy().tobytes()


def decode(value: Any, limit: int = DECODED_LIMIT) -> Any:
    """The message's values rebuilt (tensors, dtypes, devices, Refs), within `limit` (see the module docstring)."""
    return _Decoder(limit).decode(value)


class _Decoder:
    def __init__(self, limit: int) -> None:
        self.left = limit
        self.seen: set[int] = set()  # the containers met so far, by id (each is held by the message: ids stay unique)

    def count(self, size: int) -> None:
        self.left -= size
        if self.left < 0:
            raise WireError("the message is larger than the grader takes once decoded")

    def container(self, value: Any) -> None:
        if id(value) in self.seen:
            raise WireError("the message refers to one container twice (honest messages never do)")
        self.seen.add(id(value))
        self.count(16 + 8 * len(value))

    def decode(self, value: Any) -> Any:
        kind = type(value)
        if kind is str or kind is bytes:
            self.count(16 + len(value))
            return value
        if kind in _PLAIN:
            self.count(16)
            return value
        if kind is dict:
            self.container(value)
            if TENSOR in value:
                return _tensor(value, self)
            if DTYPE in value:
                return _dtype(value[DTYPE])
            if DEVICE in value:
                return torch.device(_name(value[DEVICE]))
            if REF in value:
                if type(value[REF]) is not int:
                    raise WireError("malformed reference")
                return Ref(value[REF], _name(value.get("type", "?")))
            return {self.decode(k): self.decode(v) for k, v in value.items()}
        if kind is list:
            self.container(value)
            return [self.decode(v) for v in value]
        if kind is tuple:
            if value:  # (the empty tuple is one object wherever it occurs)
                self.container(value)
            return tuple(self.decode(v) for v in value)
        raise WireError(f"not plain data: {kind.__name__}")


def _name(value: Any) -> str:
    if type(value) is not str or len(value) > NAME_LIMIT:
        raise WireError("malformed name")
    return value


def _dtype(name: Any) -> torch.dtype:
    if type(name) is not str or name not in DTYPES:
        raise WireError(f"unknown dtype {name[:20]!r}" if type(name) is str else "malformed dtype")
    return DTYPES[name]


def _tensor(spec: dict, decoder: _Decoder) -> torch.Tensor:
    dtype = _dtype(spec.get(TENSOR))
    shape, device, data = spec.get("shape"), spec.get("device"), spec.get("data")
    if (type(shape) is not list or len(shape) > 64 or not all(type(s) is int and 0 <= s < 1 << 62 for s in shape)
            or type(device) is not str or device not in DEVICES):
        raise WireError("malformed tensor")
    decoder.count(16 + 8 * len(shape) + (len(data) if type(data) is bytes else 0))
    if device == "meta":
        return torch.empty(shape, dtype=dtype, device="meta")
    numel = 1
    for s in shape:
        numel *= s
    itemsize = dtype.itemsize
    if type(data) is not bytes or len(data) != numel * itemsize:
        raise WireError("tensor data does not match its shape and dtype")
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(data), dtype=dtype).reshape(shape)


def dumps(value: Any) -> bytes:
    return pickle.dumps(encode(value), protocol=5)


def loads(data: bytes, limit: int = DECODED_LIMIT) -> Any:
    if len(data) > limit:
        raise WireError("the message is larger than the grader takes")
    try:
        return decode(_NoClasses(io.BytesIO(data)).load(), limit)
    except WireError:
        raise
    except Exception as exc:  # truncated or forged bytes
        raise WireError(f"unreadable message: {type(exc).__name__}: {str(exc)[:200]}") from None


# --- framing over plain pipes (a spawned worker's stdin and stdout: grader/sandbox/spawner.py, worker.py `main`) ---
# Each message is its length (8 bytes, little-endian) and its bytes: os.read and os.write only, which every platform
# has for pipes (multiprocessing's Connection needs a socket on Windows).


class Frames:
    """Messages one way in, one way out, over two file descriptors (the same `send_bytes`/`recv_bytes` as a
    multiprocessing Connection, so that a worker's loop serves either)."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd, self.write_fd = read_fd, write_fd

    def fileno(self) -> int:
        return self.read_fd

    def send_bytes(self, data: bytes) -> None:
        view = memoryview(len(data).to_bytes(8, "little") + data)
        while view:
            view = view[os.write(self.write_fd, view):]

    def recv_bytes(self, maxlength: int | None = None) -> bytes:
        size = int.from_bytes(self._read(8), "little")
        if maxlength is not None and size > maxlength:
            raise OSError("bad message length")
        return self._read(size)

    def _read(self, size: int) -> bytes:
        chunks, left = [], size
        while left:
            chunk = os.read(self.read_fd, min(left, 1 << 20))
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        for fd in {self.read_fd, self.write_fd}:
            try:
                os.close(fd)
            except OSError:
                pass
