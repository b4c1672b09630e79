"""Which components have pictures (`python -m grader show COMPONENT`), what each shows, and which checks' failures.

Stated here once: `show` draws these figures (grader/show/), scoring names a
figure in a failing component's message when one of the checks it lists
failed, the HTML page and nbgrader's feedback embed them. Light on purpose
(no torch, no matplotlib): the grading hot path reads it.
"""
from __future__ import annotations

from dataclasses import dataclass

from .i18n import N_, _


@dataclass(frozen=True)
class Picture:
    caption: str  # what the figure shows, in English (N_: translated where it is shown)
    checks: tuple[str, ...]  # the component's checks (course.yml) whose failure the figure shows


# component -> figure name -> the picture
FIGURES: dict[str, dict[str, Picture]] = {
    "masking": {
        "causal_mask": Picture(
            N_("causal_mask(q_len) and causal_mask(q_len, k_len) (dark: may attend, blank: masked), and the weights "
               "softmax(apply_mask(scores, mask)) leaves (the first row's scores lie near -1e5)"),
            ("test_causal_mask_square", "test_causal_mask_with_k_len", "test_apply_mask_values",
             "test_apply_mask_causal", "test_apply_mask_zero_weight_for_low_scores")),
    },
    "head_splitting": {
        "head_split": Picture(
            N_("split_heads: which feature (number) of which position (colour) each head holds, and merge_heads "
               "putting them back"),
            ("test_split_heads_layout", "test_merge_heads_layout", "test_round_trip")),
    },
    "multi_head_attention": {
        "attention_heads": Picture(
            N_("MultiHeadAttention.last_attention, one heatmap per head (no mask), and the output"),
            ("test_mha_matches_torch", "test_mha_last_attention_follows_latest_call", "test_mha_causal_no_leakage")),
        "sdpa_weights": Picture(
            N_("the weights of scaled_dot_product_attention, one heatmap per head, with a causal mask, and head 0's output"),
            ("test_sdpa_matches_torch", "test_sdpa_weights_are_softmax_of_scaled_scores", "test_sdpa_causal_no_leakage")),
    },
    "sinusoidal_encoding": {
        "sinusoidal_encoding": Picture(
            N_("sinusoidal_positional_encoding as a heatmap (positions down, features across; column 0 is sin, 0 at "
               "position 0)"),
            ("test_even_columns_are_sines", "test_odd_columns_are_cosines", "test_position_zero",
             "test_shift_is_a_rotation")),
    },
    "patch_embedding": {
        "patch_order": Picture(
            N_("patchify of a 2-channel image: which patch (colour) each pixel lands in, and its slot (number) in the "
               "patch vector"),
            ("test_patchify_matches_unfold",)),
    },
    "kv_cache": {
        "kv_cache_growth": Picture(
            N_("KVCache.update over decode steps (a prefill, then one token at a time): the positions the returned "
               "keys hold, one row per step, and len(cache)"),
            ("test_cache_update_appends_along_the_sequence", "test_cache_length_grows_with_tokens")),
    },
    "rope": {
        "rope_rotation": Picture(
            N_("apply_rope on pairs (1, 0) with rope_angles(16, 8, base=100): the angle each feature pair is turned by, "
               "per position, and its length"),
            ("test_rope_angles_values", "test_apply_rope_matches_complex_rotation", "test_keeps_norms")),
    },
    "grouped_query_attention": {
        "gqa_heads": Picture(
            N_("repeat_kv: which key/value head each query head reads"),
            ("test_repeat_kv_matches_repeat_interleave",)),
    },
    "swin_windows": {
        "swin_windows": Picture(
            N_("window_partition: which window (colour) and slot (number) each cell of the map goes to"),
            ("test_window_partition_matches_loops", "test_windows_ordered_by_image_then_row_major")),
        "swin_mask": Picture(
            N_("shifted_window_mask: per window, which tokens may attend which after the cyclic shift"),
            ("test_shifted_window_mask_matches_swin_labels", "test_mask_matches_the_rolled_coordinates",
             "test_mask_is_symmetric_with_a_true_diagonal")),
    },
}


def show_command(component: str) -> str:
    """The command that draws `component`'s figures."""
    return f"python -m grader show {component}"


def figure_file(component: str, figure: str) -> str:
    """The file name `show` writes a figure to."""
    return f"{component}.{figure}.png"


def figures_showing(component: str, failed_checks: set[str]) -> list[str]:
    """The figures of `component` that show the failure of one of `failed_checks`."""
    return [name for name, picture in FIGURES.get(component, {}).items() if failed_checks & set(picture.checks)]


def see_line(component: str, figures: list[str]) -> str:
    """The line a failing component's message ends with: where to look."""
    return _("see: {command} (draws {files})").format(command=show_command(component),
                                                     files=", ".join(figure_file(component, f) for f in figures))
