"""transformer-drills: the exercises. Fill in the stubs, one component at a time.

Which file holds what (the component id is in brackets; a check reports per id):

- ``attention.py``: ``split_heads`` / ``merge_heads`` [head_splitting],
  ``attention_scores`` [scaling], ``causal_mask`` / ``apply_mask`` [masking],
  ``MultiHeadAttention.__init__`` / ``project_qkv`` [qkv_projection],
  ``scaled_dot_product_attention`` / ``MultiHeadAttention.forward``
  [multi_head_attention; the cache branch of ``forward`` is kv_cache].
- ``positional.py``: ``sinusoidal_positional_encoding`` [sinusoidal_encoding].
- ``block.py``: ``TransformerBlock`` [pre_ln_block].
- ``vit.py``: ``patchify`` / ``PatchEmbedding`` [patch_embedding].
- ``kv_cache.py``: ``KVCache`` [kv_cache].

The LLM track (the parts of a LLaMA-style language model):

- ``norms.py``: ``LayerNorm`` [layer_norm], ``RMSNorm`` [rms_norm].
- ``rope.py``: ``rope_angles`` / ``apply_rope`` [rope].
- ``ffn.py``: ``SwiGLU`` [swiglu].
- ``gqa.py``: ``repeat_kv`` / ``GroupedQueryAttention`` [grouped_query_attention].
- ``training.py``: ``softmax`` / ``log_softmax`` / ``cross_entropy`` [cross_entropy],
  ``AdamW`` / ``clip_grad_norm`` [optimizer], ``lr_at`` [lr_schedule].
- ``sampling.py``: ``filter_logits`` / ``sample_next_token`` / ``generate`` [sampling].
- ``gpt.py``: ``DecoderBlock`` / ``TinyLM`` [tiny_lm], the whole model, built on
  the parts above; when it passes, ``python -m grader train`` trains it.

The vision track (Transformers for images):

- ``vit.py``: ``ViT`` [vit_classifier], the whole Vision Transformer
  classifier on your ``PatchEmbedding`` and ``TransformerBlock``, trained by
  a check.
- ``swin.py``: ``window_partition`` / ``window_reverse`` / ``shifted_window_mask``
  [swin_windows].
- ``swin.py``: ``WindowAttention`` / ``SwinBlock`` [window_attention].

The seq2seq track (the encoder-decoder Transformer and its tokenizer):

- ``tokenizer.py``: ``train_bpe`` [bpe_training], ``BPETokenizer``
  [bpe_encoding], byte-level BPE as GPT-2's tokenizer.

The interview track (what LLM interviews ask after the basics):

- ``alignment.py``: ``sequence_logprobs`` / ``dpo_loss`` [dpo_loss],
  ``group_advantages`` / ``grpo_loss`` [grpo_loss], the losses that align a
  language model with preferences (DPO and GRPO, as TRL computes them).

Every function you write starts as ``raise NotImplementedError(...)``; replace
that line with your code. Each component is graded on its own: the checks for
one component use trusted stand-ins for all the others, so you can work in any
order. The course's teaching order (course.yml's, as in the README; the LLM
track from layer_norm on, the vision track from vit_classifier on, the seq2seq
track from bpe_training on, the interview track from dpo_loss on) is:
qkv_projection, scaling, masking, head_splitting, multi_head_attention,
sinusoidal_encoding, pre_ln_block, patch_embedding, kv_cache, layer_norm,
rms_norm, rope, swiglu, grouped_query_attention, cross_entropy, optimizer,
lr_schedule, sampling, tiny_lm, vit_classifier, swin_windows, window_attention,
bpe_training, bpe_encoding, dpo_loss, grpo_loss.

How to check your work:

    python -m grader check COMPONENT      # e.g. python -m grader check masking
    python -m grader check                # every component
    pytest tests/test_<component>.py      # the same checks, with pytest's output
"""
