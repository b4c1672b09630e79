from . import Bug

MASKED = ("        if mask is not None:\n            nW = mask.size(0)\n"
          "            scores = scores.view(B_ // nW, nW, self.n_heads, N, N)\n"
          "            scores = scores.masked_fill(~mask[None, :, None], float(\"-inf\")).view(B_, self.n_heads, N, N)\n"
          "        ")

REL = "rel = coords[:, :, None] - coords[:, None, :] + ws - 1  # (2, N, N), each in [0, 2ws - 2]"
INDEX = 'self.register_buffer("relative_position_index", rel[0] * (2 * ws - 1) + rel[1])  # (N, N)'
QKV = "q, k, v = (split_heads(t, self.n_heads) for t in self.qkv(x).chunk(3, dim=-1))  # (B_, H, N, Dh)"
BIAS = "scores = scores + bias.permute(2, 0, 1)"
MASK = ("            scores = scores.view(B_ // nW, nW, self.n_heads, N, N)\n"
        "            scores = scores.masked_fill(~mask[None, :, None], float(\"-inf\")).view(B_, self.n_heads, N, N)\n")
ROLLS = ("            y = torch.roll(y, (-s, -s), dims=(1, 2))\n"
         "            mask = shifted_window_mask(H, W, ws, s, device=x.device)\n"
         "        y = window_reverse(self.attn(window_partition(y, ws), mask), ws, H, W)\n"
         "        if s:\n"
         "            y = torch.roll(y, (s, s), dims=(1, 2))\n")

BUGS = [
    # The index: the offset taken key minus query, the ws - 1 shift forgotten, the axes or the stride confused
    # (nnFormer's WindowAttention_kv had wrong strides, 282857341/nnFormer#88; microsoft/Swin-Transformer#367
    # asks whether 2 * ws - 2 would do).
    Bug("window_attention", "index_transposed", "swin.py", REL,
        "rel = coords[:, None, :] - coords[:, :, None] + ws - 1",
        "takes the relative coordinates as key minus query, (yj - yi, xj - xi), so the index is transposed",
        diagnosis=("window_attention:index_transposed",)),
    Bug("window_attention", "index_without_offset", "swin.py", REL,
        "rel = coords[:, :, None] - coords[:, None, :]",
        "forgets to shift the offsets by ws - 1, so negative offsets index the table from its end",
        diagnosis=("window_attention:index_no_offset",)),
    Bug("window_attention", "index_stride_2ws_minus_2", "swin.py", INDEX,
        'self.register_buffer("relative_position_index", rel[0] * (2 * ws - 2) + rel[1])',
        "multiplies the row offset by 2ws - 2 instead of 2ws - 1, so different offsets share a table row",
        diagnosis=("window_attention:index_stride_2ws_minus_2",)),
    Bug("window_attention", "index_axes_swapped", "swin.py", INDEX,
        'self.register_buffer("relative_position_index", rel[1] * (2 * ws - 1) + rel[0])',
        "makes the column offset the major one, (xi - xj + ws - 1) * (2ws - 1) + (yi - yj + ws - 1)",
        diagnosis=("window_attention:index_axes_swapped",)),
    Bug("window_attention", "scaled_by_channel_width", "swin.py",
        "scores = q @ k.transpose(-2, -1) / math.sqrt(C / self.n_heads)",
        "scores = q @ k.transpose(-2, -1) / math.sqrt(C)",
        "divides the scores by sqrt(C), the channel width, instead of sqrt(C / n_heads), the width of a head",
        diagnosis=("window_attention:scale_channel",)),
    Bug("window_attention", "bias_without_permute", "swin.py", BIAS,
        "scores = scores + bias.reshape(self.n_heads, N, N)",
        "reshapes the gathered (N, N, heads) bias to (heads, N, N) instead of permuting the heads first",
        diagnosis=("window_attention:bias_without_permute",)),
    Bug("window_attention", "bias_forgotten", "swin.py", BIAS,
        "pass",
        "builds the table and the index but never adds the bias to the scores",
        diagnosis=("window_attention:no_bias",)),
    Bug("window_attention", "qkv_heads_first", "swin.py", QKV,
        "q, k, v = self.qkv(x).reshape(B_, N, self.n_heads, 3, C // self.n_heads).permute(3, 0, 2, 1, 4)",
        "reads qkv's output as (heads, 3, head width) per token instead of q, k, v one after the other",
        diagnosis=("window_attention:qkv_heads_first",)),
    Bug("window_attention", "q_k_swapped", "swin.py", QKV,
        "k, q, v = (split_heads(t, self.n_heads) for t in self.qkv(x).chunk(3, dim=-1))",
        "takes qkv's first third as the keys and its second as the queries",
        diagnosis=("window_attention:qk_swapped",)),
    Bug("window_attention", "mask_interleaved", "swin.py", MASK,
        "            scores = scores.view(nW, B_ // nW, self.n_heads, N, N)\n"
        "            scores = scores.masked_fill(~mask[:, None, None], float(\"-inf\")).view(B_, self.n_heads, N, N)\n",
        "views the windows as (nW, B) instead of (B, nW), so window b uses mask[b // (B_ / nW)], not mask[b % nW]",
        diagnosis=("window_attention:mask_interleaved",)),
    Bug("window_attention", "mask_added_as_0_1", "swin.py", MASK,
        "            scores = (scores.view(B_ // nW, nW, self.n_heads, N, N) + mask[None, :, None])"
        ".view(B_, self.n_heads, N, N)\n",
        "adds the bool mask to the scores as Swin's code adds its float mask, so allowed pairs get +1 and masked "
        "ones nothing",
        diagnosis=("window_attention:mask_01",)),
    Bug("window_attention", "mask_not_passed", "swin.py",
        "y = window_reverse(self.attn(window_partition(y, ws), mask), ws, H, W)",
        "y = window_reverse(self.attn(window_partition(y, ws)), ws, H, W)",
        "builds the shifted-window mask but never passes it to the attention",
        diagnosis=("window_attention:mask_not_passed",)),
    Bug("window_attention", "no_roll_back", "swin.py", ROLLS,
        ROLLS.replace("        if s:\n            y = torch.roll(y, (s, s), dims=(1, 2))\n", ""),
        "rolls the map before the windows and never rolls the result back",
        diagnosis=("window_attention:no_roll_back",)),
    Bug("window_attention", "roll_wrong_way", "swin.py", ROLLS,
        ROLLS.replace("(-s, -s)", "(+s, +s)").replace("(s, s)", "(-s, -s)"),
        "rolls by +shift_size before the windows and by -shift_size after, the opposite of the mask",
        diagnosis=("window_attention:roll_wrong_way",)),
    Bug("window_attention", "residual_from_normed", "swin.py", "x = x + y",
        "x = self.norm1(x) + y",
        "adds the attention branch to norm1(x) instead of to x",
        diagnosis=("window_attention:residual_from_normed",)),
    Bug("window_attention", "mlp_without_norm2", "swin.py", "return x + self.mlp(self.norm2(x))",
        "return x + self.mlp(x)",
        "feeds the MLP the raw residual stream, forgetting norm2",
        diagnosis=("window_attention:mlp_without_norm2",)),
    Bug("window_attention", "relu_mlp", "swin.py", "nn.Sequential(nn.Linear(dim, hidden), nn.GELU(),",
        "nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(),",
        "uses ReLU in the MLP, as the original Transformer does, instead of Swin's GELU",
        diagnosis=("window_attention:relu",)),
    Bug("window_attention", "mlp_ratio_ignored", "swin.py", "hidden = int(dim * mlp_ratio)",
        "hidden = 4 * dim",
        "hard-codes the MLP's hidden width to 4 * dim, ignoring mlp_ratio",
        diagnosis=("window_attention:mlp_ratio_ignored",)),
]

# Families of the bugs above, first written as unseen bugs to measure the diagnoses on (2026-12-01).
BUGS += [
    Bug("window_attention", "roll_back_same_way", "swin.py", "y = torch.roll(y, (s, s), dims=(1, 2))",
        "y = torch.roll(y, (-s, -s), dims=(1, 2))",
        "rolls the output back the same way it rolled the map",
        diagnosis=("window_attention:rolled_back_same_way",)),
]

# Members of the fitted roll family (mistakes.ROLLS) that no single entry names.
BUGS += [
    Bug("window_attention", "rolls_rows_only", "swin.py", "y = torch.roll(y, (-s, -s), dims=(1, 2))",
        "y = torch.roll(y, -s, dims=1)",
        "rolls the map along the rows only before the windows",
        diagnosis=("window_attention:rolls",)),
    Bug("window_attention", "rolls_back_only", "swin.py", "y = torch.roll(y, (-s, -s), dims=(1, 2))", "y = y",
        "forgets the first roll but rolls the output back",
        diagnosis=("window_attention:rolls",)),
]

# The softmax over another axis than the keys, the scale left out, the MLP reading the block's input.
BUGS += [
    Bug("window_attention", "softmax_over_queries_dim_2", "swin.py", "scores.softmax(dim=-1) @ v",
        "scores.softmax(dim=2) @ v", "softmax over dim 2, the queries of (B_, H, N, N) scores",
        diagnosis=("window_attention:softmax_dim_2",)),
    Bug("window_attention", "softmax_over_heads", "swin.py", "scores.softmax(dim=-1) @ v",
        "scores.softmax(dim=1) @ v", "softmax over dim 1, the heads",
        diagnosis=("window_attention:softmax_dim_1",)),
    Bug("window_attention", "scores_unscaled", "swin.py", "scores = q @ k.transpose(-2, -1) / math.sqrt(C / self.n_heads)",
        "scores = q @ k.transpose(-2, -1)", "forgets the scale",
        diagnosis=("window_attention:unscaled",)),
    Bug("window_attention", "mlp_reads_block_input", "swin.py",
        "        x = x + y\n        return x + self.mlp(self.norm2(x))",
        "        return x + y + self.mlp(self.norm2(x))", "the MLP branch reads the block's input (a parallel block)",
        diagnosis=("window_attention:parallel_mlp",)),
    Bug("window_attention", "index_offsets_summed", "swin.py",
        "rel[0] * (2 * ws - 1) + rel[1]", "rel[0] + rel[1]",
        "adds the shifted row and column offsets without the row's stride",
        diagnosis=("window_attention:index_no_stride",)),
    Bug("window_attention", "index_stride_2ws", "swin.py",
        "rel[0] * (2 * ws - 1) + rel[1]", "rel[0] * (2 * ws) + rel[1]",
        "takes 2ws as the stride of the row offset (the window width times two)",
        diagnosis=("window_attention:index_stride_2ws",)),
]

# Set 12 (session 10, core and vision): realistic slips in other idioms, named by the entries that exist
# or by the families widened the same day.
BUGS += [
    Bug('window_attention', 'meshgrid_xy', 'swin.py',
        'indexing="ij"',
        'indexing="xy"',
        "builds the coordinates with meshgrid(..., indexing='xy')",
        diagnosis=("window_attention:index_axes_swapped",)),
    Bug('window_attention', 'bias_permute_201_transposed', 'swin.py',
        'scores = scores + bias.permute(2, 0, 1)',
        'scores = scores + bias.permute(2, 1, 0)',
        'moves the heads first with permute(2, 1, 0)',
        diagnosis=("window_attention:bias_transposed",)),
    Bug('window_attention', 'roll_dims_2_3', 'swin.py',
        'y = torch.roll(y, (-s, -s), dims=(1, 2))',
        'y = torch.roll(y, (-s, -s), dims=(2, 3))',
        'rolls dims (2, 3), as for (B, C, H, W), before the windows',
        diagnosis=("window_attention:rolls",)),
    Bug('window_attention', 'gelu_tanh', 'swin.py',
        'nn.Sequential(nn.Linear(dim, hidden), nn.GELU(),',
        "nn.Sequential(nn.Linear(dim, hidden), nn.GELU(approximate='tanh'),",
        "uses GELU's tanh approximation in the MLP",
        diagnosis=("window_attention:gelu_tanh",)),
    Bug('window_attention', 'attn_residual_dropped', 'swin.py',
        'x = x + y',
        'x = y',
        'drops the residual around the window attention (x = y)',
        diagnosis=("window_attention:attention_residual_dropped",)),
    Bug("window_attention", "mlp_residual_dropped", "swin.py", "return x + self.mlp(self.norm2(x))",
        "return self.mlp(self.norm2(x))", "returns the MLP's output without the second residual",
        diagnosis=("window_attention:mlp_residual_dropped",)),
    # Held-out set 13's residual_in_place: no check saw it until SwinBlock joined test_leaves_inputs_alone.
    Bug("window_attention", "residual_in_place", "swin.py", "        x = x + y\n", "        x += y\n",
        "adds the attention's residual into the caller's map in place (x += y)",
        named_by="after SwinBlock(8, 2, 2, shift_size=1)'s forward"),
    # Held-out set 13's bias_after_softmax (MASKED: the lines between the bias and the softmax, kept).
    Bug("window_attention", "bias_after_softmax", "swin.py",
        "        scores = scores + bias.permute(2, 0, 1)\n" + MASKED + "return self.proj(merge_heads(scores.softmax(dim=-1) @ v))",
        MASKED + "return self.proj(merge_heads((scores.softmax(dim=-1) + bias.permute(2, 0, 1)) @ v))",
        "adds the relative position bias to the weights after the softmax",
        diagnosis=("window_attention:bias_after_softmax",)),
]

BUGS += [
    # State that survives a call (issue 30 §4): the mask made on the first call and kept, as Swin's code keeps
    # attn_mask for its one input_resolution; every check built a block for one map size.
    Bug("window_attention", "block_mask_kept", "swin.py",
        "            mask = shifted_window_mask(H, W, ws, s, device=x.device)\n",
        "            if getattr(self, \"attn_mask\", None) is None:  # made once, for the resolution of the first call\n"
        "                self.attn_mask = shifted_window_mask(H, W, ws, s, device=x.device)\n"
        "            mask = self.attn_mask\n",
        "makes the shifted window mask on the first call and keeps it, so a later map of another height and width "
        "with as many windows is masked with the first map's regions",
        diagnosis=("window_attention:block_mask_kept",)),
]
