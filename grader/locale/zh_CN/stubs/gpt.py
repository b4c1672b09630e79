"""一个小型的 LLaMA 式语言模型（组件 ``tiny_lm``），大语言模型方向的收官之作。

你构建的一切都在这里汇合。仅解码器的语言模型读入词元 id ``(B, T)``，并在每个位置上给出
对*下一个*词元在词表上的分数（logits）：

    x = tok_emb(idx)                        # (B, T, D)：每个词元 id 一个可学习的向量
    for block in blocks:  x = block(x)      # 各位置交流（注意力）并思考（SwiGLU）
    logits = head(norm(x))                  # (B, T, vocab_size)

**块** 采用 LLaMA 的结构：*pre-norm*（每个分支用 RMSNorm 归一化自己的输入；残差流本身
从不归一化，所以它始终是一条从嵌入到最后一个块的恒等通路）、带 RoPE 的分组查询注意力，
以及 SwiGLU 前馈网络：

    h   = x + attn(attn_norm(x), mask, rope=rope, cache=cache)
    out = h + ffn(ffn_norm(h))

两个残差连接都把分支的输出加到*进入*该分支的东西上（先是 ``x``，然后是 ``h``），而不是
加到它的归一化版本上。由于残差流在块内从不归一化，模型在 head 之前再归一化一次
（``norm``）。

**位置** 只来自 RoPE：没有要加上的位置嵌入。旋转表取决于 ``max_len`` 和*一个头*的宽度
（``d_model // n_heads``，因为旋转的是每个头的查询和键），不依赖任何可学习的东西，所以
在 ``__init__`` 中计算一次，由所有块共用。用 ``self.register_buffer(name, table,
persistent=False)`` 注册它们：buffer 会随模型一起 ``.to(device)`` 和
``.to(torch.float64)``（普通属性会留在 CPU 上），``persistent=False`` 让它不进入
``state_dict``，所以检查点只保存学到的东西，并且能加载到为另一个 ``max_len`` 构建的模型中。

**因果性。** 没有缓存时，模型一次看到全部 ``T`` 个位置，绝不能让位置 ``t`` 看到
``t + 1 ...``（否则它会读到它被要求预测的答案）：给各个块一个因果掩码（attention.py
中的 ``causal_mask``）。有缓存时（解码，见 ``sampling.generate``），``idx`` 只包含
*接下来*的位置；此时注意力在已缓存的键上自行掩码，所以掩码为 ``None``，并且每个块得到
*它自己*的缓存（第 ``i`` 个块的键不是第 ``j`` 个块的）。新的位置从 ``len(caches[0])``
开始：``GroupedQueryAttention`` 从它的缓存读出这个值，以便在正确的位置上旋转。

检查项拒绝 ``nn.TransformerDecoderLayer``、``nn.TransformerEncoderLayer`` 和
``nn.MultiheadAttention``：请用你自己的部件（``RMSNorm``、``GroupedQueryAttention``、
``SwiGLU``、``rope_angles``、``KVCache``）。通过之后就训练它：``python -m grader train``。
"""
from __future__ import annotations

import torch
import torch.nn as nn
from torch import Tensor

# 你构建的部件（或者在 tiny_lm 的检查项运行时，评分程序中它们的可信版本）
from .attention import causal_mask
from .ffn import SwiGLU
from .gqa import GroupedQueryAttention
from .kv_cache import KVCache
from .norms import RMSNorm
from .rope import rope_angles


class DecoderBlock(nn.Module):
    """Pre-norm 解码器块；``(B, T, D)`` -> ``(B, T, D)``。

    子模块（名字是约定的一部分：检查项按名字加载 state dict）：
      - ``attn_norm``：``RMSNorm(d_model, eps)``，归一化注意力的输入
      - ``attn``：``GroupedQueryAttention(d_model, n_heads, n_kv_heads, bias=False)``
      - ``ffn_norm``：``RMSNorm(d_model, eps)``，归一化前馈网络的输入
      - ``ffn``：``SwiGLU(d_model, d_ff)``

    没有 dropout，也没有别的东西。
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, d_ff: int, eps: float = 1e-5) -> None:
        """创建四个子模块。

        TODO (tiny_lm)，分步说明：
          1. 保持下面的 ``super().__init__()`` 调用在最前面。
          2. 按类文档字符串中的名字创建那些子模块：两个各自独立的 RMSNorm（每个分支
             学习自己的 weight）。
        """
        super().__init__()
        raise NotImplementedError("tiny_lm: write DecoderBlock.__init__")

    def forward(self, x: Tensor, mask: Tensor | None = None, *, rope: tuple[Tensor, Tensor] | None = None,
                cache: KVCache | None = None) -> Tensor:
        """``x`` ``(B, T, D)`` -> ``(B, T, D)``；``mask``、``rope`` 和 ``cache`` 原样传给注意力。

        TODO (tiny_lm)，分步说明：
          1. 用 ``attn_norm`` 归一化 ``x``，对它做注意力（把掩码、RoPE 表和缓存传下去）；
             把结果加到 ``x`` 本身上：这就是 ``h``。
          2. 用 ``ffn_norm`` 归一化 ``h``，应用前馈网络，把结果加到 ``h`` 上；返回它。
        """
        raise NotImplementedError("tiny_lm: write DecoderBlock.forward")


class TinyLM(nn.Module):
    """词元 id ``(B, T)`` -> logits ``(B, T, vocab_size)``。

    属性和子模块（约定中的名字）：
      - ``vocab_size``、``max_len``：即参数（``generate`` 读取 ``max_len``）
      - ``tok_emb``：``nn.Embedding(vocab_size, d_model)``
      - ``blocks``：由 ``n_layers`` 个 ``DecoderBlock(d_model, n_heads, n_kv_heads, d_ff)`` 组成的 ``nn.ModuleList``
      - ``norm``：``RMSNorm(d_model)``，最终的归一化
      - ``head``：``nn.Linear(d_model, vocab_size, bias=False)``，有自己的权重（不与 ``tok_emb`` 共享）
      - RoPE 表 ``rope_angles(max_len, d_model // n_heads, rope_base)``，作为两个
        非持久的 buffer（名字任意）

    state dict 恰好包含 ``tok_emb.weight``、``blocks.*``、``norm.weight`` 和
    ``head.weight``。
    """

    def __init__(self, vocab_size: int, max_len: int, d_model: int, n_heads: int, n_kv_heads: int,
                 n_layers: int, d_ff: int, rope_base: float = 10000.0) -> None:
        """创建各层和 RoPE 表。

        TODO (tiny_lm)，分步说明：
          1. 保持下面的 ``super().__init__()`` 调用在最前面。
          2. 保存 ``vocab_size`` 和 ``max_len``。
          3. 创建 ``tok_emb``、``n_layers`` 个块（放在 ``nn.ModuleList`` 中，使它们的
             参数成为模型的参数）、``norm`` 和 ``head``。
          4. 为一个头的宽度计算 cos 表和 sin 表，并把每个都用 ``persistent=False``
             注册为 buffer。
        """
        super().__init__()
        raise NotImplementedError("tiny_lm: write TinyLM.__init__")

    def new_caches(self) -> list[KVCache]:
        """每个块一个新的空 ``KVCache``，按块的顺序排列。

        TODO (tiny_lm)，分步说明：
          1. 返回一个列表，其中每个块对应一个*不同的* ``KVCache`` 对象（用 ``*`` 重复的
             列表会把同一个对象放很多次）。
        """
        raise NotImplementedError("tiny_lm: write TinyLM.new_caches")

    def forward(self, idx: Tensor, caches: list[KVCache] | None = None) -> Tensor:
        """``idx`` ``(B, T)`` int64 -> logits ``(B, T, vocab_size)``。

        没有 ``caches`` 时：位置 ``0 .. T-1``，因果的。有 ``caches`` 时（由
        ``new_caches()`` 创建）：``idx`` 包含已缓存的 ``len(caches[0])`` 个位置之后的
        ``T`` 个位置。若某个位置会达到 ``max_len``（``start + T > max_len``），抛出
        ``ValueError``（评分）。

        TODO (tiny_lm)，分步说明：
          1. 找出新位置从哪里开始（没有缓存时为 0，否则为第一个缓存的长度），若最后一个
             位置会大于或等于 ``max_len``，抛出 ``ValueError``。
          2. 嵌入词元。
          3. 选择掩码：没有缓存时为 ``T`` 个位置的因果掩码，有缓存时为 ``None``。
          4. 按顺序运行每个块，每个都带上掩码、RoPE 表 ``(cos, sin)`` 和它自己的缓存
             （``caches[i]``，或 None）。
          5. 应用最终的归一化，再应用 head；返回 logits。
        """
        raise NotImplementedError("tiny_lm: write TinyLM.forward")
