"""What a person (or their job) says about a run: tags, and a note (Job.notes).

Tags are free words a run's owner gives it (on the page, the API, ``portal submit --tag``,
or ``pm.tag()`` from inside the job) to find and group runs (``tag:resnet``, group by tag
on the comparison page). They are not the catalog's curated image tags (catalog.Tag).
"""

from __future__ import annotations

from django.core.validators import RegexValidator
from django.db import models

# A tag is one short word: letters, digits and ._:=+- (e.g. "resnet", "seed=3", "lr:0.01").
TAG_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:=+-]{0,63}$"
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
