"""解码：温度、top-k、top-p 与生成（组件 ``sampling``）。

语言模型在每个位置上为词表中的每个词元给出一个分数（logit）。解码把最后一个位置的
分数变成下一个词元，再把这个词元送回模型，一次一个。这里有三个函数：

- ``filter_logits``：温度，然后是 top-k 和 top-p（核采样）过滤；
- ``sample_next_token``：温度为 0 时贪心，否则每行抽样一次；
- ``generate``：使用模型键值缓存的生成循环。

``torch.topk``、``torch.sort``、``torch.cumsum`` 和 ``torch.multinomial`` 都可以用。检查项
把 ``filter_logits`` 与一个暴力筛选作比较，并根据抽样结果的分布（大量抽样对照过滤后的
softmax）和确定性来评判抽样，而不是要求与 ``torch.multinomial`` 的结果相等。
"""
from __future__ import annotations

import torch
import torch.nn as nn
from torch import Tensor


def filter_logits(logits: Tensor, *, temperature: float = 1.0, top_k: int | None = None,
                  top_p: float | None = None) -> Tensor:
    """``(..., V)`` -> ``(..., V)``：缩放后的 logits，被过滤掉的词元处为 ``-inf``。

    温度：在 softmax 之前把 logits 除以 ``temperature``，小于 1 时分布变尖（最可能的
    词元占更多概率质量；趋近 0 时变成贪心），大于 1 时分布变平（出现更出人意料的词元）。
    它不改变哪个词元最可能。

    Top-k 在每一行（最后一维）中保留大于或等于该行第 ``top_k`` 大值的元素。边界上的
    并列值全部保留，所以一行保留的元素可能多于 ``top_k`` 个；``top_k`` 大于 ``V`` 时
    全部保留。

    Top-p（核采样）作用于 top-k 留下部分的 softmax：当*严格比它更可能*的那些词元的总
    概率小于 ``top_p`` 时，该词元被保留。按概率从大到小排序，这保留的是概率质量达到
    ``top_p`` 的最短前缀，跨过 ``top_p`` 的那个词元也包括在内，与被保留词元并列的词元
    同样保留。最可能的词元之上什么都没有，所以总会至少留下一个词元；``top_p = 1`` 时
    保留所有词元。

    ``None`` 关闭对应的过滤。每个被去掉的元素变为 ``-inf``（使它的 softmax 权重恰好为
    0）；被保留的元素为 ``logits / temperature``。不修改输入。

    若 ``temperature <= 0``、``top_k < 1``，或 ``top_p`` 不在 ``(0, 1]`` 内，抛出
    ``ValueError``（评分）。

    TODO (sampling)，分步说明：
      1. 检查这三个参数，按上面的说明抛出 ``ValueError``。
      2. 除以温度（得到一个新张量）。
      3. Top-k：找出每行第 ``top_k`` 大的值（保留最后一维以便广播），把所有小于它
         （而不是等于它）的元素填为 ``-inf``。
      4. Top-p：对结果取 softmax；对每个词元，求严格大于它自己概率的那些概率之和；
         在该和大于或等于 ``top_p`` 的地方填 ``-inf``。（排序加累积和也能做到：注意
         跨过 ``top_p`` 的那个词元以及并列值。）
    """
    raise NotImplementedError("sampling: write filter_logits")


def sample_next_token(logits: Tensor, *, temperature: float = 1.0, top_k: int | None = None,
                      top_p: float | None = None, generator: torch.Generator | None = None) -> Tensor:
    """``(B, V)`` -> int64 ``(B,)``：每行一个词元索引。

    ``temperature == 0`` 表示贪心：每行取最大 logit 的索引，有多个相等时取第一个
    （即 ``argmax`` 的返回值）；不需要过滤，也不需要随机性。否则：从
    ``softmax(filter_logits(logits, ...))`` 中每行抽样一次，用的是概率，而不是 logits。

    为什么传入生成器，而不是给 torch 设种子？``torch.manual_seed`` 以及每一次不带
    ``generator=`` 的抽样，都会使用并推进进程的*全局*随机状态，而其他一切（dropout、
    权重初始化、数据顺序）都共用它：抽样会改变程序其余部分的行为，也无法单独重放。这里
    所有的随机性都来自 ``generator``，所以处于同一状态的两个生成器给出相同的词元，全局
    状态也不受影响（``torch.multinomial``、``torch.rand`` 等函数都接受 ``generator=``）。

    TODO (sampling)，分步说明：
      1. 温度为 0：返回词表维（最后一维）上的 argmax。
      2. 否则先过滤，在词表维上取 softmax，用生成器每行抽取一个索引，以 ``(B,)``
         张量返回。
    """
    raise NotImplementedError("sampling: write sample_next_token")


def generate(model: nn.Module, idx: Tensor, max_new_tokens: int, *, temperature: float = 0.0,
             top_k: int | None = None, top_p: float | None = None,
             generator: torch.Generator | None = None) -> Tensor:
    """``(B, T)`` int64 提示 -> ``(B, T + max_new_tokens)``：提示后面接上新的词元。

    ``model`` 是一个 ``TinyLM`` 或类似的东西：``model(idx, caches=caches)`` 给出 logits
    ``(B, T, V)``，``model.new_caches()`` 为每个块建立一个空的键值缓存，
    ``model.max_len`` 是它最多能容纳的位置数。

    为什么要缓存？没有缓存时，每一步都要把整个序列再送入模型一次，重新计算永远不变的键
    和值。有了缓存，提示只送入一次（填满缓存），之后每次只送入一个新词元：它的位置接在
    已缓存的位置之后，它的注意力读取已缓存的键和值。带着缓存再次送入旧词元，会把它们
    第二次放到新的位置上。最后选出的那个词元根本不必送入：没有谁需要它的 logits（而且
    当输出填满 ``max_len`` 时，也没有位置留给它了）。

    每个词元都由 ``sample_next_token``（使用同样的 ``temperature``、``top_k``、
    ``top_p`` 和 ``generator``）根据本次调用*最后*一个位置的 logits 选出。不修改提示。
    运行时不计算梯度。

    若 ``max_new_tokens < 0`` 或 ``T + max_new_tokens > model.max_len``，抛出
    ``ValueError``（评分）；``max_new_tokens == 0`` 时返回提示本身。

    TODO (sampling)，分步说明：
      1. 检查长度，按上面的说明抛出 ``ValueError``。
      2. 建立新的缓存，只建一次。
      3. 重复 ``max_new_tokens`` 次：在缓存中还没有的部分上运行模型（第一次是提示，
         之后是最后一个词元，形状 ``(B, 1)``），根据最后一个位置的 logits 选出下一个
         词元，并把它保留下来。
      4. 返回接上了新词元的提示（一个新张量）。
    """
    raise NotImplementedError("sampling: write generate")
