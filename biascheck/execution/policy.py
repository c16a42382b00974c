"""When a call may start and when a failed one is tried again: the retry policy (exponential backoff
with full jitter that honours Retry-After, up to a cap), the circuit breaker that stops a run whose
endpoint cannot be reached, and the cost budget. The runner (:mod:`biascheck.execution.runner`)
applies them to every call."""

from __future__ import annotations

import random
from dataclasses import dataclass

from biascheck.execution.stats import RunStats


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 6
    base_delay: float = 0.25
    max_delay: float = 20.0
    # A Retry-After (delay-seconds or HTTP-date) longer than this is not waited for: the request
    # errors at once, its error naming the wait asked and this cap, instead of stalling CI.
    max_retry_after: float = 120.0

    def delay(self, retry: int, retry_after: float | None, rng: random.Random) -> float:
        backoff = rng.uniform(0, min(self.max_delay, self.base_delay * 2**retry))
        if retry_after is None:
            return backoff
        return max(retry_after, backoff)


@dataclass
class CircuitBreaker:
    """Stops a run whose endpoint cannot be reached instead of retrying every request to exhaustion
    (nothing listening on a port: 7 attempts per request, hours for a suite).

    Until the endpoint has replied once (any HTTP reply, an error status included), attempts go one
    at a time, and ``first_attempts`` consecutive attempts failing with the same unreachable error
    stop the run. After a reply, a streak of unreachable failures with no reply in between stops it
    once it has lasted ``outage_s`` (an endpoint that went away mid-run); shorter blips are retried."""

    first_attempts: int = 3
    outage_s: float = 120.0
    replied: bool = False
    streak: int = 0
    streak_start: float = 0.0
    streak_error: str = ""

    def must_wait(self, in_flight: int) -> bool:
        return not self.replied and in_flight > 0

    def reply(self) -> None:
        self.replied, self.streak = True, 0

    def trips(self, error: str, now: float) -> bool:
        """Record one unreachable attempt; True when the run should stop."""
        same = error == self.streak_error
        self.streak, self.streak_error = (self.streak + 1 if same else 1), error
        if self.streak == 1:
            self.streak_start = now
        if not self.replied:
            return self.streak >= self.first_attempts
        return now - self.streak_start >= self.outage_s

    def reason(self, error: str) -> str:
        if not self.replied:
            return f"{error} (the first {self.streak} attempts all failed this way; stopped by the circuit breaker)"
        return f"{error} (no reply for {self.outage_s:g} s; stopped by the circuit breaker)"


@dataclass
class Budget:
    """A spending limit. Calls already in flight are charged when they return, so a new call
    starts only if the spend so far plus the expected cost of those in flight (the mean cost per
    call so far) stays under the limit: overspend is at most about one call's cost."""

    max_cost_usd: float | None
    in_flight: int = 0
    priced_calls: int = 0

    def must_wait(self) -> bool:
        """Under a limit, the first call goes alone: until one is priced there is no estimate."""
        return self.max_cost_usd is not None and self.priced_calls == 0 and self.in_flight > 0

    def exhausted(self, stats: RunStats) -> bool:
        if self.max_cost_usd is None:
            return False
        mean = stats.cost_usd / self.priced_calls if self.priced_calls else 0.0
        return stats.cost_usd + mean * (self.in_flight + 1) > self.max_cost_usd
