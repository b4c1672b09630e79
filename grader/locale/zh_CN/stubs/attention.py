"""缩放点积注意力与多头注意力。

全文使用的形状（批在前）：

- ``B``  批大小
- ``T``  序列长度（两者不同时，``Tq`` 个查询，``Tk`` 个键/值）
- ``D``  模型宽度，``d_model``
- ``H``  头数
- ``Dh`` 一个头的宽度，``D // H``（也叫 ``d_k``）

一句话说注意力：每个位置构造一个*查询*（query，“我在找什么？”）、一个*键*
（key，“我包含什么？”）和一个*值*（value，“被选中时我交出什么？”）；一个查询与
每个键作比较，比较结果经 softmax 变成和为 1 的权重，输出就是值的加权平均：

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V

本文件中的组件（``python -m grader check COMPONENT``）：

- ``head_splitting``：``split_heads``、``merge_heads``
- ``scaling``：``attention_scores``
- ``masking``：``causal_mask``、``apply_mask``
- ``multi_head_attention``：``scaled_dot_product_attention``，
  以及不带缓存的 ``MultiHeadAttention.forward``
- ``qkv_projection``：``MultiHeadAttention.__init__``、``MultiHeadAttention.project_qkv``
- ``kv_cache``：``MultiHeadAttention.forward`` 中的缓存分支

约定：掩码是一个 bool 张量，其中 **True 表示“可以关注”**（与
``torch.nn.functional.scaled_dot_product_attention`` 相同）。永远不要原地修改
输入。输出保持输入的 dtype（评分覆盖 float32 和 float64）。参数错误时抛出
``ValueError``，信息中要指出问题所在。
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
import torch.nn as nn
from torch import Tensor

if TYPE_CHECKING:  # 只为类型注解而导入，这样写坏的 kv_cache.py 不会连累本文件
    from .kv_cache import KVCache


# ---------------------------------------------------------------------------
# head_splitting
# ---------------------------------------------------------------------------
def split_heads(x: Tensor, n_heads: int) -> Tensor:
    """把模型维拆成多个头：``(B, T, D)`` -> ``(B, H, T, Dh)``。

    为什么要多头？在全部 ``D`` 个特征上做一次注意力，每个查询只能得到一种对各位置的
    加权。把 ``D`` 拆成 ``H`` 个宽度为 ``Dh = D // H`` 的较小子空间，每个头就能关注
    不同的东西（邻近的词、句子的主语、配对的括号），而总代价不变：``H`` 个宽度为
    ``Dh`` 的头与一个宽度为 ``D`` 的头计算量相同。

    布局（精确评分）：第 ``h`` 个头持有 ``x`` 中连续的特征 ``h*Dh`` 到
    ``(h+1)*Dh - 1``，因此
    ``split_heads(x, H)[b, h, t, i] == x[b, t, h*Dh + i]``。

    若 ``D`` 不能被 ``n_heads`` 整除，抛出 ``ValueError``（评分）。

    TODO (head_splitting)，分步说明：
      1. 从 ``x`` 的形状读出 ``B, T, D``；若 ``D % n_heads != 0``，抛出
         ``ValueError``，说明 ``d_model`` 不能被 ``n_heads`` 整除。
      2. 把最后一维视为 ``(H, Dh)``，得到 ``(B, T, H, Dh)``。
      3. 交换 ``T`` 和 ``H`` 两维，使头排在序列之前。
    （``view``/``reshape`` 加 ``transpose`` 可以；喜欢的话 ``einops.rearrange``
    也可以。）
    """
    raise NotImplementedError("head_splitting: write split_heads")


def merge_heads(x: Tensor) -> Tensor:
    """把多个头重新拼接起来：``(B, H, T, Dh)`` -> ``(B, T, H*Dh)``。

    它恰好是 ``split_heads`` 的逆：``merge_heads(split_heads(x, H))`` 等于 ``x``。

    TODO (head_splitting)，分步说明：
      1. 把 ``H`` 和 ``T`` 换回来，得到 ``(B, T, H, Dh)``。
      2. 把最后两维合成宽度为 ``H*Dh`` 的一维。转置之后张量不再连续，
         单用 ``view`` 会失败：请用 ``reshape``（或先 ``.contiguous()``）。
    """
    raise NotImplementedError("head_splitting: write merge_heads")


# ---------------------------------------------------------------------------
# scaling
# ---------------------------------------------------------------------------
def attention_scores(q: Tensor, k: Tensor) -> Tensor:
    """每个查询与每个键的缩放相似度。

    ``q`` 为 ``(..., Tq, d)``，``k`` 为 ``(..., Tk, d)``，前导维相同（例如
    ``(B, H)``）；结果为 ``(..., Tq, Tk)``，其中
    ``scores[..., i, j] = (q_i . k_j) / sqrt(d)``，``d`` 是 ``q`` 的最后一维。

    为什么除以 ``sqrt(d)``？若 ``q`` 和 ``k`` 的元素均值为 0、方差为 1，它们的点积
    是 ``d`` 个这样的乘积之和，方差为 ``d``：头越宽，分数越大。过大的分数会让
    softmax 饱和（几乎全部权重落在一个键上），此时梯度消失，学习停滞。除以
    ``sqrt(d)`` 把方差拉回 1，与头的宽度无关。

    TODO (scaling)，分步说明：
      1. 转置 ``k`` 的最后两维，使其成为 ``(..., d, Tk)``
         （不要用 ``k.T``，它会反转*所有*维）。
      2. 用批量矩阵乘法把 ``q`` 与它相乘。
      3. 除以 ``d``（``q`` 最后一维的大小）的平方根。
    """
    raise NotImplementedError("scaling: write attention_scores")


# ---------------------------------------------------------------------------
# masking
# ---------------------------------------------------------------------------
def causal_mask(q_len: int, k_len: int | None = None, *, device=None) -> Tensor:
    """形状为 ``(q_len, k_len)`` 的 bool 掩码，让一个位置看不到未来。

    ``True`` 表示“可以关注”。``k_len`` 默认等于 ``q_len``。查询是 ``k_len`` 个位置中
    的*最后* ``q_len`` 个（用键值缓存解码时正是如此：键包含之前缓存的一切），因此

        mask[i, j] is True exactly when j <= i + (k_len - q_len)

    当 ``q_len == k_len == 4`` 时它是下三角的::

        [[T, F, F, F],
         [T, T, F, F],
         [T, T, T, F],
         [T, T, T, T]]

    当 ``q_len = 2, k_len = 4`` 时，两个查询是位置 2 和 3::

        [[T, T, T, F],
         [T, T, T, T]]

    张量创建在 ``device`` 上（``None``：默认设备）。
    若 ``k_len < q_len``，抛出 ``ValueError``（评分）。

    TODO (masking)，分步说明：
      1. ``k_len`` 默认取 ``q_len``；若 ``k_len < q_len``，抛出 ``ValueError``。
      2. 在 ``device`` 上构造一个 bool ``(q_len, k_len)`` 张量，在向右平移
         ``k_len - q_len`` 的对角线上及其下方为 True（一个带偏移的下三角，
         或者把列索引 ``j`` 与行索引 ``i`` 作比较）。
    """
    raise NotImplementedError("masking: write causal_mask")


def apply_mask(scores: Tensor, mask: Tensor | None) -> Tensor:
    """在 softmax 之前遮住 ``mask`` 为 False 的位置。

    ``mask`` 是 bool，可以广播到 ``scores``（例如 ``(Tq, Tk)`` 对
    ``(B, H, Tq, Tk)``）；``True`` 表示“可以关注”。它为 False 的地方，结果为一个
    很大的负数；其余地方分数不变。``mask=None`` 时原样返回分数。

    为什么用很大的负数而不是 0？分数为 0 经过 softmax 后仍有权重
    ``exp(0) / sum``。``exp(-inf)`` 恰好是 0，所以被掩码的分数取 ``-inf``
    （或该 dtype 的最小有限值 ``torch.finfo(scores.dtype).min``，或像 ``-1e9``
    这样的常数）时，无论其他分数是多少，该位置的权重都恰好为 0。这几种都可以。

    返回一个新张量；不要原地修改 ``scores``（不带末尾下划线的 ``masked_fill``
    返回副本）。

    TODO (masking)，分步说明：
      1. 若 ``mask`` 为 None，原样返回 ``scores``。
      2. 否则在掩码为 *False* 的位置（它的逻辑取反）填入一个很大的负数，
         保持 ``scores`` 的 dtype。
    """
    raise NotImplementedError("masking: write apply_mask")


# ---------------------------------------------------------------------------
# multi_head_attention
# ---------------------------------------------------------------------------
def scaled_dot_product_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """``softmax(q k^T / sqrt(d)) v``，同时返回输出和权重。

    形状：``q (..., Tq, d)``、``k (..., Tk, d)``、``v (..., Tk, dv)``，前导维相同；
    ``mask``（bool，True = 可以关注）可广播到 ``(..., Tq, Tk)``，或为 None。

    返回 ``(out, weights)``：
      - ``weights = softmax(apply_mask(attention_scores(q, k), mask), dim=-1)``，
        形状 ``(..., Tq, Tk)``；每行（在键上）之和为 1。
      - ``out = weights @ v``，形状 ``(..., Tq, dv)``：对每个查询，值的加权平均。

    TODO (multi_head_attention)，分步说明：
      1. 用 ``attention_scores`` 计算缩放后的分数。
      2. 用 ``apply_mask`` 加掩码。
      3. 在最后一维（键）上做 softmax，而不是在查询上。
      4. 把权重乘以 ``v``；返回输出和权重。
    """
    raise NotImplementedError("multi_head_attention: write scaled_dot_product_attention")


class MultiHeadAttention(nn.Module):
    """作用于 ``(B, T, D)`` 输入的多头自注意力，可选键值缓存。

    ``forward`` 的数据流::

        x (B, T, D) --w_q, w_k, w_v--> q, k, v (B, T, D)
                    --split_heads----> (B, H, T, Dh) each
                    --scaled_dot_product_attention--> (B, H, T, Dh)
                    --merge_heads----> (B, T, D)
                    --out_proj-------> (B, T, D)

    属性（名字是约定的一部分，参与评分）：
      - ``d_model``、``n_heads``、``d_k``（``= d_model // n_heads``）
      - ``w_q``、``w_k``、``w_v``、``out_proj``：四个
        ``nn.Linear(d_model, d_model, bias=bias)``。因此 state dict 恰好有这些键
        ``w_q.weight, w_q.bias, w_k.weight, w_k.bias,
        w_v.weight, w_v.bias, out_proj.weight, out_proj.bias``（``bias=False``
        时没有偏置）。不要创建其他参数或子模块。
      - ``last_attention``：第一次调用 ``forward`` 之前为 None，之后为最近一次调用的
        注意力权重 ``(B, H, Tq, Tk)``，已 detach。
    """

    def __init__(self, d_model: int, n_heads: int, bias: bool = True) -> None:
        """创建各个投影（组件 ``qkv_projection``）。

        若 ``d_model`` 不能被 ``n_heads`` 整除，抛出 ``ValueError``（评分）。

        TODO (qkv_projection)，分步说明：
          1. 保持下面的 ``super().__init__()`` 调用在最前面：在给任何层赋值之前，
             ``nn.Module`` 必须先初始化。
          2. 若 ``d_model % n_heads != 0``，抛出 ``ValueError``。
          3. 保存 ``d_model``、``n_heads`` 和 ``d_k = d_model // n_heads``。
          4. 创建 ``w_q``、``w_k``、``w_v`` 和 ``out_proj``，每个都是从 ``d_model``
             到 ``d_model``、``bias=bias`` 的线性层。
          5. 把 ``last_attention`` 设为 None。
        """
        super().__init__()
        raise NotImplementedError("qkv_projection: write MultiHeadAttention.__init__")

    def project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """把 ``x (B, T, D)`` 投影为查询、键和值，形状都是 ``(B, T, D)``。

        三者分别是 ``w_q(x)``、``w_k(x)``、``w_v(x)``：同一个输入以三种不同方式读取，
        使“我在找什么”（查询）可以不同于“我凭什么被找到”（键）和“我交出什么”（值）。

        TODO (qkv_projection)，分步说明：
          1. 把三个投影分别作用于 ``x``。
          2. 按 ``(q, k, v)`` 的顺序以元组返回。
        """
        raise NotImplementedError("qkv_projection: write MultiHeadAttention.project_qkv")

    def forward(
        self, x: Tensor, mask: Tensor | None = None, cache: KVCache | None = None
    ) -> Tensor:
        """``x (B, T, D)`` 的自注意力；返回 ``(B, T, D)``。

        ``mask``（bool，True = 可以关注）可广播到 ``(B, H, T, T)``：
        ``(T, T)``、``(B, 1, T, T)`` 或 ``(B, H, T, T)``；None 表示处处可关注。

        带 ``KVCache`` 时（组件 ``kv_cache``）：``x`` 是一个序列*接下来*的 ``T`` 个位置，
        其更早的位置已在缓存中。它们的键和值（投影并 ``split_heads`` 之后）用
        ``cache.update(k, v)`` 追加到缓存，该调用返回迄今所有位置的键和值
        ``(B, H, Tk, Dh)``。新的查询关注每个已缓存的位置，彼此之间按因果关系可见，
        这恰好是 ``causal_mask(T, Tk)``。缓存自带掩码，所以同时传入 ``mask`` 和
        ``cache`` 时抛出 ``ValueError``（评分）。

        两种情况下都要把本次调用的注意力权重（detach 后）保存到
        ``self.last_attention``（``(B, H, Tq, Tk)``）。

        TODO (multi_head_attention)，分步说明：
          1. 用 ``project_qkv`` 投影 ``x``。
          2. 用 ``split_heads`` 把 ``q``、``k``、``v`` 分别拆成多头。
          3. （kv_cache，见下）若给了缓存，在这里处理。
          4. 带掩码运行 ``scaled_dot_product_attention``。
          5. 把权重（detach 后）保存到 ``self.last_attention``。
          6. 用 ``merge_heads`` 合并多头，再应用 ``out_proj``。

        TODO (kv_cache)，缓存分支，即上面第 3 步，分步说明：
          a. 若同时给了 ``mask``（不为 None），抛出 ``ValueError``。
          b. 用 ``cache.update(k, v)`` 的返回值替换 ``k`` 和 ``v``。
          c. 用 ``causal_mask(T_new, T_total, device=x.device)`` 作为掩码。
        """
        raise NotImplementedError(
            "multi_head_attention: write MultiHeadAttention.forward (its cache branch is kv_cache)"
        )
