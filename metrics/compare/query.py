"""Which runs a comparison shows: a query language, parsed by pure functions, then applied
to the jobs a person may see.

A query is words separated by spaces (double quotes keep a value with spaces), all of
which must hold::

    tag:resnet            a tag, exactly (``tag:seed*``: any tag starting with "seed")
    param.lr<0.01         a parameter (Job.params): = : != < <= > >= ; numbers compare as
                          numbers, ``true``/``false`` as booleans, anything else as text
    metric.val_acc>0.95   a metric's *last* value (rank 0, the latest attempt), = < <= > >=
    image:digits-demo     the image's slug (or its name, any case)
    state:completed       the portal's state (queued, pending, running, completed, ...)
    cluster:devcluster    the cluster's name
    after:2026-11-01      created on or after (a date or an ISO time, UTC)
    before:2026-11-02     created before
    experiment:7          the trials of experiment 7
    id:1,2,3              these jobs
    lenet                 any other word: the job's name contains it

``ids=1,2,3`` (the dashboard's checkboxes) adds runs to what the query matches. Both are
only ever applied to ``Job.objects.visible_to(user)`` (projects/access.py): a query names no
run its person may not see. Errors are ``BadQuery`` with a message that quotes at most
``QUOTE`` characters of what was typed.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db.models import Exists, F, OuterRef, Q, QuerySet, Subquery
from django.db.models.fields.json import KeyTransform

from jobs.models import Job, JobTag
from metrics.models import MetricSeries
from metrics.query import InIds

MAX_QUERY = 1000  # characters
MAX_TERMS = 20
MAX_IDS = 100_000  # characters of ``ids`` (about 15,000 runs): the URL, not the runs, is bounded
QUOTE = 40
BIG = 1.7e308  # comparisons stay between numbers (JSON orders text and booleans apart)

OPS = ("<=", ">=", "!=", "<", ">", "=", ":")
TERM = re.compile(
    r"^(?P<field>[a-z]+)(?:\.(?P<key>[A-Za-z0-9_.@/+-]{1,100}))?(?P<op><=|>=|!=|<|>|=|:)(?P<value>.*)\Z",
    re.S,
)
FIELDS = {
    "tag",
    "param",
    "metric",
    "image",
    "state",
    "cluster",
    "after",
    "before",
    "experiment",
    "id",
}
KEYED = {"param", "metric"}
ORDERED = {"param", "metric"}  # the fields that take < <= > >=
TAG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:=+-]{0,63}\*?\Z")
WORD = re.compile(r"^[^\x00-\x1f]{1,100}\Z")


class BadQuery(ValueError):
    """A query, an option or an id list that cannot be used; ``str()`` says why."""


def quote(text: str) -> str:
    cut = text[:QUOTE] + ("…" if len(text) > QUOTE else "")
    return repr(cut)


@dataclass(frozen=True)
class Term:
    field: str  # one of FIELDS, or "name" for a bare word
    op: str  # "=" (":" is read as "="), "!=", "<", "<=", ">", ">="
    value: str | int | float | bool | datetime | tuple[int, ...]
    key: str = ""  # a param's or metric's name


def _whole(text: str, what: str) -> int:
    if not re.fullmatch(r"\d{1,18}", text):
        raise BadQuery(f"{what} must be a whole number, not {quote(text)}.")
    return int(text)


def _scalar(text: str) -> str | int | float | bool:
    if text in ("true", "false"):
        return text == "true"
    if re.fullmatch(r"[+-]?\d{1,18}", text):
        return int(text)
    try:
        number = float(text)
    except ValueError:
        return text
    if number != number or abs(number) >= BIG:  # nan, inf: text
        return text
    return number


def _date(text: str, field: str) -> datetime:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise BadQuery(
            f"{field}: wants a date (2026-11-01) or an ISO time, not {quote(text)}."
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def parse_term(word: str) -> Term:
    match = TERM.match(word)
    if not match or match["field"] not in FIELDS:
        if not WORD.match(word) or any(op in word for op in ("<", ">", "=")) or ":" in word:
            known = ", ".join(sorted(FIELDS))
            raise BadQuery(f"Cannot read {quote(word)}: a term is field:value with one of {known}.")
        return Term("name", "=", word)
    field, key, op, value = match["field"], match["key"] or "", match["op"], match["value"]
    op = "=" if op == ":" else op
    if (field in KEYED) != bool(key):
        example = f"{field}.NAME" if field in KEYED else field
        raise BadQuery(f"{quote(word)}: write {example}{op}value.")
    if op not in ("=", "!=") and field not in ORDERED:
        raise BadQuery(
            f"{quote(word)}: {field} takes only ':' (< and > are for param. and metric.)."
        )
    if op == "!=" and field == "metric":
        raise BadQuery(f"{quote(word)}: metric takes = < <= > >=.")
    if not value:
        raise BadQuery(f"{quote(word)}: the value is missing.")
    if field == "tag":
        if not TAG.match(value):
            raise BadQuery(
                f"tag: {quote(value)} is not a tag (one word of letters, digits, ._:=+-)."
            )
        return Term(field, op, value)
    if field == "param":
        parsed = _scalar(value)
        if op in ("<", "<=", ">", ">=") and not isinstance(parsed, int | float):
            raise BadQuery(f"param.{key}{op}: wants a number, not {quote(value)}.")
        return Term(field, op, parsed, key)
    if field == "metric":
        number = _scalar(value)
        if isinstance(number, bool) or not isinstance(number, int | float):
            raise BadQuery(f"metric.{key}{op}: wants a number, not {quote(value)}.")
        return Term(field, op, float(number), key)
    if field == "state":
        if value not in Job.State.values:
            states = ", ".join(Job.State.values)
            raise BadQuery(f"state: {quote(value)} is not one of {states}.")
        return Term(field, op, value)
    if field in ("after", "before"):
        return Term(field, op, _date(value, field))
    if field == "experiment":
        return Term(field, op, _whole(value, "experiment"))
    if field == "id":
        return Term(field, op, parse_ids(value))
    return Term(field, op, value[:100])  # image, cluster


def parse(text: str) -> list[Term]:
    """The terms of a query; BadQuery if it is too long, has too many terms or one is bad."""
    if len(text) > MAX_QUERY:
        raise BadQuery(f"The query is {len(text)} characters long; at most {MAX_QUERY}.")
    try:
        words = shlex.split(text)
    except ValueError:
        raise BadQuery(f"Unbalanced quotes in {quote(text)}.") from None
    if len(words) > MAX_TERMS:
        raise BadQuery(f"The query has {len(words)} terms; at most {MAX_TERMS}.")
    return [parse_term(w) for w in words]


def parse_ids(text: str) -> tuple[int, ...]:
    if len(text) > MAX_IDS:
        raise BadQuery(f"The id list is {len(text)} characters long; at most {MAX_IDS}.")
    return tuple(dict.fromkeys(_whole(v.strip(), "An id") for v in text.split(",") if v.strip()))


# -- applying -------------------------------------------------------------------------------


def _compare(name: str, op: str, value) -> Q:
    lookup = {"=": "exact", "<": "lt", "<=": "lte", ">": "gt", ">=": "gte"}
    if op == "!=":
        return ~Q(**{name: value})
    return Q(**{f"{name}__{lookup[op]}": value})


def _condition(term: Term, n: int) -> tuple[Q, dict]:
    """The Q of one term and the annotations it needs (named after its position ``n``)."""
    field, op, value = term.field, term.op, term.value
    if field == "name":
        return Q(name__icontains=value), {}
    if field == "tag":
        assert isinstance(value, str)
        tags = JobTag.objects.filter(job=OuterRef("pk"))
        tags = (
            tags.filter(name__startswith=value[:-1])
            if value.endswith("*")
            else tags.filter(name=value)
        )
        q = Q(Exists(tags))
        return (~q if op == "!=" else q), {}
    if field == "param":
        name = f"_param{n}"
        q = _compare(name, op, value)
        if op in ("<", "<=", ">", ">="):  # a number: keep text and booleans out of range
            q &= Q(**{f"{name}__gt": -BIG}) & Q(**{f"{name}__lt": BIG})
        return q, {name: KeyTransform(term.key, "params")}
    if field == "metric":
        name = f"_metric{n}"
        last = MetricSeries.objects.filter(
            job=OuterRef("pk"), key=term.key, rank=0, system=False
        ).order_by("-attempt")
        return _compare(name, op, value), {name: Subquery(last.values("last_value")[:1])}
    simple = {
        "state": "state",
        "cluster": "cluster__name",
        "experiment": "trial__experiment_id",
    }
    if field in simple:
        return _compare(simple[field], op, value), {}
    if field == "image":
        q = Q(image__slug=value) | Q(image__name__iexact=value)
        return (~q if op == "!=" else q), {}
    if field == "after":
        return Q(created_at__gte=value), {}
    if field == "before":
        return Q(created_at__lt=value), {}
    if field == "id":
        q = Q(pk__in=value)
        return (~q if op == "!=" else q), {}
    raise AssertionError(field)


def select(user, text: str = "", ids: tuple[int, ...] = ()) -> QuerySet[Job]:
    """The jobs ``user`` may see that match query ``text``, plus those of ``ids`` (an empty
    query with no ids selects none)."""
    visible = Job.objects.visible_to(user)
    terms = parse(text)
    if not terms and not ids:
        return visible.none()
    matched = Q()
    annotations: dict = {}
    for n, term in enumerate(terms):
        q, more = _condition(term, n)
        matched &= q
        annotations.update(more)
    chosen = (matched if terms else Q(pk__in=[])) | Q(InIds(F("pk"), ids))
    return visible.annotate(**annotations).filter(chosen)
