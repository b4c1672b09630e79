from . import Bug

F = "alignment.py"
GROUPED = "grouped = rewards.view(-1, group_size)  # (G, group_size)"
MEAN = "mean = grouped.mean(dim=1, keepdim=True)"
STD = "std = grouped.std(dim=1, keepdim=True)"
ADV = "return ((grouped - mean) / (std + eps)).view(-1)"
RATIO = "ratio = torch.exp(logps - old_logps)"
SURROGATE = "surrogate = torch.min(ratio * adv, torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * adv)"
KL = "kl = torch.exp(ref_logps - logps) - (ref_logps - logps) - 1"
TOKEN = "per_token = -(surrogate - beta * kl)"
SEQ = "per_sequence = (per_token * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)"

BUGS = [
    # group_advantages
    Bug("grpo_loss", "std_biased", F, STD, "std = grouped.std(dim=1, keepdim=True, unbiased=False)",
        "takes the biased std", diagnosis=("grpo_loss:std_biased",)),
    Bug("grpo_loss", "eps_inside_sqrt", F, STD + "\n    " + ADV,
        "var = grouped.var(dim=1, keepdim=True)\n    return ((grouped - mean) / torch.sqrt(var + eps)).view(-1)",
        "adds eps under the square root", diagnosis=("grpo_loss:eps_inside_sqrt",)),
    Bug("grpo_loss", "eps_missing", F, ADV, "return ((grouped - mean) / std).view(-1)",
        "divides by the std alone, NaN for equal rewards", diagnosis=("grpo_loss:eps_missing",)),
    Bug("grpo_loss", "whole_batch_statistics", F, MEAN + "\n    " + STD,
        "mean = rewards.mean()\n    std = rewards.std()", "normalises by the whole batch's mean and std",
        diagnosis=("grpo_loss:whole_batch_statistics",)),
    Bug("grpo_loss", "batch_std", F, STD, "std = rewards.std()", "divides by the whole batch's std",
        diagnosis=("grpo_loss:batch_std",)),
    Bug("grpo_loss", "groups_interleaved", F, GROUPED + "\n    " + MEAN + "\n    " + STD,
        "grouped = rewards.view(group_size, -1)  # (group_size, G)\n    mean = grouped.mean(dim=0, keepdim=True)\n"
        "    std = grouped.std(dim=0, keepdim=True)",
        "takes every G-th reward as a group", diagnosis=("grpo_loss:groups_interleaved",)),
    Bug("grpo_loss", "not_scaled", F, ADV, "return (grouped - mean).view(-1)", "only subtracts the mean",
        diagnosis=("grpo_loss:not_scaled",)),
    Bug("grpo_loss", "mean_not_subtracted", F, ADV, "return (grouped / (std + eps)).view(-1)",
        "divides without subtracting the mean", diagnosis=("grpo_loss:mean_not_subtracted",)),
    Bug("grpo_loss", "eps_hard_coded", F, ADV, "return ((grouped - mean) / (std + 1e-4)).view(-1)",
        "writes eps into the code", diagnosis=("grpo_loss:eps_argument_ignored",)),
    Bug("grpo_loss", "group_size_one_allowed", F, "    if group_size < 2 or rewards.numel() % group_size:",
        "    if rewards.numel() % group_size:", "checks divisibility only", named_by="expected a ValueError"),
    # grpo_loss
    Bug("grpo_loss", "max_not_min", F, SURROGATE,
        "surrogate = torch.max(ratio * adv, torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * adv)",
        "takes the max of the two terms", diagnosis=("grpo_loss:max_not_min",)),
    Bug("grpo_loss", "advantage_clamped", F, SURROGATE,
        "surrogate = torch.min(ratio * adv, torch.clamp(ratio * adv, 1 - clip_eps, 1 + clip_eps))",
        "clamps ratio * A instead of the ratio", diagnosis=("grpo_loss:advantage_clamped",)),
    Bug("grpo_loss", "no_clipping", F, SURROGATE, "surrogate = ratio * adv", "forgets the clipped term",
        diagnosis=("grpo_loss:no_clipping",)),
    Bug("grpo_loss", "clip_one_sided", F, SURROGATE,
        "surrogate = torch.min(ratio * adv, torch.clamp(ratio, max=1 + clip_eps) * adv)",
        "clamps the ratio from above only", diagnosis=("grpo_loss:clip_one_sided",)),
    Bug("grpo_loss", "kl_sign_flipped", F, TOKEN, "per_token = -(surrogate + beta * kl)", "adds the KL to the objective",
        diagnosis=("grpo_loss:kl_sign_flipped",)),
    Bug("grpo_loss", "k1_kl", F, KL, "kl = logps - ref_logps", "uses the k1 estimator",
        diagnosis=("grpo_loss:k1_not_k3",)),
    Bug("grpo_loss", "k2_kl", F, KL, "kl = 0.5 * (logps - ref_logps) ** 2", "uses the k2 estimator",
        diagnosis=("grpo_loss:k2_not_k3",)),
    Bug("grpo_loss", "k3_reversed", F, KL, "kl = torch.exp(logps - ref_logps) - (logps - ref_logps) - 1",
        "reverses the difference inside k3", diagnosis=("grpo_loss:k3_reversed",)),
    Bug("grpo_loss", "k3_without_minus_one", F, KL, "kl = torch.exp(ref_logps - logps) - (ref_logps - logps)",
        "forgets the - 1 of k3", diagnosis=("grpo_loss:k3_without_minus_one",)),
    Bug("grpo_loss", "kl_missing", F, TOKEN, "per_token = -surrogate", "leaves the KL penalty out",
        diagnosis=("grpo_loss:kl_missing",)),
    Bug("grpo_loss", "token_mean", F, SEQ, "per_sequence = (per_token * mask).sum() / mask.sum()",
        "averages over all the batch's tokens at once", diagnosis=("grpo_loss:token_mean",)),
    Bug("grpo_loss", "divided_by_t", F, SEQ, "per_sequence = (per_token * mask).sum(dim=1) / mask.shape[1]",
        "divides each row's sum by T", diagnosis=("grpo_loss:divided_by_t",)),
    Bug("grpo_loss", "mask_ignored", F, SEQ, "per_sequence = per_token.mean(dim=1)", "averages every token",
        diagnosis=("grpo_loss:mask_ignored",)),
    Bug("grpo_loss", "sequence_sum", F, SEQ, "per_sequence = (per_token * mask).sum(dim=1)",
        "sums each sequence instead of averaging", diagnosis=("grpo_loss:sequence_sum",)),
    Bug("grpo_loss", "objective_not_negated", F, TOKEN, "per_token = surrogate - beta * kl",
        "returns the objective, not the loss", diagnosis=("grpo_loss:loss_not_negated",)),
    Bug("grpo_loss", "ratio_inverted", F, RATIO, "ratio = torch.exp(old_logps - logps)", "inverts the ratio",
        diagnosis=("grpo_loss:ratio_inverted",)),
    Bug("grpo_loss", "ratio_without_exp", F, RATIO, "ratio = logps - old_logps", "forgets the exp of the log-ratio",
        diagnosis=("grpo_loss:ratio_without_exp",)),
    Bug("grpo_loss", "ratio_against_reference", F, RATIO, "ratio = torch.exp(logps - ref_logps)",
        "takes the ratio against the reference", diagnosis=("grpo_loss:ratio_against_reference",)),
    Bug("grpo_loss", "kl_against_old", F, KL, "kl = torch.exp(old_logps - logps) - (old_logps - logps) - 1",
        "penalises the distance to the sampling policy", diagnosis=("grpo_loss:kl_against_old",)),
    Bug("grpo_loss", "ratio_detached", F, RATIO, "ratio = torch.exp(logps - old_logps).detach()",
        "detaches the ratio", diagnosis=("grpo_loss:ratio_detached",)),
    Bug("grpo_loss", "kl_detached", F, KL, "kl = (torch.exp(ref_logps - logps) - (ref_logps - logps) - 1).detach()",
        "detaches the KL penalty", diagnosis=("grpo_loss:kl_detached",)),
    Bug("grpo_loss", "normalised_in_place", F, ADV,
        "grouped -= mean\n    grouped /= std + eps\n    return grouped.reshape(-1)",
        "normalises the view of the caller's rewards in place",
        diagnosis=("grpo_loss:rewards_normalised_in_place",)),
]
