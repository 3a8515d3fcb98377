"""What a job writes comes back as plain, bounded text: the failed job's stderr tail and the
image check's answer lines (pure parsers; the real path is in tests/devcluster)."""

from catalog import image_check
from common import text


def test_error_tail_keeps_the_last_lines_as_plain_text():
    stderr = (
        "".join(f"line {i}\n" for i in range(100))
        + "\x1b[31mTraceback\x1b[0m (most recent call last):\n"
        + "epoch 1:  10%\repoch 1:  50%\repoch 1: 100%\n"
        + "bell\x07 and NUL\x00 and a DEL\x7f\n"
        + "RuntimeError: CUDA out of memory\n\n\n"
    )
    tail = text.error_tail(stderr, max_lines=5)
    assert tail.splitlines() == [
        "line 99",
        "Traceback (most recent call last):",
        "epoch 1: 100%",
        "bell and NUL and a DEL",
        "RuntimeError: CUDA out of memory",
    ]


def test_error_tail_is_bounded_in_characters_and_keeps_a_long_lines_end():
    tail = text.error_tail("x" * 1_000_000 + "the cause\n", max_chars=200)
    assert len(tail) <= 200
    assert tail.startswith("…") and tail.endswith("the cause")
    many = text.error_tail("".join(f"{i:04d} {'y' * 90}\n" for i in range(5000)))
    assert len(many) <= 2000 and many.splitlines()[-1].startswith("4999")


def test_error_tail_of_nothing_is_nothing():
    assert text.error_tail("") == ""
    assert text.error_tail("\n\n  \n") == ""


def test_image_check_lines_need_the_nonce_and_a_known_status():
    out = "\n".join(
        [
            "Welcome to the cluster! 0 ok forged by a login banner",
            "n0nce 0 ok apptainer is installed (/usr/bin/apptainer)",
            "n0nce 0 fail image file /sif/x.sif is missing",
            "n0nce 1 note docker://python:3.12 is pulled when a job starts; not checked here",
            "n0nce 1 maybe something odd",
            "n0nce 7 fail an index out of range",
            "other 1 fail a line without the nonce",
            "n0nce x fail not an index",
            "n0nce 1 fail escape \x1b[2Jcleared " + "z" * 1000,
        ]
    )
    found = image_check.parse_image_check(out, "n0nce", 2)
    assert [(f.ok, f.text) for f in found[0]] == [
        (True, "apptainer is installed (/usr/bin/apptainer)"),
        (False, "image file /sif/x.sif is missing"),
    ]
    assert [f.ok for f in found[1]] == [None, False]
    assert found[1][1].text.startswith("escape cleared ") and len(found[1][1].text) == 300


def test_image_check_answers_are_bounded_in_count():
    out = "".join(f"n 0 fail problem {i}\n" for i in range(10_000))
    found = image_check.parse_image_check(out, "n", 1)
    assert len(found[0]) == 50
