"""Slurm's compressed host lists, as the scheduler writes them, to one name each."""

import pytest

from common.hostlist import MAX_NAMES, expand_hostlist


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("", []),
        ("vm", ["vm"]),
        ("node[1-2]", ["node1", "node2"]),
        ("node[1-2,7],gpu07", ["node1", "node2", "node7", "gpu07"]),
        ("gpu-a[01-03]", ["gpu-a01", "gpu-a02", "gpu-a03"]),
        ("rack[1-2]-n[1-2]", ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
        ("node[3-1]", ["node[3-1]"]),  # not a range: kept as written
        ("node[a-b]", ["node[a-b]"]),
        ("node[1-2", ["node[1-2"]),
        ("None assigned", ["None assigned"]),
    ],
)
def test_host_lists_expand_to_names(text, names):
    assert expand_hostlist(text) == names


def test_a_huge_range_is_cut_at_the_bound():
    assert len(expand_hostlist("n[0-99999999]")) == MAX_NAMES
