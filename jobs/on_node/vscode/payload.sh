# VS Code: code-server, opened on the folder chosen. code-server's only credential is a password
# typed into its own page, which the portal cannot give it; so it runs with --auth none
# on a Unix socket that only this job's user can open (mode 600), and session_guard.py
# listens on the session's port in front of it: a connection gets through only with this
# session's secret, which the portal's proxy adds to every request. The guard starts
# code-server, listens only once it answers /healthz (so the registration below means
# ready), hides the secret from it (its terminals), and ends with it.
# No subpath: the session has an origin of its own. Extensions and settings stay in the
# person's home (~/.local/share/code-server), so the next session has them.
${session_start}mkdir -p -- ${folder}
_portal_cs=$$(${launch} sh -c 'command -v code-server') \
    || { echo "portal: this image has no code-server command" >&2; exit 1; }
cat > session_guard.py <<'PORTAL_SESSION_GUARD'
${guard_script}PORTAL_SESSION_GUARD
# A Unix socket's path has at most 107 bytes: in the work directory when it fits, else in
# a private directory of /tmp (which Apptainer binds into the container too).
_portal_socket="$$PORTAL_WORK_DIR/code-server.sock"
if [ $${#_portal_socket} -gt 100 ]; then
    _portal_socket="$$(mktemp -d "$${TMPDIR:-/tmp}/portal-vscode.XXXXXX")/code-server.sock"
fi
rm -f -- "$$_portal_socket"
# A config of its own, empty: the person's ~/.config/code-server/config.yaml may set a
# password, a certificate or an address, none of which works behind the guard.
: > code-server.yaml
python3 session_guard.py --port "$$_portal_port" --upstream "unix:$$_portal_socket" \
    --ready-path /healthz -- ${launch} "$$_portal_cs" --config "$$PORTAL_WORK_DIR/code-server.yaml" \
    --auth none --socket "$$_portal_socket" --socket-mode 600 --disable-telemetry \
    --disable-update-check --disable-getting-started-override --ignore-last-opened ${folder} &
_portal_child=$$!
${register}wait "$$_portal_child"
exit $$?
