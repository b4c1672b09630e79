"""Vision Transformer：图块嵌入（组件 ``patch_embedding``）
和整个分类器（组件 ``vit_classifier``，视觉方向）。

Vision Transformer 把图像当作一个序列：把它切成 ``P x P`` 的图块，把每个图块展平成
一个向量，再用一个共享的线性层把每个向量投影到 ``d_model``。此后图块就像词一样是
词元，同样的 Transformer 块都适用。

形状：图像 ``(B, C, H, W)``；``P`` = ``patch_size``；共 ``N = (H/P) * (W/P)`` 个图块，
每个是 ``C * P * P`` 个数的向量。

分类器（``ViT``，在本文件末尾）把各部分组装起来：

    x = patch_embed(images)                 # (B, N, D)：每个图块一个词元
    x = cat([cls, x], dim=1) + pos_emb      # (B, N + 1, D)：类别词元在前，再加位置
    for block in blocks:  x = block(x)      # 你的 TransformerBlock（block.py），不用掩码
    logits = head(norm(x)[:, 0])            # (B, n_classes)：只用类别词元

**为什么要类别词元。** 模型必须把 ``N`` 个图块词元变成一个答案。ViT（Dosovitskiy
等，2020）借用了 BERT 的 ``[CLS]``：一个额外的、可学习的向量，不属于任何图块，放在
序列最前面。它自己不含任何像素，所以经过各个块之后它携带的一切都是通过关注图块收集
来的；head 只读这个词元。（对图块词元取平均也行，但那是另一个模型，不是这里评分的
那个。）

**为什么用可学习的位置。** 注意力把它的词元当作一个集合：交换两个图块，没有位置的
话，每个词元的输出都随之交换，而类别词元的输出不变，模型就分不清图像的上和下。ViT
为每个位置加一个可学习的向量 ``pos_emb``，形状 ``(1, N + 1, D)``（批大小为 1，在
``B`` 上广播）。用可学习的而不是正弦位置编码，是因为图像不是一维序列：图块 ``n`` 的
二维邻域是什么，由训练去发现。

**位置 0。** 类别词元是*前置*的：它位于位置 0，得到 ``pos_emb`` 的第 0 行，head 读取
``x[:, 0]``。所以顺序是：图块词元，然后把类别词元放在最前面，然后把 ``pos_emb`` 加到
全部 ``N + 1`` 个词元上（图块 ``n`` 用第 ``1 + n`` 行）。

``vit_classifier`` 的检查项拒绝 ``nn.TransformerEncoder`` 和
``nn.TransformerEncoderLayer``：请用你的 ``TransformerBlock``。
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


def patchify(images: Tensor, patch_size: int) -> Tensor:
    """把图像切成展平的图块：``(B, C, H, W)`` -> ``(B, N, C*P*P)``。

    顺序（精确评分，它决定哪个权重对上哪个像素）：
      - 图块按行优先编号：沿最上面一行图块从左到右，再到下一行。图块 ``n`` 位于
        图块行 ``n // (W/P)``、图块列 ``n % (W/P)``。
      - 每个图块按 ``(C, P, P)`` 顺序展平：先是通道 0 的全部（各行从上到下，每行
        从左到右），然后通道 1，……

    这恰好是 ``torch.nn.functional.unfold(images,
    kernel_size=P, stride=P)`` 的顺序，它给出 ``(B, C*P*P, N)``。

    若 ``H`` 或 ``W`` 不是 ``P`` 的倍数，抛出 ``ValueError``（评分）。

    TODO (patch_embedding)，分步说明：
      1. 读出 ``H`` 和 ``W``；若任一不是 ``P`` 的倍数，抛出 ``ValueError``。
      2. 把 ``H`` 拆成 ``(H/P, P)``，把 ``W`` 拆成 ``(W/P, P)``。
      3. 重排各维，使两个图块网格维紧跟在 ``B`` 之后（行在前），接着是 ``C``
         和两个图块内的维（行在前）。
      4. 把网格维展平成 ``N``，其余展平成 ``C*P*P``。
    （其他做法：``F.unfold`` 之后转置，或 ``einops.rearrange``。）
    """
    raise NotImplementedError("patch_embedding: write patchify")


class PatchEmbedding(nn.Module):
    """图像 ``(B, C, img_size, img_size)`` -> 图块嵌入 ``(B, num_patches, d_model)``。

    属性（约定的一部分）：
      - ``num_patches``：``(img_size // patch_size) ** 2``
      - ``proj``：``nn.Linear(in_channels * patch_size**2, d_model)``，作用于每个展平的
        图块。（卷积核和步长都为 ``P`` 的 ``Conv2d`` 是同一个运算，但约定以及检查项
        加载的 state dict 用的是名为 ``proj`` 的 ``Linear``。）

    不要创建其他参数或子模块。
    """

    def __init__(self, img_size: int, patch_size: int, in_channels: int, d_model: int) -> None:
        """TODO (patch_embedding)，分步说明：
          1. 保持下面的 ``super().__init__()`` 调用在最前面。
          2. 记住 ``img_size``、``patch_size`` 和 ``in_channels``；``forward``
             需要用它们检查输入。
          3. 按上面的说明设置 ``num_patches`` 并创建 ``proj``。
        """
        super().__init__()
        raise NotImplementedError("patch_embedding: write PatchEmbedding.__init__")

    def forward(self, images: Tensor) -> Tensor:
        """``proj(patchify(images, patch_size))``，形状 ``(B, num_patches, d_model)``。

        若 ``images`` 不是一批 4 维的 ``in_channels x img_size x img_size`` 图像，
        抛出 ``ValueError``（评分）。

        TODO (patch_embedding)，分步说明：
          1. 检查 ``images`` 是否为 ``(B, in_channels, img_size, img_size)``；
             若不是，抛出 ``ValueError``，写明期望的和实际的形状。
          2. 用 ``patchify`` 把图像切成图块。
          3. 把 ``proj`` 作用于每个图块并返回结果。
        """
        raise NotImplementedError("patch_embedding: write PatchEmbedding.forward")


class ViT(nn.Module):
    """Vision Transformer 分类器：``(B, C, img_size, img_size)`` -> ``(B, n_classes)``。

    属性（约定的一部分，也是检查项加载的 state dict 中的名字）：
      - ``patch_embed``：``PatchEmbedding(img_size, patch_size, in_channels, d_model)``
      - ``cls_token``：形状 ``(1, 1, d_model)`` 的 ``nn.Parameter``
      - ``pos_emb``：形状 ``(1, num_patches + 1, d_model)`` 的 ``nn.Parameter``
        （是 ``nn.Parameter`` 而不是 buffer：位置是学出来的）
      - ``blocks``：由 ``n_layers`` 个各自独立的
        ``TransformerBlock(d_model, n_heads, d_ff, dropout)`` 组成的 ``nn.ModuleList``
      - ``norm``：``nn.LayerNorm(d_model)``；``head``：``nn.Linear(d_model, n_classes)``

    不要创建其他参数或子模块。
    """

    def __init__(self, img_size: int, patch_size: int, in_channels: int, n_classes: int, d_model: int,
                 n_heads: int, n_layers: int, d_ff: int, dropout: float = 0.0) -> None:
        """TODO (vit_classifier)，分步说明：
          1. 保持下面的 ``super().__init__()`` 调用在最前面。
          2. 在*这里*、``__init__`` 内部从 ``.block`` 导入 ``TransformerBlock``
             （约定如此要求）：这样在 block.py 尚未完成时，``patchify`` 和
             ``PatchEmbedding`` 仍能导入并评分。
          3. 创建 ``patch_embed``；它的 ``num_patches`` 说明 ``pos_emb`` 除了类别词元
             那一行之外还需要多少行。
          4. 按上面的形状把 ``cls_token`` 和 ``pos_emb`` 创建为参数（全零或较小的
             随机值均可：检查项会加载自己的值）。
          5. 创建 ``n_layers`` 个块，每个都是新的 ``TransformerBlock``，并传入
             ``dropout``（它自己的默认值不是 0），放进 ``nn.ModuleList``；用 ``*``
             重复的列表会把同一个块放很多次。然后创建 ``norm`` 和 ``head``。
        """
        super().__init__()
        raise NotImplementedError("vit_classifier: write ViT.__init__")

    def forward(self, images: Tensor) -> Tensor:
        """``images`` ``(B, in_channels, img_size, img_size)`` -> logits ``(B, n_classes)``。

        TODO (vit_classifier)，分步说明：
          1. 嵌入图块：``(B, N, D)``。
          2. 给批中每张图像一个类别词元（把一个 ``(1, 1, D)`` 参数变成
             ``(B, 1, D)``，不要把它复制成新的参数），并放在图块词元前面：
             ``(B, N + 1, D)``。
          3. 加上 ``pos_emb``（它在批上广播）。
          4. 按顺序运行每个块，不用掩码：每个词元都能看到其他所有词元。
          5. 应用 ``norm``，保留位置 0（类别词元），再应用 ``head``。
        """
        raise NotImplementedError("vit_classifier: write ViT.forward")
