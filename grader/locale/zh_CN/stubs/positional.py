"""正弦位置编码（组件 ``sinusoidal_encoding``）。

为什么需要位置？自注意力本身分不清顺序：它是*置换等变*的。打乱输入的位置，输出也
以同样方式打乱，别的什么都不变；在注意力看来，序列就是一个集合。
“狗咬人”和“人咬狗”看起来会一样。所以在第一个块之前，我们给每个词元的嵌入*加上*
一个只取决于其位置的向量。

原始的 Transformer 使用频率按几何级数递减的固定正弦和余弦。对位置 ``p`` 和特征对
索引 ``i``（``0 <= i < d_model / 2``），角度为 ``p / 10000^(2i/d_model)``：

    PE[p, 2i]     = sin(p / 10000^(2i/d_model))
    PE[p, 2i + 1] = cos(p / 10000^(2i/d_model))

第 ``0, 1`` 维转得最快（每 ``2*pi`` 个位置转一整圈）；最后几维转得极慢，几千个位置
内几乎不动，就像钟表的指针。有用的性质是：对固定的偏移 ``k``，``p + k`` 处的
(sin, cos) 对就是 ``p`` 处的那对*旋转*了一个只取决于 ``k`` 的角度
（sin(a+b) = sin a cos b + cos a sin b，等等）。所以“再往后 k 个位置”是一个在每个
位置都相同的线性映射，这让模型容易学到相对位置。
"""
from __future__ import annotations

import math

import torch
from torch import Tensor


def sinusoidal_positional_encoding(max_len: int, d_model: int) -> Tensor:
    """float32 ``(max_len, d_model)`` 的位置编码表，位置从 0 开始。

    ``PE[p, 2i] = sin(p / 10000^(2i/d_model))``，
    ``PE[p, 2i+1] = cos(p / 10000^(2i/d_model))``：偶数列是正弦，奇数列是余弦，
    第 ``2i`` 列和第 ``2i+1`` 列共用一个频率。因此第 0 行是 ``[0, 1, 0, 1, ...]``。

    不论默认 dtype 是什么，结果总是 float32。用 float32 计算没有问题：检查项允许
    float32 对角度的舍入误差。

    若 ``d_model`` 为奇数，或 ``max_len`` 或 ``d_model`` 不是正数，抛出
    ``ValueError``（评分）。

    TODO (sinusoidal_encoding)，分步说明：
      1. 检查参数，按上面的说明抛出 ``ValueError``。
      2. 用 float32 构造一列位置 ``0 .. max_len-1``，形状 ``(max_len, 1)``。
      3. 构造一行 ``d_model / 2`` 个频率 ``1 / 10000^(2i/d_model)``，
         ``i = 0, 1, ...``（``exp(-log(10000) * 2i / d_model)`` 是同一个数，
         也是常见的算法）。
      4. 把它们相乘（广播），得到角度表 ``(max_len, d_model/2)``。
      5. 把角度的正弦放进一个 float32 ``(max_len, d_model)`` 张量的偶数列，
         余弦放进奇数列；返回它。
    """
    raise NotImplementedError("sinusoidal_encoding: write sinusoidal_positional_encoding")
