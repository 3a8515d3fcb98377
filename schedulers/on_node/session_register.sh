# The moment the app listens: write connection.json (private; the portal's
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
import port_owner  # (written beside it by session_start.sh)

held = port_owner.others(port)
if held:
    # Another user's process took the port first: never register their server.
    print(f"portal: port {port} on this node is held by another user (uid {sorted(held)}): "
          "the session is not opened", file=sys.stderr)
    sys.exit(1)
info = {"node": socket.gethostname(), "port": port, "secret": os.environ["PORTAL_SESSION_TOKEN"]}
if os.environ.get("SLURM_JOB_ID"):
    # Which run wrote it: a requeued job's new run starts while the last run's file is
    # still here, and the portal must not route to that run's port (it reads this file).
    info["attempt"] = int(os.environ.get("SLURM_RESTART_COUNT") or 0)
with open("connection.json.tmp", "w") as fh:
    json.dump(info, fh)
os.replace("connection.json.tmp", "connection.json")
url = os.environ.get("PORTAL_REGISTER_URL", "")
if not url or not os.path.exists(".portal_secret"):
    sys.exit(0)
with open(".portal_secret") as fh:
    secret = fh.read().strip()
body = json.dumps({"port": port, "token": os.environ["PORTAL_SESSION_TOKEN"]}).encode()
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
