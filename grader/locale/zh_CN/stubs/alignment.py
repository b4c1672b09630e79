"""按偏好对齐语言模型：DPO 与 GRPO 的损失。

这里有两个组件（面试专题）：

- ``dpo_loss``：``sequence_logprobs`` 和 ``dpo_loss``，直接偏好优化（Direct
  Preference Optimization，Rafailov 等，2023）的损失，与 TRL 的 ``DPOTrainer``
  在 ``loss_type="sigmoid"`` 时的算法一致；
- ``grpo_loss``：``group_advantages`` 和 ``grpo_loss``，组相对策略优化（GRPO，
  DeepSeekMath，2024），与 TRL 的 ``GRPOTrainer`` 的算法一致。

两者都是对数概率上的损失：整段回答的，或回答中每个词元的；给出这些对数概率的模型
不在练习之内。用张量运算写：``torch.log_softmax``、``F.logsigmoid``、``F.softplus``、
``gather`` 和 ``torch.clamp`` 都可以用；``trl``、``transformers`` 和 ``peft`` 包不行。
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def sequence_logprobs(logits: Tensor, labels: Tensor, mask: Tensor) -> Tensor:
    """每个序列的标签的对数概率：``(B, T, V), (B, T), (B, T) -> (B,)``。

    ``logits[b, t]`` 给 ``labels[b, t]`` 打分（函数内部不做错位：对因果语言模型，
    调用者传入 ``logits[:, :-1]`` 和 ``idx[:, 1:]``）。结果的 dtype 与 logits 相同，
    对每个 ``b``，是在 ``mask[b, t]`` 为 True 的位置 ``t`` 上
    ``log_softmax(logits[b, t])[labels[b, t]]`` 的和：模型给这个回答的对数概率，
    提示和填充由掩码排除。

    在 ``mask`` 为 False 的位置，标签可以是任何值，包括 ``-100``（Hugging Face
    数据集里“忽略”的标签）：绝不能把它当作索引。``gather`` 遇到 ``-100`` 会出错；
    先把这些标签换掉（比如换成 0），之后再把它们的项置零。掩码全为 False 的行什么都
    不加：结果是 0。

    若 ``labels`` 和 ``mask`` 的形状不是 ``logits.shape[:2]``，抛出 ``ValueError``
    （评分）。

    TODO (dpo_loss)，分步说明：
      1. 检查形状，按上面的说明抛出 ``ValueError``。
      2. 在词表维（最后一维）上做 ``log_softmax``。
      3. 把 ``mask`` 为 False 处的标签换成合法的索引，再用 ``gather`` 在最后一维上
         取出每个位置的标签那一项。
      4. 只保留 ``mask`` 为 True 处取出的值（其余为 0），在 ``T`` 上求和。
    """
    raise NotImplementedError("dpo_loss: write sequence_logprobs")


def dpo_loss(policy_chosen: Tensor, policy_rejected: Tensor, ref_chosen: Tensor, ref_rejected: Tensor,
             beta: float = 0.1) -> tuple[Tensor, Tensor, Tensor]:
    """DPO 的损失和隐式奖励：``(loss, chosen_rewards, rejected_rewards)``。

    每个参数都是形状 ``(B,)`` 的序列对数概率（``sequence_logprobs`` 的结果）：每个
    提示的被选回答和被拒回答，分别在正在训练的策略和冻结的参考模型下。DPO 不需要奖励
    模型：一个回答的隐式奖励是 ``beta * (policy - ref)``，即策略把它的概率提高了多少::

        chosen_rewards   = beta * (policy_chosen - ref_chosen)        # (B,)，detach
        rejected_rewards = beta * (policy_rejected - ref_rejected)    # (B,)，detach
        margin = (policy_chosen - ref_chosen) - (policy_rejected - ref_rejected)
        loss = mean(-logsigmoid(beta * margin))                       # 0 维

    为什么用 ``logsigmoid`` 而不是 ``log(sigmoid(...))``？间隔为 ``-1e3`` 时 sigmoid
    下溢为 0，其对数是 ``-inf``（梯度是 NaN），而 ``logsigmoid(-1e3) = -1e3`` 完全
    可以表示。检查项用到的 ``beta * margin`` 大到 ``±1e3``。奖励只用于记录：它们是
    detach 过的（没有梯度流过）。

    若四个形状不同，抛出 ``ValueError``（评分）。

    TODO (dpo_loss)，分步说明：
      1. 检查四个形状是否相同，否则抛出 ``ValueError``。
      2. 计算两个对数比：被选的和被拒的，各自是策略减参考。
      3. 损失是 ``-F.logsigmoid(beta * (chosen - rejected))`` 在批次上的平均。
      4. 奖励是 ``beta`` 乘以各自的对数比，并 detach。
    """
    raise NotImplementedError("dpo_loss: write dpo_loss")


def group_advantages(rewards: Tensor, group_size: int, eps: float = 1e-4) -> Tensor:
    """GRPO 的优势：把每个奖励与同一提示的其他回答相比较。

    ``rewards (G * group_size,)`` 每个提示有 ``group_size`` 个回答，各组依次排列：
    提示 ``g`` 的回答是 ``rewards[g * group_size : (g + 1) * group_size]``。GRPO 不
    需要价值模型：一个回答的优势是它的奖励在组内标准化的结果::

        A = (r - mean(group)) / (std(group) + eps)     # 无偏的 std：torch.std 的默认

    结果与 ``rewards`` 形状相同。奖励全相等的组学不到东西，给出全零（它的 std 是 0，
    所以 ``eps`` 加在 std 之外）。

    若 ``group_size < 2``，或奖励的个数不是它的倍数，抛出 ``ValueError``（评分）。

    TODO (grpo_loss)，分步说明：
      1. 检查 ``group_size``，按上面的说明抛出 ``ValueError``。
      2. 把奖励看成 ``(G, group_size)``。
      3. 减去每组的均值，再除以该组的 std 加 ``eps``（用 ``keepdim=True``，
         让它们在组内广播）。
      4. 展平回 ``rewards`` 的形状。
    """
    raise NotImplementedError("grpo_loss: write group_advantages")


def grpo_loss(logps: Tensor, old_logps: Tensor, ref_logps: Tensor, advantages: Tensor, mask: Tensor,
              clip_eps: float = 0.2, beta: float = 0.04) -> Tensor:
    """GRPO 的损失，一个 0 维张量：DeepSeekMath 的目标取负，与 TRL 的 ``GRPOTrainer`` 一致。

    ``logps``、``old_logps``、``ref_logps (B, T)``：回答中每个词元的对数概率，分别在
    正在训练的策略、采样这些回答的策略和冻结的参考模型下；``advantages (B,)``（每个
    回答一个，``group_advantages`` 的结果）；``mask (B, T)`` 为 bool，回答的词元处为
    True。对每个词元，``A`` 是它所在序列的优势::

        ratio     = exp(logps - old_logps)
        surrogate = min(ratio * A, clamp(ratio, 1 - clip_eps, 1 + clip_eps) * A)
        kl        = exp(ref_logps - logps) - (ref_logps - logps) - 1      # “k3”估计，>= 0
        loss_t    = -(surrogate - beta * kl)

    然后对每个序列，在 ``mask`` 为 True 的词元上求 ``loss_t`` 的均值，再在批次上求
    这些均值的平均。``min`` 是 PPO 的悲观：无论 ``A`` 的符号如何，截断只能降低目标。
    ``old_logps``、``ref_logps`` 和 ``advantages`` 是常量；只有 ``logps`` 带梯度。

    TODO (grpo_loss)，分步说明：
      1. 给每个序列的优势加一个词元轴：``(B,)`` 变成 ``(B, 1)``。
      2. 逐词元计算比率、截断后的替代目标（两项取 ``torch.min``）和 k3 KL。
      3. ``loss_t = -(surrogate - beta * kl)``。
      4. 对每个序列：``mask`` 为 True 处 ``loss_t`` 的和除以该行 True 的个数；再在
         批次上求平均。
    """
    raise NotImplementedError("grpo_loss: write grpo_loss")
