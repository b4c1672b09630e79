from . import Bug

LOG_SHIFT = "shifted = x - x.amax(dim=dim, keepdim=True)  # every entry <= 0, the largest exactly 0"
LOG_RETURN = "return shifted - torch.log(torch.exp(shifted).sum(dim=dim, keepdim=True))"
SOFT_EXP = "e = torch.exp(x - x.amax(dim=dim, keepdim=True))"
KEEP = "keep = targets != ignore_index  # (N,)"
PICKED = "picked = logp[keep].gather(1, targets[keep].unsqueeze(1)).squeeze(1)  # (N_kept,)"

BUGS = [
    Bug("cross_entropy", "softmax_no_max", "training.py", SOFT_EXP,
        "e = torch.exp(x)",
        "exponentiates the raw scores, so exp overflows to inf for large scores"),
    Bug("cross_entropy", "softmax_global_max", "training.py", SOFT_EXP,
        "e = torch.exp(x - x.max())",
        "subtracts the maximum of the whole tensor instead of each row's maximum"),
    Bug("cross_entropy", "softmax_ignores_dim", "training.py", SOFT_EXP + "\n    return e / e.sum(dim=dim, keepdim=True)",
        "e = torch.exp(x - x.amax(dim=-1, keepdim=True))\n    return e / e.sum(dim=-1, keepdim=True)",
        "always normalises over the last dimension, whatever dim says"),
    Bug("cross_entropy", "softmax_max_without_keepdim", "training.py", SOFT_EXP,
        "e = torch.exp(x - x.max(dim=dim).values)",
        "subtracts x.max(dim).values without keepdim, which broadcasts along the wrong dimension"),
    Bug("cross_entropy", "log_of_softmax", "training.py", LOG_SHIFT + "\n    " + LOG_RETURN,
        "return torch.log(softmax(x, dim))",
        "computes log_softmax as the log of the softmax, which is -inf where the softmax underflows"),
    Bug("cross_entropy", "log_softmax_no_max", "training.py", LOG_SHIFT,
        "shifted = x",
        "computes x - log(sum(exp(x))) without subtracting the maximum"),
    Bug("cross_entropy", "log_softmax_max_added_back", "training.py", LOG_RETURN,
        "return x - torch.log(torch.exp(shifted).sum(dim=dim, keepdim=True))",
        "subtracts the log-sum of the shifted exponentials from the unshifted x"),
    Bug("cross_entropy", "ignored_counted_in_mean", "training.py", "return -picked.mean()",
        "return -picked.sum() / targets.numel()",
        "divides by the number of all positions, ignored ones included"),
    Bug("cross_entropy", "ignore_minus_100_hard_coded", "training.py", KEEP,
        "keep = targets != -100",
        "ignores -100 whatever ignore_index says"),
    Bug("cross_entropy", "sum_not_mean", "training.py", "return -picked.mean()",
        "return -picked.sum()",
        "returns the summed loss instead of the mean"),
    Bug("cross_entropy", "missing_minus", "training.py", "return -picked.mean()",
        "return picked.mean()",
        "forgets the minus sign of -log p"),
    Bug("cross_entropy", "indexes_every_target", "training.py", PICKED,
        "picked = logp[keep][:, targets[keep]]",
        "indexes logp[:, targets], an N x N matrix, instead of one entry per row"),
    Bug("cross_entropy", "no_shape_check", "training.py", "    if targets.shape != logits.shape[:-1]:\n        raise",
        "    if targets.numel() != logits.shape[:-1].numel():\n        raise",
        "checks only the number of targets, not their shape"),
    Bug("cross_entropy", "shifts_in_place", "training.py", LOG_SHIFT,
        "shifted = x.sub_(x.amax(dim=dim, keepdim=True))",
        "subtracts the maximum from the caller's tensor in place"),
]
