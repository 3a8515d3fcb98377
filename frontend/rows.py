"""A job's row on the dashboard (and its live update, ``/jobs/<id>/row/``), written in
Python: the one place its markup is made.

The row was a Django template included once per row: 20 rows were about half of a
dashboard request's CPU (variable lookups, filters, five ``{% url %}`` and a
``{% csrf_token %}`` per row). Here what is the same for every row (the URLs' shapes,
the CSRF field) is made once per page by ``Rows``, and a row is one f-string whose
every value from the database or a user goes through ``escape``.
"""

from __future__ import annotations

from django.core.exceptions import ObjectDoesNotExist
from django.middleware.csrf import get_token
from django.urls import reverse
from django.utils.dateformat import format as date_format
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.timezone import is_aware, localtime

from frontend.templatetags.portal import duration
from jobs.display import pending_text
from jobs.models import Job

MARK = 987654321  # a job id in a reversed URL, replaced by each row's
# Where a row's CSRF field goes: rows are kept in the cache (jobs/listing.py) for every
# request of their person, each with its own token. Escaped text never holds a "<".
CSRF_MARK = "<portal-csrf-field>"


def _shape(name: str, **kwargs: object) -> tuple[str, str]:
    """A URL reversed once, as (before the id, after it)."""
    url = reverse(name, kwargs=kwargs) if kwargs else reverse(name, args=[MARK])
    head, _, tail = url.partition(str(MARK))
    return head, tail


def with_csrf(request, rows: str) -> SafeString:
    """``rows`` (Rows.page()'s or row()'s) with this request's CSRF field in place."""
    field = f'<input type="hidden" name="csrfmiddlewaretoken" value="{escape(get_token(request))}">'
    return mark_safe(rows.replace(CSRF_MARK, field))  # noqa: S308 - escaped in Rows.row()


def _iso(value) -> str:
    """As the template's ``|date:'c'``: ISO 8601 in the current time zone."""
    if value is None:
        return ""
    return date_format(localtime(value) if is_aware(value) else value, "c")


class Rows:
    """The rows of one page (its URLs' shapes made once; the CSRF field is with_csrf()'s)."""

    # What a page's query joins, and the long columns a row never reads (a job's script,
    # its git diff, its stderr's tail: kilobytes each, decoded for nothing).
    RELATED = ("image", "partition", "owner", "session")
    UNREAD = (
        "notes",
        "params",
        "command",
        "staging",
        "message",
        "script",
        "stderr_tail",
        "reproduce",
        "git_diff",
    )

    def __init__(self, *, show_owner: bool) -> None:
        self.show_owner = show_owner
        self.detail = _shape("job-detail")
        self.cancel = _shape("job-cancel")
        self.session = _shape("session-open", public_id=str(MARK))
        self.launch = reverse("launch")

    def page(self, jobs) -> str:
        """The rows of ``jobs``, with CSRF_MARK where each row's CSRF field goes."""
        return "".join(self.row(job) for job in jobs)

    def row(self, job: Job) -> str:
        pk = job.pk
        detail = f"{self.detail[0]}{pk}{self.detail[1]}"
        name = escape(job.name)
        title = f' title="{name}"' if job.name else ""
        owner = (
            f'<td data-label="Owner">{escape(job.owner.get_username())}</td>'
            if self.show_owner
            else ""
        )
        resources: str = escape(job.partition.name if job.partition_id else "")
        if job.is_distributed:
            resources += (
                f" · <span data-shape>{job.nodes}×{job.tasks_per_node}</span> "
                f"{escape(job.launcher)}"
            )
        if job.gpus:
            per_node = "/node" if job.nodes > 1 else ""
            resources += f" · {job.gpus}× {escape(job.gpu_type or 'GPU')}{per_node}"
        resources += f" · {job.cpus} CPU · {job.memory_gb} GB"
        if job.node:
            resources += f"<br>on <span data-nodes>{escape(', '.join(job.node_list))}</span>"
        active = job.is_active
        if job.state == Job.State.PENDING:
            reason: str = escape(pending_text(job))
        else:
            reason = "cancelling…" if job.cancel_requested_at and active else ""
        elapsed = job.elapsed
        ran = f"ran {duration(elapsed)}" if elapsed else ""
        return (
            f'<tr data-job-id="{pk}" data-state="{escape(job.state)}" '
            f'data-active="{"true" if active else "false"}" data-kind="{escape(job.kind)}" '
            f'data-session="{"true" if job.has_session else "false"}"\n'
            f'    data-started-at="{_iso(job.started_at)}" '
            f'data-limit-minutes="{job.time_limit_minutes}">\n'
            f'  <td class="pick"><input type="checkbox" form="compare-form" name="ids" '
            f'value="{pk}" aria-label="Compare job {pk}" data-compare-pick></td>\n'
            f'  <td data-label="Job"><span class="job-name"{title}><a href="{detail}">#{pk}</a> '
            f'{name}</span><small class="kind">{escape(job.get_kind_display())}</small></td>\n'
            f"  {owner}\n"
            f'  <td data-label="Image">{escape(str(job.image))}</td>\n'
            f'  <td data-label="Resources"><small>{resources}</small></td>\n'
            f'  <td data-label="State"><span class="badge state-{escape(job.state)}" data-badge>'
            f"{escape(job.get_state_display())}</span>\n"
            f'    <small class="reason" data-reason>{reason}</small></td>\n'
            f'  <td data-label="Time"><small data-elapsed>{ran}</small> '
            f"<small data-remaining></small></td>\n"
            f'  <td data-label="Actions" class="actions">\n'
            f"    {self._open(job)}\n"
            f'    <a href="{detail}#logs">Logs</a>\n'
            f'    <a href="{self.launch}?from={pk}">Launch again</a>\n'
            f'    <form method="post" action="{self.cancel[0]}{pk}{self.cancel[1]}" '
            f'class="inline cancel-form"{"" if active else " hidden"}>{CSRF_MARK}\n'
            f'      <button type="submit" class="danger small" data-cancel>Cancel</button>\n'
            f"    </form>\n"
            f"  </td>\n"
            f"</tr>\n"
        )

    def _open(self, job: Job) -> str:
        """A session's Open button, shown once the session is ready."""
        if not job.has_session:
            return ""
        try:
            session = job.session
        except ObjectDoesNotExist:
            session = None
        href = f"{self.session[0]}{escape(session.public_id)}{self.session[1]}" if session else ""
        hidden = "" if session is not None and session.display_state == "ready" else " hidden"
        what = escape(job.session_app_name)
        return (
            f'<a data-open-session target="_blank" rel="noopener" class="button primary small"\n'
            f'       href="{href}"{hidden}>Open {what}</a>'
        )
