# A session's app listens on a port chosen free on this node, with a secret made here.
# The secret reaches the app through the environment and the portal through a private
# file or the registration call, never a command line. A requeued job runs this again:
# the last run's connection file points at a dead port.
rm -f connection.json connection.json.tmp
_portal_port=$$(python3 -c 'import socket; s=socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])') \
    || { echo "portal: python3 is needed on the node to pick a free port" >&2; exit 1; }
_portal_secret=$$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')
export PORTAL_SESSION_PORT=$$_portal_port PORTAL_SESSION_TOKEN=$$_portal_secret
export PORTAL_REGISTER_URL=${register_url}
