"""Every Celery task has an explicit name, and beat and the routes name registered tasks.

Celery names a task after its module path unless told otherwise: moving a module (or a
function to another module) would rename it, and the messages already queued under the
old name, the beat entries and the routes would then name a task no worker knows. The
registry cannot tell an explicit name from an automatic one, so the decorators are read
from the source."""

import ast
import fnmatch
import inspect
from pathlib import Path

import pytest
from django.conf import settings

from portal.celery import app

ROOT = Path(settings.BASE_DIR).resolve()


def portal_tasks() -> dict:
    """The tasks the portal's own apps register (Celery's built-in ones left out)."""
    app.loader.import_default_modules()
    # (A test may register a task of its own in this process: not the portal's.)
    tasks = {
        name: task for name, task in app.tasks.items() if not name.startswith(("celery.", "tests."))
    }
    assert tasks, "no task registered: autodiscovery found nothing"
    return tasks


def is_task_decorator(decorator: ast.expr) -> bool:
    """``@shared_task``, ``@app.task``, ``@celery_app.task`` ..., bare or called."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    if isinstance(target, ast.Name):
        return target.id in ("shared_task", "task")
    return isinstance(target, ast.Attribute) and target.attr in ("task", "shared_task")


def explicit_name(decorator: ast.expr) -> str | None:
    """The ``name=`` a task decorator gives (None: none, so Celery makes one up)."""
    if not isinstance(decorator, ast.Call):
        return None
    for keyword in decorator.keywords:
        if keyword.arg == "name" and isinstance(keyword.value, ast.Constant):
            return keyword.value.value
    return None


def task_decorators(path: Path):
    """(function name, line, explicit name or None) of each task decorator in ``path``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for decorator in node.decorator_list:
                if is_task_decorator(decorator):
                    yield node.name, decorator.lineno, explicit_name(decorator)


def product_sources() -> list[Path]:
    """The Python files of the portal's own apps (every local app in INSTALLED_APPS)."""
    packages = {ROOT / "portal"}  # the project package: settings, the Celery app
    for label in settings.INSTALLED_APPS:
        top = ROOT / label.split(".")[0]
        if top.is_dir():
            packages.add(top)
    assert {p.name for p in packages} >= {"jobs", "portal", "proxy", "frontend", "identity"}
    return sorted(
        path
        for package in packages
        for path in package.rglob("*.py")
        if "migrations" not in path.parts
    )


def test_every_task_decorator_in_the_product_names_its_task():
    """Including tasks in modules nothing imports yet: each decorator says name=."""
    unnamed = [
        f"{path.relative_to(ROOT)}:{line} {function}"
        for path in product_sources()
        for function, line, name in task_decorators(path)
        if not name
    ]
    assert not unnamed, "task decorators without an explicit name=: " + ", ".join(unnamed)


def test_every_registered_task_was_declared_with_its_name():
    """Each task the registry holds comes from a decorator that gives that very name."""
    problems = []
    for name, task in sorted(portal_tasks().items()):
        function = inspect.unwrap(task.run)
        path = Path(inspect.getsourcefile(function)).resolve()
        if ROOT not in path.parents:
            problems.append(f"{name}: defined outside the portal ({path})")
            continue
        declared = [
            explicit
            for found, _line, explicit in task_decorators(path)
            if found == function.__name__
        ]
        if declared != [name]:
            problems.append(f"{name}: {path.relative_to(ROOT)} declares {declared}")
    assert not problems, "\n".join(problems)


def test_beat_entries_name_registered_tasks():
    tasks = portal_tasks()
    unknown = {
        entry: spec["task"]
        for entry, spec in settings.CELERY_BEAT_SCHEDULE.items()
        if spec["task"] not in tasks
    }
    assert not unknown, f"beat entries naming no registered task: {unknown}"


def routes() -> list[str]:
    configured = settings.CELERY_TASK_ROUTES
    entries = configured if isinstance(configured, list | tuple) else [configured]
    patterns = []
    for entry in entries:
        assert isinstance(entry, dict), f"route {entry!r}: only mappings are checked here"
        patterns.extend(entry)
    return patterns


@pytest.mark.parametrize("pattern", routes())
def test_routes_name_registered_tasks(pattern):
    """A route is a name or a glob (Celery's own matching); each matches a task."""
    tasks = portal_tasks()
    assert isinstance(pattern, str), f"route {pattern!r}: only names and globs are checked"
    assert fnmatch.filter(tasks, pattern), f"route {pattern!r} matches no registered task"
