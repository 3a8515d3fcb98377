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
# Who listens on a port (the registration and the session guard refuse another user's).
cat > port_owner.py <<'PORTAL_PORT_OWNER'
${port_owner}PORTAL_PORT_OWNER
# A session with GPUs: the metrics client samples the node (CPU, memory, the job's GPUs
# through nvidia-smi) beside the app, so the portal can tell its owner when the GPUs sit
# idle; code run in the session logs only what it logs itself (no second sampler).
if [ -n "$${CUDA_VISIBLE_DEVICES:-}" ]; then
    python3 "$$PORTAL_WORK_DIR/lib/portal_metrics.py" --system >/dev/null 2>&1 &
fi
export PORTAL_SYSTEM_METRICS_INTERVAL=0

