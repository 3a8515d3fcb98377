"""What is on disk, checked before any reader opens a file: a folder's entries by
``lstat`` (never following a link), each a directory or a regular file within the size
bound; a link, FIFO, socket or device, or a file too large, is named as a problem of the
runs holding it (readers skip those runs). More entries or depth than the bounds end the
scan with Unreadable: a folder of a million files costs a bounded walk, not a hung worker."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from tracking.imports.source import Unreadable

MAX_DEPTH = 32
MAX_PROBLEMS = 1000


@dataclass
class Tree:
    root: Path
    files: dict[Path, int] = field(default_factory=dict)  # regular file: size
    dirs: set[Path] = field(default_factory=set)
    problems: dict[Path, str] = field(default_factory=dict)


def _name(path: Path, root: Path) -> str:
    try:
        shown = str(path.relative_to(root.parent))
    except ValueError:
        shown = str(path)
    return shown if len(shown) <= 200 else "…" + shown[-199:]


def scan(root: Path) -> Tree:
    """Every entry under ``root`` (a folder or one file), by lstat."""
    most_files = settings.PORTAL_IMPORT_MAX_FILES
    most_bytes = settings.PORTAL_IMPORT_MAX_FILE_BYTES
    tree = Tree(root)
    info = os.lstat(root)
    if not stat.S_ISDIR(info.st_mode):
        _entry(tree, root, info, most_bytes)
        return tree
    stack: list[tuple[Path, int]] = [(root, 0)]
    count = 0
    while stack:
        folder, depth = stack.pop()
        tree.dirs.add(folder)
        try:
            entries = list(os.scandir(folder))
        except OSError as exc:
            tree.problems[folder] = f"{_name(folder, root)} cannot be read ({exc.strerror})."
            continue
        for entry in entries:
            count += 1
            if count > most_files:
                raise Unreadable(
                    f"{_name(root, root)} holds more than {most_files:,} files and folders; "
                    "import a part of it at a time."
                )
            path = Path(entry.path)
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                if depth + 1 > MAX_DEPTH:
                    tree.problems[path] = f"{_name(path, root)} is nested too deep."
                else:
                    stack.append((path, depth + 1))
            else:
                _entry(tree, path, info, most_bytes)
    if len(tree.problems) > MAX_PROBLEMS:
        raise Unreadable(
            f"{_name(root, root)} holds more than {MAX_PROBLEMS} links, special files or files "
            f"too large; {next(iter(tree.problems.values()))}"
        )
    return tree


def _entry(tree: Tree, path: Path, info: os.stat_result, most_bytes: int) -> None:
    if stat.S_ISLNK(info.st_mode):
        tree.problems[path] = (
            f"{_name(path, tree.root)} is a symbolic link; links are not followed."
        )
    elif not stat.S_ISREG(info.st_mode):
        tree.problems[path] = f"{_name(path, tree.root)} is not a regular file."
    elif info.st_size > most_bytes:
        tree.problems[path] = (
            f"{_name(path, tree.root)} is {info.st_size / 1e9:.1f} GB, more than the "
            f"{most_bytes / 1e9:.2f} GB an imported file may be (PORTAL_IMPORT_MAX_FILE_BYTES)."
        )
    else:
        tree.files[path] = info.st_size


def copy_clean(tree: Tree, folder: Path, dest: Path, refused: set[Path]) -> None:
    """Copy ``folder``'s regular files (as scanned) to ``dest``, leaving out what is under
    a ``refused`` folder: a reader that follows paths opens only what was checked. Each
    file is opened without following a link, and copied up to its scanned size."""

    def kept(path: Path) -> bool:
        if folder not in path.parents:
            return False
        parts = path.relative_to(folder).parts
        return not any(folder.joinpath(*parts[:n]) in refused for n in range(1, len(parts) + 1))

    for path in tree.dirs:  # empty ones too: MLflow checks a run folder's layout
        if kept(path):
            (dest / path.relative_to(folder)).mkdir(parents=True, exist_ok=True)
    for path, size in tree.files.items():
        if kept(path):
            target = dest / path.relative_to(folder)
            target.parent.mkdir(parents=True, exist_ok=True)
            copy_file(path, size, target)


def copy_file(path: Path, size: int, target: Path) -> None:
    """``path``'s first ``size`` bytes (its scanned size) to ``target``; opened without
    following a link or waiting on a FIFO, so what changed since the scan costs nothing."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as src, open(target, "wb") as out:
        left = size
        while left > 0:
            chunk = src.read(min(left, 1024 * 1024))
            if not chunk:
                break
            out.write(chunk)
            left -= len(chunk)
