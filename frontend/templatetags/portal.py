from datetime import timedelta

from django import template
from django.utils.html import format_html

from common import jsonfast
from jobs import display

register = template.Library()


@register.filter
def duration(value: timedelta | None) -> str:
    """'1h 05m' or '3m 07s', like the page's live counter."""
    if value is None:
        return ""
    seconds = max(0, int(value.total_seconds()))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h {minutes:02d}m" if hours else f"{minutes}m {secs:02d}s"


@register.filter
def duration_seconds(value: int | None) -> str:
    """The same for a number of seconds."""
    return duration(timedelta(seconds=value or 0))


@register.filter
def kib(value: int | None) -> str:
    """A size in KiB (as quota files count blocks) in words: '1.5 GB', '300 MB'."""
    size = float(value or 0) * 1024
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1024 or unit == "TB":
            return f"{size:.0f} {unit}" if unit in ("B", "KB") else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TB"


# A job in words (jobs/display.py): {{ job|pending_text }}, {{ job|gpu_text }}, ...
register.filter("pending_text", display.pending_text)
register.filter("gpu_text", display.gpu_text)
register.filter("attempts_text", display.attempts_text)
register.filter("shape", display.shape)


@register.filter
def fast_json_script(value, element_id: str):
    """``json_script`` encoded by orjson (common/jsonfast.py), for large documents."""
    return jsonfast.json_script(value, element_id)


@register.simple_tag
def doc(page: str, text: str) -> str:
    """A link into this version's docs (served at /docs/), where a concept is used:
    {% doc "use/projects" "What is a project?" %}; in a tab of its own, so the page it
    helps with stays open beside it. tests/frontend/test_doc_links.py checks that each page
    named in a template is one the docs have."""
    return format_html(
        '<a class="help" href="/docs/{}.html" target="_blank" rel="noopener">{}</a>', page, text
    )
