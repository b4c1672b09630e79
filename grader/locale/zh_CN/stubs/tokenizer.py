"""字节级 BPE：训练分词器的合并规则，并用它们对文本编码。

这里有两个组件：

- ``bpe_training``：``train_bpe``，从一段文本中学习合并规则；
- ``bpe_encoding``：``BPETokenizer``，把文本转成 token id，再转回来。

模型读的是整数，不是文本。字节级 BPE（byte-pair encoding，GPT-2 的分词器）从 256
个可能的字节出发，因此每个字符串都有编码（它的 UTF-8 字节），然后学习“合并”：训练
文本中出现最多的相邻 token 对变成一个新 token，如此反复。常见的词最后成为一个 token，
罕见的词成为几段，永远不会有未知的东西。

两个组件用同样的方式切分文本，token 对永远不跨越切分点：

1. 先在特殊 token 处切分（例如 ``"<|endoftext|>"``）：文本在每一处特殊 token 出现的
   地方被切开，最左边的优先；若有几个从同一位置开始，取最长的。特殊 token 就是一个
   token，永远不被预分词，也不被合并。
2. 再用 GPT-2 的预分词模式 ``PAT``（见下）通过 ``regex`` 包切分每两个特殊 token 之间
   的片段：预分词结果是 ``PAT.finditer(piece)`` 的各个匹配，每个取其 UTF-8 编码的字节
   （``" hello"``、``"'s"``、``" 2026"``、``"!!"`` 等）。

你可以使用 ``regex`` 和 ``collections``；``tokenizers``、``tiktoken`` 和
``sentencepiece`` 包会替你完成练习，检查项会拒绝它们。
"""
from __future__ import annotations

import regex

# GPT-2 的预分词模式：缩写、字母、数字、其他符号、空白。
PAT = regex.compile(r"'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+")


def train_bpe(text: str, vocab_size: int, special_tokens=()) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """从 ``text`` 学习字节级 BPE 的合并规则：返回 ``(vocab, merges)``。

    ``vocab: dict[int, bytes]``：id 0..255 是单个字节（``vocab[b] == bytes([b])``），
    接着是按给定顺序排列的特殊 token（id 从 256 开始，取其 UTF-8 字节），然后按学习
    顺序每个合并一项（第 ``i`` 个合并的 id 是 ``256 + len(special_tokens) + i``，值为
    它的两个字节串拼接）。``merges: list[tuple[bytes, bytes]]``，按学习顺序排列。

    一个 token 对的计数是预分词结果内部持有它的相邻位置个数，对每个预分词结果的
    每次出现求和：``b"aaa"`` 持有 ``(b"a", b"a")`` 两次。token 对永远不跨越两个预分词
    结果或一个特殊 token。每一步合并计数最高的 token 对；计数相同时，按 Python 对
    ``(bytes, bytes)`` 元组的排序取较大的那个（并列者的 ``max``）。合并在每个预分词
    结果中从左到右、不重叠地替换该 token 对（``a a a`` 变成 ``aa a``）。当词表达到
    ``vocab_size`` 项时停止训练；若没有任何预分词结果还剩两个 token，则提前停止。

    若 ``vocab_size < 256 + len(special_tokens)``，抛出 ``ValueError``（计分）。

    TODO (bpe_training)，分步说明：
      1. 检查 ``vocab_size``；用 256 个字节、再加上特殊 token 建立 ``vocab``。
      2. 在特殊 token 处切开 ``text``（同一位置开始的取最长），用 ``PAT.finditer``
         对每个片段预分词；把每个预分词结果作为单字节元组计数（元组的
         ``collections.Counter``：相同的预分词结果只记一次，带上出现次数）。
      3. 直到 ``vocab`` 有 ``vocab_size`` 项：统计每个相邻 token 对（乘以预分词结果
         的计数）；若一个也没有就停止；取计数最高的 token 对，并列时取 ``max``。
      4. 把它加入 ``merges``，把它拼接后的字节以下一个 id 加入 ``vocab``，并在每个
         预分词结果中从左到右、不重叠地合并该 token 对。
    """
    raise NotImplementedError("bpe_training: write train_bpe")


class BPETokenizer:
    """文本到 token id 以及反向转换，使用 ``train_bpe`` 返回的那种词表和合并规则。

    ``BPETokenizer(vocab, merges, special_tokens=())``：``vocab: dict[int, bytes]``，
    ``merges`` 按训练顺序排列（GPT-2 自己的合并规则转换成字节后也可以用）。若某个
    特殊 token 的 UTF-8 字节不是 ``vocab`` 中的值，抛出 ``ValueError``（计分）。

    ``encode(text) -> list[int]``：特殊 token 变成它的 id；每个预分词结果从它的单个
    字节开始，像 GPT-2 的 ``bpe()`` 那样合并：在 ``merges`` 中最靠前（秩最低，而不是
    最频繁）的相邻 token 对在它出现的每个地方被合并，从左到右、不重叠，反复进行，
    直到没有相邻 token 对在 ``merges`` 中。每个得到的字节串变成它在 ``vocab`` 中的 id；
    若两个 id 持有相同的字节，取较小的那个。

    ``decode(ids) -> str``：把各 id 的字节串拼接起来，用 ``errors="replace"`` 按 UTF-8
    解码（一个 token 可能只持有半个字符）；遇到不在 ``vocab`` 中的 id 时抛出
    ``ValueError``（计分）。对每个字符串都有 ``decode(encode(s)) == s``。

    TODO (bpe_encoding)，分步说明：
      1. ``__init__``：保存 ``vocab``；建立每个合并的秩（它在 ``merges`` 中的下标）以及
         反查表 字节 -> 最小 id；检查每个特殊 token 的字节都在其中。
      2. ``encode``：在特殊 token 处切开文本（最长优先），加入每个特殊 token 的 id，
         并用 ``PAT`` 对其余每个片段预分词。
      3. 对每个预分词结果：从单个字节开始；只要某个相邻 token 对有秩，就把秩最低的
         那个 token 对在各处合并（从左到右，不重叠）；然后在反查表中查出每一段的 id。
      4. ``decode``：检查每个 id，拼接字节串，用 ``errors="replace"`` 解码。
    """

    def __init__(self, vocab: dict[int, bytes], merges, special_tokens=()) -> None:
        raise NotImplementedError("bpe_encoding: write BPETokenizer.__init__")

    def encode(self, text: str) -> list[int]:
        raise NotImplementedError("bpe_encoding: write BPETokenizer.encode")

    def decode(self, ids: list[int]) -> str:
        raise NotImplementedError("bpe_encoding: write BPETokenizer.decode")
