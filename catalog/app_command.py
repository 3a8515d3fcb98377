"""Session apps' commands and form fields, read as hostile input (catalog.models.SessionApp).

An app's **command** is words, never a shell line: ``streamlit run {script} --server.port
{port}``. It is split once, as POSIX shell words (quotes group, nothing is expanded), and
each word may hold placeholders: the portal's variables (``{port}`` or ``{socket}``: where
the app must listen, ``{folder}``: the folder the person chose, ``{work_dir}``: the job's
work directory, ``{home}``: their home or scratch root) and the app's own fields
(``{epochs}``). ``{{`` and ``}}`` are braces. The job script renders every word as one
quoted shell word, the variables as shell variables in double quotes and the values as
single-quoted text, so a value is one literal argument whatever it holds (``$(id)``,
``;``, a newline), and is also in the environment as ``PORTAL_APP_<NAME>``.

An app's **fields** are a JSON list of ``{"name", "label", "type", …}``: ``text``
(``max_length``), ``integer`` and ``number`` (``min``, ``max``), ``choice``
(``choices``), ``boolean``; each with an optional ``default`` and ``help``. Values are
checked against their field before a job is made (``clean_values``).

Pure: no model, no Django.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# Bounds of what an admin writes and a person sends.
COMMAND_MAX_CHARS = 4000
COMMAND_MAX_WORDS = 64
FIELDS_MAX = 20
TEXT_MAX = 1000
CHOICES_MAX = 50
LABEL_MAX = 80
HELP_MAX = 300
NUMBER_MAX = 1e15

# The portal's variables, and how the job script spells each (shell, in double quotes).
VARIABLES = {
    "port": '"$_portal_app_port"',
    "socket": '"$_portal_socket"',
    "folder": '"$_portal_folder"',
    "work_dir": '"$PORTAL_WORK_DIR"',
    "home": '"$_portal_root"',
}
LISTEN = ("port", "socket")
FIELD_TYPES = ("text", "integer", "number", "choice", "boolean")
NAME = re.compile(r"[a-z][a-z0-9_]{0,31}\Z")
PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
READY_STATUS = re.compile(
    r"[1-5][0-9][0-9](-[1-5][0-9][0-9])?(,[1-5][0-9][0-9](-[1-5][0-9][0-9])?){0,9}\Z"
)
HTTP_PATH = re.compile(r"/[A-Za-z0-9._~!$&'()*+,;=:@%/?-]{0,199}\Z")


class AppError(ValueError):
    """What is wrong with a command, a field or a value, in words for the person."""


@dataclass(frozen=True)
class Field:
    name: str
    label: str
    type: str
    default: object = None
    help: str = ""
    min: float | None = None
    max: float | None = None
    max_length: int = 200
    choices: tuple[str, ...] = ()

    @property
    def env(self) -> str:
        return "PORTAL_APP_" + self.name.upper()

    def as_dict(self) -> dict:
        """What the launch form's script and the API show of it."""
        found: dict = {"name": self.name, "label": self.label, "type": self.type}
        for key in ("default", "help", "min", "max", "choices"):
            value = getattr(self, key)
            if value not in (None, "", ()):
                found[key] = list(value) if key == "choices" else value
        if self.type == "text":
            found["max_length"] = self.max_length
        return found


def _one_line(value: object, what: str, limit: int) -> str:
    if not isinstance(value, str) or not value.isprintable() or len(value) > limit:
        raise AppError(f"{what} is one line of at most {limit} printable characters.")
    return value


def _number(value: object, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise AppError(f"{what} is a number.")
    if not math.isfinite(value) or abs(value) > NUMBER_MAX:
        raise AppError(f"{what} is a number between -{NUMBER_MAX:g} and {NUMBER_MAX:g}.")
    return value


def parse_fields(data: object) -> list[Field]:
    """The fields an admin declared (the JSON list), checked; AppError says what is wrong."""
    if data in (None, ""):
        return []
    if not isinstance(data, list) or len(data) > FIELDS_MAX:
        raise AppError(f"Fields are a list of at most {FIELDS_MAX} objects.")
    fields: list[Field] = []
    for n, item in enumerate(data, 1):
        if not isinstance(item, dict):
            raise AppError(f"Field {n} is not an object.")
        unknown = set(item) - {
            "name", "label", "type", "default", "help", "min", "max", "max_length", "choices"
        }  # fmt: skip
        if unknown:
            raise AppError(f"Field {n} has no key {sorted(unknown)[0]!r}.")
        name = item.get("name")
        if not isinstance(name, str) or not NAME.match(name) or name in VARIABLES:
            raise AppError(
                f"Field {n}'s name is a lower-case identifier of at most 32 characters "
                f"(not one of {', '.join(VARIABLES)})."
            )
        if any(f.name == name for f in fields):
            raise AppError(f"Two fields are named {name!r}.")
        kind = item.get("type", "text")
        if kind not in FIELD_TYPES:
            raise AppError(f"Field {name}'s type is one of {', '.join(FIELD_TYPES)}.")
        label = _one_line(item.get("label", name), f"Field {name}'s label", LABEL_MAX)
        help_text = _one_line(item.get("help", ""), f"Field {name}'s help", HELP_MAX)
        low = _number(item.get("min"), f"Field {name}'s min")
        high = _number(item.get("max"), f"Field {name}'s max")
        if low is not None and high is not None and low > high:
            raise AppError(f"Field {name}'s min is above its max.")
        max_length = item.get("max_length", 200)
        if (
            isinstance(max_length, bool)
            or not isinstance(max_length, int)
            or not (1 <= max_length <= TEXT_MAX)
        ):
            raise AppError(f"Field {name}'s max_length is 1 to {TEXT_MAX}.")
        choices: tuple[str, ...] = ()
        if kind == "choice":
            raw = item.get("choices")
            if not isinstance(raw, list) or not 1 <= len(raw) <= CHOICES_MAX:
                raise AppError(f"Field {name} lists 1 to {CHOICES_MAX} choices.")
            choices = tuple(_one_line(c, f"A choice of {name}", 200) for c in raw)
        field = Field(name, label, kind, None, help_text, low, high, max_length, choices)
        default = item.get("default")
        if default is not None:
            try:
                clean_value(field, default)
            except AppError as exc:
                raise AppError(f"Field {name}'s default: {exc}") from None
        fields.append(Field(name, label, kind, default, help_text, low, high, max_length, choices))
    return fields


def clean_value(field: Field, value: object) -> str:
    """``value`` for ``field`` as the text the app is given; AppError when it does not fit."""
    what = field.label
    if field.type == "text":
        if not isinstance(value, str):
            raise AppError(f"{what} is text.")
        # Any text, newlines and tabs included, but no other control character (NUL
        # cannot be passed to a program at all).
        if any(not (c.isprintable() or c in "\n\t") for c in value):
            raise AppError(f"{what} holds a control character.")
        if len(value) > field.max_length:
            raise AppError(f"{what} is at most {field.max_length} characters.")
        return value
    if field.type == "boolean":
        if isinstance(value, bool):
            return "true" if value else "false"
        if value in ("true", "false", "on", ""):
            return "true" if value in ("true", "on") else "false"
        raise AppError(f"{what} is true or false.")
    if field.type == "choice":
        if value not in field.choices:
            raise AppError(f"{what} is one of {', '.join(field.choices)}.")
        return str(value)
    # integer or number, from JSON or from a form's text
    if isinstance(value, str):
        text = value.strip()
        if not re.fullmatch(r"-?[0-9]{1,16}(\.[0-9]{1,16})?([eE][-+]?[0-9]{1,3})?", text):
            raise AppError(f"{what} is a number.")
        value = (
            float(text)
            if field.type == "number" or "." in text or "e" in text.lower()
            else int(text)
        )
    number = _number(value, what)
    assert number is not None
    if field.type == "integer":
        if isinstance(number, float):
            if not number.is_integer():
                raise AppError(f"{what} is a whole number.")
            number = int(number)
    if field.min is not None and number < field.min:
        raise AppError(f"{what} is at least {field.min:g}.")
    if field.max is not None and number > field.max:
        raise AppError(f"{what} is at most {field.max:g}.")
    return str(int(number)) if field.type == "integer" else repr(float(number))


def clean_values(fields: Sequence[Field], raw: Mapping[str, object] | None) -> dict[str, str]:
    """Every field's value (sent, else its default; a field without either is an error),
    checked; a name that is no field is an error too. Raises AppError naming the first."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping) or len(raw) > FIELDS_MAX:
        raise AppError("The app's values are an object of its fields.")
    names = {f.name for f in fields}
    for key in raw:
        if key not in names:
            raise AppError(f"This app has no field {str(key)[:40]!r}.")
    values: dict[str, str] = {}
    for field in fields:
        value = raw.get(field.name, field.default)
        if value is None:
            if field.type == "boolean":
                value = False
            else:
                raise AppError(f"{field.label}: a value is needed.")
        values[field.name] = clean_value(field, value)
    return values


def split_command(command: str, field_names: Sequence[str] = ()) -> list[list[tuple[str, str]]]:
    """``command`` as words, each a list of (literal text, "") and ("", placeholder) parts;
    AppError when it is not words an app can start with."""
    if not isinstance(command, str) or not command.strip():
        raise AppError("The command is empty.")
    if len(command) > COMMAND_MAX_CHARS:
        raise AppError(f"The command is at most {COMMAND_MAX_CHARS} characters.")
    if any(not (c.isprintable() or c in "\n\t") for c in command):
        raise AppError("The command holds a control character.")
    try:
        words = shlex.split(command, posix=True)
    except ValueError as exc:
        raise AppError(f"The command's quotes do not close ({exc}).") from None
    if len(words) > COMMAND_MAX_WORDS:
        raise AppError(f"The command is at most {COMMAND_MAX_WORDS} words.")
    known = set(VARIABLES) | set(field_names)
    parsed: list[list[tuple[str, str]]] = []
    for word in words:
        parts: list[tuple[str, str]] = []
        at = 0
        for match in PLACEHOLDER.finditer(word):
            if match.start() > at:
                parts.append((word[at : match.start()], ""))
            token = match.group(0)
            if token in ("{{", "}}"):
                parts.append((token[0], ""))
            elif match.group(1) is None:
                raise AppError(f"A lone brace in {word[:60]!r}: write {{{{ or }}}}.")
            elif match.group(1) not in known:
                raise AppError(
                    f"The command names {{{match.group(1)[:40]}}}, which is neither one of "
                    f"the portal's variables ({', '.join(VARIABLES)}) nor a field."
                )
            else:
                parts.append(("", match.group(1)))
            at = match.end()
        if at < len(word):
            parts.append((word[at:], ""))
        parsed.append(parts or [("", "")])
    if any(name for _, name in parsed[0]):
        raise AppError("The command's first word is the program: no placeholder in it.")
    used = {name for word in parsed for _, name in word if name}
    listens = [v for v in LISTEN if v in used]
    if len(listens) != 1:
        raise AppError(
            "The command says where the app listens with exactly one of {port} (a port on "
            "the node's loopback) or {socket} (a Unix socket only its user can open)."
        )
    return parsed


def listening(parsed: list[list[tuple[str, str]]]) -> str:
    """Where a checked command (split_command) listens: "port" or "socket"."""
    return "socket" if any(name == "socket" for word in parsed for _, name in word) else "port"


def render(parsed: list[list[tuple[str, str]]], values: Mapping[str, str]) -> str:
    """A checked command (split_command) as one shell line of quoted words: literal text
    and values single-quoted, the portal's variables as double-quoted shell variables."""
    rendered = []
    for word in parsed:
        pieces = []
        for text, name in word:
            if name in VARIABLES:
                pieces.append(VARIABLES[name])
            elif name:
                pieces.append(shlex.quote(values[name]))
            elif text:
                pieces.append(shlex.quote(text))
        rendered.append("".join(pieces) or "''")
    return " ".join(rendered)


def environment(fields: Sequence[Field], values: Mapping[str, str]) -> str:
    """``export PORTAL_APP_<NAME>=<quoted value>`` lines, one per field."""
    return "".join(f"export {f.env}={shlex.quote(values[f.name])}\n" for f in fields)


def check_ready(path: str, status: str) -> None:
    if not HTTP_PATH.match(path or ""):
        raise AppError("The readiness path starts with / (at most 200 URL characters).")
    if not READY_STATUS.match(status or ""):
        raise AppError("The ready statuses are like 200, 200-399 or 200,302.")
