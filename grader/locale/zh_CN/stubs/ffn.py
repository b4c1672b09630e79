"""SwiGLU 前馈网络（组件 ``swiglu``）。

核心方向的前馈网络是 ``Linear, ReLU, Linear``：加宽到 ``d_ff``，应用一个固定的非线性，
再收窄回去。*门控线性单元*（Dauphin 等，2017；Shazeer，2020，“GLU Variants Improve
Transformer”）让隐藏层成为同一个输入的两个投影之积：其中一个经过非线性，决定另一个
能通过多少。

    hidden = silu(w_gate(x)) * w_up(x)        # (..., d_ff)，逐元素乘积
    out    = w_down(hidden)                    # (..., D)

``silu(z) = z * sigmoid(z)``（也叫 Swish）：光滑，且在 ``|z|`` 较大时接近 ReLU。只有
*门*（gate）经过它；*up* 投影保持线性，这正是这个单元“门控”的含义。LLaMA、PaLM 和
大多数近期的语言模型都使用这个块，不带偏置，并把 ``d_ff`` 取为约 ``8/3 * d_model``，
使它的三个矩阵与经典的两个 ``4 * d_model`` 矩阵代价相当。

两个投影形状相同，所以把它们互换，或者把 ``silu`` 作用在错的那个上，代码照样能运行：
只有数值（以及检查项）能看出来。``F.silu`` 可以用。
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


class SwiGLU(nn.Module):
    """SwiGLU 前馈网络，``(..., d_model)`` -> ``(..., d_model)``。

    各层（名字是约定的一部分：检查项按名字加载 state dict），都*不带*偏置：
      - ``w_gate``：``nn.Linear(d_model, d_ff)``，经过 silu 的那个投影
      - ``w_up``：``nn.Linear(d_model, d_ff)``，与它相乘的投影
      - ``w_down``：``nn.Linear(d_ff, d_model)``，回到模型的宽度

    不要创建其他参数或子模块。
    """

    def __init__(self, d_model: int, d_ff: int) -> None:
        """创建 ``w_gate``、``w_up`` 和 ``w_down``。

        TODO (swiglu)，分步说明：
          1. 保持下面的 ``super().__init__()`` 调用在最前面。
          2. 按类文档字符串中的名字创建那三个层，``bias=False``。
        """
        super().__init__()
        raise NotImplementedError("swiglu: write SwiGLU.__init__")

    def forward(self, x: Tensor) -> Tensor:
        """``w_down(silu(w_gate(x)) * w_up(x))``；``x`` 为 ``(..., d_model)``，结果也是。

        TODO (swiglu)，分步说明：
          1. 用 ``w_gate`` 和 ``w_up`` 分别投影 ``x``（各为 ``(..., d_ff)``）。
          2. 只对门投影应用 silu，再与 up 投影逐元素相乘。
          3. 用 ``w_down`` 把乘积投影回去。
        """
        raise NotImplementedError("swiglu: write SwiGLU.forward")
