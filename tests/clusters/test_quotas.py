"""Storage use from the site's Open OnDemand quota files, parsed as data."""

import json

from clusters import quotas


def document(*entries):
    return json.dumps({"version": 1, "timestamp": 1596732082.0, "quotas": list(entries)})


def test_user_and_fileset_entries_and_entries_that_are_not_one():
    text = (
        "#file\n"
        + document(
            {
                "user": "hpcuser",
                "path": "/home/hpcuser",
                "total_block_usage": 1048576,
                "block_limit": 2097152,
                "total_file_usage": 5,
                "file_limit": 10,
            },
            {
                "type": "fileset",
                "user": "hpcuser2",
                "path": "/projects/vision",
                "block_usage": 500,
                "total_block_usage": 1000,
                "block_limit": 2000,
                "file_usage": 1,
                "total_file_usage": 5,
                "file_limit": 10,
            },
            {"user": "Robert'); --", "path": "/x", "total_block_usage": 1, "block_limit": 2},
            {"user": "eve", "path": "/x", "total_block_usage": -1, "block_limit": 2},
            {"user": "eve", "path": "/x", "total_block_usage": True, "block_limit": 2},
            {"user": "eve", "path": "/x", "total_block_usage": "1", "block_limit": 2},
            {
                "user": "eve",
                "path": "/x",
                "type": "group",
                "total_block_usage": 1,
                "block_limit": 2,
            },
            "not an object",
        )
        + "\n#file\n{not json\n#file\n"
        + "[" * 100_000
        + "\n#file\n\n"
    )
    found = quotas.parse(text)
    assert [(q.user, q.kind) for q in found] == [("hpcuser", "user"), ("hpcuser2", "fileset")]
    home, shared = found
    assert home.used_percent == 50 and home.files == 5
    assert (shared.used_kib, shared.total_kib, shared.files) == (500, 1000, 1)
