# Notebook: JupyterLab on a port chosen free on this node, with a secret made
# here. The secret reaches Jupyter through the environment and the portal
# through a private file or the registration call, never a command line.
# A requeued job runs this again: the last run's connection file points at a dead port.
rm -f connection.json connection.json.tmp
_portal_port=$$(python3 -c 'import socket; s=socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])') \
    || { echo "portal: python3 is needed on the node to pick a free port" >&2; exit 1; }
_portal_secret=$$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')
export JUPYTER_PORT=$$_portal_port JUPYTER_TOKEN=$$_portal_secret
export PORTAL_REGISTER_URL=${register_url}
# JupyterLab opens in the user's home (or scratch), or the folder they chose in it: what
# they save there is there in the next session; this job's own files stay in the hidden
# .portal directory.
mkdir -p -- ${notebook_root}
# No "Would you like to get notified about official Jupyter news?" on every session, and no
# calls to the internet for news or updates: JupyterLab's own settings say "never" by
# default, through a default_setting_overrides.json of this job's own. JUPYTER_CONFIG_PATH
# adds it in front of the user's ~/.jupyter and the image's settings and hides neither;
# what the user chose in Settings > Notifications still wins.
mkdir -p jupyter-config/labconfig
echo '{"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": false}}' \
    > jupyter-config/labconfig/default_setting_overrides.json
export JUPYTER_CONFIG_PATH="$$PORTAL_WORK_DIR/jupyter-config$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}"
${launch} jupyter lab --no-browser --ip=0.0.0.0 --ServerApp.root_dir=${notebook_root} &
_portal_child=$$!
# The moment Jupyter listens: write connection.json (private; the portal's
# workers read it over SFTP when the portal cannot be reached from here) and
# tell the portal directly.
python3 - "$$_portal_port" <<'PORTAL_REGISTER' &
import json, os, socket, sys, time, urllib.error, urllib.request

port = int(sys.argv[1])
deadline = time.time() + 900
while time.time() < deadline:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        break
    except OSError:
        time.sleep(0.1)
else:
    sys.exit(0)
info = {"node": socket.gethostname(), "port": port, "secret": os.environ["JUPYTER_TOKEN"]}
with open("connection.json.tmp", "w") as fh:
    json.dump(info, fh)
os.replace("connection.json.tmp", "connection.json")
url = os.environ.get("PORTAL_REGISTER_URL", "")
if not url or not os.path.exists(".portal_secret"):
    sys.exit(0)
with open(".portal_secret") as fh:
    secret = fh.read().strip()
body = json.dumps({"port": port, "token": os.environ["JUPYTER_TOKEN"]}).encode()
request = urllib.request.Request(
    url, data=body, method="POST",
    headers={"Content-Type": "application/json", "Authorization": "Bearer " + secret},
)
# 409 until the portal sees the job running here (it asks the scheduler at once);
# anything else is retried a few times, then the portal reads connection.json itself.
for attempt in range(30):
    try:
        urllib.request.urlopen(request, timeout=5).close()
        print("portal: session registered")
        break
    except urllib.error.HTTPError as exc:
        if exc.code == 409 and b"already registered" in exc.read():
            break
        if exc.code != 409 or attempt == 29:
            print(f"portal: registering the session failed: {exc}", file=sys.stderr)
            if exc.code in (403, 410):
                break
        time.sleep(2)
    except Exception as exc:
        print(f"portal: registering the session failed: {exc}", file=sys.stderr)
        time.sleep(1 + min(attempt, 4))
PORTAL_REGISTER
wait "$$_portal_child"
exit $$?
