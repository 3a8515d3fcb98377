"""Run schemathesis's CLI with `ast.parse` serialised across threads.

CPython 3.11 keeps the AST constructor's recursion counter in interpreter-wide state
(python/cpython#106905). With `--workers 2`, hypothesis describes a filter's lambda by
parsing its source in both worker threads at once; the counters interleave and one parse
fails with "SystemError: AST constructor recursion depth mismatch" (seen in CI, stop 51).
A lock around the parse is all the workaround needs; the requests still go out from two
workers.
"""

import ast
import sys
import threading

_lock = threading.Lock()
_parse = ast.parse


def _serial_parse(*args, **kwargs):  # type: ignore[no-untyped-def]
    with _lock:
        return _parse(*args, **kwargs)


ast.parse = _serial_parse

if __name__ == "__main__":
    from schemathesis.cli import schemathesis

    sys.argv[0] = "st"
    sys.exit(schemathesis())
