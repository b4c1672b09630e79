"""归一化层：LayerNorm（组件 ``layer_norm``）和 RMSNorm（``rms_norm``）。

深层网络的激活值在层与层之间会发生尺度漂移。归一化层把每个词元的特征向量（最后一维
``D``）缩放到标准大小，再通过一个可学习的、逐特征的 ``weight``（对 LayerNorm 还有
一个平移 ``bias``）让模型重新选择自己的尺度。每个词元单独归一化：与 BatchNorm 不同，
批和序列上不共享任何东西。

**LayerNorm**（Ba 等，2016）既中心化又缩放：在最后一维上，

    y = (x - mean) / sqrt(var + eps) * weight + bias

其中 ``var`` 是*有偏*方差，即 ``(x - mean) ** 2`` 的均值（除以 ``D`` 而不是
``D - 1``：这是该向量自身的性质，而不是对总体的估计）。``eps`` 放在平方根*里面*：
它防止常数向量（方差为 0）除以零。

**RMSNorm**（Zhang 与 Sennrich，2019；LLaMA 使用）只保留缩放：

    y = x / sqrt(mean(x ** 2) + eps) * weight

为什么去掉均值？论文发现 LayerNorm 的好处来自重新缩放，而不是重新中心化：只除以
均方根训练得一样好，少一次归约，也没有偏置。注意 ``mean(x ** 2)`` 不是方差：哪里都
没有减去均值，所以对远离零的输入（比如 ``x = 100 + noise``），RMSNorm 和 LayerNorm
的结果相差很大。

形状：两者都把 ``(..., D)`` 映射到 ``(..., D)``，前导维可以有任意多个。用张量运算来写
（``torch.nn.LayerNorm``、``F.layer_norm``、``nn.RMSNorm`` 和 ``F.rms_norm`` 正是你要
实现的东西，所以检查项拒绝它们）；``torch.rsqrt`` 可以用。
"""
from __future__ import annotations

import torch
import torch.nn as nn
from torch import Tensor


class LayerNorm(nn.Module):
    """在最后一维上做层归一化，``(..., D)`` -> ``(..., D)``。

    参数（名字是约定的一部分：检查项按名字加载 state dict）：
      - ``weight``：形状 ``(d_model,)`` 的 ``nn.Parameter``，初始化为全一
      - ``bias``：形状 ``(d_model,)`` 的 ``nn.Parameter``，初始化为全零

    state dict 中不放别的东西（``eps`` 保存为普通属性）。
    """

    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        """创建 ``weight`` 和 ``bias``；记住 ``eps``。

        TODO (layer_norm)，分步说明：
          1. 保持下面的 ``super().__init__()`` 调用在最前面。
          2. 保存 ``eps``。
          3. 创建 ``weight``（全一）和 ``bias``（全零），形状都是 ``(d_model,)``，
             用 ``nn.Parameter`` 包起来，使它们参与训练并被保存。
        """
        super().__init__()
        raise NotImplementedError("layer_norm: write LayerNorm.__init__")

    def forward(self, x: Tensor) -> Tensor:
        """在最后一维上计算 ``(x - mean) / sqrt(var + eps) * weight + bias``。

        ``x`` 为 ``(..., D)``；结果的形状和 dtype 与 ``x`` 相同。

        TODO (layer_norm)，分步说明：
          1. 在最后一维上求 ``x`` 的均值，保留该维（``(..., 1)``），使它能广播回 ``x``。
          2. 在同一维上求有偏方差：偏差平方的均值（若用 ``var``，则用
             ``unbiased=False`` / ``correction=0``）。
          3. 减去均值，再除以 ``var + eps`` 的平方根。
          4. 乘以 ``weight`` 并加上 ``bias``（两者都是 ``(D,)``：它们在前导维上广播）。
        """
        raise NotImplementedError("layer_norm: write LayerNorm.forward")


class RMSNorm(nn.Module):
    """在最后一维上做均方根归一化，``(..., D)`` -> ``(..., D)``。

    参数（名字是约定的一部分）：
      - ``weight``：形状 ``(d_model,)`` 的 ``nn.Parameter``，初始化为全一

    没有偏置，state dict 中也没有别的东西。
    """

    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        """创建 ``weight``；记住 ``eps``。

        TODO (rms_norm)，分步说明：
          1. 保持下面的 ``super().__init__()`` 调用在最前面。
          2. 保存 ``eps``。
          3. 创建 ``weight``，一个全一的 ``nn.Parameter``，形状 ``(d_model,)``。
        """
        super().__init__()
        raise NotImplementedError("rms_norm: write RMSNorm.__init__")

    def forward(self, x: Tensor) -> Tensor:
        """在最后一维上计算 ``x / sqrt(mean(x ** 2) + eps) * weight``。

        ``x`` 为 ``(..., D)``；结果的形状和 dtype 与 ``x`` 相同。

        TODO (rms_norm)，分步说明：
          1. 对 ``x`` 求平方，在最后一维上取平均并保留该维（``(..., 1)``）。
             不要先减去均值。
          2. 加上 ``eps``，取平方根的倒数（``torch.rsqrt``）。
          3. 用它乘以 ``x``，再乘以 ``weight``。
        """
        raise NotImplementedError("rms_norm: write RMSNorm.forward")
