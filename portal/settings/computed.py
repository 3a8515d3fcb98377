"""Layer 3 of the settings: what follows from the operator's values (configured.py) and
the dev/test switches (dev.py). First the start-up checks, which stop a start whose
values cannot work together, before anything is built from them; then what Django,
Celery and Channels are given. Nothing here reads the environment, except for the
variables' old names, which it refuses.
"""

import os
import re

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from kombu import Exchange, Queue

from portal import redis_ha
from portal.settings.configured import (
    CELERY_TASK_DEFAULT_QUEUE,
    DATA_DIR,
    DATABASE_URL,
    EMAIL_USE_SSL,
    EMAIL_USE_TLS,
    PORTAL_API_RATE,
    PORTAL_BULK_SSH_CIPHERS,
    PORTAL_CHANNELS_MAX_CONNECTIONS,
    PORTAL_DB_POOL_MAX,
    PORTAL_DB_POOL_TIMEOUT,
    PORTAL_ENCRYPTION_KEYS,
    PORTAL_ENDPOINT_IDLE_INTERVAL,
    PORTAL_EXPERIMENT_INTERVAL,
    PORTAL_EXPERIMENT_QUEUE,
    PORTAL_IDLE_POLICY_INTERVAL,
    PORTAL_IMPORT_QUEUE,
    PORTAL_LOG_FORMAT,
    PORTAL_METRICS_INGEST_RATE,
    PORTAL_OIDC_ACCOUNT_SECONDS,
    PORTAL_OIDC_API_AUDIENCE,
    PORTAL_OIDC_CLIENT_ID,
    PORTAL_OIDC_CONFIRM_MAX_AGE,
    PORTAL_OIDC_ISSUER,
    PORTAL_OIDC_LEEWAY,
    PORTAL_OIDC_SCOPES,
    PORTAL_OUTBOX_INTERVAL,
    PORTAL_PROJECT_SYNC_INTERVAL,
    PORTAL_RECOVER_AFTER,
    PORTAL_RETRY_BACKOFF_MAX,
    PORTAL_SSH_CA_KEY_FILES,
    PORTAL_SSH_CERT_SOURCE_ADDRESSES,
    PORTAL_SYNC_INTERVAL,
    PORTAL_TASK_TIME_LIMIT,
    PORTAL_TRANSFER_POLL_INTERVAL,
    PORTAL_TRANSFER_QUEUE,
    PORTAL_UPSTREAM_NETWORKS,
    PORTAL_WEBHOOK_QUEUE,
    PROXY_RECONCILE_INTERVAL,
    REDIS_SENTINEL_MASTER,
    REDIS_SENTINEL_PASSWORD,
    REDIS_SENTINELS,
    REDIS_URL,
    SECRET_KEY,
    SECURE_COOKIES,
    authentication_backends,
    behind_tls_proxy,
    cache_prefix,
    log_level,
    sqlite_busy_timeout,
)
from portal.settings.dev import DEMO_MODE, INSECURE_DEFAULTS_ALLOWED, test_db_suffix

# --- Start-up checks ---------------------------------------------------------------------
if not SECRET_KEY:
    raise ImproperlyConfigured(
        "SECRET_KEY (or SECRET_KEY_FILE) is required unless DEBUG=1 or PORTAL_DEMO=1"
    )
if PORTAL_OIDC_ISSUER and not PORTAL_OIDC_CLIENT_ID:
    raise ImproperlyConfigured("PORTAL_OIDC_ISSUER is set: PORTAL_OIDC_CLIENT_ID is required too")
if PORTAL_OIDC_ISSUER and "openid" not in PORTAL_OIDC_SCOPES.split():
    raise ImproperlyConfigured("PORTAL_OIDC_SCOPES must contain openid")
if PORTAL_OIDC_LEEWAY > 300:
    raise ImproperlyConfigured(f"PORTAL_OIDC_LEEWAY={PORTAL_OIDC_LEEWAY} must be at most 300")
if PORTAL_OIDC_API_AUDIENCE and PORTAL_OIDC_API_AUDIENCE == PORTAL_OIDC_CLIENT_ID:
    raise ImproperlyConfigured(
        "PORTAL_OIDC_API_AUDIENCE must not be the client id (PORTAL_OIDC_CLIENT_ID): id tokens "
        "name the client id as their audience and would pass as API tokens"
    )
if PORTAL_OIDC_CONFIRM_MAX_AGE > 30 * 24 * 3600:
    raise ImproperlyConfigured(
        f"PORTAL_OIDC_CONFIRM_MAX_AGE={PORTAL_OIDC_CONFIRM_MAX_AGE} must be at most 2592000 "
        "(30 days)"
    )
if not PORTAL_ENCRYPTION_KEYS:
    raise ImproperlyConfigured(
        "PORTAL_ENCRYPTION_KEYS (or PORTAL_ENCRYPTION_KEY_FILE) is required unless "
        "DEBUG=1 or PORTAL_DEMO=1; make one with: python manage.py generate_encryption_key"
    )
if not PORTAL_UPSTREAM_NETWORKS:
    raise ImproperlyConfigured(
        "PORTAL_UPSTREAM_NETWORKS is required unless DEBUG=1 or PORTAL_DEMO=1: the compute "
        "nodes' networks (CIDRs, comma-separated), the only ones the session proxy may reach"
    )
if bool(REDIS_SENTINELS) != bool(REDIS_SENTINEL_MASTER):
    raise ImproperlyConfigured("REDIS_SENTINELS and REDIS_SENTINEL_MASTER go together: set both")
if REDIS_SENTINEL_MASTER:
    redis_ha.check_master(REDIS_SENTINEL_MASTER)
    redis_ha.check_sentinel_mode(REDIS_URL, REDIS_SENTINEL_PASSWORD, demo=DEMO_MODE)
if (
    PORTAL_SSH_CA_KEY_FILES
    and not PORTAL_SSH_CERT_SOURCE_ADDRESSES
    and not INSECURE_DEFAULTS_ALLOWED
):
    # A certificate that works from anywhere is a credential worth stealing for minutes.
    raise ImproperlyConfigured(
        "PORTAL_SSH_CA_KEY_FILES is set but PORTAL_SSH_CERT_SOURCE_ADDRESSES is not: name the "
        "addresses (CIDRs) the login nodes see the portal's workers and web hosts connect "
        "from, so that a certificate is accepted only from there."
    )
# Renamed (they sat beside Django's own SESSION_* settings): an old name in the environment
# stops the start instead of being ignored in favour of a default.
for _old, _new in {
    "SESSION_DOMAIN": "PROXY_SESSION_DOMAIN",
    "SESSION_SCHEME": "PROXY_SESSION_SCHEME",
    "SESSION_PUBLIC_PORT": "PROXY_SESSION_PUBLIC_PORT",
    "SESSION_COOKIE_MAX_AGE": "PROXY_COOKIE_MAX_AGE",
    "SESSION_CODE_TTL": "PROXY_CODE_TTL",
}.items():
    if _old in os.environ:
        raise ImproperlyConfigured(f"{_old} is now called {_new}: rename it in the environment.")
if PORTAL_BULK_SSH_CIPHERS and not re.fullmatch(
    r"[a-z0-9][a-z0-9@.-]*(,[a-z0-9][a-z0-9@.-]*)*", PORTAL_BULK_SSH_CIPHERS
):
    raise ImproperlyConfigured(
        "PORTAL_BULK_SSH_CIPHERS is a comma-separated list of OpenSSH cipher names "
        "(for example aes128-gcm@openssh.com,chacha20-poly1305@openssh.com), or openssh"
    )
if EMAIL_USE_TLS and EMAIL_USE_SSL:
    raise ImproperlyConfigured("set EMAIL_USE_TLS or EMAIL_USE_SSL, not both")

# --- Django's wiring ----------------------------------------------------------------------
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    # The portal's own apps, from the ground floor up (docs/explain/architecture.md: the house).
    "clusters",
    "identity",
    "catalog",
    "projects",
    "jobs",
    "metrics",
    "tracking",
    "usage",
    "experiments",
    "registry",
    "retention",
    "notifications",
    "files",
    "proxy",
    "endpoints",
    "ops",
    "frontend",
    # Development and load tooling (no models, no URLs): its management commands.
    "devtools",
]

MIDDLEWARE = [
    # Outermost: each request timed for /metrics, whatever answers it (ops/middleware.py).
    "ops.middleware.RequestMetricsMiddleware",
    # First: on session hosts only the proxy's login handshake answers.
    "proxy.middleware.SessionHostMiddleware",
    "endpoints.middleware.EndpointHostMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # A deadline on cluster work, and a bounded number of one person's requests waiting on
    # clusters at once (429 past it): clusters/share.py.
    "clusters.share.ClusterShareMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # With OIDC on, a session ends when its person's provider confirmation is too old.
    "identity.middleware.ConfirmationMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # A view's database error (the database restarting) is a 503 with Retry-After.
    "portal.middleware.DatabaseUnavailableMiddleware",
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"
ASGI_APPLICATION = "portal.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "notifications.context.unread_count",
            ],
        },
    },
]

# --- Database -----------------------------------------------------------------
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=0)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATA_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        # Take the write lock at BEGIN so concurrent writers wait (busy timeout)
        # instead of failing with "database is locked" on lock upgrade.
        "transaction_mode": "IMMEDIATE",
        "timeout": sqlite_busy_timeout,
    }
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test.sqlite3")}
# PostgreSQL: the pool of PORTAL_DB_POOL_MAX connections per process (configured.py).
if PORTAL_DB_POOL_MAX and DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": min(2, PORTAL_DB_POOL_MAX),
        "max_size": PORTAL_DB_POOL_MAX,
        "timeout": PORTAL_DB_POOL_TIMEOUT,
    }
# Test runs started together each get their own test database (dev.py).
if test_db_suffix:
    _db = DATABASES["default"]
    _base = _db.get("TEST", {}).get("NAME") or f"test_{_db['NAME']}"
    _db["TEST"] = {"NAME": f"{_base}_{test_db_suffix}"}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Auth -----------------------------------------------------------------------
# Sign-in throttling comes first, in front of whatever backends are configured.
# Then the local-password rule (with OIDC on, only PORTAL_LOCAL_LOGIN_USERS may use a
# password, the admin's login included), and last the backend that keeps a session made by
# an OIDC sign-in (identity/backends.py).
AUTHENTICATION_BACKENDS = [
    "identity.throttle.SignInThrottle",
    "identity.backends.LocalPasswordPolicy",
    *authentication_backends,
    "identity.backends.ProviderSessionBackend",
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"

# --- Security -------------------------------------------------------------------
SESSION_COOKIE_SECURE = SECURE_COOKIES
CSRF_COOKIE_SECURE = SECURE_COOKIES
if SECURE_COOKIES:
    # __Host-: browsers accept these only from the portal's own host, Secure and without
    # a Domain, so no page on another subdomain (a notebook on a session host included)
    # can set or overwrite them.
    SESSION_COOKIE_NAME = "__Host-sessionid"
    CSRF_COOKIE_NAME = "__Host-csrftoken"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
if behind_tls_proxy:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"

# --- Static files -------------------------------------------------------------------
STATIC_URL = "static/"
# Plotly's own plotly.min.js is served from the installed package (no CDN).
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "frontend.finders.PlotlyFinder",
]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
# A missing manifest entry falls back to the unhashed file instead of a 500.
WHITENOISE_MANIFEST_STRICT = False

LANGUAGE_CODE = "en-us"
USE_I18N = True
USE_TZ = True

_log_format = PORTAL_LOG_FORMAT or ("console" if DEMO_MODE else "json")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "ops.logs.Context"}, "chatter": {"()": "ops.logs.Chatter"}},
    "formatters": {
        "console": {
            "()": "ops.logs.Console",
            "fmt": "%(asctime)s %(levelname)s %(name)s [%(request_id)s]: %(message)s",
        },
        "json": {
            "()": "ops.logs.Json",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(process)d %(request_id)s %(message)s",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        },
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": _log_format,
            # A console (the demo's) shows what a person needs; JSON lines keep every task's
            # received/succeeded line for a log collector (ops/logs.py: Chatter).
            "filters": ["context", "chatter"] if _log_format == "console" else ["context"],
        }
    },
    "root": {"handlers": ["console"], "level": log_level},
    "loggers": {"paramiko": {"level": "WARNING"}},
}
# The worker logs through LOGGING (JSON lines, request ids) rather than Celery's own format.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# --- REST API ---------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "identity.token_auth.BearerTokenAuthentication",
        "identity.api_auth.ProviderTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "identity.token_auth.HasTokenScope",
    ],
    "DEFAULT_THROTTLE_CLASSES": ["identity.token_auth.TokenRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"api": PORTAL_API_RATE, "ingest": PORTAL_METRICS_INGEST_RATE},
    "DEFAULT_PARSER_CLASSES": [
        "jobs.api.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "common.api_errors.exception_handler",
    "URL_FORMAT_OVERRIDE": None,  # ?format=csv is ours (metrics export), not DRF's
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "HPC portal API",
    "DESCRIPTION": "Launch, follow and cancel Slurm jobs; read their logs and metrics. "
    "Authenticate with `Authorization: Bearer <personal token>` (Account page, or "
    "`manage.py issue_token USERNAME`).",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",  # served from this server: no CDN
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "JobStateEnum": "common.choices.State",
        "LauncherEnum": "common.choices.Launcher",
        "JobKindEnum": "common.choices.Kind",
        "LaunchKindEnum": "common.choices.LAUNCHED_KIND_CHOICES",
    },
}

# --- Celery -----------------------------------------------------------------------------
CELERY_BROKER_URL = REDIS_URL
if REDIS_SENTINELS:
    CELERY_BROKER_URL = redis_ha.broker_url(REDIS_URL, REDIS_SENTINELS)
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A broker outage never ends the worker (portal/worker.py: Redis, mended for reconnects).
CELERY_BROKER_TRANSPORT = (
    "portal.worker:SentinelTransport" if REDIS_SENTINELS else "portal.worker:Transport"
)
# A task whose worker process is killed goes back to the queue at once; tasks that talk
# to clusters are killed after PORTAL_TASK_TIME_LIMIT seconds; a message a dead worker
# had reserved comes back after the visibility timeout (the recovery sweep finds lost
# submissions and cancellations sooner). It must exceed the longest retry countdown.
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# Redis redelivers a message a dead worker had reserved after this many seconds (Celery's
# default is an hour); longer than any task may run or any retry may wait.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": int(max(PORTAL_TASK_TIME_LIMIT, PORTAL_RETRY_BACKOFF_MAX * 1.2) * 2),
    **(
        redis_ha.broker_transport_options(REDIS_SENTINEL_MASTER, REDIS_SENTINEL_PASSWORD)
        if REDIS_SENTINELS
        else {}
    ),
}
# The default queue, the experiments' and the webhooks' (configured.py says why).
CELERY_TASK_QUEUES = [
    Queue(name, Exchange(name), routing_key=name)
    for name in (
        CELERY_TASK_DEFAULT_QUEUE,
        PORTAL_EXPERIMENT_QUEUE,
        PORTAL_WEBHOOK_QUEUE,
        PORTAL_IMPORT_QUEUE,
        PORTAL_TRANSFER_QUEUE,
    )
]
CELERY_TASK_ROUTES = {
    "jobs.experiments.tasks.*": {"queue": PORTAL_EXPERIMENT_QUEUE},
    "jobs.notifications.tasks.deliver_webhook": {"queue": PORTAL_WEBHOOK_QUEUE},
    "jobs.tracking.tasks.*": {"queue": PORTAL_IMPORT_QUEUE},
    "files.tasks.start_transfer": {"queue": PORTAL_TRANSFER_QUEUE},
    "files.tasks.poll_transfer": {"queue": PORTAL_TRANSFER_QUEUE},
}
# Task modules besides each app's tasks.py (autodiscovered).
CELERY_IMPORTS = ("usage.idle_policy", "endpoints.traffic")
CELERY_BEAT_SCHEDULE = {
    "sync-clusters": {"task": "jobs.tasks.sync_clusters", "schedule": PORTAL_SYNC_INTERVAL},
    "deliver-job-events": {
        "task": "jobs.tasks.deliver_job_events",
        "schedule": PORTAL_OUTBOX_INTERVAL,
        # A backlog of sweeps is worth one: each takes everything due.
        "options": {"expires": PORTAL_OUTBOX_INTERVAL},
    },
    # Imports whose message was lost or whose worker died are sent again.
    "resend-imports": {"task": "jobs.tracking.tasks.resend_imports", "schedule": 300.0},
    "tail-running-metrics": {
        "task": "jobs.metrics.tasks.tail_running",
        "schedule": PORTAL_SYNC_INTERVAL,
        "options": {"expires": PORTAL_SYNC_INTERVAL},
    },
    "recover-jobs": {"task": "jobs.tasks.recover_jobs", "schedule": PORTAL_RECOVER_AFTER / 2},
    "advance-experiments": {
        "task": "jobs.experiments.tasks.advance_experiments",
        "schedule": PORTAL_EXPERIMENT_INTERVAL,
        "options": {"expires": PORTAL_EXPERIMENT_INTERVAL},
    },
    "idle-gpu-policy": {
        "task": "jobs.idle_policy.enforce_idle_gpu_policy",
        "schedule": PORTAL_IDLE_POLICY_INTERVAL,
        "options": {"expires": PORTAL_IDLE_POLICY_INTERVAL},
    },
    "efficiency-digest": {
        "task": "jobs.tasks.send_efficiency_digest",
        "schedule": 7 * 24 * 3600,
        "options": {"expires": 24 * 3600},
    },
    "sync-projects": {
        "task": "projects.tasks.sync_projects",
        "schedule": PORTAL_PROJECT_SYNC_INTERVAL,
        "options": {"expires": PORTAL_PROJECT_SYNC_INTERVAL},
    },
    "sweep-owed-notifications": {
        "task": "jobs.notifications.tasks.sweep_owed",
        "schedule": 300,
        "options": {"expires": 300},
    },
    "warn-walltime-ending": {
        "task": "jobs.notifications.tasks.warn_walltime_ending",
        "schedule": 60,
        "options": {"expires": 60},
    },
    # A version whose manifest task was lost (a broker restarted empty) is read again.
    "resend-manifests": {
        "task": "registry.tasks.resend_pending",
        "schedule": 120,
        "options": {"expires": 120},
    },
    # A retention plan whose task was lost is listed or applied again.
    "resend-retention-plans": {
        "task": "retention.tasks.resend_lost",
        "schedule": 180,
        "options": {"expires": 180},
    },
    "prune-audit-log": {
        "task": "jobs.tasks.prune_audit_log",
        "schedule": 24 * 3600,
        "options": {"expires": 24 * 3600},
    },
    # Refresh tokens re-confirm people whose provider confirmation is half its age.
    "reconfirm-identities": {
        "task": "portal.identity.tasks.reconfirm_identities",
        "schedule": min(max(PORTAL_OIDC_CONFIRM_MAX_AGE / 8, 1.0), 900.0),
        "options": {"expires": min(max(PORTAL_OIDC_CONFIRM_MAX_AGE / 8, 1.0), 900.0)},
    },
    # Each person's account at the provider, for those it can be asked about.
    "check-provider-accounts": {
        "task": "portal.identity.tasks.check_accounts",
        "schedule": float(PORTAL_OIDC_ACCOUNT_SECONDS),
        "options": {"expires": float(PORTAL_OIDC_ACCOUNT_SECONDS)},
    },
    "watch-transfers": {
        "task": "files.tasks.watch_transfers",
        "schedule": PORTAL_TRANSFER_POLL_INTERVAL,
        "options": {"expires": PORTAL_TRANSFER_POLL_INTERVAL},
    },
    "reconcile-endpoint-routes": {
        "task": "endpoints.tasks.reconcile_routes",
        "schedule": PROXY_RECONCILE_INTERVAL,
        "options": {"expires": PROXY_RECONCILE_INTERVAL},
    },
    "watch-endpoints": {
        "task": "endpoints.traffic.watch",
        "schedule": PORTAL_ENDPOINT_IDLE_INTERVAL,
        "options": {"expires": PORTAL_ENDPOINT_IDLE_INTERVAL},
    },
    "reconcile-session-routes": {
        "task": "proxy.tasks.reconcile_routes",
        "schedule": PROXY_RECONCILE_INTERVAL,
        # A backlog of reconciles is worth one: the next one does it all.
        "options": {"expires": PROXY_RECONCILE_INTERVAL},
    },
}

# --- Channels and the cache (Redis) ---------------------------------------------------
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {
            "hosts": [
                {
                    **(
                        redis_ha.channel_layer_host(
                            REDIS_URL,
                            REDIS_SENTINELS,
                            REDIS_SENTINEL_MASTER,
                            REDIS_SENTINEL_PASSWORD,
                        )
                        if REDIS_SENTINELS
                        else {"address": REDIS_URL}
                    ),
                    # A process's sockets wait for messages in one BZPOPMIN that Redis holds
                    # up to 5 s (the layer's brpop_timeout); redis-py's own read timeout is
                    # 5 s too, so a reply a moment late raised TimeoutError in whichever
                    # socket's consumer was waiting, and closed that dashboard's socket.
                    "socket_timeout": 15,
                    "socket_connect_timeout": 5,
                    "max_connections": PORTAL_CHANNELS_MAX_CONNECTIONS,
                }
            ],
            "prefix": "portal:channels:",
        },
    }
}

CACHES = {
    "default": {
        "BACKEND": "common.cache.RedisCache",  # one connection pool per process
        "LOCATION": REDIS_URL,
        # Locks and throttle counts; a test run uses its own prefix on a shared Redis.
        "KEY_PREFIX": cache_prefix,
        # JSON, not pickle: reading the cache never runs code, whoever wrote to Redis.
        "OPTIONS": {
            "serializer": "common.cache.JSONSerializer",
            **(
                redis_ha.cache_options(
                    REDIS_SENTINELS, REDIS_SENTINEL_MASTER, REDIS_SENTINEL_PASSWORD
                )
                if REDIS_SENTINELS
                else {}
            ),
        },
    }
}
