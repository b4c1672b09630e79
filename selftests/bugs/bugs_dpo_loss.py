from . import Bug

F = "alignment.py"
CHECK = "    if logits.dim() != 3 or labels.shape != logits.shape[:2] or mask.shape != labels.shape:"
LOGP = "logp = torch.log_softmax(logits, dim=-1)"
PICK = "picked = logp.gather(-1, safe.unsqueeze(-1)).squeeze(-1)  # (B, T)"
SUM = "return torch.where(mask, picked, torch.zeros_like(picked)).sum(dim=-1)"
CHOSEN = "chosen_logratios = policy_chosen - ref_chosen"
REJECTED = "rejected_logratios = policy_rejected - ref_rejected"
MARGIN = "logits = chosen_logratios - rejected_logratios"
LOSS = "loss = -F.logsigmoid(beta * logits).mean()"
REWARD_C = "chosen_rewards = beta * chosen_logratios.detach()"
REWARD_R = "rejected_rewards = beta * rejected_logratios.detach()"

BUGS = [
    # sequence_logprobs
    Bug("dpo_loss", "shift_inside", F, PICK + "\n    " + SUM,
        "picked = logp[:, :-1].gather(-1, safe[:, 1:].unsqueeze(-1)).squeeze(-1)\n"
        "    return torch.where(mask[:, 1:], picked, torch.zeros_like(picked)).sum(dim=-1)",
        "shifts logits and labels inside, as TRL's get_batch_logps does, although the caller has shifted",
        diagnosis=("dpo_loss:shifted_inside",)),
    Bug("dpo_loss", "gather_raw_labels", F, PICK, "picked = logp.gather(-1, labels.unsqueeze(-1)).squeeze(-1)",
        "gathers with the raw labels, -100 under the mask included", diagnosis=("dpo_loss:gathered_masked_labels",)),
    Bug("dpo_loss", "masked_terms_kept", F, SUM, "return picked.sum(dim=-1)",
        "replaces the masked labels but sums every position", diagnosis=("dpo_loss:masked_terms_kept",)),
    Bug("dpo_loss", "mask_inverted", F, SUM, "return torch.where(~mask, picked, torch.zeros_like(picked)).sum(dim=-1)",
        "keeps the positions where the mask is False", diagnosis=("dpo_loss:mask_inverted",)),
    Bug("dpo_loss", "masked_mean", F, SUM,
        "return torch.where(mask, picked, torch.zeros_like(picked)).sum(dim=-1) / mask.sum(dim=-1).clamp(min=1)",
        "averages over the answer's tokens (average_log_prob=True)", diagnosis=("dpo_loss:masked_mean_not_sum",)),
    Bug("dpo_loss", "mean_over_t", F, SUM, "return torch.where(mask, picked, torch.zeros_like(picked)).mean(dim=-1)",
        "takes the mean over T instead of the sum", diagnosis=("dpo_loss:mean_over_t",)),
    Bug("dpo_loss", "raw_logits", F, LOGP, "logp = logits", "sums the raw logits, no log_softmax",
        diagnosis=("dpo_loss:logits_not_log_softmax",)),
    Bug("dpo_loss", "softmax_not_log", F, LOGP, "logp = torch.softmax(logits, dim=-1)",
        "sums probabilities instead of log-probabilities", diagnosis=("dpo_loss:probabilities_summed",)),
    Bug("dpo_loss", "log_softmax_over_t", F, LOGP, "logp = torch.log_softmax(logits, dim=1)",
        "normalises over the sequence instead of the vocabulary", diagnosis=("dpo_loss:log_softmax_over_t",)),
    Bug("dpo_loss", "negative_log_likelihood", F, SUM,
        "return -torch.where(mask, picked, torch.zeros_like(picked)).sum(dim=-1)",
        "returns the negative log-likelihood", diagnosis=("dpo_loss:sequence_logprobs_negated",)),
    Bug("dpo_loss", "no_label_shape_check", F, CHECK, "    if logits.dim() != 3:",
        "checks only that the logits are 3-D", named_by="expected a ValueError"),
    # dpo_loss
    Bug("dpo_loss", "log_of_sigmoid", F, LOSS, "loss = -torch.log(torch.sigmoid(beta * logits)).mean()",
        "takes log(sigmoid(x)), which is -inf for a large negative margin", diagnosis=("dpo_loss:log_of_sigmoid",)),
    Bug("dpo_loss", "reference_and_policy_swapped", F, CHOSEN + "\n    " + REJECTED,
        "chosen_logratios = ref_chosen - policy_chosen\n    rejected_logratios = ref_rejected - policy_rejected",
        "takes reference minus policy for both log-ratios",
        diagnosis=("dpo_loss:margin_sign_flipped", "dpo_loss:rewards_negated")),
    Bug("dpo_loss", "chosen_and_rejected_swapped", F, MARGIN, "logits = rejected_logratios - chosen_logratios",
        "subtracts the chosen log-ratio from the rejected one", diagnosis=("dpo_loss:margin_sign_flipped",)),
    Bug("dpo_loss", "beta_missing", F, LOSS, "loss = -F.logsigmoid(logits).mean()", "forgets beta in the loss",
        diagnosis=("dpo_loss:beta_missing",)),
    Bug("dpo_loss", "beta_twice", F, MARGIN, "logits = beta * (chosen_logratios - rejected_logratios)",
        "scales the margin by beta and then again in the loss", diagnosis=("dpo_loss:beta_twice",)),
    Bug("dpo_loss", "beta_outside", F, LOSS, "loss = -beta * F.logsigmoid(logits).mean()",
        "multiplies the logsigmoid by beta", diagnosis=("dpo_loss:beta_outside",)),
    Bug("dpo_loss", "loss_summed", F, LOSS, "loss = -F.logsigmoid(beta * logits).sum()", "sums the loss over the batch",
        diagnosis=("dpo_loss:loss_sum_not_mean",)),
    Bug("dpo_loss", "loss_no_minus", F, LOSS, "loss = F.logsigmoid(beta * logits).mean()", "forgets the minus sign",
        diagnosis=("dpo_loss:loss_no_minus",)),
    Bug("dpo_loss", "sigmoid_not_logsigmoid", F, LOSS, "loss = -torch.sigmoid(beta * logits).mean()",
        "uses the sigmoid itself", diagnosis=("dpo_loss:sigmoid_not_logsigmoid",)),
    Bug("dpo_loss", "reference_ignored", F, MARGIN, "logits = policy_chosen - policy_rejected",
        "takes the margin of the policy alone", diagnosis=("dpo_loss:reference_ignored",)),
    Bug("dpo_loss", "reference_added", F, CHOSEN + "\n    " + REJECTED,
        "chosen_logratios = policy_chosen + ref_chosen\n    rejected_logratios = policy_rejected + ref_rejected",
        "adds the reference's log-probabilities instead of subtracting them", diagnosis=("dpo_loss:reference_added",)),
    Bug("dpo_loss", "hinge_loss", F, LOSS, "loss = torch.relu(1 - beta * logits).mean()",
        "writes the hinge loss", diagnosis=("dpo_loss:hinge_loss",)),
    Bug("dpo_loss", "ipo_loss", F, LOSS, "loss = ((logits - 1 / (2 * beta)) ** 2).mean()", "writes IPO's loss",
        diagnosis=("dpo_loss:ipo_loss",)),
    Bug("dpo_loss", "mean_before_logsigmoid", F, LOSS, "loss = -F.logsigmoid(beta * logits.mean())",
        "averages the margins before the logsigmoid", diagnosis=("dpo_loss:mean_inside",)),
    Bug("dpo_loss", "rewards_not_detached", F, REWARD_C + "\n    " + REWARD_R,
        "chosen_rewards = beta * chosen_logratios\n    rejected_rewards = beta * rejected_logratios",
        "returns the rewards attached to the graph", diagnosis=("dpo_loss:rewards_attached",)),
    Bug("dpo_loss", "rewards_without_beta", F, REWARD_C + "\n    " + REWARD_R,
        "chosen_rewards = chosen_logratios.detach()\n    rejected_rewards = rejected_logratios.detach()",
        "leaves beta out of the rewards", diagnosis=("dpo_loss:rewards_without_beta",)),
    Bug("dpo_loss", "rewards_swapped", F, "return loss, chosen_rewards, rejected_rewards",
        "return loss, rejected_rewards, chosen_rewards", "returns the rewards in the wrong order",
        diagnosis=("dpo_loss:rewards_swapped",)),
    Bug("dpo_loss", "rewards_policy_only", F, REWARD_C + "\n    " + REWARD_R,
        "chosen_rewards = beta * policy_chosen.detach()\n    rejected_rewards = beta * policy_rejected.detach()",
        "rewards the policy's log-probabilities, not the log-ratios", diagnosis=("dpo_loss:rewards_policy_only",)),
    Bug("dpo_loss", "half_shape_check", F,
        "    if not (policy_chosen.shape == policy_rejected.shape == ref_chosen.shape == ref_rejected.shape):",
        "    if policy_chosen.shape != policy_rejected.shape:",
        "compares the policy's two shapes only", named_by="expected a ValueError"),
    Bug("dpo_loss", "labels_zeroed_in_place", F,
        "safe = torch.where(mask, labels, torch.zeros_like(labels))  # labels under a False mask may be -100",
        "safe = labels.masked_fill_(~mask, 0)  # labels under a False mask may be -100",
        "zeroes the caller's masked labels in place before gathering",
        diagnosis=("dpo_loss:labels_changed_in_place",)),
]
