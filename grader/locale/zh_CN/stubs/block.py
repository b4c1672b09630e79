"""Pre-LN Transformer 块（组件 ``pre_ln_block``）。

一个块由两个子层组成，每个子层都包在一个残差连接里：注意力（各位置之间交换信息）
和逐位置的前馈网络（每个位置各自思考）。形状始终是 ``(B, T, D)``，所以块可以堆叠。

LayerNorm 放在哪里？原始的 Transformer 在残差相加*之后*归一化（Post-LN：
``x = norm(x + sublayer(x))``）。此后大多数模型使用 **Pre-LN**，只对子层的输入
做归一化：

    x = x + dropout(attention(norm1(x)))
    x = x + dropout(ff(norm2(x)))

在 Pre-LN 中，残差流 ``x`` 一路上从不被归一化：它是从整个堆叠的输入到输出的一条
恒等通路，所以梯度能不减弱地传到前面的层。Pre-LN 不需要 Post-LN 所需的学习率
预热就能稳定训练。（最后一个块之后的那个 LayerNorm 是模型的事，不是块的事。）
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn as nn
from torch import Tensor

from .attention import MultiHeadAttention

if TYPE_CHECKING:  # 只为类型注解而导入
    from .kv_cache import KVCache


class TransformerBlock(nn.Module):
    """Pre-LN 块，``(B, T, D)`` -> ``(B, T, D)``。

    子模块（名字是约定的一部分：检查项按名字加载 state dict）：
      - ``attention``：``MultiHeadAttention(d_model, n_heads)``（带偏置）
      - ``norm1``、``norm2``：两个*各自独立*的 ``nn.LayerNorm(d_model)``
      - ``ff``：``nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))``
      - ``dropout``：``nn.Dropout(dropout)``

    不要创建其他参数或子模块。
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1) -> None:
        """创建类文档字符串中列出的子模块。

        TODO (pre_ln_block)，分步说明：
          1. 保持下面的 ``super().__init__()`` 调用在最前面。
          2. 严格按上面的列表和名字创建 ``attention``、``norm1``、``norm2``、``ff``
             和 ``dropout``。前馈网络先加宽到 ``d_ff``（常为 ``4 * d_model``），
             应用 ReLU，再收窄回 ``d_model``。
        """
        super().__init__()
        raise NotImplementedError("pre_ln_block: write TransformerBlock.__init__")

    def forward(self, x: Tensor, mask: Tensor | None = None, cache: KVCache | None = None) -> Tensor:
        """Pre-LN：``x = x + dropout(attention(norm1(x), mask, cache))``，
        然后 ``x = x + dropout(ff(norm2(x)))``；返回 ``(B, T, D)``。

        ``mask`` 和 ``cache`` 直接传给 ``self.attention``（见
        ``MultiHeadAttention.forward``）；块本身不对它们做任何别的事。

        TODO (pre_ln_block)，分步说明：
          1. 用 ``norm1`` 归一化 ``x``，在其上运行注意力，并把 ``mask`` 和 ``cache``
             传下去。
          2. 应用 dropout，并把结果*加*到未归一化的 ``x`` 上（残差连接）。
          3. 用 ``norm2`` 归一化新的 ``x``，在其上运行 ``ff``。
          4. 应用 dropout，再次加到 ``x`` 上，然后返回。
        不要原地修改 ``x``（写 ``x = x + ...``，不要写 ``x += ...``）。
        """
        raise NotImplementedError("pre_ln_block: write TransformerBlock.forward")
