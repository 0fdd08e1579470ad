"""How a probability is written, everywhere the app, the report and the CLI show one.

    fmt_prob(0.123456) == "0.123";  fmt_prob(0.00042) == "4.20e-4";  fmt_prob(3e-13) == "<1e-6"
"""
from __future__ import annotations

import math

FLOOR = 1e-6                # below this a probability is written "<1e-6" (float32 noise, not a number to read)
SCIENTIFIC_BELOW = 1e-3     # 3 significant figures in plain decimals would need 6+ places below this


def fmt_prob(p) -> str:
    """3 significant figures ("0.500", "0.0123"); scientific below 1e-3 ("4.20e-4"); "<1e-6" below 1e-6;
    exactly 0 (a masked or banned token) is "0". Anything not a number is "–"."""
    try:
        p = float(p)
    except (TypeError, ValueError):
        return "–"
    if not math.isfinite(p):
        return "–"
    if p == 0:
        return "0"
    if p < FLOOR:
        return "<1e-6"
    if p < SCIENTIFIC_BELOW:
        mantissa, exponent = f"{p:.2e}".split("e")
        if float(mantissa) * 10 ** int(exponent) >= SCIENTIFIC_BELOW:       # 9.996e-4 rounds up to 1.00e-3
            return f"{p:#.3g}"
        return f"{mantissa}e{int(exponent)}"
    return f"{p:#.3g}"


def fmt_probs(ps) -> list[str]:
    """fmt_prob of each value of a sequence, array or tensor (flattened)."""
    if hasattr(ps, "detach"):
        ps = ps.detach().cpu().numpy()
    if hasattr(ps, "ravel"):
        ps = ps.ravel().tolist()
    return [fmt_prob(p) for p in ps]
