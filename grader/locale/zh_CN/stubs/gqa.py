"""分组查询注意力（组件 ``grouped_query_attention``）。

多头注意力让 ``n_heads`` 个头各有自己的查询、键和值。语言模型生成文本时，过去每个位置
的键和值都保存在键值缓存（kv_cache.py）中，每层各一个 ``(B, H, T, Dh)`` 张量；占满长
上下文内存的、每个解码步都要读回来的，正是这个缓存，而不是计算。

分组查询注意力（Ainslie 等，2023，“GQA”；LLaMA 2 70B、LLaMA 3、Mistral 使用）保留
``n_heads`` 个查询头，但只计算 ``n_kv_heads`` 个键值头，``n_kv_heads`` 整除
``n_heads``。查询头被分成 ``n_kv_heads`` 组，每组 ``n_rep = n_heads // n_kv_heads``
个连续的头，组内每个头都与该组唯一的键值头一起计算注意力::

    查询头 h  ->  键值头 h // n_rep
    例如 n_heads = 6, n_kv_heads = 2：头 0、1、2 用键值头 0；头 3、4、5 用键值头 1

于是缓存保存 ``n_kv_heads`` 个头而不是 ``n_heads`` 个：内存少 ``n_rep`` 倍，质量只有
少许损失。``n_kv_heads == n_heads`` 就是普通的多头注意力，``n_kv_heads == 1`` 是多查询
注意力（Shazeer，2019）。键和值只在计算注意力本身时才重复到 ``n_heads`` 个头
（``repeat_kv``），绝不在缓存里重复：缓存之前就重复会把省下的全部浪费掉。

重复的顺序很重要，而且从形状上看不出来：``repeat_kv`` 输出的第 ``j`` 个头是输入的第
``j // n_rep`` 个头（``[a, a, b, b]``，即 ``torch.repeat_interleave(x, n_rep, dim=1)``
给出的结果），而不是 ``j % n_kv_heads``（``[a, b, a, b]``，即
``x.repeat(1, n_rep, 1, 1)`` 给出的结果）。

旋转位置编码（rope.py）与它配合使用：有 ``rope = (cos, sin)`` 时，查询和键在拆分多头
之后用 ``apply_rope`` 旋转。有缓存时，新的位置不是 ``0 .. T-1``，而是
``start .. start + T - 1``，``start = len(cache)``（在更新缓存之前读取），并且键在
*写入缓存之前*旋转：缓存中的键保持其自身位置的旋转，永远不会再被旋转。

你可以调用自己在 attention.py 中写的 ``split_heads``、``merge_heads``、``causal_mask``
和 ``scaled_dot_product_attention``，以及 rope.py 中的 ``apply_rope``（为本组件评分时，
由评分程序的版本代替它们）。这里不允许使用 PyTorch 的
``F.scaled_dot_product_attention`` 和 ``nn.MultiheadAttention``。
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn as nn
from torch import Tensor

from .attention import causal_mask, merge_heads, scaled_dot_product_attention, split_heads
from .rope import apply_rope

if TYPE_CHECKING:
    from .kv_cache import KVCache


def repeat_kv(x: Tensor, n_rep: int) -> Tensor:
    """``(B, Hkv, T, Dh)`` -> ``(B, Hkv * n_rep, T, Dh)``：输出的第 ``j`` 个头是输入的第 ``j // n_rep`` 个头。

    每个键值头连续出现 ``n_rep`` 次，与 ``torch.repeat_interleave(x, n_rep, dim=1)``
    的结果相同。``n_rep == 1`` 时返回同样的值。若 ``n_rep < 1``，抛出 ``ValueError``
    （评分）。

    TODO (grouped_query_attention)，分步说明：
      1. 若 ``n_rep`` 小于 1，抛出 ``ValueError``。
      2. 紧跟在头维之后给 ``x`` 加一个大小为 ``n_rep`` 的新轴，其中每个元素都重复它
         所属的头（``expand`` 不复制数据就能做到）。
      3. 把头轴和新轴合并成大小为 ``Hkv * n_rep`` 的一个轴（头在前，使同一个头的
         各个副本挨在一起）。
    """
    raise NotImplementedError("grouped_query_attention: write repeat_kv")


class GroupedQueryAttention(nn.Module):
    """``n_heads`` 个查询头共用 ``n_kv_heads`` 个键值头；``(B, T, D)`` -> ``(B, T, D)``。

    属性（名字是约定的一部分，参与评分）：
      - ``d_model``、``n_heads``、``n_kv_heads``、``d_k``（``= d_model // n_heads``，
        每个头的大小，不论是查询头还是键值头）
      - ``w_q``：``nn.Linear(d_model, d_model)``，``n_heads`` 个查询头
      - ``w_k``、``w_v``：``nn.Linear(d_model, n_kv_heads * d_k)``，只有
        ``n_kv_heads`` 个键值头（除非 ``n_kv_heads == n_heads``，否则比 ``w_q`` 窄）
      - ``out_proj``：``nn.Linear(d_model, d_model)``
      四个都用 ``bias=bias``。不要创建其他参数或子模块。
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, bias: bool = False) -> None:
        """创建四个投影。

        若 ``d_model`` 不能被 ``n_heads`` 整除、``n_kv_heads < 1``，或 ``n_heads``
        不能被 ``n_kv_heads`` 整除，抛出 ``ValueError``（评分）。

        TODO (grouped_query_attention)，分步说明：
          1. 保持下面的 ``super().__init__()`` 调用在最前面。
          2. 检查上面三个条件，任一不满足就抛出 ``ValueError``（先检查
             ``n_kv_heads < 1``，再用它做除法）。
          3. 保存 ``d_model``、``n_heads``、``n_kv_heads`` 和 ``d_k``。
          4. 按类文档字符串中列出的大小创建 ``w_q``、``w_k``、``w_v`` 和
             ``out_proj``，都用 ``bias=bias``。
        """
        super().__init__()
        raise NotImplementedError("grouped_query_attention: write GroupedQueryAttention.__init__")

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        *,
        rope: tuple[Tensor, Tensor] | None = None,
        cache: KVCache | None = None,
    ) -> Tensor:
        """``x (B, T, D)`` 的注意力；返回 ``(B, T, D)``。

        ``mask``（bool，True = 可以关注）可广播到 ``(B, n_heads, T, T)``，与
        ``MultiHeadAttention`` 中相同；None 表示处处可关注。``rope`` 是
        ``rope_angles`` 给出的 ``(cos, sin)``，为 None 时不旋转。

        带 ``KVCache`` 时，``x`` 是已缓存的 ``len(cache)`` 个位置之后的 ``T`` 个位置。
        ``cache.update(k, v)`` 追加本次调用的键和值（``n_kv_heads`` 个头，键已旋转），
        并返回迄今所有位置的键和值；新的查询关注所有这些位置，彼此之间按因果关系可见，
        即 ``causal_mask(T, T_total)``。缓存自带掩码：同时传入 ``mask`` 和 ``cache``
        时抛出 ``ValueError``（评分）。

        TODO (grouped_query_attention)，分步说明：
          1. 若同时给了掩码和缓存，抛出 ``ValueError``。
          2. 用 ``w_q``、``w_k``、``w_v`` 投影 ``x``；像 ``split_heads`` 那样把查询拆成
             ``n_heads`` 个头，把键和值拆成 ``n_kv_heads`` 个头。
          3. 若给了 ``rope``：本次调用的位置从 ``start``（``len(cache)``，没有缓存时为
             0）开始，共 ``T`` 个；用 ``apply_rope`` 在这些位置上旋转查询和键（不旋转值）。
          4. 若给了缓存：用 ``cache.update`` 的返回值替换键和值，并用从新位置到所有位置
             的因果掩码作为掩码。
          5. 用 ``repeat_kv`` 把键和值重复到 ``n_heads`` 个头（在缓存之后，使缓存保持
             ``n_kv_heads`` 个头），再用 ``scaled_dot_product_attention`` 带掩码计算注意力。
          6. 合并多头，再应用 ``out_proj``。
        """
        raise NotImplementedError("grouped_query_attention: write GroupedQueryAttention.forward")
