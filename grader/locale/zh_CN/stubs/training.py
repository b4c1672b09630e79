"""训练语言模型：损失、优化器和学习率调度。

这里有三个组件：

- ``cross_entropy``：``softmax``、``log_softmax`` 和 ``cross_entropy``，下一个词元预测的
  损失；
- ``optimizer``：``AdamW`` 和 ``clip_grad_norm``，把梯度变成更新的东西；
- ``lr_schedule``：``lr_at``，线性预热然后余弦衰减，GPT 式训练的调度。

每一个都必须与 PyTorch 自己的实现（``torch.softmax``、``F.cross_entropy``、
``torch.optim.AdamW``、``torch.nn.utils.clip_grad_norm_``）结果相等，并且必须用张量
运算来写：检查项拒绝调用这些内置函数（``torch.exp``、``torch.log``、``torch.sqrt``、
``amax``、``gather`` 和 ``torch._foreach_*`` 都可以用）。
"""
from __future__ import annotations

import math
from typing import Callable, Iterable

import torch
from torch import Tensor


def log_softmax(x: Tensor, dim: int = -1) -> Tensor:
    """沿 ``dim`` 计算 ``log(softmax(x))``：形状和 dtype 与 ``x`` 相同。

    为什么要减去最大值？``exp`` 很快就会溢出：在 float32 中 ``exp(89)`` 已经是
    ``inf``，而在初始化不好的模型里，几百的分数很常见。一行的每个分数都减去同一个常数
    时 softmax 不变（它在分子和分母之间抵消），所以先减去每行的最大值：最大的指数就是
    ``exp(0) = 1``，什么都不会溢出。检查项使用的分数大到 ``±1e4``。

    为什么不用 ``log(softmax(x))``？当一个概率下溢为 0 时，它的对数是 ``-inf``，尽管
    真实值（比如 ``-2e4``）完全可以表示。在对数空间里计算：
    ``log_softmax(x) = (x - m) - log(sum(exp(x - m)))``，``m`` 是该行的最大值
    （“log-sum-exp 技巧”）。

    TODO (cross_entropy)，分步说明：
      1. 沿 ``dim`` 求 ``x`` 的最大值，保留该维（``keepdim=True``），使它能与 ``x``
         广播。
      2. 减去它；现在每个元素都 <= 0。
      3. 再减去其指数之和（沿 ``dim``，同样 keepdim）的对数。
    """
    raise NotImplementedError("cross_entropy: write log_softmax")


def softmax(x: Tensor, dim: int = -1) -> Tensor:
    """沿 ``dim`` 计算 ``exp(x) / sum(exp(x))``：形状和 dtype 不变，每个切片之和为 1。

    与 ``torch.softmax(x, dim)`` 相等，并且在它有限的地方也有限，分数可达 ``±1e4``
    （为什么先减去最大值，见 ``log_softmax``）。你可以直接计算，也可以写成
    ``exp(log_softmax(x, dim))``。

    TODO (cross_entropy)，分步说明：
      1. 从 ``x`` 中减去沿 ``dim`` 的最大值（keepdim）。
      2. 取指数，再除以沿 ``dim`` 的和（keepdim）。
    """
    raise NotImplementedError("cross_entropy: write softmax")


def cross_entropy(logits: Tensor, targets: Tensor, *, ignore_index: int = -100) -> Tensor:
    """``-log p[target]`` 的均值：``logits (..., V)``、``targets (...)`` int64 -> 0 维张量。

    语言模型给出 ``logits (B, T, V)``，即每个位置上每个词表项一个分数；``targets (B, T)``
    是真正出现的下一个词元。损失是在各个位置上，模型给这个词元的对数概率的相反数的平均：
    模型确信且正确时为 0，确信别的词元时很大。

    目标为 ``ignore_index`` 的位置（填充、提示）不计入：它们既不进入求和，*也*不计入求
    均值时的除数。结果是 logits 的 dtype 的 0 维张量，等于
    ``F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=ignore_index)``。

    若 ``targets.shape != logits.shape[:-1]``，抛出 ``ValueError``（评分）。

    TODO (cross_entropy)，分步说明：
      1. 检查形状，按上面的说明抛出 ``ValueError``。
      2. 展平：logits 变为 ``(N, V)``，targets 变为 ``(N,)``。
      3. 在最后一维上对 logits 取你的 ``log_softmax``。
      4. 保留目标不是 ``ignore_index`` 的行，并从每行取出其目标处的元素（``gather``，
         或用 ``arange`` 索引）。
      5. 返回它们均值的相反数。
    """
    raise NotImplementedError("cross_entropy: write cross_entropy")


class AdamW(torch.optim.Optimizer):
    """带解耦权重衰减的 Adam（Loshchilov 与 Hutter，2019），每一步都与 ``torch.optim.AdamW`` 相等。

    Adam 为每个参数保存梯度的滑动平均（``m``，一阶矩：带动量的方向）和梯度平方的滑动
    平均（``v``，二阶矩：梯度通常有多大），并让每个元素朝 ``m`` 的方向移动大约
    ``lr``，再按 ``1 / sqrt(v)`` 缩放。两个平均都从 0 开始，所以起初偏小；除以
    ``1 - beta**t``（偏差修正）可以抵消这一点，``t`` 是*这个*参数被更新的次数（某一步中
    没有梯度的参数不更新，它的 ``t`` 也不变）。

    为什么要*解耦*的衰减？把 ``wd * p`` 加到梯度上（L2 正则化）会让衰减经过 ``m`` 和
    ``v``，而 ``1 / sqrt(v)`` 的缩放恰恰会削弱梯度大的那些参数的衰减。AdamW 在 Adam
    步骤之前、与之分开地直接收缩参数本身 ``p *= 1 - lr * wd``，所以每个权重以相同的速率
    衰减。

    参数 ``p``（梯度为 ``g``）的一步 ``t``（从 1 开始）::

        p *= 1 - lr * weight_decay
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g**2
        p -= lr * (m / (1 - b1**t)) / (sqrt(v / (1 - b2**t)) + eps)

    ``__init__(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)``：
    ``params`` 就是 ``torch.optim.Optimizer`` 接受的东西（张量的可迭代对象，或字典的
    可迭代对象，每个字典是一个有自己设置的参数组）。``lr``、``eps`` 或 ``weight_decay``
    为负，或某个 beta 不在 ``[0, 1)`` 内时，抛出 ``ValueError``（评分）。

    TODO (optimizer)，``__init__``，分步说明：
      1. 检查各项设置，按上面的说明抛出 ``ValueError``。
      2. 用包含四项设置的字典调用 ``super().__init__(params, defaults)``：基类会建立
         ``self.param_groups``（每组是一个字典，含它的 ``"params"`` 和每项设置）和
         ``self.state``（每个参数一个字典，起初为空）。
    """

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01) -> None:
        raise NotImplementedError("optimizer: write AdamW.__init__")

    @torch.no_grad()
    def step(self, closure: Callable[[], Tensor] | None = None) -> Tensor | None:
        """更新每个有梯度的参数一次；返回 closure 的损失，或 None。

        ``closure``（可选）重新计算损失和梯度；先在 ``torch.enable_grad()`` 下调用它
        （本方法在 ``no_grad`` 下运行）。

        TODO (optimizer)，分步说明：
          1. 若有 closure，（在启用梯度的情况下）调用它并保留其损失。
          2. 对每个参数组，*此时*从组中读取 ``lr``、``betas``、``eps``、``weight_decay``：
             调度可能在上一步之后修改了它们。
          3. 对组中每个有 ``.grad`` 的参数（跳过其他参数）：取出它的状态
             （``self.state[p]``）；第一次更新时创建它的步数计数以及 ``m``、``v``
             （与 ``p`` 同形状的零）；把这一步计入。
          4. 原地衰减 ``p``，原地更新 ``m`` 和 ``v``，然后按上面的公式原地移动 ``p``。
          5. 返回损失（没有 closure 时为 None）。
        """
        raise NotImplementedError("optimizer: write AdamW.step")


def clip_grad_norm(parameters: Iterable[Tensor], max_norm: float) -> Tensor:
    """把所有梯度一起缩放，使它们的范数至多为 ``max_norm``；返回缩放前的范数。

    梯度裁剪防止一个坏批次把模型甩得很远：所有参数的梯度被看作一个长向量；若它的 L2
    范数超过 ``max_norm``，每个梯度都（原地）乘以 ``max_norm / (norm + 1e-6)``，否则
    保持不变。方向从不改变，只改变长度。与 ``torch.nn.utils.clip_grad_norm_`` 相等。

    ``parameters`` 可以是任意可迭代对象，也可以是生成器（``model.parameters()`` 就是）：
    只遍历一次。``.grad`` 为 None 的参数跳过。返回裁剪前的总范数，一个 0 维张量。

    TODO (optimizer)，分步说明：
      1. 把不为 None 的梯度收集到一个列表中（遍历一次）。
      2. 总范数：所有梯度的所有元素平方之和的平方根（各梯度范数组成的向量的范数是
         同一个数）。
      3. 缩放因子 ``min(1, max_norm / (norm + 1e-6))``。
      4. 把每个梯度原地乘以它；返回范数。
    """
    raise NotImplementedError("optimizer: write clip_grad_norm")


def lr_at(step: int, *, max_lr: float, min_lr: float, warmup_steps: int, total_steps: int) -> float:
    """第 ``step`` 步的学习率：线性预热，余弦衰减，然后保持下限（一个 Python float）。

    为什么要预热？开始时权重是随机的，Adam 的 ``v`` 还没见过几个梯度，大步长可能把模型
    甩进一个再也出不来的坏区域（或者让损失爆炸）。所以学习率在 ``warmup_steps`` 步内从
    0 线性升到 ``max_lr``；然后沿半个余弦周期降到 ``min_lr``，开始和结束时都衰减得很慢，
    ``total_steps`` 之后保持不变::

        step < warmup_steps:        max_lr * step / warmup_steps
        warmup_steps <= step <= total_steps:
            progress = (step - warmup_steps) / (total_steps - warmup_steps)   # 0 .. 1
            min_lr + 0.5 * (max_lr - min_lr) * (1 + cos(pi * progress))
        step > total_steps:         min_lr

    若 ``step < 0``、``warmup_steps < 0`` 或 ``total_steps <= warmup_steps``，抛出
    ``ValueError``（评分）。

    TODO (lr_schedule)，分步说明：
      1. 检查参数，按上面的说明抛出 ``ValueError``。
      2. 返回 ``step`` 所在阶段的值（用 ``math.cos``、``math.pi``：结果是普通的 float）。
    """
    raise NotImplementedError("lr_schedule: write lr_at")
