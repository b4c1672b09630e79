"""旋转位置编码 RoPE（组件 ``rope``）。

核心方向在第一个块之前，给每个词元的嵌入*加上*一次正弦向量。RoPE（Su 等，2021，
“RoFormer”；LLaMA 和大多数近期语言模型使用）则在每个注意力层内部，按与位置成正比的
角度*旋转*查询和键。值不旋转。

把一个头的 ``Dh`` 个特征看作 ``Dh / 2`` 对，第 ``i`` 对是两个**相邻**的特征
``(2i, 2i+1)``。在位置 ``p``，第 ``i`` 对旋转角度 ``p * theta_i``，每对一个频率，

    theta_i = base ** (-2i / Dh),    i = 0 .. Dh/2 - 1,   base = 10000

所以第 0 对每个位置转一弧度，最后几对几乎不动。旋转角度 ``a`` 就是二维旋转

    out[2i]   = x[2i] * cos(a) - x[2i+1] * sin(a)
    out[2i+1] = x[2i] * sin(a) + x[2i+1] * cos(a)

为什么要旋转？把一对特征读作复数 ``z = x[2i] + 1j * x[2i+1]``：旋转就是
``z * e^(1j * a)``，而两个向量的点积是 ``Re(sum over pairs of z_q * conj(z_k))``。
把位置 ``m`` 的查询和位置 ``n`` 的键都旋转：

    Re(sum z_q e^(1j m theta) * conj(z_k e^(1j n theta)))
      = Re(sum z_q * conj(z_k) * e^(1j (m - n) theta))

绝对位置消掉了：注意力分数只取决于内容和*距离* ``m - n``。这就是“相对位置”的含义，
而且在每一层都成立。旋转还保持长度，所以每一对（以及每个向量）的范数不变：RoPE 让
信息绕着圆转动，而不缩放它。在位置 0 什么都不动。

特征对的布局很重要。Meta 的 LLaMA 代码和 RoFormer 论文把 ``(2i, 2i+1)`` 配成一对；
Hugging Face 的 LLaMA 和 GPT-NeoX 把特征 ``i`` 与 ``i + Dh/2`` 配对（“rotate_half”
技巧）。两者都是合法的 RoPE，但不能互换：它们把不同的特征放在一起旋转，所以用一种训练
出的权重换成另一种就会得出乱码。本套练习使用**相邻**的特征对：特征 0、2、4……是各对中
的第一个，特征 1、3、5……是第二个。

精度：角度 ``p * theta_i`` 随位置增大，它的舍入误差也随之增大，而这个误差就是旋转中
同样多弧度的误差。像 Meta 的代码那样用 float32 计算，误差保持很小；用 float16 的话，
位置超过 1024 时误差达到半个弧度，超过 2048 时达到一整个弧度。用 float32 构造这些表
（或者用 float64，再转换为 float32）；检查项允许 float32 的舍入误差。

复数（``torch.polar``、``torch.view_as_complex``）、einops 和普通张量运算都可以用。
"""
from __future__ import annotations

import torch
from torch import Tensor


def rope_angles(max_len: int, head_dim: int, base: float = 10000.0) -> tuple[Tensor, Tensor]:
    """旋转表 ``(cos, sin)``，都是 float32 ``(max_len, head_dim // 2)``。

    对位置 ``p = 0 .. max_len - 1`` 和特征对 ``i = 0 .. head_dim/2 - 1``，
    ``cos[p, i] = cos(p * base**(-2i / head_dim))``，``sin`` 同理。
    因此 ``cos`` 的第 0 行全为一，``sin`` 的第 0 行全为零。

    若 ``head_dim`` 为奇数，或 ``max_len`` 或 ``head_dim`` 不是正数，抛出
    ``ValueError``（评分）。

    TODO (rope)，分步说明：
      1. 检查参数，按上面的说明抛出 ``ValueError``。
      2. 计算 ``head_dim / 2`` 个频率，每对一个：``base`` 的负指数次幂，指数随特征对
         的索引增大（注意指数数的是特征，每对两个，再除以 ``head_dim``）。
      3. 把每个位置（从 0 开始，用 float32，不要用 float16）乘以每个频率：得到角度表
         ``(max_len, head_dim / 2)``。
      4. 按这个顺序返回该表的余弦和正弦，类型为 float32。
    """
    raise NotImplementedError("rope: write rope_angles")


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor, positions: Tensor | None = None) -> Tensor:
    """把 ``x (..., T, Dh)``（比如 ``(B, H, T, Dh)``）的每一对相邻特征旋转；形状和 dtype 不变。

    ``cos`` 和 ``sin`` 是 ``rope_angles`` 给出的表，``(max_len, Dh // 2)``。
    ``x`` 的第 ``t`` 行位于位置 ``positions[t]``：``positions`` 是一个 int64 ``(T,)``
    张量，默认为 ``0 .. T-1``（在缓存了 ``n`` 个位置的键值缓存之后，调用者传入
    ``n .. n + T - 1``）。记 ``c = cos[positions[t], i]``、``s = sin[positions[t], i]``：

        out[..., t, 2i]   = x[..., t, 2i] * c - x[..., t, 2i+1] * s
        out[..., t, 2i+1] = x[..., t, 2i] * s + x[..., t, 2i+1] * c

    结果的 dtype 与 ``x`` 相同（float32 的表配 float64 的 ``x`` 得到 float64 的结果），
    ``x`` 本身保持不变。

    若 ``Dh`` 不是表宽度的两倍，或某个位置超出了表的范围（为负，或不小于表的长度：
    Python 的索引会悄悄地把负数绕回去），抛出 ``ValueError``（评分）。

    TODO (rope)，分步说明：
      1. 检查特征数与表是否匹配；不匹配则抛出 ``ValueError``。
      2. 没有给出位置时使用默认位置；若有位置超出表的范围，抛出 ``ValueError``。
      3. 在这些位置上查出 ``cos`` 和 ``sin`` 的行（``x`` 的每个位置一行，在前导维上
         广播），转换为 ``x`` 的 dtype。
      4. 取出每一对相邻特征中的第一个和第二个。
      5. 用上面两个公式旋转每一对，构造新的张量（永远不要写入 ``x``）。
      6. 把每对旋转后的两个特征按 ``(2i, 2i+1)`` 的顺序并排放回去，返回形状与 ``x``
         相同的张量。
    """
    raise NotImplementedError("rope: write apply_rope")
