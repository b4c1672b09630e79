"""Which components have pictures (`python -m grader show COMPONENT`), and what each picture shows.

Stated here once: `show` draws these figures (grader/show/), scoring names them
in a failing component's message, the HTML page embeds them. Light on purpose
(no torch, no matplotlib): the grading hot path reads it.
"""
from __future__ import annotations

# component -> figure name -> what the figure shows (its caption)
FIGURES: dict[str, dict[str, str]] = {
    "masking": {
        "causal_mask": "causal_mask(q_len) and causal_mask(q_len, k_len) (dark: may attend, blank: masked), "
                       "and the weights softmax(apply_mask(scores, mask)) leaves",
    },
    "head_splitting": {
        "head_split": "split_heads: which feature (number) of which position (colour) each head holds, "
                      "and merge_heads putting them back",
    },
    "multi_head_attention": {
        "attention_heads": "MultiHeadAttention.last_attention, one heatmap per head, with a causal mask",
        "sdpa_weights": "the weights of scaled_dot_product_attention, one heatmap per head, with a causal mask",
    },
    "sinusoidal_encoding": {
        "sinusoidal_encoding": "sinusoidal_positional_encoding as a heatmap (positions down, features across; "
                               "column 0 is sin, 0 at position 0)",
    },
    "patch_embedding": {
        "patch_order": "patchify: which patch (number) each pixel lands in, and its slot inside the patch vector",
    },
    "kv_cache": {
        "kv_cache_growth": "KVCache.update over decode steps (prefill, then one token at a time): the positions "
                           "the returned keys hold, one row per step",
    },
    "rope": {
        "rope_rotation": "apply_rope on pairs (1, 0): the angle each feature pair is turned by, per position",
    },
    "grouped_query_attention": {
        "gqa_heads": "repeat_kv: which key/value head each query head reads",
    },
    "swin_windows": {
        "swin_windows": "window_partition: which window (colour) and slot (number) each cell of the map goes to",
        "swin_mask": "shifted_window_mask: per window, which tokens may attend which after the cyclic shift",
    },
}


def show_command(component: str) -> str:
    """The command that draws `component`'s figures."""
    return f"python -m grader show {component}"


def figure_file(component: str, figure: str) -> str:
    """The file name `show` writes a figure to."""
    return f"{component}.{figure}.png"


def see_line(component: str) -> str:
    """The line a failing component's message ends with: where to look."""
    return f"see: {show_command(component)} (draws {', '.join(figure_file(component, f) for f in FIGURES[component])})"
