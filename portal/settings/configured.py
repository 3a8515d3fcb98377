"""Layer 2 of the settings: what an operator sets. Every environment variable the portal
reads, with its default and its meaning, grouped by concern; the comment above each is its
meaning in the docs' settings reference (docs/_ext/portal_reference.py).

Only reading happens here: a value that cannot be used stops the start with its name
(portal/env.py). Checks between values, and everything Django and Celery are given, are
in computed.py. Defaults that differ in demo and debug take the switches of dev.py.
Lower-case names hold a variable that is not a setting of its own: computed.py puts it
where it belongs (DATABASES, CACHES, LOGGING, AUTHENTICATION_BACKENDS ...).
"""

import shutil
from pathlib import Path

from portal import redis_ha
from portal.env import (
    env_bool,
    env_choice,
    env_float,
    env_int,
    env_list,
    env_networks,
    env_secret,
    env_str,
)
from portal.settings import dev
from portal.settings.dev import DEBUG, DEMO_MODE, INSECURE_DEFAULTS_ALLOWED

# Not a variable: the checkout, which the defaults below are relative to.
BASE_DIR = Path(__file__).resolve().parents[2]

# --- The install ---------------------------------------------------------------------
# Private state of this install (SQLite file, TLS keys, demo secrets): readable by the
# portal's user only, never by the dev cluster's users whose jobs run on this machine.
DATA_DIR = Path(env_str("PORTAL_DATA_DIR", str(BASE_DIR / "var")))
dev.make_private(DATA_DIR)  # demo and debug: made, mode 700

# Required unless DEBUG or PORTAL_DEMO (computed.py stops the start without it); there, a
# random key made once per install in DATA_DIR/secret_key.
SECRET_KEY = env_secret("SECRET_KEY") or dev.local_secret_key(DATA_DIR)

# Keys (Fernet, comma-separated, newest first) that encrypt cluster private keys
# at rest. Rotating: put the new key first, keep the old one until re-encrypted.
# Without them, one key from PORTAL_ENCRYPTION_KEY (or its _FILE); in DEBUG or PORTAL_DEMO
# one derived from SECRET_KEY; else computed.py stops the start.
PORTAL_ENCRYPTION_KEYS = env_list("PORTAL_ENCRYPTION_KEYS", [])
if not PORTAL_ENCRYPTION_KEYS:
    _file_key = env_secret("PORTAL_ENCRYPTION_KEY")
    PORTAL_ENCRYPTION_KEYS = [_file_key] if _file_key else dev.derived_encryption_keys(SECRET_KEY)

# --- The web server ------------------------------------------------------------------
# host names the portal answers to
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
# extra origins for CSRF (e.g. `https://portal.example.org`)
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
# Public URL of the portal, used in links handed to jobs and in e-mails.
PORTAL_URL = env_str("PORTAL_URL", "http://localhost:8000").rstrip("/")
# where `collectstatic` puts assets (served by whitenoise)
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "var" / "static")))
# The documentation of this version, built by `make docs` (Sphinx) and served at /docs/.
PORTAL_DOCS_DIR = Path(env_str("PORTAL_DOCS_DIR", str(DATA_DIR / "docs-html")))
TIME_ZONE = env_str("TIME_ZONE", "UTC")
log_level = env_str("LOG_LEVEL", "INFO")
# Log lines: "json" (one object per line, for a log collector), "console" (readable), or
# empty: json in production, console in demo mode. Either way secrets are masked and each
# line carries the request id of what it was written for (ops/logs.py).
PORTAL_LOG_FORMAT = env_choice("PORTAL_LOG_FORMAT", "", ("", "json", "console"))

# --- Database ------------------------------------------------------------------------
# The embedded default is a SQLite file in WAL mode with a busy timeout, so the
# web server and the Celery workers can write at the same time. Set
# DATABASE_URL=postgres://... for PostgreSQL.
DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{DATA_DIR / 'portal.sqlite3'}")
# SQLite: seconds a writer waits for the lock.
sqlite_busy_timeout = env_float("SQLITE_BUSY_TIMEOUT", 20.0, minimum=0)
# PostgreSQL: a pool of at most PORTAL_DB_POOL_MAX connections per process (psycopg_pool,
# Django's OPTIONS["pool"]). Under ASGI each request's view runs in a thread with its own
# connection, opened and closed every time without a pool: 200 jobs uploading metrics at
# once opened ~95 connections from two web processes and exhausted max_connections (100),
# so calls past it failed with 503. With a pool they wait up to PORTAL_DB_POOL_TIMEOUT
# seconds for a connection instead. 0: no pool (a connection per request, as before).
PORTAL_DB_POOL_MAX = env_int("PORTAL_DB_POOL_MAX", 0, minimum=0)
# seconds a request waits for a pooled connection before failing
PORTAL_DB_POOL_TIMEOUT = env_float("PORTAL_DB_POOL_TIMEOUT", 30.0, minimum=1)
# Threads of each web process that run requests (Django's WSGI handler inside the ASGI
# server, portal/serving.py); the views that stream run beside them on the event loop.
PORTAL_WEB_THREADS = env_int("PORTAL_WEB_THREADS", 8, minimum=1)
# How long one web request may wait on clusters in all (seconds; every SSH login, command
# and SFTP call it makes; transfers excepted): clusters/share.py.
PORTAL_WEB_CLUSTER_SECONDS = env_float("PORTAL_WEB_CLUSTER_SECONDS", 60.0, minimum=1)
# how many of one person's requests may wait on clusters at once, across every web
# process; more are answered 429 with `Retry-After` before any SSH
PORTAL_PERSON_CLUSTER_REQUESTS = env_int("PORTAL_PERSON_CLUSTER_REQUESTS", 4, minimum=1)
# How many of a web process's PORTAL_WEB_THREADS one caller (an API token, a browser
# session, an address) takes at once; their other requests wait on the event loop, holding
# no thread (common/callers.py). Default: their cluster places and two more (so that what
# does not wait on a cluster, a 429 past the places included, still goes through), and
# never all the threads.
PORTAL_WEB_CALLER_THREADS = env_int(
    "PORTAL_WEB_CALLER_THREADS",
    max(1, min(PORTAL_WEB_THREADS - 2, PORTAL_PERSON_CLUSTER_REQUESTS + 2)),
    minimum=1,
)
# Seconds a person's job listing (the dashboard's page, a page of GET /api/v1/jobs/) is
# kept in the cache at most (jobs/listing.py). It is built again as soon as a job it shows
# changes; this bounds what a missed change (a process killed between its commit and its
# signal) and times computed from the clock cost. 0: listings are never cached.
PORTAL_LISTING_CACHE_SECONDS = env_int("PORTAL_LISTING_CACHE_SECONDS", 10, minimum=0)

# --- Redis (broker, cache, channel layer) -------------------------------------------
# REDIS_URL (or REDIS_URL_FILE) carries the password. `make demo`/`make test` run a Redis
# of their own with a random password and leave its URL in var/redis.url (0600).
REDIS_URL = env_secret("REDIS_URL") or dev.local_redis_url(DATA_DIR, "redis://127.0.0.1:6379/0")
# Redis made highly available (portal/redis_ha.py): with REDIS_SENTINELS (host:port,
# comma-separated) and REDIS_SENTINEL_MASTER (the master's name in the sentinels'
# configuration), the broker, the cache and the channel layer follow the master the
# sentinels name; REDIS_URL then gives only its password and database number.
# REDIS_SENTINEL_PASSWORD (or _FILE): the sentinels' own password, required outside
# PORTAL_DEMO; rediss:// is refused in this mode until TLS is carried through.
REDIS_SENTINELS = redis_ha.parse_sentinels(env_list("REDIS_SENTINELS", []))
# the master's name as the sentinels know it (set with `REDIS_SENTINELS`, never alone)
REDIS_SENTINEL_MASTER = env_str("REDIS_SENTINEL_MASTER", "")
# the sentinels' own password (set `requirepass` on every sentinel). Sentinel mode
# refuses a `rediss://` `REDIS_URL` at start: TLS is not carried through it yet
REDIS_SENTINEL_PASSWORD = env_secret("REDIS_SENTINEL_PASSWORD")
# Locks and throttle counts; a test run uses its own prefix on a shared Redis.
cache_prefix = env_str("PORTAL_CACHE_PREFIX", "portal")
# Redis connections a process's channel layer may hold at once. Each socket's join, leave
# and send takes one for a moment, and redis-py refuses past its limit (MaxConnectionsError)
# instead of waiting: at its default of 100, a web process whose 250 dashboards closed or
# reconnected together (a restart, a network blip) lost the rest's subscriptions.
PORTAL_CHANNELS_MAX_CONNECTIONS = env_int("PORTAL_CHANNELS_MAX_CONNECTIONS", 1000, minimum=10)
# Locks that keep one worker at a task (a cluster's sync, a job's metrics tail, an
# experiment's step: jobs/task_helpers.py) are leases of this many seconds, renewed while
# their holder runs: a worker killed while holding one holds it up this long at most.
PORTAL_LOCK_LEASE = env_float("PORTAL_LOCK_LEASE", 15.0, minimum=1)

# --- Sign-in ---------------------------------------------------------------------------
# Backends after the sign-in throttle and the local-password rule (computed.py), e.g. LDAP;
# OIDC has its own settings below.
authentication_backends = env_list(
    "AUTHENTICATION_BACKENDS", ["django.contrib.auth.backends.ModelBackend"]
)
# Failed sign-ins per user name (x5 per client address) within the window (seconds).
PORTAL_SIGNIN_FAILURES = env_int("PORTAL_SIGNIN_FAILURES", 10, minimum=1)
# the window of PORTAL_SIGNIN_FAILURES, in seconds
PORTAL_SIGNIN_WINDOW = env_int("PORTAL_SIGNIN_WINDOW", 900, minimum=10)

# --- OIDC sign-in (identity/) ---------------------------------------------------
# Off while PORTAL_OIDC_ISSUER is empty. The issuer's /.well-known/openid-configuration
# gives every endpoint and the JWKS; the portal is a confidential client using the
# authorization code flow with PKCE (redirect URI: <PORTAL_URL>/oidc/callback/).
# With an issuer, a client id is required too (computed.py checks it).
PORTAL_OIDC_ISSUER = env_str("PORTAL_OIDC_ISSUER", "").rstrip("/")
# the portal's confidential client at the provider
PORTAL_OIDC_CLIENT_ID = env_str("PORTAL_OIDC_CLIENT_ID", "")
PORTAL_OIDC_CLIENT_SECRET = env_secret("PORTAL_OIDC_CLIENT_SECRET") or ""
# shown on the sign-in button
PORTAL_OIDC_PROVIDER_NAME = env_str("PORTAL_OIDC_PROVIDER_NAME", "your organisation")
# Must contain openid.
PORTAL_OIDC_SCOPES = env_str("PORTAL_OIDC_SCOPES", "openid profile email")
# Which claim names the portal user, and which lists the person's groups.
PORTAL_OIDC_USERNAME_CLAIM = env_str("PORTAL_OIDC_USERNAME_CLAIM", "preferred_username")
PORTAL_OIDC_GROUPS_CLAIM = env_str("PORTAL_OIDC_GROUPS_CLAIM", "groups")
# Empty: anyone the provider authenticates gets an account. Otherwise one of these groups.
PORTAL_OIDC_ALLOWED_GROUPS = env_list("PORTAL_OIDC_ALLOWED_GROUPS", [])
# Staff / superuser flags follow these groups at every sign-in.
PORTAL_OIDC_STAFF_GROUPS = env_list("PORTAL_OIDC_STAFF_GROUPS", [])
PORTAL_OIDC_SUPERUSER_GROUPS = env_list("PORTAL_OIDC_SUPERUSER_GROUPS", [])
# The id token must carry one of these acr values / contain one of these amr values (MFA).
PORTAL_OIDC_REQUIRE_ACR = env_list("PORTAL_OIDC_REQUIRE_ACR", [])
PORTAL_OIDC_REQUIRE_AMR = env_list("PORTAL_OIDC_REQUIRE_AMR", [])
# Clock skew allowed on exp/iat/nbf (seconds), for id tokens and API access tokens; at
# most 300.
PORTAL_OIDC_LEEWAY = env_int("PORTAL_OIDC_LEEWAY", 60, minimum=0)
# The audience the provider's JWT access tokens must name to be accepted by the API; empty:
# the API takes none. Never the client id: the portal's own id tokens name that one.
PORTAL_OIDC_API_AUDIENCE = env_str("PORTAL_OIDC_API_AUDIENCE", "")
# How long the provider's word holds (seconds): past it since the person's last sign-in (or
# refresh-token answer), their API tokens, browser sessions and cluster actions stop until
# they sign in again (identity/confirmation.py). Default: a working day; at most 30
# days.
PORTAL_OIDC_CONFIRM_MAX_AGE = env_int("PORTAL_OIDC_CONFIRM_MAX_AGE", 10 * 3600, minimum=5)
# A refresh token (kept at sign-in, encrypted) re-confirms the person unattended when the
# provider still answers it and lists them in the allowed groups. Turn off for a provider
# that keeps answering refresh tokens of people it disabled (glewlwyd 2.7 does): then only
# a sign-in confirms.
PORTAL_OIDC_REFRESH_CONFIRMS = env_bool("PORTAL_OIDC_REFRESH_CONFIRMS", True)
# The provider's account API, asked every PORTAL_OIDC_ACCOUNT_SECONDS whether each person
# whose confirmation is current is still enabled there (identity/accounts.py): a URL with
# {username} (the provider's user name claim) or {subject}, answering one account's JSON
# with a boolean field (200) or 404 when it is gone; e.g. glewlwyd's
# http://idp:4593/api/user/{username} with an API key ("token <key>"). Empty: not asked
# (a disabled person then loses access at the confirmation's age, or a back-channel logout).
PORTAL_OIDC_ACCOUNT_URL = env_str("PORTAL_OIDC_ACCOUNT_URL", "")
# The Authorization header's whole value for that API (a secret: _FILE works too).
PORTAL_OIDC_ACCOUNT_AUTHORIZATION = env_secret("PORTAL_OIDC_ACCOUNT_AUTHORIZATION") or ""
# the answer's boolean field that says enabled
PORTAL_OIDC_ACCOUNT_ENABLED_FIELD = env_str("PORTAL_OIDC_ACCOUNT_ENABLED_FIELD", "enabled")
# how often the beat asks
PORTAL_OIDC_ACCOUNT_SECONDS = env_int("PORTAL_OIDC_ACCOUNT_SECONDS", 5, minimum=1)
# People asked about per run: those who can open a session now first, then the rest of the
# current ones, longest unasked first.
PORTAL_OIDC_ACCOUNT_BATCH = env_int("PORTAL_OIDC_ACCOUNT_BATCH", 50, minimum=1)
# Provider groups that become Django group memberships (names, or "prefix*" patterns); only
# Django groups matching these follow the provider, others stay as an admin set them.
PORTAL_OIDC_DJANGO_GROUPS = env_list("PORTAL_OIDC_DJANGO_GROUPS", [])
# Send the id token as id_token_hint to the provider's end-session endpoint (in the URL).
# Off: client_id and post_logout_redirect_uri only (OIDC RP-Initiated Logout 1.0); turn on
# only for a provider that ends no session without it (glewlwyd 2.7 does nothing without).
PORTAL_OIDC_LOGOUT_ID_TOKEN_HINT = env_bool("PORTAL_OIDC_LOGOUT_ID_TOKEN_HINT", False)
# Who may still sign in with a local password while OIDC is on (emergency admins).
PORTAL_LOCAL_LOGIN_USERS = env_list("PORTAL_LOCAL_LOGIN_USERS", [])
# Personal API tokens live at most this many days (a token asked "never" gets it).
PORTAL_API_TOKEN_MAX_DAYS = env_int("PORTAL_API_TOKEN_MAX_DAYS", 90, minimum=1)

# --- Cookies and the proxy in front ---------------------------------------------------
# Secure session and CSRF cookies (with __Host- names: computed.py).
SECURE_COOKIES = env_bool("PORTAL_SECURE_COOKIES", not INSECURE_DEFAULTS_ALLOWED)
# A browser session lasts a working day by default (as long as a provider's confirmation).
SESSION_COOKIE_AGE = env_int("PORTAL_SESSION_AGE", max(PORTAL_OIDC_CONFIRM_MAX_AGE, 60), minimum=60)
# Trust X-Forwarded-Proto: https from the TLS-terminating proxy (SECURE_PROXY_SSL_HEADER).
behind_tls_proxy = env_bool("PORTAL_BEHIND_TLS_PROXY", False)
# The addresses (or networks) of the HAProxy or ingress hosts in front of the web servers:
# only a connection from one of them may say whose request it carries (X-Forwarded-For),
# so the sign-in throttle and the logs see each client's own address. gunicorn reads the
# same variable (deploy/systemd/portal-web@.service passes it as --forwarded-allow-ips);
# the default fits an HAProxy on the same host. Checked here, so a bad value stops the start.
# "*" (anyone) is refused: any client that reaches a web server could then choose its address.
FORWARDED_ALLOW_IPS = env_networks("FORWARDED_ALLOW_IPS", ["127.0.0.1", "::1"])

# --- Clusters: SSH -------------------------------------------------------------------
# seconds to connect and authenticate to a cluster
SSH_CONNECT_TIMEOUT = env_float("PORTAL_SSH_CONNECT_TIMEOUT", 10.0, minimum=0.1)
# seconds a remote command may run
SSH_COMMAND_TIMEOUT = env_float("PORTAL_SSH_COMMAND_TIMEOUT", 60.0, minimum=0.1)
# SSH keep-alive interval in seconds (0: off)
SSH_KEEPALIVE_INTERVAL = env_int("PORTAL_SSH_KEEPALIVE", 30, minimum=0)
# Clusters in certificate mode (Cluster.ssh_auth; clusters/certs.py): the portal's SSH
# user CA, as OpenSSH private key files (comma-separated; the first signs, every one listed
# is the portal's, for rotation; `manage.py ssh_ca` makes them). Default only in DEBUG or
# PORTAL_DEMO; elsewhere it must be set before a cluster uses certificates. A certificate is
# valid for PORTAL_SSH_CERT_MINUTES and, with PORTAL_SSH_CERT_SOURCE_ADDRESSES (CIDRs: the
# portal's own addresses as the login nodes see them), only from those addresses (required
# with key files outside DEBUG and PORTAL_DEMO: computed.py).
PORTAL_SSH_CA_KEY_FILES = env_list(
    "PORTAL_SSH_CA_KEY_FILES",
    [str(DATA_DIR / "ssh-ca" / "user_ca")] if INSECURE_DEFAULTS_ALLOWED else [],
)
# how long a certificate is valid; a pooled connection is replaced before it expires
PORTAL_SSH_CERT_MINUTES = env_int("PORTAL_SSH_CERT_MINUTES", 5, minimum=1)
# the portal hosts' addresses as login nodes see them (CIDRs): the certificates'
# `source-address`
PORTAL_SSH_CERT_SOURCE_ADDRESSES = env_networks("PORTAL_SSH_CERT_SOURCE_ADDRESSES", [])
# A person's own certificate, for SSH into their running job from their terminal or editor
# (jobs/node_access.py): valid for PORTAL_SSH_USER_CERT_MINUTES (at most a day) and,
# with PORTAL_SSH_USER_CERT_SOURCE_ADDRESSES (CIDRs: the networks people connect from, a
# VPN's say), only from those addresses.
PORTAL_SSH_USER_CERT_MINUTES = env_int("PORTAL_SSH_USER_CERT_MINUTES", 60, minimum=1, maximum=1440)
# the networks people connect from (CIDRs, a VPN's say): their certificates'
# `source-address`
PORTAL_SSH_USER_CERT_SOURCE_ADDRESSES = env_networks("PORTAL_SSH_USER_CERT_SOURCE_ADDRESSES", [])
# Where signing happens (clusters/signer.py): with PORTAL_SSH_SIGNER_SOCKET set, this
# process asks the signer (`manage.py ssh_signer`, the only process given the CA key files)
# for each certificate and never reads the key; the signer serves its own user and those
# of PORTAL_SSH_SIGNER_CLIENTS (user names: the web's and workers' service user).
PORTAL_SSH_SIGNER_SOCKET = env_str("PORTAL_SSH_SIGNER_SOCKET", "")
# for the signer: user names (besides its own) whose processes may ask it
PORTAL_SSH_SIGNER_CLIENTS = env_list("PORTAL_SSH_SIGNER_CLIENTS", [])

# --- Jobs: tasks, sync and recovery -----------------------------------------------------
# Queue name, so that several portals (or a test run) can share one Redis.
CELERY_TASK_DEFAULT_QUEUE = env_str("PORTAL_CELERY_QUEUE", "celery")
# Tasks that talk to clusters are killed after PORTAL_TASK_TIME_LIMIT seconds.
PORTAL_TASK_TIME_LIMIT = env_float("PORTAL_TASK_TIME_LIMIT", 180.0, minimum=10)
# How many of one person's tasks (submissions, cancels, one job's sync) may run at once,
# across every worker process (jobs/task_helpers.PersonTask): their login environment,
# however slow, holds no more of the workers than this. Raise it with more processes.
PORTAL_PERSON_TASKS = env_int("PORTAL_PERSON_TASKS", 1, minimum=1)
# And of every kind together (tasks, transfers, imports), how many of one worker's
# processes one person's tasks may hold at once: a worker that consumes every queue (as
# `make demo` runs it) is never all one person's. Raise it for workers of many processes.
PORTAL_PERSON_WORKERS = env_int("PORTAL_PERSON_WORKERS", 1, minimum=1)
# Seconds after which a queued job or a cancellation that made no progress is queued again.
PORTAL_RECOVER_AFTER = env_float("PORTAL_RECOVER_AFTER", 60.0, minimum=2)
# What a job's change owes (its notification, tails, accounting, experiment step; the
# JobEvent's ``due``, jobs/outbox.py) is handed to the queue on commit and, when that
# failed, by a sweep every PORTAL_OUTBOX_INTERVAL seconds. What was handed over and not
# done within PORTAL_OUTBOX_LEASE seconds (a broker restarted empty, a dead worker) is
# handed over again; longer than any consumer's retries take.
PORTAL_OUTBOX_INTERVAL = env_float("PORTAL_OUTBOX_INTERVAL", 10.0, minimum=0.5)
# seconds after which what was handed over and never done (the broker restarted empty, a
# worker died) is handed over again
PORTAL_OUTBOX_LEASE = env_float("PORTAL_OUTBOX_LEASE", 900.0, minimum=1)
# Projects (projects/): each cluster's accounts are read every PORTAL_PROJECT_SYNC_INTERVAL
# seconds. What an account's associated users may do with each other's runs unless the
# project says otherwise (its default role in the admin): none (an account for charging
# only), viewer or member. Its coordinators are managers whatever this says. Off (none)
# unless a centre chooses: a catch-all account everyone is in must not show everyone's
# runs to everyone.
PORTAL_PROJECT_SYNC_INTERVAL = env_float("PORTAL_PROJECT_SYNC_INTERVAL", 300.0, minimum=5)
# Provider groups that extend projects, "<group>=<cluster>/<account>[:viewer|member|manager]",
# or narrow one to the group's people, "...:only"; comma-separated (projects/grants.py).
PORTAL_PROJECT_GROUPS = env_list("PORTAL_PROJECT_GROUPS", [])
# A project page's reading of its account's use (sacct, sshare, limits) is kept this many
# seconds: the page never asks the scheduler more often.
PORTAL_PROJECT_USAGE_CACHE = env_float("PORTAL_PROJECT_USAGE_CACHE", 300.0, minimum=0)
# The clusters' maintenance reservations, read for the launch form, are kept this long.
PORTAL_RESERVATIONS_CACHE = env_float("PORTAL_RESERVATIONS_CACHE", 60.0, minimum=0)
# what an account's associated users may do with each other's runs unless its project
# says otherwise: `none`, `viewer` or `member` (coordinators are managers)
PORTAL_PROJECT_DEFAULT_ROLE = env_choice(
    "PORTAL_PROJECT_DEFAULT_ROLE", "none", ("none", "viewer", "member")
)
# Read-only links with an expiry to runs, comparisons and experiments, for signed-in people
# outside their project (projects/links.py): off unless a centre turns them on; a link
# lasts at most PORTAL_READ_LINK_MAX_DAYS.
PORTAL_READ_LINKS = env_bool("PORTAL_READ_LINKS", False)
# the longest a read link lasts
PORTAL_READ_LINK_MAX_DAYS = env_int("PORTAL_READ_LINK_MAX_DAYS", 14, minimum=1)
# How often Celery beat asks each cluster about its active jobs (seconds), and
# the fraction of that interval over which the per-cluster polls are spread.
PORTAL_SYNC_INTERVAL = env_float("PORTAL_SYNC_INTERVAL", 15.0, minimum=1)
# fraction of the interval over which per-cluster polls are spread
PORTAL_SYNC_JITTER = env_float("PORTAL_SYNC_JITTER", 0.5, minimum=0)
# Transient failures (cluster unreachable, slurmctld busy) are retried this often.
PORTAL_SUBMIT_MAX_RETRIES = env_int("PORTAL_SUBMIT_MAX_RETRIES", 6, minimum=0)
# A submission taken up this many times without its task finishing it (a worker killed or
# lost mid-submit, each a full task time limit) is ended submit_failed by the recovery
# sweep rather than queued again (jobs/tasks.py recover_jobs).
PORTAL_SUBMIT_MAX_TRIES = env_int("PORTAL_SUBMIT_MAX_TRIES", 3, minimum=1)
# longest back-off between retries, in seconds
PORTAL_RETRY_BACKOFF_MAX = env_float("PORTAL_RETRY_BACKOFF_MAX", 120.0, minimum=1)
# The most `squeue --json` may print (bytes). Slurm 22.05 ignores -u with --json and lists
# every user's jobs (about 3.5 KB each); later versions list only the account's.
PORTAL_SQUEUE_MAX_BYTES = env_int("PORTAL_SQUEUE_MAX_BYTES", 64 * 1024 * 1024, minimum=65536)
# A job that neither the controller nor accounting reports (under its name) for this long
# (seconds) ends as failed with a message saying its outcome is unknown.
PORTAL_LOST_JOB_GRACE = env_float("PORTAL_LOST_JOB_GRACE", 600.0, minimum=0)

# --- Experiments (experiments/) -------------------------------------------------
# How often each running experiment's controller steps
# (stops trials early, starts new ones), and how long a completed trial's metrics may
# still be arriving before a missing objective counts as never logged.
PORTAL_EXPERIMENT_INTERVAL = env_float("PORTAL_EXPERIMENT_INTERVAL", 5.0, minimum=0.5)
# seconds a completed trial's metrics may still be arriving before a missing objective
# counts as never logged
PORTAL_EXPERIMENT_SETTLE = env_float("PORTAL_EXPERIMENT_SETTLE", 15.0, minimum=0)
# Budgets, checked when an experiment starts: a user's experiments running at once, the
# trials of one experiment, and the jobs all of a user's running experiments may run at
# once (the sum of their max_concurrent).
PORTAL_EXPERIMENTS_MAX_RUNNING = env_int("PORTAL_EXPERIMENTS_MAX_RUNNING", 5, minimum=1)
# most `max_trials` one experiment may ask for
PORTAL_EXPERIMENT_MAX_TRIALS = env_int("PORTAL_EXPERIMENT_MAX_TRIALS", 1000, minimum=1)
# sum of `max_concurrent` over one user's running experiments
PORTAL_EXPERIMENTS_MAX_CONCURRENT = env_int("PORTAL_EXPERIMENTS_MAX_CONCURRENT", 64, minimum=1)
# The longest one controller step may run (seconds; it talks to no cluster: cancellations
# and submissions are tasks of their own). Its lock outlives it, so steps never overlap.
PORTAL_EXPERIMENT_STEP_TIME_LIMIT = env_float("PORTAL_EXPERIMENT_STEP_TIME_LIMIT", 60.0, minimum=10)
# Experiments' controller steps have their own queue, so that sweeps never delay other
# users' submissions. A worker started without -Q consumes both queues; a busy site gives
# experiments a worker of their own (-Q <this queue>) and the others -Q <the default>.
PORTAL_EXPERIMENT_QUEUE = env_str(
    "PORTAL_EXPERIMENT_QUEUE", f"{CELERY_TASK_DEFAULT_QUEUE}-experiments"
)
# Imports of uploaded runs (tracking/tasks.py) take minutes of one worker process each:
# a queue of their own, consumed by every worker started without -Q, so that a busy site
# can give them a worker and keep them from delaying submissions.
PORTAL_IMPORT_QUEUE = env_str("PORTAL_IMPORT_QUEUE", f"{CELERY_TASK_DEFAULT_QUEUE}-imports")
# The longest one import may run (seconds): a worker is held this long at most.
PORTAL_IMPORT_TIME_LIMIT = env_float("PORTAL_IMPORT_TIME_LIMIT", 3600.0, minimum=60)
# The memory one import may take beyond what its worker holds (MiB): past it the import
# stops with a message (tracking/imports/memory.py), the worker goes on.
PORTAL_IMPORT_MEMORY_MB = env_int("PORTAL_IMPORT_MEMORY_MB", 2048, minimum=16)
# How many of one person's imports run at once (the rest wait their turn in the queue).
PORTAL_PERSON_IMPORTS = env_int("PORTAL_PERSON_IMPORTS", 1, minimum=1)

# --- Usage and idle GPUs -------------------------------------------------------------
# Usage (usage/hours.py): a running job whose GPUs all stayed at or below this utilisation
# (per cent, from the metrics client's nvidia-smi samples) for this many minutes is flagged
# to its owner and listed for staff; the Usage page shows at most this many rows.
PORTAL_GPU_IDLE_MINUTES = env_float("PORTAL_GPU_IDLE_MINUTES", 30.0, minimum=0.1)
# at or below this utilisation (per cent, every GPU, every sample) a GPU counts as idle
PORTAL_GPU_IDLE_PERCENT = env_float("PORTAL_GPU_IDLE_PERCENT", 5.0, minimum=0)
# Seconds between passes of the partitions' idle-GPU policies (usage/idle_policy.py).
PORTAL_IDLE_POLICY_INTERVAL = env_int("PORTAL_IDLE_POLICY_INTERVAL", 60, minimum=5)
# most rows on the Usage page and in its CSV
PORTAL_USAGE_MAX_ROWS = env_int("PORTAL_USAGE_MAX_ROWS", 5000, minimum=1)

# --- Limits: logs, files, metrics, comparisons, the audit log ---------------------------
# Largest part of a job's stdout/stderr read at once (bytes, from the end).
PORTAL_LOG_TAIL_BYTES = env_int("PORTAL_LOG_TAIL_BYTES", 64 * 1024, minimum=1024)
# Downloads from a job's work directory: the largest file served (bigger ones: scp/rsync),
# read over SFTP this many bytes at a time.
PORTAL_DOWNLOAD_MAX_BYTES = env_int("PORTAL_DOWNLOAD_MAX_BYTES", 2 * 1024**3, minimum=0)
# bytes the web process hands on at a time while streaming a download (over SFTP: per
# read)
PORTAL_DOWNLOAD_CHUNK_BYTES = env_int("PORTAL_DOWNLOAD_CHUNK_BYTES", 1024**2, minimum=4096)
# Resumable uploads (tus, files/uploads.py): the largest file, the most one person may have
# in unfinished uploads at once, and the most one request (a tus PATCH) may carry: the web
# host holds at most that much of an upload at a time.
# The largest request body any address takes, decided before it is received
# (portal/body_limits.py): Django's own DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MiB) by default. tus
# chunks (PORTAL_UPLOAD_CHUNK_BYTES) and run archives (PORTAL_IMPORT_MAX_UPLOAD_BYTES) take
# more, from signed-in people only.
PORTAL_BODY_MAX_BYTES = env_int("PORTAL_BODY_MAX_BYTES", 2621440, minimum=65536)
# the largest file one upload may be
PORTAL_UPLOAD_MAX_BYTES = env_int("PORTAL_UPLOAD_MAX_BYTES", 100 * 1024**3, minimum=0)
# the most one person may have in unfinished uploads at once
PORTAL_UPLOAD_PERSON_BYTES = env_int("PORTAL_UPLOAD_PERSON_BYTES", 500 * 1024**3, minimum=0)
# the most one upload request (a tus PATCH) may carry (streamed: the web host holds at
# most 4 MiB of it)
PORTAL_UPLOAD_CHUNK_BYTES = env_int("PORTAL_UPLOAD_CHUNK_BYTES", 256 * 1024**2, minimum=65536)
# An upload's sha256 and rename on the cluster are done within its last request (bounded
# by PORTAL_WEB_CLUSTER_SECONDS) for a file of at most this many bytes; a larger file, or a
# cluster that takes longer, is finished by a task the client polls (files/uploads.py).
PORTAL_UPLOAD_HASH_INLINE_BYTES = env_int("PORTAL_UPLOAD_HASH_INLINE_BYTES", 1024**3, minimum=0)
# How the bytes of uploads and downloads travel (clusters/bulk.py): "openssh" (the
# default where an ssh client is installed) pipes them through OpenSSH's client (dd on the
# cluster), multiplexed over one ControlMaster per person's account and purpose, with
# paramiko's SFTP where a master cannot log in; "paramiko" moves them over SFTP. A master's private directory (its key
# and certificate until it is logged in, then its control socket) is made in
# PORTAL_BULK_SSH_DIR ("": /dev/shm where writable, else the temporary directory); a
# master unused for PORTAL_BULK_SSH_IDLE seconds is closed, and a web process keeps at
# most PORTAL_BULK_SSH_MASTERS (then the least recently used idle one is closed).
PORTAL_BULK_TRANSPORT = env_choice(
    "PORTAL_BULK_TRANSPORT",
    "openssh" if shutil.which("ssh") else "paramiko",
    ("openssh", "paramiko"),
)
# where each OpenSSH master gets its private directory (its key and certificate until it
# has logged in, then its control socket)
PORTAL_BULK_SSH_DIR = env_str("PORTAL_BULK_SSH_DIR", "")
# seconds an OpenSSH master may stay unused before it is closed
PORTAL_BULK_SSH_IDLE = env_float("PORTAL_BULK_SSH_IDLE", 120.0, minimum=1)
# the most OpenSSH masters one web process keeps (then the least recently used idle one
# is closed)
PORTAL_BULK_SSH_MASTERS = env_int("PORTAL_BULK_SSH_MASTERS", 64, minimum=1)
# The ciphers a master offers, in OpenSSH's Ciphers syntax: "" = AES-GCM first where this
# host's CPU has AES instructions (else OpenSSH's own order), "openssh" = OpenSSH's order.
PORTAL_BULK_SSH_CIPHERS = env_str("PORTAL_BULK_SSH_CIPHERS", "")
# Who may read /metrics without a token (the Prometheus servers): CIDR networks. A staff
# member's API token with the metrics scope works from anywhere.
PORTAL_METRICS_NETWORKS = env_networks("PORTAL_METRICS_NETWORKS", ["127.0.0.0/8", "::1/128"])
# How often each running transfer's progress is read from its rclone log (seconds).
PORTAL_TRANSFER_POLL_INTERVAL = env_float("PORTAL_TRANSFER_POLL_INTERVAL", 2.0, minimum=0.5)
# Transfers' starts and looks have a queue of their own (consumed by every worker started
# without -Q), and at most this many of one person's run at once (jobs/task_helpers.py's
# PersonTask): a login that hangs their start holds one worker process, not all of them.
PORTAL_TRANSFER_QUEUE = env_str("PORTAL_TRANSFER_QUEUE", f"{CELERY_TASK_DEFAULT_QUEUE}-transfers")
# how many of one person's transfer tasks run at once
PORTAL_PERSON_TRANSFERS = env_int("PORTAL_PERSON_TRANSFERS", 1, minimum=1)
# The audit log of actions on clusters (identity/audit/__init__.py): rows older than this many days
# are deleted by a daily task.
PORTAL_AUDIT_RETENTION_DAYS = env_int("PORTAL_AUDIT_RETENTION_DAYS", 400, minimum=1)
# Training metrics: how often the in-job client samples CPU/GPU/memory (seconds, 0 = off),
# and the most of a metrics file the SSH tail reads per file and pass (bytes).
PORTAL_SYSTEM_METRICS_INTERVAL = env_float("PORTAL_SYSTEM_METRICS_INTERVAL", 5.0, minimum=0)
# most bytes of a job's metrics files read over SFTP in one pass (all files together)
PORTAL_METRICS_TAIL_BYTES = env_int("PORTAL_METRICS_TAIL_BYTES", 4 * 1024 * 1024, minimum=4096)
# What reproduces a run: the most of a checkout's `git diff` kept beside a job that asks for
# it (bytes; the rest is cut and marked so).
PORTAL_GIT_DIFF_MAX_BYTES = env_int("PORTAL_GIT_DIFF_MAX_BYTES", 1024 * 1024, minimum=1024)
# Per-job metric quotas: series (name x rank x attempt), stored points, bytes received
# (uploads and files), ranks (0 .. N-1), and upload requests per job (DRF rate).
PORTAL_METRICS_MAX_SERIES = env_int("PORTAL_METRICS_MAX_SERIES", 2000, minimum=1)
# per-job quota: stored points
PORTAL_METRICS_MAX_POINTS = env_int("PORTAL_METRICS_MAX_POINTS", 5_000_000, minimum=1)
# per-job quota: bytes of metric records received (uploads and files)
PORTAL_METRICS_MAX_BYTES = env_int("PORTAL_METRICS_MAX_BYTES", 1024**3, minimum=4096)
# ranks 0 … N-1 accepted in records
PORTAL_METRICS_MAX_RANKS = env_int("PORTAL_METRICS_MAX_RANKS", 4096, minimum=1)
# upload requests per job (429 with `Retry-After` past it)
PORTAL_METRICS_INGEST_RATE = env_str("PORTAL_METRICS_INGEST_RATE", "600/min")
# At most this many rank-*.jsonl files are looked at per job and pass.
PORTAL_METRICS_MAX_FILES = env_int("PORTAL_METRICS_MAX_FILES", 256, minimum=1)
# Imports of MLflow, W&B and TensorBoard runs (tracking/imports/): the largest file
# read, the most files and runs one import looks at, and the largest upload (an archive).
PORTAL_IMPORT_MAX_FILE_BYTES = env_int("PORTAL_IMPORT_MAX_FILE_BYTES", 256 * 1024**2, minimum=1024)
# most files and folders one import walks; more ends it with a message
PORTAL_IMPORT_MAX_FILES = env_int("PORTAL_IMPORT_MAX_FILES", 200_000, minimum=1)
# most runs one import brings in
PORTAL_IMPORT_MAX_RUNS = env_int("PORTAL_IMPORT_MAX_RUNS", 10_000, minimum=1)
# largest upload of runs (a 413 before it is read); it may unpack to four times this
PORTAL_IMPORT_MAX_UPLOAD_BYTES = env_int("PORTAL_IMPORT_MAX_UPLOAD_BYTES", 1024**3, minimum=1024)
# At most this many runs in one comparison (page, API, `portal compare`); more is a 400
# that says so. 1,000 is what bench/compare.py and bench/load.py measure.
PORTAL_COMPARE_MAX_RUNS = env_int("PORTAL_COMPARE_MAX_RUNS", 1000, minimum=1)

# --- REST API and pages that reach a cluster -------------------------------------------
# Requests per token (or signed-in user) and period, e.g. "600/min".
PORTAL_API_RATE = env_str("PORTAL_API_RATE", "600/min")
# Pages that reach a cluster over SSH (logs, files, downloads, experiment data, opening a
# session, testing an account): requests per signed-in user and period, all such pages
# together (common/throttle.py); a job's session registration: calls per session.
PORTAL_PAGE_CLUSTER_RATE = env_str("PORTAL_PAGE_CLUSTER_RATE", "120/min")
# registration calls per session (the job's script retries about every 2 s)
PORTAL_SESSION_REGISTER_RATE = env_str("PORTAL_SESSION_REGISTER_RATE", "40/min")

# --- Session proxy ---------------------------------------------------------------------
# Session links: <PROXY_SESSION_SCHEME>://<id>.<PROXY_SESSION_DOMAIN>[:PROXY_SESSION_PUBLIC_PORT]/
# (Renamed from SESSION_*: an old name in the environment stops the start, computed.py.)
PROXY_SESSION_DOMAIN = env_str("PROXY_SESSION_DOMAIN", "sessions.localhost")
# scheme of session links
PROXY_SESSION_SCHEME = env_str("PROXY_SESSION_SCHEME", "https")
# The port browsers use for session links; empty for the scheme's default (443).
PROXY_SESSION_PUBLIC_PORT = env_str(
    "PROXY_SESSION_PUBLIC_PORT", "8443" if INSECURE_DEFAULTS_ALLOWED else ""
)
# How long a proxy cookie and a one-time login code stay valid (seconds).
PROXY_COOKIE_MAX_AGE = env_int("PROXY_COOKIE_MAX_AGE", 12 * 3600, minimum=60)
# seconds a one-time code from the portal stays valid
PROXY_CODE_TTL = env_int("PROXY_CODE_TTL", 60, minimum=5)
# Upstream (compute node) timeouts for the proxy, in seconds.
PROXY_CONNECT_TIMEOUT = env_float("PROXY_CONNECT_TIMEOUT", 10.0, minimum=0.1)
PROXY_READ_TIMEOUT = env_float("PROXY_READ_TIMEOUT", 300.0, minimum=1)
# The only networks the session proxy may connect to (CIDRs, comma-separated): every route,
# for every scheduler, is checked against them (proxy/routes.py) and refused outside them.
# Required outside DEBUG and PORTAL_DEMO (computed.py refuses the start without it): all of
# RFC 1918 would make a session link a way into every private host the portal reaches. In
# DEBUG or PORTAL_DEMO: the private ranges (RFC 1918, IPv6 ULA) and loopback (the dev
# clusters' nodes are 127.0.0.1). Link-local (cloud metadata) and public addresses never by
# default.
PORTAL_UPSTREAM_NETWORKS = env_networks(
    "PORTAL_UPSTREAM_NETWORKS",
    ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7", "127.0.0.0/8", "::1/128"]
    if INSECURE_DEFAULTS_ALLOWED
    else [],
)
# HAProxy in the session data path (proxy/haproxy.py, proxy/routes.py): the admin socket
# of every instance behind PROXY_SESSION_DOMAIN (unix:PATH or tcp:HOST:PORT, comma-separated;
# the first is the one `manage.py run_proxy` starts), the token map each reads (the same
# path on every instance), maxconn, and how often routes are reconciled (seconds).
PROXY_INSTANCES = env_list("PROXY_INSTANCES", [f"unix:{DATA_DIR / 'proxy' / 'admin.sock'}"])
# the (empty) token map file HAProxy loads at start; entries come over the admin socket
PROXY_MAP_PATH = env_str("PROXY_MAP_PATH", str(DATA_DIR / "proxy" / "tokens.map"))
# HAProxy's connection limit, and one session's share of it
PROXY_MAXCONN = env_int("PROXY_MAXCONN", 4000, minimum=100)
# Connections (WebSockets included) one session may hold open at once; more wait.
PROXY_SESSION_MAXCONN = env_int("PROXY_SESSION_MAXCONN", 256, minimum=8)
# seconds between beat's reconciliations of every instance's routes
PROXY_RECONCILE_INTERVAL = env_float("PROXY_RECONCILE_INTERVAL", 5.0, minimum=0.5)
# Model endpoints (endpoints/): the command that serves a registered version on a node,
# the model's folder appended (a word list, never a shell line; the node's or the image's
# environment must have it), for MLflow models and for language models (OpenAI's API).
PORTAL_SERVE_MLFLOW_COMMAND = env_str(
    "PORTAL_SERVE_MLFLOW_COMMAND",
    "mlflow models serve --env-manager local --host 127.0.0.1 --port {port} --model-uri",
)
PORTAL_SERVE_OPENAI_COMMAND = env_str(
    "PORTAL_SERVE_OPENAI_COMMAND", "transformers serve --host 127.0.0.1 --port {port}"
)
# seconds between passes that record endpoints' traffic and stop idle ones (endpoints/traffic.py)
PORTAL_ENDPOINT_IDLE_INTERVAL = env_float("PORTAL_ENDPOINT_IDLE_INTERVAL", 30.0, minimum=1.0)
# A request to a stopped endpoint is held this long while it starts, then sent on (307 to
# itself) or answered 503 with Retry-After; at most PORTAL_ENDPOINT_HOLDS held at once per
# web process (more are answered 503 at once: holding takes a thread).
PORTAL_ENDPOINT_HOLD_SECONDS = env_float("PORTAL_ENDPOINT_HOLD_SECONDS", 20.0, minimum=0.0)
PORTAL_ENDPOINT_HOLDS = env_int("PORTAL_ENDPOINT_HOLDS", 4, minimum=0)
# Where the TLS certificate for the session proxy lives (make demo / make test create a dev one).
TLS_DIR = Path(env_str("PORTAL_TLS_DIR", str(DATA_DIR / "tls")))

# --- Email and notifications ------------------------------------------------------------
# Django's SMTP backend. The demo (PORTAL_DEMO) sends to `make mail`'s exim on
# 127.0.0.1:2525, which keeps every message in /var/lib/portal-mail/Maildir.
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
# SMTP server for notifications
EMAIL_HOST = env_str("EMAIL_HOST", "127.0.0.1" if DEMO_MODE else "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 2525 if DEMO_MODE else 25, minimum=1)
# SMTP authentication
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_secret("EMAIL_HOST_PASSWORD") or ""
# One of the two at most.
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)  # STARTTLS (port 587)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)  # TLS from the start (port 465)
# seconds per SMTP operation
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 20, minimum=1)
# sender of notifications
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "HPC portal <portal@localhost>")
SERVER_EMAIL = env_str("SERVER_EMAIL", DEFAULT_FROM_EMAIL)
# At most this many emails per person per window; past it, one digest when the window ends.
PORTAL_NOTIFY_EMAIL_MAX = env_int("PORTAL_NOTIFY_EMAIL_MAX", 5, minimum=1)
PORTAL_NOTIFY_EMAIL_WINDOW_MINUTES = env_int("PORTAL_NOTIFY_EMAIL_WINDOW_MINUTES", 60, minimum=1)
# Events within this many seconds of one another go in one email.
PORTAL_NOTIFY_BATCH_SECONDS = env_float("PORTAL_NOTIFY_BATCH_SECONDS", 5.0, minimum=0)
# "A long job completed": one that ran at least this long.
PORTAL_NOTIFY_LONG_JOB_MINUTES = env_int("PORTAL_NOTIFY_LONG_JOB_MINUTES", 30, minimum=0)
# "A job started after a long wait": queued at least this long.
PORTAL_NOTIFY_STARTED_AFTER_MINUTES = env_int("PORTAL_NOTIFY_STARTED_AFTER_MINUTES", 30, minimum=0)
# Webhooks (a person's Slack/Mattermost-compatible URL, signed): one attempt may take at most
# this many seconds (connecting included); after MAX_FAILURES failed attempts in a row the
# webhook is turned off and its owner told; a delivery is tried at most 1 + RETRIES times
# (10 s, 20 s, 40 s ... apart: about 5 minutes in all with 5 retries).
PORTAL_WEBHOOK_TIMEOUT = env_float("PORTAL_WEBHOOK_TIMEOUT", 10.0, minimum=0.5)
# Within it: the name's lookup and the TCP connect each get at most this long, and an
# answer (even a 2xx) that took longer than SLOW_SECONDS in all counts as a failed attempt
# (towards MAX_FAILURES; it is not posted again).
PORTAL_WEBHOOK_CONNECT_TIMEOUT = env_float("PORTAL_WEBHOOK_CONNECT_TIMEOUT", 3.0, minimum=0.1)
# an answer (even 2xx) after this many seconds counts as a failed attempt
PORTAL_WEBHOOK_SLOW_SECONDS = env_float("PORTAL_WEBHOOK_SLOW_SECONDS", 5.0, minimum=0.1)
# At most RATE_MAX attempts per person per RATE_WINDOW seconds; past it, what gathers is
# posted as one digest when the window allows (as PORTAL_NOTIFY_EMAIL_MAX for email).
PORTAL_WEBHOOK_RATE_MAX = env_int("PORTAL_WEBHOOK_RATE_MAX", 10, minimum=1)
# the window of PORTAL_WEBHOOK_RATE_MAX, in seconds
PORTAL_WEBHOOK_RATE_WINDOW = env_float("PORTAL_WEBHOOK_RATE_WINDOW", 60.0, minimum=1)
# failed attempts in a row after which a webhook is turned off and its owner told
PORTAL_WEBHOOK_MAX_FAILURES = env_int("PORTAL_WEBHOOK_MAX_FAILURES", 15, minimum=1)
# retries per notification (back-off from 10 s, doubling, at most 10 min)
PORTAL_WEBHOOK_RETRIES = env_int("PORTAL_WEBHOOK_RETRIES", 5, minimum=0)
# Addresses a webhook may reach besides global ones (loopback, private, link-local ... are
# refused otherwise: the workers sit next to Redis, the database and the cluster).
PORTAL_WEBHOOK_ALLOWED_NETWORKS = env_networks(
    "PORTAL_WEBHOOK_ALLOWED_NETWORKS", ["127.0.0.1/32"] if DEMO_MODE else []
)
# Plain http:// webhook URLs (https only otherwise).
PORTAL_WEBHOOK_ALLOW_HTTP = env_bool("PORTAL_WEBHOOK_ALLOW_HTTP", DEMO_MODE or DEBUG)
# Webhook deliveries have a queue of their own: a slow receiver never delays submissions,
# cancels or mail (a worker without -Q consumes all three queues; deploy/systemd names them).
PORTAL_WEBHOOK_QUEUE = env_str("PORTAL_WEBHOOK_QUEUE", f"{CELERY_TASK_DEFAULT_QUEUE}-webhooks")
