"""Paths and names as the file manager checks them before anything reaches a cluster."""

import pytest

from common import paths
from common.paths import BadPath
from files import ranges


@pytest.mark.parametrize(
    "rel, parts",
    [("", []), ("a/b/", ["a", "b"]), ("./a//b/.", ["a", "b"]), ("a b/ü", ["a b", "ü"])],
)
def test_a_path_is_its_plain_names(rel, parts):
    assert paths.parts_of(rel) == parts


@pytest.mark.parametrize(
    "rel",
    ["..", "a/../../etc", "/../x", "a/\x00b", "x" * 256, "/".join(["d"] * 10_000), "a/" * 3000],
)
def test_anything_that_could_leave_the_root_or_stall_is_refused(rel):
    with pytest.raises(BadPath):
        paths.parts_of(rel)


@pytest.mark.parametrize(
    "name",
    ["", ".", "..", "a/b", "line\nbreak", "esc\x1b[31m", "tab\there", "x" * 256, "bidi\u202e"],
)
def test_a_new_name_is_one_printable_component(name):
    with pytest.raises(BadPath):
        paths.new_name(name)


def test_good_new_names_pass_trimmed():
    assert paths.new_name("  results 2026-11 (final).csv ") == "results 2026-11 (final).csv"
    assert paths.new_name("données") == "données"


def test_names_from_the_cluster_are_shown_escaped_and_bounded():
    assert paths.shown("a\nb\x1b[2Jc\td") == "a\\nb\\x1b[2Jc\\td"
    assert paths.shown("x" * 300, 10) == "x" * 9 + "…"


# --- ranges, as curl -C - and browsers send them ----------------------------------------


@pytest.mark.parametrize(
    "header, expected",
    [
        (None, None),
        ("bytes=0-", (0, 999)),
        ("bytes=500-", (500, 999)),  # curl -C - after 500 bytes
        ("bytes=0-99", (0, 99)),
        ("bytes=900-5000", (900, 999)),
        ("bytes=-100", (900, 999)),
        ("bytes=-5000", (0, 999)),
        ("bytes=0-1,5-9", None),  # several ranges: the whole file
        ("items=0-5", None),
        ("bytes=9-2", None),  # invalid: ignored
        ("bytes=-", None),
    ],
)
def test_one_byte_range_is_served_others_give_the_whole_file(header, expected):
    assert ranges.byte_range(header, 1000) == expected


@pytest.mark.parametrize("header", ["bytes=1000-", "bytes=5000-6000", "bytes=-0"])
def test_a_range_past_the_end_is_unsatisfiable(header):
    with pytest.raises(ranges.Unsatisfiable):
        ranges.byte_range(header, 1000)


def test_if_range_must_name_this_version():
    tag = ranges.etag(1000, 1700000000.5)
    assert ranges.still_valid(None, tag) and ranges.still_valid(tag, tag)
    assert not ranges.still_valid(ranges.etag(1001, 1700000000.5), tag)


def test_a_zip_member_name_never_reads_as_a_path_elsewhere():
    """Before: a file named ``..\\..\\evil.bat`` on the cluster went into the folder's zip
    as it was, and Windows' unzip wrote it two folders up."""
    from files.zipstream import zip_name

    assert zip_name("sub/..\\..\\evil.bat") == "sub/.._.._evil.bat"
    assert zip_name("C:evil") == "C_evil"
    assert zip_name("plain/name.txt") == "plain/name.txt"
