from . import Bug

LOG_SHIFT = "shifted = x - x.amax(dim=dim, keepdim=True)  # every entry <= 0, the largest exactly 0"
LOG_RETURN = "return shifted - torch.log(torch.exp(shifted).sum(dim=dim, keepdim=True))"
SOFT_EXP = "e = torch.exp(x - x.amax(dim=dim, keepdim=True))"
KEEP = "keep = targets != ignore_index  # (N,)"
PICKED = "picked = logp[keep].gather(1, targets[keep].unsqueeze(1)).squeeze(1)  # (N_kept,)"

BUGS = [
    Bug("cross_entropy", "softmax_no_max", "training.py", SOFT_EXP,
        "e = torch.exp(x)",
        "exponentiates the raw scores, so exp overflows to inf for large scores",
        diagnosis=("your softmax does not subtract the maximum",)),
    Bug("cross_entropy", "softmax_global_max", "training.py", SOFT_EXP,
        "e = torch.exp(x - x.max())",
        "subtracts the maximum of the whole tensor instead of each row's maximum",
        diagnosis=("your softmax subtracts the maximum of the whole",)),
    Bug("cross_entropy", "softmax_ignores_dim", "training.py", SOFT_EXP + "\n    return e / e.sum(dim=dim, keepdim=True)",
        "e = torch.exp(x - x.amax(dim=-1, keepdim=True))\n    return e / e.sum(dim=-1, keepdim=True)",
        "always normalises over the last dimension, whatever dim says",
        diagnosis=("your softmax ignores `dim` and always",)),
    Bug("cross_entropy", "softmax_max_without_keepdim", "training.py", SOFT_EXP,
        "e = torch.exp(x - x.max(dim=dim).values)",
        "subtracts x.max(dim).values without keepdim, which broadcasts along the wrong dimension",
        diagnosis=("your softmax subtracts x.max(dim).values",)),
    Bug("cross_entropy", "log_of_softmax", "training.py", LOG_SHIFT + "\n    " + LOG_RETURN,
        "return torch.log(softmax(x, dim))",
        "computes log_softmax as the log of the softmax, which is -inf where the softmax underflows",
        diagnosis=("your log_softmax is log(softmax(x)): where the",)),
    Bug("cross_entropy", "log_softmax_no_max", "training.py", LOG_SHIFT,
        "shifted = x",
        "computes x - log(sum(exp(x))) without subtracting the maximum",
        diagnosis=("your log_softmax computes x - log(sum(exp(x)))",)),
    Bug("cross_entropy", "log_softmax_max_added_back", "training.py", LOG_RETURN,
        "return x - torch.log(torch.exp(shifted).sum(dim=dim, keepdim=True))",
        "subtracts the log-sum of the shifted exponentials from the unshifted x",
        diagnosis=("your log_softmax is off by the maximum: x -",)),
    Bug("cross_entropy", "ignored_counted_in_mean", "training.py", "return -picked.mean()",
        "return -picked.sum() / targets.numel()",
        "divides by the number of all positions, ignored ones included",
        diagnosis=("your mean counts the ignored positions too:",)),
    Bug("cross_entropy", "ignore_minus_100_hard_coded", "training.py", KEEP,
        "keep = targets != -100",
        "ignores -100 whatever ignore_index says",
        diagnosis=("your cross_entropy ignores -100 whatever",)),
    Bug("cross_entropy", "sum_not_mean", "training.py", "return -picked.mean()",
        "return -picked.sum()",
        "returns the summed loss instead of the mean",
        diagnosis=("you returned the sum of -log p[target], not the",)),
    Bug("cross_entropy", "missing_minus", "training.py", "return -picked.mean()",
        "return picked.mean()",
        "forgets the minus sign of -log p",
        diagnosis=("you forgot the minus sign: cross-entropy is the",)),
    Bug("cross_entropy", "indexes_every_target", "training.py", PICKED,
        "picked = logp[keep][:, targets[keep]]",
        "indexes logp[:, targets], an N x N matrix, instead of one entry per row",
        diagnosis=("you indexed logp[:, targets], which takes every",)),
    Bug("cross_entropy", "no_shape_check", "training.py", "    if targets.shape != logits.shape[:-1]:\n        raise",
        "    if targets.numel() != logits.shape[:-1].numel():\n        raise",
        "checks only the number of targets, not their shape",
        named_by="expected a ValueError"),
    Bug("cross_entropy", "shifts_in_place", "training.py", LOG_SHIFT,
        "shifted = x.sub_(x.amax(dim=dim, keepdim=True))",
        "subtracts the maximum from the caller's tensor in place",
        diagnosis=("your code subtracted the maximum from the",)),
    Bug("cross_entropy", "tensor_softmax_method", "training.py", SOFT_EXP + "\n    return e / e.sum(dim=dim, keepdim=True)",
        "return x.softmax(dim)",
        "calls the tensor's own softmax method, which skips the exercise",
        named_by="must be written from scratch"),
    Bug("cross_entropy", "logsumexp_method", "training.py", LOG_SHIFT + "\n    " + LOG_RETURN,
        "return x - x.logsumexp(dim=dim, keepdim=True)",
        "calls the tensor's logsumexp method instead of writing the log-sum-exp",
        named_by="must be written from scratch"),
]

# Families of the bugs above, first written as unseen bugs to measure the diagnoses on (2026-12-01).
BUGS += [
    Bug("cross_entropy", "log_softmax_over_dim_0", "training.py", "logp = log_softmax(logits, dim=-1).reshape(-1, logits.size(-1))",
        "logp = log_softmax(logits, dim=0).reshape(-1, logits.size(-1))",
        "normalises the log-probabilities over dim 0",
        diagnosis=('normalised over the first dimension',)),
]

# Members of the fitted fixed-dim families (mistakes.SOFTMAX_FIXED_DIM, LOG_SOFTMAX_FIXED_DIM) that no single
# entry names.
BUGS += [
    Bug("cross_entropy", "softmax_over_dim_0", "training.py",
        "e = torch.exp(x - x.amax(dim=dim, keepdim=True))\n    return e / e.sum(dim=dim, keepdim=True)",
        "e = torch.exp(x - x.amax(dim=0, keepdim=True))\n    return e / e.sum(dim=0, keepdim=True)",
        "normalises over dim 0 whatever dim says, as if x were always (classes, ...)",
        diagnosis=("your softmax always normalises over dim=0",)),
    Bug("cross_entropy", "log_softmax_over_dim_minus_2", "training.py",
        "shifted = x - x.amax(dim=dim, keepdim=True)  # every entry <= 0, the largest exactly 0\n"
        "    return shifted - torch.log(torch.exp(shifted).sum(dim=dim, keepdim=True))",
        "shifted = x - x.amax(dim=-2, keepdim=True)  # every entry <= 0, the largest exactly 0\n"
        "    return shifted - torch.log(torch.exp(shifted).sum(dim=-2, keepdim=True))",
        "normalises over dim -2 whatever dim says",
        diagnosis=("your log_softmax always normalises over dim=-2",)),
]

# A reduction over the whole tensor or without keepdim (mistakes: the normaliser families), from held-out set 8
# (the first two) and their siblings.
BUGS += [
    Bug("cross_entropy", "logsumexp_without_keepdim", "training.py", LOG_RETURN,
        "return shifted - torch.log(torch.exp(shifted).sum(dim=dim))",
        "log_softmax loses keepdim, so the row sums broadcast along the wrong axis",
        diagnosis=("without keepdim=True",)),
    Bug("cross_entropy", "softmax_global_sum", "training.py", "return e / e.sum(dim=dim, keepdim=True)",
        "return e / e.sum()", "softmax divides by the sum of the whole tensor instead of along dim",
        diagnosis=("the sum of the whole tensor",)),
    Bug("cross_entropy", "softmax_sum_without_keepdim", "training.py", "return e / e.sum(dim=dim, keepdim=True)",
        "return e / e.sum(dim=dim)", "softmax's sum loses keepdim, so the totals broadcast along the wrong axis",
        diagnosis=("e.sum(dim) without keepdim=True",)),
    Bug("cross_entropy", "log_softmax_global_sum", "training.py", LOG_RETURN,
        "return shifted - torch.log(torch.exp(shifted).sum())",
        "log_softmax subtracts the log of the whole tensor's sum",
        diagnosis=("the sum of the whole tensor",)),
    Bug("cross_entropy", "unshifted_logsumexp_without_keepdim", "training.py", LOG_SHIFT + "\n    " + LOG_RETURN,
        "return x - torch.log(torch.exp(x).sum(dim=dim))",
        "x - log(sum(exp(x))) with neither the maximum subtracted nor keepdim=True",
        diagnosis=("(or logsumexp(dim)) without keepdim=True",)),
    Bug("cross_entropy", "log_softmax_max_without_keepdim", "training.py", LOG_SHIFT,
        "shifted = x - x.max(dim=dim).values",
        "log_softmax subtracts x.max(dim).values without keepdim",
        diagnosis=("your log_softmax subtracts x.max(dim).values",)),
]

# The sum divided by another count than the kept targets' (mistakes.CE_DENOMINATOR).
BUGS += [
    Bug("cross_entropy", "divided_by_batch", "training.py", "return -picked.mean()",
        "return -picked.sum() / logits.size(0)", "divides the summed loss by the batch size only",
        diagnosis=("by logits.size(0)",)),
    Bug("cross_entropy", "divided_by_vocabulary", "training.py", "return -picked.mean()",
        "return -picked.sum() / logits.size(-1)", "divides the summed loss by the number of classes",
        diagnosis=("by logits.size(-1)",)),
    Bug("cross_entropy", "max_pair_as_tensor", "training.py",
        "shifted = x - x.amax(dim=dim, keepdim=True)", "shifted = x - x.max(dim=dim, keepdim=True)",
        "subtracts what x.max(dim) returns, a (values, indices) pair, as if it were the maximum",
        diagnosis=("with a dim it returns a pair",)),
]
