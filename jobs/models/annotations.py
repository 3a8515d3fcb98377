"""What a person (or their job) says about a run: tags, a note and parameters, their
bounds, and the part of Job that holds them (JobAnnotations: notes, params, tags).

Tags are free words a run's owner gives it (on the page, the API, ``portal submit --tag``,
or ``pm.tag()`` from inside the job) to find and group runs (``tag:resnet``, group by tag
on the comparison page). They are not the catalog's curated image tags (catalog.Tag).
"""

from __future__ import annotations

import json
import math
import re
from typing import TYPE_CHECKING

from django.core.validators import MaxLengthValidator, RegexValidator
from django.db import models, transaction

from jobs import signals

if TYPE_CHECKING:
    from django.db.models.fields.related_descriptors import RelatedManager

# A tag is one short word: letters, digits and ._:=+- (e.g. "resnet", "seed=3", "lr:0.01").
TAG_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:=+-]{0,63}\Z"
tag_name = RegexValidator(
    TAG_PATTERN,
    "A tag is one word of at most 64 letters, digits and . _ : = + - (it starts with a "
    "letter or digit).",
)
MAX_TAGS_PER_JOB = 32
MAX_NOTE_CHARS = 10_000


class JobTag(models.Model):
    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="tags")
    name = models.CharField(max_length=64, validators=[tag_name])
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["job", "name"], name="one_tag_name_per_job"),
        ]
        indexes = [models.Index(fields=["name"])]

    def __str__(self) -> str:
        return self.name


# -- bounds and checks (every way in: page, API, CLI, the job's own uploads) ---------------

# A parameter's name reaches the job as PORTAL_PARAM_<NAME> (upper case), so two names that
# differ only in case are one parameter; names are identifiers, values scalars.
PARAM_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,47}\Z"
_PARAM_NAME = re.compile(PARAM_NAME_PATTERN)
_TAG = re.compile(TAG_PATTERN)
MAX_PARAMS = 100
MAX_PARAM_TEXT = 200  # characters of a text value
MAX_PARAM_INT = 2**53  # what a JSON number holds exactly in every client


class BadAnnotation(ValueError):
    """A tag, note or parameter outside its bounds: the message says which and why."""


def clean_tag(name: object) -> str:
    if not isinstance(name, str) or not _TAG.match(name):
        shown = repr(name)[:80]
        raise BadAnnotation(f"{shown} is not a tag: {tag_name.message}")
    return name


def clean_tags(names: object) -> list[str]:
    """A list of tags (or one string of them, separated by spaces or commas), checked,
    without repeats, in order."""
    if isinstance(names, str):
        names = names.replace(",", " ").split()
    if not isinstance(names, (list, tuple)):
        raise BadAnnotation("Tags are a list of words.")
    if len(names) > MAX_TAGS_PER_JOB:
        raise BadAnnotation(f"A job has at most {MAX_TAGS_PER_JOB} tags.")
    return list(dict.fromkeys(clean_tag(n) for n in names))


def clean_note(text: object) -> str:
    if not isinstance(text, str):
        raise BadAnnotation("A note is text.")
    if "\x00" in text:
        raise BadAnnotation("A note may not contain NUL characters.")
    if len(text) > MAX_NOTE_CHARS:
        raise BadAnnotation(f"A note has at most {MAX_NOTE_CHARS} characters.")
    return text


def clean_param_value(name: str, value: object) -> int | float | bool | str:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if abs(value) > MAX_PARAM_INT:
            raise BadAnnotation(f"Parameter {name}: whole numbers up to ±2^53.")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise BadAnnotation(f"Parameter {name}: a finite number.")
        return value
    if isinstance(value, str):
        if len(value) > MAX_PARAM_TEXT or any(ord(c) < 32 or ord(c) == 127 for c in value):
            raise BadAnnotation(
                f"Parameter {name}: text of at most {MAX_PARAM_TEXT} characters on one line."
            )
        return value
    raise BadAnnotation(f"Parameter {name}: a number, text or true/false.")


def clean_params(params: object) -> dict[str, int | float | bool | str]:
    """A run's parameters: at most MAX_PARAMS names (identifiers, unique whatever their
    case: each becomes PORTAL_PARAM_<NAME>) with scalar values."""
    if not isinstance(params, dict):
        raise BadAnnotation("Parameters are an object of name: value.")
    if len(params) > MAX_PARAMS:
        raise BadAnnotation(f"At most {MAX_PARAMS} parameters.")
    cleaned: dict[str, int | float | bool | str] = {}
    upper: set[str] = set()
    for name, value in params.items():
        if not isinstance(name, str) or not _PARAM_NAME.match(name):
            raise BadAnnotation(
                f"{repr(name)[:60]} is not a parameter name: a letter or _, then at most 47 "
                "letters, digits or _."
            )
        if name.upper() in upper:
            raise BadAnnotation(f"Parameter {name} is given twice (names ignore case).")
        upper.add(name.upper())
        cleaned[name] = clean_param_value(name, value)
    return cleaned


def parse_param_value(text: str) -> int | float | bool | str:
    """``name=value`` text (the CLI, the launch form) to a value: a number, true/false, or
    the text itself."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return text
    return number if math.isfinite(number) else text


def parse_params_text(text: str) -> dict[str, int | float | bool | str]:
    """``name=value`` lines (or words) as parameters, checked."""
    params: dict[str, object] = {}
    for item in text.split():
        name, sep, value = item.partition("=")
        if not sep:
            raise BadAnnotation(f"{item[:60]!r}: write parameters as name=value.")
        if name in params:
            raise BadAnnotation(f"Parameter {name} is given twice.")
        params[name] = parse_param_value(value)
    return clean_params(params)


def params_text(params: dict) -> str:
    """Parameters as ``name=value`` lines (what parse_params_text reads back)."""
    return "\n".join(f"{k}={format_param(v)}" for k, v in params.items())


# -- how parameters reach the job (a launch's and an experiment trial's alike) -------------

PARAMS_FILE = "params.json"


def param_env_name(name: str) -> str:
    return f"PORTAL_PARAM_{name.upper()}"


def format_param(value) -> str:
    """A parameter value as it reaches the command line and the environment."""
    if isinstance(value, float):
        return repr(value)
    return str(value)


def params_env(params: dict) -> dict[str, str]:
    """PORTAL_PARAM_<NAME> for each parameter."""
    return {param_env_name(k): format_param(v) for k, v in params.items()}


def params_json(params: dict) -> str:
    return json.dumps(params, sort_keys=True)


# -- on the job -----------------------------------------------------------------------------


class JobAnnotations(models.Model):
    """Job's note, parameters and tags (JobTag rows), each changed within its bounds."""

    notes = models.TextField(
        blank=True,
        validators=[MaxLengthValidator(MAX_NOTE_CHARS)],
        help_text="What its owner wants to remember about this run (plain text).",
    )
    params = models.JSONField(
        default=dict,
        blank=True,
        help_text="The run's parameters (name: number, text or boolean): given at launch "
        "(PORTAL_PARAM_* and params.json in the job), an experiment trial's, or reported by "
        "the job (pm.params()); what comparisons show and group by.",
    )

    if TYPE_CHECKING:
        tags: RelatedManager[JobTag]  # JobTag.job's reverse

    class Meta:
        abstract = True

    def annotation_errors(self) -> dict[str, str]:
        """Job.clean()'s part: the parameters within their bounds (``params`` cleaned)."""
        try:
            self.params = clean_params(self.params)
        except BadAnnotation as exc:
            return {"params": str(exc)}
        return {}

    @property
    def tag_names(self) -> list[str]:
        return [t.name for t in self.tags.all()] if self.pk else []

    def set_tags(self, names: list[str]) -> None:
        """The job's tags become ``names`` (checked: BadAnnotation)."""
        names = clean_tags(names)
        with transaction.atomic():
            self.tags.exclude(name__in=names).delete()
            self._add_tags(names)
        signals.updated_on_commit(self)

    def change_tags(self, add=(), remove=()) -> list[str]:
        """Add and remove tags (checked: BadAnnotation, nothing changed); the tags after."""
        add, remove = clean_tags(list(add)), clean_tags(list(remove))
        with transaction.atomic():
            self.tags.filter(name__in=remove).delete()
            self._add_tags([n for n in add if n not in remove])
        signals.updated_on_commit(self)
        return self.tag_names

    def _add_tags(self, names: list[str]) -> None:
        # Locked: two requests adding tags at once cannot both pass the bound.
        type(self)._default_manager.select_for_update().filter(pk=self.pk).values_list("pk").first()
        have = set(self.tags.values_list("name", flat=True))
        new = [n for n in names if n not in have]
        if len(have) + len(new) > MAX_TAGS_PER_JOB:
            raise BadAnnotation(f"A job has at most {MAX_TAGS_PER_JOB} tags ({len(have)} already).")
        JobTag.objects.bulk_create(
            [JobTag(job_id=self.pk, name=n) for n in new], ignore_conflicts=True
        )

    def set_notes(self, text: str) -> None:
        self.notes = clean_note(text)
        type(self)._default_manager.filter(pk=self.pk).update(notes=self.notes)
        signals.updated_on_commit(self)

    def report_params(self, params: dict) -> dict:
        """Merge parameters the job reports (pm.params()) into its own, within the bound
        (checked: BadAnnotation, nothing changed)."""
        rows = type(self)._default_manager
        with transaction.atomic():
            current = (
                rows.select_for_update().filter(pk=self.pk).values_list("params", flat=True)
            ).first() or {}
            merged = clean_params({**current, **clean_params(params)})
            rows.filter(pk=self.pk).update(params=merged)
        self.params = merged
        signals.updated_on_commit(self)
        return merged
