"""files.log_slice: which bytes of a log a tail or a follower gets (pure; the SFTP
reads around it are exercised on the dev cluster)."""

from clusters.files import log_slice, whole_utf8


def test_whole_file_read_from_the_start():
    got = log_slice(b"a\nb\n", 0, 4, whole_lines=True)
    assert (got.text, got.start, got.end, got.truncated) == ("a\nb\n", 0, 4, False)


def test_tail_drops_its_partial_first_line():
    data = b"ne one\nline two\n"
    got = log_slice(data, 100, 100 + len(data), whole_lines=True)
    assert got.text == "line two\n" and got.truncated
    assert got.start == 107 and got.end == 100 + len(data)


def test_follower_stops_at_its_last_whole_line_when_more_remains():
    got = log_slice(b"one\ntwo\nthr", 10, 1000, whole_lines=False)
    assert got.text == "one\ntwo\n" and got.end == 18 and got.truncated
    again = log_slice(b"thr", 18, 21, whole_lines=False)  # at the end: a partial line is shown
    assert again.text == "thr" and again.end == 21 and not again.truncated


def test_no_character_is_split_across_reads():
    euro = "€".encode()  # 3 bytes
    data = b"x" + euro[:2]
    got = log_slice(data, 0, 3, whole_lines=False)
    assert got.text == "x" and got.end == 1
    rest = log_slice(euro, got.end, 4, whole_lines=False)
    assert rest.text == "€" and rest.end == 4


def test_whole_utf8():
    assert whole_utf8(b"") == b""
    assert whole_utf8(b"abc") == b"abc"
    assert whole_utf8("é".encode()) == "é".encode()
    assert whole_utf8("é".encode()[:1]) == b""
    assert whole_utf8(b"a" + "𝄞".encode()[:3]) == b"a"
    assert whole_utf8(b"a" + "𝄞".encode()) == b"a" + "𝄞".encode()
