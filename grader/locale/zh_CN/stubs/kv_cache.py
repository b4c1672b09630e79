"""用于自回归解码的键值缓存（组件 ``kv_cache``）。

解码器一次生成一个词元时，第 ``t`` 步需要位置 ``0 .. t`` 的全部键和值。没有缓存时，
每一步都要为整个前缀重新计算它们：总计算量是平方级的。但较早位置的键和值永远不会变
（因果注意力：过去看不到未来），所以每个位置的 ``k`` 和 ``v`` 只需计算一次并保存，
每一步只投影新的词元。

缓存保存的是投影并 ``split_heads`` *之后*的键和值，形状都是
``(B, H, T_cached, Dh)``；位置沿第 ``-2`` 维排列。

本组件的另一半在 attention.py 中：``MultiHeadAttention.forward`` 的缓存分支（追加新的
键/值，让新的查询用 ``causal_mask(T_new, T_total)`` 计算注意力，并在同时传入掩码和
缓存时抛出 ``ValueError``）。
"""
from __future__ import annotations

import torch
from torch import Tensor


class KVCache:
    """迄今已解码位置的键和值，形状都是 ``(B, H, T_cached, Dh)``。

    ``KVCache()`` 初始为空（``len(cache) == 0``）。一个缓存属于一个注意力层
    （多层的模型每层各有一个）。
    """

    def __init__(self) -> None:
        """初始为空。

        TODO (kv_cache)，分步说明：
          1. 创建用来保存已缓存键和值的东西（例如两个初始为 None 的属性，
             或两个空列表）。
        """
        raise NotImplementedError("kv_cache: write KVCache.__init__")

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """追加 ``k``、``v``，并返回迄今缓存的全部内容。

        ``k`` 和 ``v`` 的形状是 ``(B, H, T_new, Dh)``。它们沿序列维（-2）放在已缓存内容
        *之后*。返回 ``(k_all, v_all)``，形状都是 ``(B, H, T_cached + T_new, Dh)``，
        最早的位置在前。返回的张量可以与缓存共享存储；梯度不必流经它们。

        TODO (kv_cache)，分步说明：
          1. 若缓存为空，新的键和值就是整个缓存。
          2. 否则沿第 -2 维把旧的和新的拼接起来。
          3. 保存结果，并返回键和值。
        """
        raise NotImplementedError("kv_cache: write KVCache.update")

    def __len__(self) -> int:
        """已缓存的位置数（为空时为 0；``T`` 是键的第 -2 维大小）。

        TODO (kv_cache)，分步说明：
          1. 若什么都没缓存，返回 0，否则返回序列维的长度。
        """
        raise NotImplementedError("kv_cache: write KVCache.__len__")
