"""A cluster's ``user_map``: which cluster user a person signing in with OIDC is there.

Two forms, written by an administrator on the Cluster:

- a template, ``{preferred_username}``: every ``{claim}`` is replaced by that claim's
  value (a string claim; any other type, or a missing claim, gives no user);
- ordered lines ``REGEX => TEMPLATE`` (Open OnDemand's ``user_map_match``): the first
  regex that matches the whole portal user name wins, and its groups fill the template
  (``\\1``, ``\\g<name>``), then claims as above.

The result must be a POSIX user name (common.validators.posix_username) or there is none:
claims are the provider's and treated as hostile.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.core.exceptions import ValidationError

ARROW = "=>"
_CLAIM = re.compile(r"\{([A-Za-z0-9_:.-]{1,64})\}")
_USERNAME = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}\Z")  # common.validators.posix_username


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern[str] | None  # None: the template alone (the first form)
    template: str


def parse(text: str) -> list[Rule]:
    """The rules of a user_map; ValidationError names the first bad line."""
    text = (text or "").strip()
    if not text:
        return []
    if ARROW not in text and "\n" not in text:
        return [Rule(None, text)]
    rules = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        regex, arrow, template = line.rpartition(ARROW)
        if not arrow or not regex.strip() or not template.strip():
            raise ValidationError(f"Line {number}: write 'REGEX => TEMPLATE'.")
        try:
            pattern = re.compile(regex.strip())
        except re.error as exc:
            raise ValidationError(f"Line {number}: the regex does not compile ({exc}).") from None
        rules.append(Rule(pattern, template.strip()))
    return rules


def _fill(template: str, claims: dict) -> str | None:
    missing = False

    def claim(match: re.Match[str]) -> str:
        nonlocal missing
        value = claims.get(match.group(1))
        if not isinstance(value, str):
            missing = True
            return ""
        return value

    result = _CLAIM.sub(claim, template)
    return None if missing else result


def cluster_username(text: str, username: str, claims: dict) -> str | None:
    """The cluster user name for a person (portal ``username``, id token ``claims``), or
    None when the map is empty, nothing matches or the result is no valid user name."""
    for rule in parse(text):
        if rule.pattern is None:
            result = _fill(rule.template, claims)
        else:
            match = rule.pattern.fullmatch(username)
            if match is None:
                continue
            try:
                expanded = match.expand(rule.template)
            except (re.error, IndexError):
                return None
            result = _fill(expanded, claims)
        if result is not None and _USERNAME.fullmatch(result):
            return result
        return None
    return None
