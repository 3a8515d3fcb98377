# A session app started by its command (VS Code, or an app a centre added in the admin:
# catalog.models.SessionApp): the words of its command are quoted here one by one, and the
# person's values are single-quoted words and PORTAL_APP_* variables, so no shell line is
# ever built from what they typed. The app has no credential the portal can give it, so
# it listens where only this job's user can reach it (a Unix socket in the job's private
# work directory, mode 600 where the app sets it; or a port on the node's loopback), and
# session_guard.py listens on the session's port in front of it: a connection gets
# through only with this session's secret, which the portal's proxy adds to every
# request. The guard starts the app, listens only once it answers its readiness path (so
# the registration below means ready), keeps the secret out of its environment, and ends
# with it. No subpath: the session has an origin of its own.
${session_start}_portal_root=${root}
_portal_folder=${folder}
mkdir -p -- "$$_portal_folder"
${launch} sh -c 'command -v "$$1" >/dev/null' sh ${program} \
    || { echo "portal: this image has no "${program}" command" >&2; exit 1; }
${helpers}cat > session_guard.py <<'PORTAL_SESSION_GUARD'
${guard_script}PORTAL_SESSION_GUARD
# A Unix socket's path has at most 107 bytes: in the work directory when it fits, else in
# a private directory of /tmp (which Apptainer binds into the container too).
_portal_socket="$$PORTAL_WORK_DIR/app.sock"
if [ $${#_portal_socket} -gt 100 ]; then
    _portal_socket="$$(mktemp -d "$${TMPDIR:-/tmp}/portal-app.XXXXXX")/app.sock"
fi
rm -f -- "$$_portal_socket"
_portal_app_port=$$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
${environment}python3 session_guard.py --port "$$_portal_port" --upstream ${upstream} \
    --ready-path ${ready_path} --ready-status ${ready_status} -- ${launch} ${command} &
_portal_child=$$!
${register}wait "$$_portal_child"
exit $$?
