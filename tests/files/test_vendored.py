"""The vendored tus client is the pinned release, unedited (frontend/static/vendor/)."""

import hashlib
from pathlib import Path

VENDOR = Path(__file__).resolve().parents[2] / "frontend" / "static" / "vendor" / "tus-js-client"
# tus-js-client 4.3.1 from the npm registry (npm pack tus-js-client@4.3.1), dist/tus.min.js.
PINNED = "8cbb1b63fccc3bba0ae73ad1deb160ce046c3750851d0c3e94921ae3ef070eb8"


def test_the_tus_client_is_the_pinned_release_with_its_licence():
    assert hashlib.sha256((VENDOR / "tus.min.js").read_bytes()).hexdigest() == PINNED
    assert "MIT License" in (VENDOR / "LICENSE").read_text()
