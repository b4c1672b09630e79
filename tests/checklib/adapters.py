"""The one place where the checks meet student code (as CS336's tests/adapters.py).

Each entry point of the contract is named here once: a function for each
function, a constructor for each class, every one taking the target under test
(the `impl` fixture). The checks call these, never a dotted name of their own,
so that a renamed or moved entry point is one edit, and a selftest holds this
file to the contract's owners table (grader/contract.py).
"""
from __future__ import annotations

from typing import Any

from grader.engine.target import RemoteFunction, RemoteObject, Target


# --- attention.py

def split_heads(impl: Target) -> RemoteFunction:
    return impl.fn("attention.split_heads")

def merge_heads(impl: Target) -> RemoteFunction:
    return impl.fn("attention.merge_heads")

def attention_scores(impl: Target) -> RemoteFunction:
    return impl.fn("attention.attention_scores")

def causal_mask(impl: Target) -> RemoteFunction:
    return impl.fn("attention.causal_mask")

def apply_mask(impl: Target) -> RemoteFunction:
    return impl.fn("attention.apply_mask")

def scaled_dot_product_attention(impl: Target) -> RemoteFunction:
    return impl.fn("attention.scaled_dot_product_attention")

def MultiHeadAttention(impl: Target, *args: Any, **kwargs: Any) -> RemoteObject:
    return impl.new("attention.MultiHeadAttention", *args, **kwargs)

# --- positional.py

def sinusoidal_positional_encoding(impl: Target) -> RemoteFunction:
    return impl.fn("positional.sinusoidal_positional_encoding")

# --- block.py

def TransformerBlock(impl: Target, *args: Any, **kwargs: Any) -> RemoteObject:
    return impl.new("block.TransformerBlock", *args, **kwargs)

# --- vit.py

def patchify(impl: Target) -> RemoteFunction:
    return impl.fn("vit.patchify")

def PatchEmbedding(impl: Target, *args: Any, **kwargs: Any) -> RemoteObject:
    return impl.new("vit.PatchEmbedding", *args, **kwargs)

def ViT(impl: Target, *args: Any, **kwargs: Any) -> RemoteObject:
    return impl.new("vit.ViT", *args, **kwargs)

# --- kv_cache.py

def KVCache(impl: Target, *args: Any, **kwargs: Any) -> RemoteObject:
    return impl.new("kv_cache.KVCache", *args, **kwargs)

# --- norms.py

def LayerNorm(impl: Target, *args: Any, **kwargs: Any) -> RemoteObject:
    return impl.new("norms.LayerNorm", *args, **kwargs)

def RMSNorm(impl: Target, *args: Any, **kwargs: Any) -> RemoteObject:
    return impl.new("norms.RMSNorm", *args, **kwargs)

# --- rope.py

def rope_angles(impl: Target) -> RemoteFunction:
    return impl.fn("rope.rope_angles")

def apply_rope(impl: Target) -> RemoteFunction:
    return impl.fn("rope.apply_rope")

def apply_rope_with_tables(impl: Target, cos: Any, sin: Any) -> RemoteObject:
    """apply_rope(x, cos, sin, positions) called as `held(x, positions)`, the same table objects every call (as a
    model's buffers are), so that what apply_rope keeps between calls, keyed by the tables, is used again."""
    return impl.new_trusted("SameObjects", "rope.apply_rope", [1, 2], cos, sin)

# --- ffn.py

def SwiGLU(impl: Target, *args: Any, **kwargs: Any) -> RemoteObject:
    return impl.new("ffn.SwiGLU", *args, **kwargs)

# --- gqa.py

def repeat_kv(impl: Target) -> RemoteFunction:
    return impl.fn("gqa.repeat_kv")

def GroupedQueryAttention(impl: Target, *args: Any, **kwargs: Any) -> RemoteObject:
    return impl.new("gqa.GroupedQueryAttention", *args, **kwargs)

def with_rope_tables(impl: Target, module: RemoteObject, cos: Any, sin: Any) -> RemoteObject:
    """`module(x, ..., rope=(cos, sin))` called as `held(x, ...)`, the same table objects every call (as a model's
    buffers are), so that what the module keeps between calls, keyed by the tables, is used again."""
    return impl.new_trusted("SameObjects", module.ref, [], rope=(cos, sin))

# --- training.py

def softmax(impl: Target) -> RemoteFunction:
    return impl.fn("training.softmax")

def log_softmax(impl: Target) -> RemoteFunction:
    return impl.fn("training.log_softmax")

def cross_entropy(impl: Target) -> RemoteFunction:
    return impl.fn("training.cross_entropy")

def AdamW(impl: Target, *args: Any, **kwargs: Any) -> RemoteObject:
    return impl.new("training.AdamW", *args, **kwargs)

def clip_grad_norm(impl: Target) -> RemoteFunction:
    return impl.fn("training.clip_grad_norm")

def lr_at(impl: Target) -> RemoteFunction:
    return impl.fn("training.lr_at")

# --- sampling.py

def filter_logits(impl: Target) -> RemoteFunction:
    return impl.fn("sampling.filter_logits")

def sample_next_token(impl: Target) -> RemoteFunction:
    return impl.fn("sampling.sample_next_token")

def generate(impl: Target) -> RemoteFunction:
    return impl.fn("sampling.generate")

# --- gpt.py

def DecoderBlock(impl: Target, *args: Any, **kwargs: Any) -> RemoteObject:
    return impl.new("gpt.DecoderBlock", *args, **kwargs)

def TinyLM(impl: Target, *args: Any, **kwargs: Any) -> RemoteObject:
    return impl.new("gpt.TinyLM", *args, **kwargs)


# --- swin.py

def window_partition(impl: Target) -> RemoteFunction:
    return impl.fn("swin.window_partition")

def window_reverse(impl: Target) -> RemoteFunction:
    return impl.fn("swin.window_reverse")

def shifted_window_mask(impl: Target) -> RemoteFunction:
    return impl.fn("swin.shifted_window_mask")

def WindowAttention(impl: Target, *args: Any, **kwargs: Any) -> RemoteObject:
    return impl.new("swin.WindowAttention", *args, **kwargs)

def SwinBlock(impl: Target, *args: Any, **kwargs: Any) -> RemoteObject:
    return impl.new("swin.SwinBlock", *args, **kwargs)


# --- tokenizer.py: a vocabulary (dict[int, bytes]) crosses the wire as (id, bytes) pairs, through the WithVocab tool
# (a dict's keys travel as strings)

def train_bpe(impl: Target) -> RemoteFunction:
    """`train_bpe` as called directly: for calls that must raise."""
    return impl.fn("tokenizer.train_bpe")

def train_bpe_vocab(impl: Target) -> Any:
    """`train_bpe(...)` returning `(vocab, merges)` with `vocab` a dict again (its keys as they came); what is
    not a pair of a dict and something else comes back as it came."""
    tool = impl.new_trusted("WithVocab")

    def call(*args: Any, **kwargs: Any) -> Any:
        result = tool.method("train_bpe", *args, **kwargs)
        if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], tuple) and \
                len(result[0]) == 2 and result[0][0] == "pairs":
            return dict(result[0][1]), result[1]
        return result
    return call

def BPETokenizer(impl: Target, vocab: dict, merges: Any, special_tokens: Any = ()) -> RemoteObject:
    """`BPETokenizer(vocab, merges, special_tokens)`, its vocabulary sent as pairs (impl.new("tokenizer.BPETokenizer")
    would send its keys as strings)."""
    return impl.new_trusted("WithVocab").method("tokenizer", list(vocab.items()), list(merges), tuple(special_tokens))


# --- alignment.py

def sequence_logprobs(impl: Target) -> RemoteFunction:
    return impl.fn("alignment.sequence_logprobs")

def dpo_loss(impl: Target) -> RemoteFunction:
    return impl.fn("alignment.dpo_loss")

def group_advantages(impl: Target) -> RemoteFunction:
    return impl.fn("alignment.group_advantages")

def grpo_loss(impl: Target) -> RemoteFunction:
    return impl.fn("alignment.grpo_loss")
