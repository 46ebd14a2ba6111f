"""Planted-bug benchmark cases for trtmin (see check_cases.py)."""

CASES: dict[str, str] = {
    "view_above_8d": "view_above_8d",
    "uint8_permute": "uint8_permute",
    "int_div_truncates": "int_div_truncates",
    "masked_row_nan": "masked_row_nan",
    "softmax_size1_inf": "softmax_size1_inf",
    "block_causal_rope": "block_causal_rope",
    "slow_oracle": "slow_oracle",
    "scaled_query_segfault": "scaled_query_segfault",
    "big_mlp_stack": "big_mlp_stack",
}
