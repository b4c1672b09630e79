from . import Bug

POS = "        self.pos_emb = nn.Parameter(torch.randn(1, self.patch_embed.num_patches + 1, d_model) * 0.02)"
CAT = "        x = torch.cat([cls, x], dim=1) + self.pos_emb  # (B, N + 1, D), the class token at position 0"
HEAD = "        return self.head(self.norm(x)[:, 0])  # (B, n_classes)"
BLOCKS = ("        self.blocks = nn.ModuleList(TransformerBlock(d_model, n_heads, d_ff, dropout) "
          "for _ in range(n_layers))")
LOOP = """        for block in self.blocks:
            x = block(x)
"""
CLS = "        self.cls_token = nn.Parameter(torch.zeros(1, 1, d_model))"
CLS_EXPAND = "        cls = self.cls_token.expand(x.size(0), -1, -1)  # (B, 1, D)"
FORWARD = "\n".join([CLS_EXPAND, CAT]) + "\n" + LOOP + HEAD
# from the positions' definition to the line that adds them (the lines between unchanged)
POS_TO_CAT = POS + "\n" + BLOCKS + """
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_classes)

    def forward(self, images: Tensor) -> Tensor:
        x = self.patch_embed(images)  # (B, N, D)
""" + CLS_EXPAND + "\n" + CAT
CLS_TO_EXPAND = CLS + "\n" + POS_TO_CAT.split("\n" + CLS_EXPAND)[0] + "\n" + CLS_EXPAND

BUGS = [
    Bug("vit_classifier", "cls_appended", "vit.py", CAT,
        "        x = torch.cat([x, cls], dim=1) + self.pos_emb",
        "appends the class token after the patches and still reads position 0",
        diagnosis=("vit_classifier:appended",)),
    Bug("vit_classifier", "cls_appended_head_last", "vit.py", FORWARD,
        FORWARD.replace("torch.cat([cls, x], dim=1)", "torch.cat([x, cls], dim=1)").replace("[:, 0]", "[:, -1]"),
        "appends the class token at the end and reads it back there, so it gets the last row of pos_emb",
        diagnosis=("vit_classifier:appended_head_last",)),
    # labmlai/annotated_deep_learning_paper_implementations#221: the positions added before the concatenation
    Bug("vit_classifier", "pos_before_cls", "vit.py", CAT,
        "        x = torch.cat([cls, x + self.pos_emb[:, :x.size(1)]], dim=1)",
        "adds the positions to the patches before prepending the class token, which gets none",
        diagnosis=("vit_classifier:cls_without_position", "vit_classifier:pos_before_cls")),
    # the same, with the patches' rows offset by the class token (a review of Megatron-LM's vision model, #6260)
    Bug("vit_classifier", "pos_before_cls_offset", "vit.py", CAT,
        "        x = torch.cat([cls, x + self.pos_emb[:, 1:]], dim=1)",
        "adds rows 1 .. N of pos_emb to the patches before prepending the class token, which never gets row 0",
        diagnosis=("vit_classifier:cls_without_position", "vit_classifier:pos_before_cls_offset")),
    Bug("vit_classifier", "pos_emb_patches_only", "vit.py", POS_TO_CAT,
        POS_TO_CAT.replace("num_patches + 1", "num_patches").replace(
            "torch.cat([cls, x], dim=1) + self.pos_emb", "torch.cat([cls, x + self.pos_emb], dim=1)"),
        "sizes pos_emb for the patches only and adds it before prepending the class token",
        diagnosis=("vit_classifier:pos_emb_per_patch",)),
    Bug("vit_classifier", "no_positions", "vit.py", CAT, "        x = torch.cat([cls, x], dim=1)",
        "creates pos_emb but never adds it",
        diagnosis=("vit_classifier:cls_without_position", "vit_classifier:no_positions", "vit_classifier:unused")),
    # labmlai/annotated_deep_learning_paper_implementations#133: one row of the table indexed by a size
    Bug("vit_classifier", "one_position_for_all", "vit.py", CAT,
        "        x = torch.cat([cls, x], dim=1) + self.pos_emb[:, x.size(0)]",
        "adds one row of pos_emb, indexed by the batch size, to every token",
        diagnosis=("vit_classifier:one_position",)),
    # Held-out: one row of the table added to every token. The last row was told "your class token is appended
    # after the patches": where only the class token reaches the logits (no blocks), the two look the same.
    Bug("vit_classifier", "last_row_for_all", "vit.py", CAT,
        "        x = torch.cat([cls, x], dim=1) + self.pos_emb[:, -1]",
        "adds pos_emb's last row to every token instead of one row per position",
        diagnosis=("vit_classifier:row_last",)),
    Bug("vit_classifier", "row_0_for_all", "vit.py", CAT,
        "        x = torch.cat([cls, x], dim=1) + self.pos_emb[:, :1]",
        "adds pos_emb's first row to every token instead of one row per position",
        diagnosis=("vit_classifier:row_0",)),
    Bug("vit_classifier", "mean_pool", "vit.py", HEAD, "        return self.head(self.norm(x).mean(dim=1))",
        "classifies the mean over all tokens instead of the class token",
        diagnosis=("vit_classifier:mean_pool",)),
    Bug("vit_classifier", "head_on_last_token", "vit.py", HEAD, "        return self.head(self.norm(x)[:, -1])",
        "classifies the last token (the last patch) instead of the class token at position 0",
        diagnosis=("vit_classifier:head_last",)),
    Bug("vit_classifier", "no_final_norm", "vit.py", HEAD, "        return self.head(x[:, 0])",
        "creates the final norm but never applies it",
        diagnosis=("vit_classifier:no_final_norm",)),
    Bug("vit_classifier", "norm_every_block", "vit.py", LOOP + HEAD,
        """        for block in self.blocks:
            x = self.norm(block(x))
        return self.head(x[:, 0])""",
        "applies the final norm after every block instead of once before the head",
        diagnosis=("vit_classifier:norm_every_block",)),
    Bug("vit_classifier", "pos_emb_buffer", "vit.py", POS,
        '        self.register_buffer("pos_emb", torch.randn(1, self.patch_embed.num_patches + 1, d_model) * 0.02)',
        "registers the positions as a buffer, so they are never learned",
        diagnosis=("vit_classifier:not_learned_buffer",)),
    Bug("vit_classifier", "pos_emb_frozen", "vit.py", POS,
        POS.replace(" * 0.02)", " * 0.02, requires_grad=False)"),
        "makes pos_emb a Parameter with requires_grad=False",
        diagnosis=("vit_classifier:not_learned_frozen",)),
    Bug("vit_classifier", "pos_emb_plain_tensor", "vit.py", POS,
        "        self.pos_emb = torch.randn(1, self.patch_embed.num_patches + 1, d_model) * 0.02",
        "keeps the positions in a plain tensor attribute: neither in the state dict nor learned",
        diagnosis=("vit_classifier:missing_key",)),
    Bug("vit_classifier", "cls_token_2d", "vit.py", CLS_TO_EXPAND,
        CLS_TO_EXPAND.replace("torch.zeros(1, 1, d_model)", "torch.zeros(1, d_model)").replace(
            "self.cls_token.expand(x.size(0), -1, -1)", "self.cls_token.expand(x.size(0), -1).unsqueeze(1)"),
        "makes the class token (1, d_model) and adds its sequence dimension in forward",
        diagnosis=("vit_classifier:cls_token_shape",)),
    Bug("vit_classifier", "shared_blocks", "vit.py", BLOCKS,
        "        self.blocks = nn.ModuleList([TransformerBlock(d_model, n_heads, d_ff, dropout)] * n_layers)",
        "repeats one TransformerBlock object n_layers times",
        diagnosis=("vit_classifier:shared_blocks",)),
    Bug("vit_classifier", "dropout_not_passed", "vit.py", BLOCKS,
        "        self.blocks = nn.ModuleList(TransformerBlock(d_model, n_heads, d_ff) for _ in range(n_layers))",
        "does not pass dropout on to the blocks, which then drop out with their own default of 0.1",
        diagnosis=("vit_classifier:dropout_by_default",)),
]

# A member of the fitted readout family (mistakes.VIT_READS) that no single entry names.
BUGS += [
    Bug("vit_classifier", "head_reads_first_patch", "vit.py", "return self.head(self.norm(x)[:, 0])",
        "return self.head(self.norm(x)[:, 1])",
        "reads token 1, the first patch, as if the class token were at 1",
        diagnosis=("vit_classifier:reads_token",)),
]

# A default dropout other than the contract's 0.0, named with the rate it gives the blocks.
BUGS += [
    Bug("vit_classifier", "dropout_default_0_1", "vit.py",
        "d_ff: int, dropout: float = 0.0) -> None:", "d_ff: int, dropout: float = 0.1) -> None:",
        "ViT's dropout defaults to 0.1 instead of 0.0",
        diagnosis=("vit_classifier:dropout_default_value",)),
]

# torch.cat's words for a class token not expanded to the batch (mistakes.CAT_NOT_EXPANDED).
BUGS += [
    Bug("vit_classifier", "cls_token_not_expanded", "vit.py", "cls = self.cls_token.expand(x.size(0), -1, -1)",
        "cls = self.cls_token", "concatenates the (1, 1, D) class token to a batch of patches without expanding it",
        diagnosis=("vit_classifier:cat_not_expanded",)),
]

# Blocks held in a plain list, not registered with the model (mistakes.BLOCKS_NOT_REGISTERED).
BUGS += [
    Bug("vit_classifier", "blocks_in_a_plain_list", "vit.py",
        "self.blocks = nn.ModuleList(TransformerBlock(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))",
        "self.blocks = [TransformerBlock(d_model, n_heads, d_ff, dropout) for _ in range(n_layers)]",
        "keeps the blocks in a Python list, so their parameters are not the model's",
        diagnosis=("vit_classifier:blocks_not_registered",)),
    Bug("vit_classifier", "head_reads_first_image", "vit.py",
        "return self.head(self.norm(x)[:, 0])", "return self.head(self.norm(x)[0])",
        "indexes [0], the first image's tokens, where [:, 0] takes the class token of every image",
        diagnosis=("vit_classifier:first_image",)),
    Bug("vit_classifier", "causal_blocks", "vit.py",
        "x = block(x)", "x = block(x, torch.ones(x.size(1), x.size(1), dtype=torch.bool, device=x.device).tril())",
        "reuses a GPT's loop and gives the encoder blocks a causal mask",
        diagnosis=("vit_classifier:causal_blocks",)),
    Bug("vit_classifier", "causal_blocks_tril_of_ones", "vit.py",
        "x = block(x)", "x = block(x, torch.tril(torch.ones(x.shape[1], x.shape[1])).bool())",
        "masks the future positions in the ViT's blocks, as a decoder would",
        diagnosis=("vit_classifier:causal_blocks",)),
]

# Set 12 (session 10, core and vision): realistic slips in other idioms, named by the entries that exist
# or by the families widened the same day.
BUGS += [
    Bug('vit_classifier', 'mean_of_patches', 'vit.py',
        'return self.head(self.norm(x)[:, 0])',
        'return self.head(self.norm(x)[:, 1:].mean(dim=1))',
        'classifies the mean of the patch tokens (global average pooling)',
        diagnosis=("vit_classifier:patch_mean_pool",)),
    Bug('vit_classifier', 'double_residual', 'vit.py',
        'x = block(x)',
        'x = x + block(x)',
        'adds a residual around each block, x = x + block(x)',
        diagnosis=("vit_classifier:block_residual_added",)),
    Bug('vit_classifier', 'last_block_skipped', 'vit.py',
        'for block in self.blocks:',
        'for block in self.blocks[:-1]:',
        'loops over self.blocks[:-1], skipping the last block',
        diagnosis=("vit_classifier:last_block_skipped",)),
    Bug('vit_classifier', 'blocks_read_embedding', 'vit.py',
        '        for block in self.blocks:\n            x = block(x)\n        return self.head(self.norm(x)[:, 0])',
        '        for block in self.blocks:\n            h = block(x)\n        return self.head(self.norm(h)[:, 0])',
        "every block reads the embeddings (h = block(x)); only the last one's output is classified",
        diagnosis=("vit_classifier:blocks_read_embedding",)),
    Bug("vit_classifier", "first_block_skipped", "vit.py", "for block in self.blocks:", "for block in self.blocks[1:]:",
        "loops over self.blocks[1:], skipping the first block",
        diagnosis=("vit_classifier:first_block_skipped",)),
    Bug("vit_classifier", "norm_before_blocks", "vit.py",
        """        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x)[:, 0])  # (B, n_classes)""",
        """        x = self.norm(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x[:, 0])  # (B, n_classes)""",
        "applies the final norm to the embeddings, before the blocks",
        diagnosis=("vit_classifier:norm_before_blocks",)),
    # Held-out set 16's pos_emb_slice_off_by_one: the patches get rows 0 .. N-1, the class token row 0 too.
    Bug("vit_classifier", "pos_rows_from_zero", "vit.py",
        "x = torch.cat([cls, x], dim=1) + self.pos_emb  # (B, N + 1, D), the class token at position 0",
        "x = torch.cat([cls + self.pos_emb[:, :1], x + self.pos_emb[:, :x.size(1)]], dim=1)",
        "adds pos_emb rows 0 .. N-1 to the patches and row 0 to the class token",
        diagnosis=("vit_classifier:pos_rows_from_zero",)),
]
