"""TensorBoard for one portal session: `python serve_tensorboard.py LOGDIR PORT`.

TensorBoard's own server, with every request checked for `Authorization: token
<secret>` (the secret in PORTAL_SESSION_TOKEN, added by the portal's proxy): without
it, 403 and nothing of the user's runs. Runs in the image's Python, next to TensorBoard.
"""

import hmac
import os
import sys

from tensorboard import program

EXPECTED = ("token " + os.environ.pop("PORTAL_SESSION_TOKEN")).encode()
REFUSED = b"This TensorBoard belongs to a portal session; open it from the portal.\n"


def guard(app):
    def checked(environ, start_response):
        given = environ.get("HTTP_AUTHORIZATION", "").encode("latin-1")
        if not hmac.compare_digest(given, EXPECTED):
            start_response(
                "403 Forbidden",
                [("Content-Type", "text/plain"), ("Content-Length", str(len(REFUSED)))],
            )
            return [REFUSED]
        return app(environ, start_response)

    return checked


class GuardedServer(program.WerkzeugServer):
    def __init__(self, wsgi_app, flags):
        super().__init__(guard(wsgi_app), flags)


if __name__ == "__main__":
    logdir, port = sys.argv[1], sys.argv[2]
    board = program.TensorBoard(server_class=GuardedServer)
    board.configure(
        argv=[None, "--logdir", logdir, "--host", "0.0.0.0", "--port", port, "--load_fast", "false"]
    )
    sys.exit(board.main())
