"""The trivial catalogue: submissions that do no work, which must earn (almost) nothing.

Each kind writes the exercise files with every function and method of the
contract answering the same way, whatever its inputs:

- ``zeros``, ``ones``, ``random``: a tensor of the right shape and dtype holding
  zeros, ones or random values (``randn``, bool outputs random booleans, drawn
  from a seed that the shape fixes, so that grades do not vary);
- ``reshaped``: one of its inputs, itself where the output has its shape,
  otherwise its values in order, cut or repeated to the right shape;
- ``echo``: the same with the values reversed, so that no layout comes out
  right by accident (as ``reshaped`` does for one head or one position);
- ``none``: ``None``;
- ``valueerror``: raises ``ValueError`` on every call;
- ``zeros_valueerrors``: ``zeros``, and raises the contract's ``ValueError``s
  (the checks of bad arguments, done right);
- ``stubs``: the untouched ``exercises/``.

Classes still construct: their ``__init__`` builds the contract's layers and
attributes (writing the layers is work that may pay, course.yml's ``standalone:``
checks). ``KVCache`` stores nothing, and ``len`` answers 1, None or raises ValueError
(``ones``, ``none``, ``valueerror``), or counts the positions handed to ``update`` (the other
kinds, whose forwards hand a cache their new positions: zeros, noise or the input itself), so
that a check of ``len`` alone cannot pay for a cache that holds nothing.

``python -m selftests.trivial DIR`` writes every kind under ``DIR/<kind>/``.
"""
from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXERCISES = ROOT / "exercises"
KINDS = ("zeros", "ones", "random", "echo", "reshaped", "none", "valueerror", "zeros_valueerrors", "stubs")

PRELUDE = '''"""A trivial submission ({kind}): every function answers without doing the work."""
from __future__ import annotations

import math
import zlib

import torch
import torch.nn as nn
from torch import Tensor

_KIND = "{kind}"


def _out(shape, like=None, *, dtype=None, device=None):
    """What this submission returns where a tensor of `shape` is due; `like` is the input it may echo."""
    if _KIND == "valueerror":
        raise ValueError("this submission raises ValueError everywhere")
    if _KIND == "none":
        return None
    shape = tuple(int(s) for s in shape)
    if _KIND in ("echo", "reshaped"):
        if not isinstance(like, Tensor) or tuple(like.shape) == shape:
            return like
        flat, size = like.flatten(), math.prod(shape)
        if _KIND == "echo":
            flat = flat.flip(0)
        if flat.numel() == 0:
            return like.new_zeros(shape)
        return flat.repeat(-(-size // flat.numel()))[:size].reshape(shape)
    if isinstance(like, Tensor):
        dtype, device = dtype or like.dtype, device or like.device
    dtype = dtype or torch.float32
    if _KIND == "ones":
        return torch.ones(shape, dtype=dtype, device=device)
    if _KIND == "random":  # the same values for the same shape, so that a grade does not vary
        gen = torch.Generator().manual_seed(zlib.crc32(repr(shape).encode()))
        if dtype == torch.bool:
            return (torch.rand(shape, generator=gen) < 0.5).to(device)
        return torch.randn(shape, generator=gen, dtype=dtype).to(device)
    return torch.zeros(shape, dtype=dtype, device=device)


def _many(*outs):
    return None if _KIND == "none" else outs


# The kinds whose KVCache counts the positions handed to update (the cheapest way to pass a check of len)
# and whose forwards hand a cache the new positions (keys and values of zeros, ones, noise or the input).
_COUNTING = ("zeros", "random", "echo", "reshaped", "zeros_valueerrors")


def _feed(cache, x, heads: int) -> None:
    """Hand `cache` the T new positions of x (B, T, D) as keys and values (B, heads, T, D // heads) that are no work."""
    if cache is None or _KIND not in _COUNTING:
        return
    batch, length, d_model = x.shape
    k = _out((batch, heads, length, d_model // heads), x)
    cache.update(k, k)


def _count():
    """What this submission answers where a number is due."""
    if _KIND == "valueerror":
        raise ValueError("this submission raises ValueError everywhere")
    return {{"none": None, "ones": 1, "random": 7}}.get(_KIND, 0)


def _reject(bad: bool, message: str) -> None:
    """The contract's ValueError, raised only by the kind that writes them."""
    if _KIND == "zeros_valueerrors" and bad:
        raise ValueError(message)
'''

SOURCES = {  # file -> its trivial source
    "attention.py": '''

def split_heads(x: Tensor, n_heads: int) -> Tensor:
    batch, length, d_model = x.shape
    _reject(d_model % n_heads != 0, "d_model is not divisible by n_heads")
    return _out((batch, n_heads, length, d_model // n_heads), x)


def merge_heads(x: Tensor) -> Tensor:
    batch, heads, length, d_head = x.shape
    return _out((batch, length, heads * d_head), x)


def attention_scores(q: Tensor, k: Tensor) -> Tensor:
    return _out((*q.shape[:-1], k.shape[-2]), q)


def causal_mask(q_len: int, k_len: int | None = None, *, device=None) -> Tensor:
    k_len = q_len if k_len is None else k_len
    _reject(k_len < q_len, "k_len is smaller than q_len")
    return _out((q_len, k_len), q_len, dtype=torch.bool, device=device)


def apply_mask(scores: Tensor, mask: Tensor | None) -> Tensor:
    return _out(scores.shape, scores)


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None):
    return _many(_out((*q.shape[:-1], v.shape[-1]), v), _out((*q.shape[:-1], k.shape[-2]), q))


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, bias: bool = True) -> None:
        super().__init__()
        _reject(d_model % n_heads != 0, "d_model is not divisible by n_heads")
        self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.last_attention = None

    def project_qkv(self, x: Tensor):
        return _many(_out(x.shape, x), _out(x.shape, x), _out(x.shape, x))

    def forward(self, x: Tensor, mask: Tensor | None = None, cache=None) -> Tensor:
        _reject(mask is not None and cache is not None, "a mask cannot be given together with a cache")
        _feed(cache, x, self.n_heads)
        batch, length, _ = x.shape
        self.last_attention = _out((batch, self.n_heads, length, length), x)
        return _out(x.shape, x)
''',
    "positional.py": '''

def sinusoidal_positional_encoding(max_len: int, d_model: int) -> Tensor:
    _reject(max_len <= 0 or d_model <= 0 or d_model % 2 != 0, "max_len and d_model must be positive, d_model even")
    return _out((max_len, d_model), max_len, dtype=torch.float32)
''',
    "block.py": '''
from .attention import MultiHeadAttention


class TransformerBlock(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.attention = MultiHeadAttention(d_model, n_heads)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None, cache=None) -> Tensor:
        _feed(cache, x, self.attention.n_heads)
        return _out(x.shape, x)
''',
    "vit.py": '''

def patchify(images: Tensor, patch_size: int) -> Tensor:
    batch, channels, height, width = images.shape
    _reject(height % patch_size != 0 or width % patch_size != 0, "H and W must be multiples of patch_size")
    n_patches = (height // patch_size) * (width // patch_size)
    return _out((batch, n_patches, channels * patch_size * patch_size), images)


class PatchEmbedding(nn.Module):
    def __init__(self, img_size: int, patch_size: int, in_channels: int, d_model: int) -> None:
        super().__init__()
        self.img_size, self.patch_size, self.in_channels = img_size, patch_size, in_channels
        self.num_patches = (img_size // patch_size) ** 2
        self.proj = nn.Linear(in_channels * patch_size**2, d_model)

    def forward(self, images: Tensor) -> Tensor:
        _reject(tuple(images.shape[1:]) != (self.in_channels, self.img_size, self.img_size),
                "the images must be in_channels x img_size x img_size")
        return _out((images.shape[0], self.num_patches, self.proj.out_features), images)


class ViT(nn.Module):
    def __init__(self, img_size: int, patch_size: int, in_channels: int, n_classes: int, d_model: int,
                 n_heads: int, n_layers: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        from .block import TransformerBlock

        self.patch_embed = PatchEmbedding(img_size, patch_size, in_channels, d_model)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d_model))
        self.pos_emb = nn.Parameter(torch.zeros(1, self.patch_embed.num_patches + 1, d_model))
        self.blocks = nn.ModuleList(TransformerBlock(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_classes)

    def forward(self, images: Tensor) -> Tensor:
        return _out((images.shape[0], self.head.out_features), images)
''',
    "kv_cache.py": '''

class KVCache:
    """Stores nothing, yet counts the positions it was handed, as a real cache's len does."""

    def __init__(self) -> None:
        self.positions = 0

    def update(self, k: Tensor, v: Tensor):
        self.positions += int(k.shape[-2])
        return _many(_out(k.shape, k), _out(v.shape, v))

    def __len__(self) -> int:
        count = _count()
        return self.positions if _KIND in _COUNTING and count is not None else count
''',
    "norms.py": '''

class LayerNorm(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x: Tensor) -> Tensor:
        return _out(x.shape, x)


class RMSNorm(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: Tensor) -> Tensor:
        return _out(x.shape, x)
''',
    "rope.py": '''

def rope_angles(max_len: int, head_dim: int, base: float = 10000.0):
    _reject(max_len <= 0 or head_dim <= 0 or head_dim % 2 != 0, "max_len and head_dim must be positive, head_dim even")
    shape = (max_len, head_dim // 2)
    return _many(_out(shape, max_len, dtype=torch.float32), _out(shape, max_len, dtype=torch.float32))


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor, positions: Tensor | None = None) -> Tensor:
    _reject(x.shape[-1] != 2 * cos.shape[-1], "Dh is not twice the tables' width")
    rows = torch.arange(x.shape[-2]) if positions is None else positions
    _reject(rows.numel() > 0 and (int(rows.min()) < 0 or int(rows.max()) >= cos.shape[0]),
            "a position is outside the tables")
    return _out(x.shape, x)
''',
    "ffn.py": '''

class SwiGLU(nn.Module):
    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.w_gate = nn.Linear(d_model, d_ff, bias=False)
        self.w_up = nn.Linear(d_model, d_ff, bias=False)
        self.w_down = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return _out(x.shape, x)
''',
    "gqa.py": '''

def repeat_kv(x: Tensor, n_rep: int) -> Tensor:
    _reject(n_rep < 1, "n_rep must be at least 1")
    batch, heads, length, d_head = x.shape
    return _out((batch, heads * n_rep, length, d_head), x)


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, bias: bool = False) -> None:
        super().__init__()
        _reject(n_kv_heads < 1 or d_model % n_heads != 0 or n_heads % n_kv_heads != 0,
                "need n_heads | d_model and n_kv_heads | n_heads")
        self.d_model, self.n_heads, self.n_kv_heads, self.d_k = d_model, n_heads, n_kv_heads, d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)
        self.w_v = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x: Tensor, mask: Tensor | None = None, *, rope=None, cache=None) -> Tensor:
        _reject(mask is not None and cache is not None, "a mask cannot be given together with a cache")
        _feed(cache, x, self.n_kv_heads)
        return _out(x.shape, x)
''',
    "training.py": '''

def softmax(x: Tensor, dim: int = -1) -> Tensor:
    return _out(x.shape, x)


def log_softmax(x: Tensor, dim: int = -1) -> Tensor:
    return _out(x.shape, x)


def cross_entropy(logits: Tensor, targets: Tensor, *, ignore_index: int = -100) -> Tensor:
    _reject(targets.shape != logits.shape[:-1], "targets must have the shape of logits[..., 0]")
    return _out((), logits)


class AdamW(torch.optim.Optimizer):
    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01) -> None:
        _reject(min(lr, eps, weight_decay) < 0 or not all(0 <= b < 1 for b in betas), "bad AdamW settings")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                new = None if p.grad is None else _out(p.shape, p.grad)
                if new is not None:
                    p.copy_(new)
        return None


def clip_grad_norm(parameters, max_norm: float) -> Tensor:
    grads = [p.grad for p in parameters if p.grad is not None]
    for g in grads:
        new = _out(g.shape, g)
        if new is not None:
            g.copy_(new)
    return _out((), grads[0])


def lr_at(step: int, *, max_lr: float, min_lr: float, warmup_steps: int, total_steps: int) -> float:
    _reject(step < 0 or warmup_steps < 0 or total_steps <= warmup_steps, "bad schedule arguments")
    count = _count()
    return None if count is None else float(count)
''',
    "sampling.py": '''

def filter_logits(logits: Tensor, *, temperature: float = 1.0, top_k: int | None = None,
                  top_p: float | None = None) -> Tensor:
    _reject(temperature <= 0 or (top_k is not None and top_k < 1) or (top_p is not None and not 0 < top_p <= 1),
            "bad filter settings")
    return _out(logits.shape, logits)


def sample_next_token(logits: Tensor, *, temperature: float = 1.0, top_k: int | None = None,
                      top_p: float | None = None, generator: torch.Generator | None = None) -> Tensor:
    out = _out(logits.shape[:-1], logits, dtype=torch.int64)
    return out.clamp(0, logits.shape[-1] - 1) if isinstance(out, Tensor) and not out.is_floating_point() else out


def generate(model: nn.Module, idx: Tensor, max_new_tokens: int, *, temperature: float = 0.0,
             top_k: int | None = None, top_p: float | None = None,
             generator: torch.Generator | None = None) -> Tensor:
    _reject(max_new_tokens < 0 or idx.shape[1] + max_new_tokens > model.max_len, "bad generate lengths")
    out = _out((idx.shape[0], idx.shape[1] + max_new_tokens), idx)
    return out.clamp(0, model.vocab_size - 1) if isinstance(out, Tensor) else out
''',
    "gpt.py": '''
from .ffn import SwiGLU
from .kv_cache import KVCache
from .norms import RMSNorm


class _Attention(nn.Module):
    """GroupedQueryAttention's layers (held here, so that gpt.py needs no gqa.py)."""

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int) -> None:
        super().__init__()
        kv = n_kv_heads * (d_model // n_heads)
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_k = nn.Linear(d_model, kv, bias=False)
        self.w_v = nn.Linear(d_model, kv, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)


class DecoderBlock(nn.Module):
    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, d_ff: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(d_model, eps)
        self.attn = _Attention(d_model, n_heads, n_kv_heads)
        self.ffn_norm = RMSNorm(d_model, eps)
        self.ffn = SwiGLU(d_model, d_ff)
        self.kv_heads = n_kv_heads

    def forward(self, x: Tensor, mask=None, *, rope=None, cache=None) -> Tensor:
        _feed(cache, x, self.kv_heads)
        return _out(x.shape, x)


class TinyLM(nn.Module):
    def __init__(self, vocab_size: int, max_len: int, d_model: int, n_heads: int, n_kv_heads: int,
                 n_layers: int, d_ff: int, rope_base: float = 10000.0) -> None:
        super().__init__()
        self.vocab_size, self.max_len = vocab_size, max_len
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList(DecoderBlock(d_model, n_heads, n_kv_heads, d_ff) for _ in range(n_layers))
        self.norm = RMSNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)

    def new_caches(self) -> list:
        return [KVCache() for _ in self.blocks]

    def forward(self, idx: Tensor, caches=None) -> Tensor:
        start = 0 if caches is None else len(caches[0])
        _reject(start + idx.shape[1] > self.max_len, "positions beyond max_len")
        return _out((*idx.shape, self.vocab_size), self.tok_emb(idx))
''',
    "swin.py": '''

def window_partition(x: Tensor, window_size: int) -> Tensor:
    batch, height, width, channels = x.shape
    _reject(height % window_size != 0 or width % window_size != 0, "H and W must be multiples of window_size")
    n_windows = (height // window_size) * (width // window_size)
    return _out((batch * n_windows, window_size * window_size, channels), x)


def window_reverse(windows: Tensor, window_size: int, H: int, W: int) -> Tensor:
    n_windows = (H // window_size) * (W // window_size)
    return _out((windows.shape[0] // n_windows, H, W, windows.shape[-1]), windows)


def shifted_window_mask(H: int, W: int, window_size: int, shift_size: int, *, device=None) -> Tensor:
    _reject(not 0 <= shift_size < window_size or H % window_size != 0 or W % window_size != 0,
            "need 0 <= shift_size < window_size, and H and W multiples of window_size")
    tokens = window_size * window_size
    return _out(((H // window_size) * (W // window_size), tokens, tokens), H, dtype=torch.bool, device=device)


class WindowAttention(nn.Module):
    def __init__(self, dim: int, window_size: int, n_heads: int) -> None:
        super().__init__()
        self.dim, self.window_size, self.n_heads = dim, window_size, n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.relative_position_bias_table = nn.Parameter(torch.zeros((2 * window_size - 1) ** 2, n_heads))
        tokens = window_size * window_size
        self.register_buffer("relative_position_index", torch.zeros(tokens, tokens, dtype=torch.long))

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        return _out(x.shape, x)


class SwinBlock(nn.Module):
    def __init__(self, dim: int, n_heads: int, window_size: int, shift_size: int = 0, mlp_ratio: float = 4.0) -> None:
        super().__init__()
        self.window_size, self.shift_size = window_size, shift_size
        self.norm1 = nn.LayerNorm(dim)
        self.norm2 = nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, window_size, n_heads)
        hidden = int(dim * mlp_ratio)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x: Tensor) -> Tensor:
        _reject(x.shape[1] % self.window_size != 0 or x.shape[2] % self.window_size != 0,
                "H and W must be multiples of window_size")
        return _out(x.shape, x)
''',
    "tokenizer.py": '''

def train_bpe(text: str, vocab_size: int, special_tokens=()):
    _reject(vocab_size < 256 + len(special_tokens), "vocab_size is below 256 + len(special_tokens)")
    _count()  # (raises ValueError for that kind)
    if _KIND == "none":
        return None
    if _KIND in ("echo", "reshaped"):  # the bytes, and the text's first two characters as its one merge
        return {i: bytes([i]) for i in range(256)}, [(text[:1].encode("utf-8"), text[1:2].encode("utf-8"))]
    if _KIND in ("ones", "random"):  # the bytes and the special tokens, no merge
        vocab = {i: bytes([i]) for i in range(256)}
        vocab.update({256 + i: s.encode("utf-8") for i, s in enumerate(special_tokens)})
        return vocab, []
    return {}, []


class BPETokenizer:
    def __init__(self, vocab, merges, special_tokens=()) -> None:
        _count()
        self.vocab = vocab
        for s in special_tokens:
            _reject(s.encode("utf-8") not in vocab.values(), "a special token is not in vocab")

    def encode(self, text: str):
        count = _count()
        if count is None:
            return None
        if _KIND in ("echo", "reshaped"):  # the text's bytes as ids
            return list(text.encode("utf-8"))
        return [count] * len(text)

    def decode(self, ids):
        _reject(any(i not in self.vocab for i in ids), "an id is not in vocab")
        count = _count()
        if count is None:
            return None
        if _KIND in ("echo", "reshaped"):  # each id as the character of that code point
            return "".join(chr(i) for i in ids)
        return ""
''',
    "alignment.py": '''

def sequence_logprobs(logits: Tensor, labels: Tensor, mask: Tensor) -> Tensor:
    _reject(labels.shape != logits.shape[:2] or mask.shape != labels.shape, "labels and mask must be logits.shape[:2]")
    return _out(logits.shape[:1], logits)


def dpo_loss(policy_chosen: Tensor, policy_rejected: Tensor, ref_chosen: Tensor, ref_rejected: Tensor,
             beta: float = 0.1):
    _reject(not (policy_chosen.shape == policy_rejected.shape == ref_chosen.shape == ref_rejected.shape),
            "the four shapes differ")
    return _many(_out((), policy_chosen), _out(policy_chosen.shape, policy_chosen),
                 _out(policy_rejected.shape, policy_rejected))


def group_advantages(rewards: Tensor, group_size: int, eps: float = 1e-4) -> Tensor:
    _reject(group_size < 2 or rewards.numel() % group_size != 0, "bad group_size")
    return _out(rewards.shape, rewards)


def grpo_loss(logps: Tensor, old_logps: Tensor, ref_logps: Tensor, advantages: Tensor, mask: Tensor,
              clip_eps: float = 0.2, beta: float = 0.04) -> Tensor:
    return _out((), logps)
''',
}


def materialize(kind: str, dest: Path) -> Path:
    """Write the trivial submission `kind` (one of KINDS) into the new folder `dest`; returns `dest`."""
    if kind not in KINDS:
        raise ValueError(f"unknown trivial kind {kind!r}; known: {', '.join(KINDS)}")
    dest = Path(dest)
    if kind == "stubs":
        shutil.copytree(EXERCISES, dest, ignore=shutil.ignore_patterns("__pycache__"))
        return dest
    dest.mkdir(parents=True)
    (dest / "__init__.py").write_text(f'"""A trivial submission: {kind}."""\n')
    for name, body in SOURCES.items():
        (dest / name).write_text(PRELUDE.format(kind=kind) + body)
    return dest
