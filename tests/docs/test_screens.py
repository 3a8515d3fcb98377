"""The docs' screenshots come from the browser tests (devtools/docs_screens.py): each one
a page shows is taken by an e2e test under that name and kept in docs/screens/, and
nothing is kept there that no page shows."""

from __future__ import annotations

from devtools import docs_screens


def test_every_screenshot_the_docs_show_is_taken_by_a_browser_test_and_kept():
    used, takers = docs_screens.used(), docs_screens.takers()
    assert len(used) >= 8  # the Start tutorials show their steps
    assert sorted(set(used) - set(takers)) == []
    kept = {path.stem for path in docs_screens.SCREENS.glob("*.png")}
    assert sorted(set(used) - kept) == []
    assert sorted(kept - set(used)) == []
    assert not [name for name in used if name.endswith("-failed")]  # a failure's picture
