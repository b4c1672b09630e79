"""transformer-drills：练习。填写桩代码，一次一个组件。

哪个文件包含什么（方括号里是组件 id；检查按 id 报告）：

- ``attention.py``：``split_heads`` / ``merge_heads`` [head_splitting]，
  ``attention_scores`` [scaling]，``causal_mask`` / ``apply_mask`` [masking]，
  ``MultiHeadAttention.__init__`` / ``project_qkv`` [qkv_projection]，
  ``scaled_dot_product_attention`` / ``MultiHeadAttention.forward``
  [multi_head_attention；``forward`` 的缓存分支属于 kv_cache]。
- ``positional.py``：``sinusoidal_positional_encoding`` [sinusoidal_encoding]。
- ``block.py``：``TransformerBlock`` [pre_ln_block]。
- ``vit.py``：``patchify`` / ``PatchEmbedding`` [patch_embedding]。
- ``kv_cache.py``：``KVCache`` [kv_cache]。

大语言模型方向（LLaMA 式语言模型的各个部分）：

- ``norms.py``：``LayerNorm`` [layer_norm]，``RMSNorm`` [rms_norm]。
- ``rope.py``：``rope_angles`` / ``apply_rope`` [rope]。
- ``ffn.py``：``SwiGLU`` [swiglu]。
- ``gqa.py``：``repeat_kv`` / ``GroupedQueryAttention`` [grouped_query_attention]。
- ``training.py``：``softmax`` / ``log_softmax`` / ``cross_entropy`` [cross_entropy]，
  ``AdamW`` / ``clip_grad_norm`` [optimizer]，``lr_at`` [lr_schedule]。
- ``sampling.py``：``filter_logits`` / ``sample_next_token`` / ``generate`` [sampling]。
- ``gpt.py``：``DecoderBlock`` / ``TinyLM`` [tiny_lm]，建立在上述各部分之上的完整
  模型；它通过之后，``python -m grader train`` 会训练它。

视觉方向（用于图像的 Transformer）：

- ``vit.py``：``ViT`` [vit_classifier]，建立在你的 ``PatchEmbedding`` 和
  ``TransformerBlock`` 之上的完整 Vision Transformer 分类器，由一个检查项训练。
- ``swin.py``：``window_partition`` / ``window_reverse`` / ``shifted_window_mask``
  [swin_windows]。
- ``swin.py``：``WindowAttention`` / ``SwinBlock`` [window_attention]。

序列到序列方向（编码器-解码器 Transformer 及其分词器）：

- ``tokenizer.py``：``train_bpe`` [bpe_training]，``BPETokenizer``
  [bpe_encoding]，即 GPT-2 分词器那样的字节级 BPE。

面试方向（基础之后大语言模型面试常问的内容）：

- ``alignment.py``：``sequence_logprobs`` / ``dpo_loss`` [dpo_loss]，
  ``group_advantages`` / ``grpo_loss`` [grpo_loss]，按偏好对齐语言模型的损失
  （DPO 和 GRPO，与 TRL 的算法一致）。

你要写的每个函数一开始都是 ``raise NotImplementedError(...)``；用你的代码替换这一行。
每个组件单独评分：一个组件的检查项对其他所有组件使用可信的替身实现，所以你可以按任意
顺序来做。课程的教学顺序（即 course.yml 中、也是 README 中的顺序；大语言模型方向从
layer_norm 开始，视觉方向从 vit_classifier 开始，序列到序列方向从 bpe_training 开始，
面试方向从 dpo_loss 开始）是：
qkv_projection, scaling, masking, head_splitting, multi_head_attention,
sinusoidal_encoding, pre_ln_block, patch_embedding, kv_cache, layer_norm,
rms_norm, rope, swiglu, grouped_query_attention, cross_entropy, optimizer,
lr_schedule, sampling, tiny_lm, vit_classifier, swin_windows, window_attention,
bpe_training, bpe_encoding, dpo_loss, grpo_loss.

如何检查你的代码：

    python -m grader check COMPONENT      # 例如 python -m grader check masking
    python -m grader check                # 所有组件
    pytest tests/test_<component>.py      # 同样的检查，显示 pytest 的输出
"""
