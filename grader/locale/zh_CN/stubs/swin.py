"""Swin Transformer 的移位窗口（组件 ``swin_windows`` 和 ``window_attention``）。

窗口（``swin_windows``：``window_partition``、``window_reverse``、``shifted_window_mask``）
-----------------------------------------------------------------------------------------------

ViT（vit.py）让每个图块关注其他所有图块：对一张 ``h x w`` 个词元、``C`` 个通道的特征图，
每层有 ``(h w)^2`` 个分数，所以图像边长加倍会让注意力的代价乘以 16。Swin（Liu 等，2021，
“Swin Transformer: Hierarchical Vision Transformer using Shifted Windows”）把特征图切成
互不重叠的 ``ws x ws`` 窗口（论文中 ``ws = 7``），只让词元在自己的窗口内做注意力。于是
不论图像多大，每个词元只与 ``ws^2`` 个其他词元打交道：代价为 ``(h w) * ws^2 * C``，与
词元数成线性关系（论文中全局注意力是 ``4hwC^2 + 2(hw)^2 C``，边长为 ``M`` 的窗口是
``4hwC^2 + 2 M^2 hw C``）。

这里的特征图是通道在后的，``(B, H, W, C)``，``H`` 和 ``W`` 是 ``ws`` 的倍数。
``window_partition`` 把它们变成一批窗口 ``(B * nW, ws * ws, C)``，
``nW = (H / ws) * (W / ws)``，顺序为：

- 先按图像：图像 0 的 ``nW`` 个窗口，然后是图像 1 的，……
- 然后在窗口网格上按行优先：一张图像的第 ``n`` 个窗口位于窗口行 ``n // (W / ws)``、
  窗口列 ``n % (W / ws)``；
- 窗口内部也按行优先：词元 ``t`` 位于其窗口的第 ``t // ws`` 行、第 ``t % ws`` 列。

对一张按行优先给位置编号的 4 x 4 特征图，``ws = 2`` 时::

     0  1 |  2  3        窗口 0：[ 0,  1,  4,  5]
     4  5 |  6  7        窗口 1：[ 2,  3,  6,  7]
    ------+------        窗口 2：[ 8,  9, 12, 13]
     8  9 | 10 11        窗口 3：[10, 11, 14, 15]
    12 13 | 14 15

``window_reverse`` 把各窗口放回原处；它恰好是逆运算（注意力的输出，每个词元一个向量，
回到特征图上）。两个函数都不改变任何值：顺序就是这个练习的全部，而且从形状上看不出来。

从不交换信息的窗口会让每个窗口成为一张单独的图像。所以 Swin 每隔一个块就把窗口网格
向下、向右*移位* ``s = ws // 2``，新窗口跨过旧窗口。移动网格会在边缘留下较小的窗口；
Swin 的做法是沿两个轴把特征图滚动 ``-s``，``torch.roll(x, (-s, -s),
dims=(1, 2))``，再照常划分滚动后的特征图（块会把结果再滚动 ``+s`` 回去）。滚动把前
``s`` 行移到底部、前 ``s`` 列移到右边：最后一行窗口（以及最后一列窗口）里现在有来自图像
相对两边的词元，它们之间不能互相关注。``shifted_window_mask`` 说明哪些词元对可以：当两个
词元来自滚动后特征图的同一个*区域*时为 True。沿行方向，区域是三个切片::

    [0, H - ws)        图像的第 s .. H - ws + s - 1 行，上移了 s：完整的窗口
    [H - ws, H - s)    图像最后的 ws - s 行，上移了 s
    [H - s, H)         图像最前面的 s 行，绕回到了底部

``W`` 的同样三个切片切分各列；一个词元的
标签是（它所在行的切片，它所在列的切片）这一对，共九个区域。当 ``H = W = 4``、
``ws = 2``、``s = 1`` 时，标签和各窗口的掩码为::

    0 0 | 1 2       窗口 0：一个区域，全为 True
    0 0 | 1 2       窗口 1：标签 [1, 2, 1, 2]：词元 0 与 2 一组，1 与 3 一组
    ----+----       窗口 2：标签 [3, 3, 6, 6]：0 与 1 一组，2 与 3 一组
    3 3 | 4 5       窗口 3：标签 [4, 5, 7, 8]：每个词元单独一组
    6 6 | 7 8

（``H - ws`` 是 ``ws`` 的倍数，所以第一个切片从不与另外两个共享窗口：用
``[0, H - s)`` 和 ``[H - s, H)`` 两个切片得到的掩码相同。Swin 的代码用三个；两种都对。）
``s == 0`` 时什么都不滚动，每个掩码都全为 True。官方代码把标签变成由 ``0`` 和 ``-100``
组成、加到分数上的浮点掩码；约定要求的是 bool 掩码（True = 可以关注）；窗口注意力把它的
False 元素变成 ``-inf``（或加上 ``-100``）。

reshape、``permute``、``einops.rearrange``、``unfold``、用索引张量 gather 以及循环都
可以用。

窗口注意力（``window_attention``：``WindowAttention``、``SwinBlock``）
--------------------------------------------------------------------------

在一个 ``ws x ws`` 词元的窗口内部，注意力就是在 ``N = ws * ws`` 个词元上的普通多头
自注意力，只多了一样东西：可学习的相对位置偏置。Swin 不给词元加位置嵌入；而是由第
``h`` 个头给词元 ``i = (yi, xi)`` 和 ``j = (yj, xj)`` 的分数加上一个只取决于它们偏移
``(yi - yj, xi - xj)`` 的数，每个偏移从 ``-(ws - 1)`` 到 ``ws - 1``。为什么用相对的而
不是绝对的：每个窗口都用同样的权重做注意力，不论它在图像的什么地方、被移位怎样切开，
所以“窗口的第 5 个词元”毫无意义，而“上移一行、左移两列”在哪里都是同一个意思（并且能
推广到更大的图像和其他位置的窗口）。``(2ws - 1) ** 2`` 个偏移以行偏移优先编号::

    index[i, j] = (yi - yj + ws - 1) * (2ws - 1) + (xi - xj + ws - 1)

（每个偏移都加上 ``ws - 1``，使其从 0 开始；步长 ``2ws - 1`` 是列偏移的个数，所以任何
两个偏移都不会共用表中的一行，而且这是 Swin 自己的编号，它的检查点依赖于此。）
``SwinBlock`` 是一个像 Transformer 那样的 pre-norm 块，作用于特征图 ``(B, H, W, C)``：
注意力分支把归一化后的特征图滚动 ``-shift_size``（不为 0 时），切成窗口，在每个窗口内用
``shifted_window_mask`` 做注意力，把窗口拼回去，再滚动 ``+shift_size``，这样
``shift_size = 0`` 和 ``ws // 2`` 的块交替出现，信息得以跨过窗口边界。"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
from torch import Tensor

from .attention import merge_heads, split_heads


def window_partition(x: Tensor, window_size: int) -> Tensor:
    """``(B, H, W, C)`` -> ``(B * nW, ws * ws, C)``，``nW = (H / ws) * (W / ws)``；dtype 和设备不变。

    窗口先按图像排列，再在窗口网格上按行优先排列；窗口内的词元按行优先排列（见模块的
    文档字符串）。若 ``H`` 或 ``W`` 不是 ``window_size`` 的倍数，抛出 ``ValueError``
    （评分）。

    TODO (swin_windows)，分步说明：
      1. 读出 ``B, H, W, C``；除非 ``ws`` 同时整除 ``H`` 和 ``W``，否则抛出
         ``ValueError``。
      2. 把 ``H`` 拆成 ``(H / ws, ws)``，把 ``W`` 拆成 ``(W / ws, ws)``：得到一个
         六维视图 ``(B, 网格行, 窗口内的行, 网格列, 窗口内的列, C)``。
      3. 重排各维，使两个网格维紧跟在 ``B`` 之后（网格行在前），然后是两个窗口内的维
         （行在前），最后是 ``C``。跳过这一步形状仍然正确，但“窗口”就变成了连续几行
         组成的条带。
      4. 把 ``B`` 和网格展平成一维，把窗口展平成 ``ws * ws``（重排后的张量不连续：
         用 ``reshape``，或在 ``view`` 之前 ``contiguous()``）。
    """
    raise NotImplementedError("swin_windows: write window_partition")


def window_reverse(windows: Tensor, window_size: int, H: int, W: int) -> Tensor:
    """``(B * nW, ws * ws, C)`` -> ``(B, H, W, C)``：``window_partition`` 的逆运算。

    ``B`` 是 ``windows.shape[0] // nW``，``nW = (H / ws) * (W / ws)``；
    ``window_reverse(window_partition(x, ws), ws, H, W)`` 还原出 ``x``，对非方形的
    特征图也是如此。

    TODO (swin_windows)，分步说明：
      1. 把窗口视为 ``(B, 网格行, 网格列, 窗口内的行, 窗口内的列, C)``：网格有
         ``H / ws`` 行和 ``W / ws`` 列（按这个顺序：把它们弄混只有在方形特征图上才
         发现不了）。
      2. 撤销 ``window_partition`` 的第 3 步：把每个窗口内的维放回到它的网格维旁边，
         （网格行, 窗口内的行, 网格列, 窗口内的列）。
      3. 把这两对展平成 ``H`` 和 ``W``：``(B, H, W, C)``。
    """
    raise NotImplementedError("swin_windows: write window_reverse")


def shifted_window_mask(H: int, W: int, window_size: int, shift_size: int, *, device=None) -> Tensor:
    """Bool ``(nW, ws * ws, ws * ws)``：滚动后的特征图中，每个窗口里哪些词元可以关注哪些。

    特征图沿 ``H`` 和 ``W`` 滚动了 ``-shift_size``
    （``torch.roll(x, (-s, -s), dims=(1, 2))``）；窗口和词元按 ``window_partition``
    的顺序排列（每张图像的掩码都一样）。当窗口 ``n`` 的词元 ``i`` 和 ``j`` 带有相同的
    标签时，``mask[n, i, j]`` 为 True：标签是 ``[0, H - ws)``、``[H - ws, H - s)``、
    ``[H - s, H)`` 中包含该词元所在行的行切片，加上 ``W`` 的同样切片中包含其所在列的
    那个（见模块文档字符串）。每个掩码都是对称的，对角线为 True；``shift_size == 0``
    时全部为 True。掩码创建在 ``device`` 上。

    除非 ``0 <= shift_size < window_size`` 且 ``window_size`` 整除 ``H`` 和 ``W``，
    否则抛出 ``ValueError``（评分）。

    TODO (swin_windows)，分步说明：
      1. 检查参数；按上面的说明抛出 ``ValueError``。
      2. 在 ``device`` 上创建一张标签图 ``(1, H, W, 1)``（它代表滚动后的特征图：不要
         再滚动它）。
      3. 给每个区域一个自己的编号：对三个行切片中的每一个、三个列切片中的每一个，把一个
         新编号写进特征图的这一块（九个块都要数，不只是各行）。
      4. 用你的 ``window_partition`` 把标签图切成窗口：每个窗口一行 ``ws * ws`` 个标签。
      5. 把每个词元的标签与同一窗口中其他每个词元的标签作比较（把一列标签与一行标签
         广播）：相等处为 True。（官方代码相减后保留 ``!= 0`` 的位置作为 ``-100``；那
         与本掩码正好相反。）
    """
    raise NotImplementedError("swin_windows: write shifted_window_mask")


class WindowAttention(nn.Module):
    """每个窗口内部的多头自注意力，带可学习的相对位置偏置。

    ``x (B_, N, C)`` -> ``(B_, N, C)``：``B_`` 个窗口，每个 ``N = ws * ws`` 个词元
    （窗口内按行优先，与 ``window_partition`` 给出的一致），``C = dim``。

    层和 buffer（名字和形状是约定的一部分，参与评分）：
      - ``qkv = nn.Linear(dim, 3 * dim)``：它的输出依次是 q、k、v（各 ``dim`` 个特征），
        每个都像 ``split_heads`` 那样拆成 ``n_heads`` 个头。
      - ``proj = nn.Linear(dim, dim)``，作用于合并后的多头。
      - ``relative_position_bias_table = nn.Parameter``，形状
        ``((2 * ws - 1) ** 2, n_heads)``：第 ``r`` 行为每个头保存一个相对偏移的偏置
        （初始为较小的随机值，例如 ``std=0.02``）。
      - ``relative_position_index``：一个 int64 的 buffer ``(N, N)``（register_buffer，
        持久与否均可），``index[i, j]`` 如模块文档字符串所述。

    你可以调用自己在 attention.py 中写的 ``split_heads`` 和 ``merge_heads``（为本组件
    评分时，由评分程序的版本代替它们）。这里不允许使用 PyTorch 的
    ``F.scaled_dot_product_attention`` 和 ``nn.MultiheadAttention``：偏置和掩码要放进
    注意力内部，所以由你来写。
    """

    def __init__(self, dim: int, window_size: int, n_heads: int) -> None:
        """TODO (window_attention)，分步说明：
          1. 保持下面的 ``super().__init__()`` 调用在最前面；保存 ``dim``、
             ``window_size`` 和 ``n_heads``。
          2. 创建 ``qkv`` 和 ``proj``。
          3. 把表创建为上面形状的 ``nn.Parameter``（buffer 永远学不到东西）。
          4. 构造索引：给词元编号 ``t = 0 .. N - 1``，坐标为 ``(t // ws, t % ws)``；对每一对
             ``(i, j)`` 取行偏移和列偏移（查询减去键），各加上 ``ws - 1``，再以步长
             ``2ws - 1`` 组合起来。借助广播，这就是一列坐标与一行坐标之差；不需要循环。
             把它注册为 buffer。
        """
        super().__init__()
        raise NotImplementedError("window_attention: write WindowAttention.__init__")

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """``x (B_, N, C)``，可选的 bool ``mask (nW, N, N)`` -> ``(B_, N, C)``。

        ``B_`` 是 ``nW`` 的倍数：一张图像的各个窗口一个接一个，一张图像接一张图像，所以
        窗口 ``b`` 使用 ``mask[b % nW]``（不是 ``mask[b // B]``）。掩码为 False 的词元对
        不得到任何权重（softmax 之前设为 ``-inf``；小于或等于 ``-1e9`` 的常数，或 Swin
        自己那种由 ``0`` 和 ``-100`` 组成、加到分数上的浮点掩码，也能通过）。

        TODO (window_attention)，分步说明：
          1. 应用 ``qkv``，把输出切成 q、k 和 v（按这个顺序）；把每个都拆成多头：
             ``(B_, n_heads, N, C / n_heads)``。
          2. 分数：q 乘以 k 的转置，除以一个头的宽度 ``C / n_heads``（每个头的点积所求和
             的范围）的平方根，而不是 ``C`` 的平方根。
          3. 取出偏置：用索引对表做索引得到 ``(N, N, n_heads)``；把头维移到最前面（用
             permute，而不是 reshape，后者会把各个头搅乱），并加到每个窗口的分数上。
          4. 有掩码时：把分数视为 ``(B_ // nW, nW, n_heads, N, N)``，使窗口轴与掩码的
             窗口轴对齐，并填充掩码为 False 的词元对（bool 掩码不是可以直接相加的数）。
          5. 在键上做 softmax，乘以 v，合并多头，应用 ``proj``。
        """
        raise NotImplementedError("window_attention: write WindowAttention.forward")


class SwinBlock(nn.Module):
    """（移位）窗口注意力和一个 MLP，各自 pre-norm 并带残差连接；``(B, H, W, C)`` -> ``(B, H, W, C)``。

    各层（名字是约定的一部分，参与评分）：``norm1``、``norm2 =
    nn.LayerNorm(dim)``，``attn = WindowAttention(dim, window_size, n_heads)``，
    ``mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden,
    dim))``，其中 ``hidden = int(dim * mlp_ratio)``。

    记 ``s = shift_size``，前向计算为::

        y = norm1(x)
        y = roll(y, -s)                  # 只在 s > 0 时，沿 H 和 W
        y = window_reverse(attn(window_partition(y), mask), ...)
        y = roll(y, +s)                  # 回到原处
        x = x + y                        # 残差加到 x 上，而不是 norm1(x) 上
        return x + mlp(norm2(x))

    滚动 ``-s`` 把窗口网格移动 ``s`` 个像素：新窗口跨过旧边界。从底边和右边绕回来的
    像素落在了图像中并不相邻的像素旁边，所以用 ``shifted_window_mask(H, W, ws, s)``
    （``s == 0`` 时不用掩码）把它们隔开；它描述的是滚动了 ``-s`` 的特征图，这就是为什么
    必须先朝这个方向滚动，之后再滚动 ``+s`` 回来。
    """

    def __init__(self, dim: int, n_heads: int, window_size: int, shift_size: int = 0, mlp_ratio: float = 4.0) -> None:
        """TODO (window_attention)，分步说明：
          1. 保持下面的 ``super().__init__()`` 调用在最前面；保存 ``window_size`` 和
             ``shift_size``。
          2. 按上面的列表创建 ``norm1``、``attn``、``norm2`` 和 ``mlp``。
        """
        super().__init__()
        raise NotImplementedError("window_attention: write SwinBlock.__init__")

    def forward(self, x: Tensor) -> Tensor:
        """``x (B, H, W, C)`` -> ``(B, H, W, C)``。

        若 ``H`` 或 ``W`` 不是窗口大小的倍数，抛出 ``ValueError``（评分）。

        TODO (window_attention)，分步说明：
          1. 读出 ``H`` 和 ``W``；除非两者都是 ``window_size`` 的倍数，否则抛出
             ``ValueError``。
          2. 用 ``norm1`` 归一化；若 ``shift_size`` 不为 0，把结果沿 ``H`` 和 ``W`` 滚动
             ``-shift_size``（``torch.roll``，两个位移、两个维），并用
             ``shifted_window_mask`` 构造掩码（在 ``x`` 所在的设备上）。
          3. 用 ``window_partition`` 切成窗口，用 ``attn``（带掩码）做注意力，用
             ``window_reverse`` 拼回去。
          4. 如果滚动过，就再滚动 ``+shift_size`` 回来；把结果加到 ``x`` 上。
          5. 返回 ``x`` 加上 ``norm2(x)`` 经过 ``mlp`` 的结果。
        """
        raise NotImplementedError("window_attention: write SwinBlock.forward")
