"""What model tokens cost: an agent file's ``prices``, per model, per million tokens.

    "prices": {"gpt-4o-mini": {"input": 0.15, "output": 0.60}}

The unit of money is the operator's (whatever their provider bills in); a step's cost is
worked out when it is recorded, with the prices of the run's agent definition, so a later
change of prices never rewrites what was spent. A model with no price has no cost (the
console shows its tokens only).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PER = 1_000_000
PRICE_KEYS = frozenset({"input", "output"})


@dataclass(frozen=True, slots=True)
class Price:
    input: float
    output: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input + output_tokens * self.output) / PER


def parse_prices(data: Any, where: str) -> tuple[dict[str, Price], list[str]]:
    """An agent file's ``prices`` object, and a problem per bad entry."""
    if data is None:
        return {}, []
    if not isinstance(data, dict):
        return {}, [f"{where}: 'prices' must map model names to {{'input', 'output'}}"]
    prices: dict[str, Price] = {}
    problems: list[str] = []
    for model, entry in sorted(data.items()):
        at = f"{where}: prices: {model!r}"
        if not isinstance(entry, dict):
            problems.append(f"{at} must be an object with 'input' and 'output'")
            continue
        problems += [f"{at}: unknown key {k!r}" for k in sorted(set(entry) - PRICE_KEYS)]
        values: dict[str, float] = {}
        for key in sorted(PRICE_KEYS):
            value = entry.get(key)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value < 0
            ):
                problems.append(f"{at}: {key!r} must be a price per million tokens, 0 or more")
            else:
                values[key] = float(value)
        if len(values) == len(PRICE_KEYS):
            prices[model] = Price(**values)
    return prices, problems


def model_name(config: Mapping[str, Any]) -> str:
    """The name a model's prices and usage go by: the provider's model name, else its kind
    (the scripted model is ``scripted``)."""
    name = config.get("model")
    return name if isinstance(name, str) and name else str(config.get("kind", "unknown"))
