"""Reconnect delays: capped exponential backoff with full jitter (a uniformly random delay between
0 and `min(maximum, initial * multiplier**attempt)`), so clients that lost the same server do
not all come back at the same instant."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable


@dataclass
class Backoff:
    initial: float = 0.5
    maximum: float = 30.0
    multiplier: float = 2.0
    #: Source of randomness in [0, 1); replaceable for tests.
    random: Callable[[], float] = field(default=random.random, repr=False, compare=False)

    def ceiling(self, attempt: int) -> float:
        """The largest delay for the `attempt`-th retry in a row (0-based)."""
        if attempt > 64:
            return self.maximum
        return min(self.maximum, self.initial * self.multiplier**attempt)

    def delay(self, attempt: int) -> float:
        """A delay for the `attempt`-th retry in a row: full jitter under the ceiling."""
        return self.random() * self.ceiling(attempt)
