# Notebook: JupyterLab on a port chosen free on this node, with a secret made
# here and written only to a file readable by the user (never on a command line).
_portal_port=$$(python3 -c 'import socket; s=socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])') \
    || { echo "portal: python3 is needed on the node to pick a free port" >&2; exit 1; }
_portal_secret=$$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')
export JUPYTER_PORT=$$_portal_port JUPYTER_TOKEN=$$_portal_secret
printf '{"node": "%s", "port": %s, "secret": "%s"}\n' "$$(hostname)" "$$_portal_port" "$$_portal_secret" > connection.json.tmp
mv connection.json.tmp connection.json
${launch} jupyter lab --no-browser --ip=0.0.0.0 --ServerApp.root_dir="$$PORTAL_WORK_DIR" &
_portal_child=$$!
wait "$$_portal_child"
exit $$?
