# Quick start: `make demo` (everything, then the stack in the foreground) and
# `make test` (everything, then every test). Each step is idempotent.
SHELL := /bin/bash
PY := .venv/bin/python
IS_ROOT := $(shell [ "$$(id -u)" = 0 ] && echo yes)
DEMO_ENV := PORTAL_DEMO=1
PORT ?= 8000
SESSION_PORT ?= 8443
DATA_DIR := $(or $(PORTAL_DATA_DIR),var)
# The demo's identity provider (deploy/idp/up.sh writes its PORTAL_OIDC_* lines here):
# `make demo` signs in through it when the file is there (the provider's demo is the portal's
# demo, linked by its set-up: link_demo_identity). Tests never read it: their stacks turn
# OIDC on themselves.
IDP_ENV ?= $(IDP_DIR)/portal.env

# Chromium for the end-to-end tests: Debian's package (Playwright's own download
# is not possible on machines without internet access).
.PHONY: help venv services services-down browser monitoring mlflow-server devcluster devcluster-down devcluster-accounts condorpool condorpool-down idp idp-down mail mail-down demo-locked demo-setup demo test bench bench-load lint typecheck floors docs docs-screens docs-linkcheck format clean

help:
	@echo "make demo            set everything up and run the portal at http://localhost:$(PORT)/"
	@echo "make test            set everything up and run the whole test suite"
	@echo "make devcluster      start the local Slurm + sshd dev cluster (root)"
	@echo "make devcluster-down stop it"
	@echo "make condorpool      start the local HTCondor pool + its sshd (root)"
	@echo "make condorpool-down stop it"
	@echo "make idp             start the local OpenID Connect provider (glewlwyd, root)"
	@echo "make idp-down        stop it"
	@echo "make mail            start the local mail server (exim4 on 127.0.0.1:2525, root)"
	@echo "make mail-down       stop it"
	@echo "make monitoring      install Debian's prometheus and promtool (root; make test does)"
	@echo "make services-down   stop the portal's own Redis (make clean does too)"
	@echo "make bench           benchmarks in bench/ (dev cluster)"
	@echo "make bench-load      the portal under a centre's load (LOAD_SCALE=0.01 for a quick run)"
	@echo "make lint            ruff, mypy and the floors"
	@echo "make floors          import-linter: each app imports only the floors below it"
	@echo "make docs            the documentation (Sphinx), served at /docs/"
	@echo "make docs-screens    the docs' screenshots, taken again by the browser tests"
	@echo "make typecheck       mypy (also run by make lint and make test)"

venv:
	@bash deploy/bootstrap.sh

services:
	@bash deploy/services.sh

# The portal's own Redis (deploy/redis.sh) keeps running after `make demo`/`make test`.
services-down:
	@bash deploy/redis.sh stop

browser:
ifeq ($(IS_ROOT),yes)
	@[ -x /usr/bin/chromium ] || { echo "installing Debian's chromium for the browser tests"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; }
else
	@[ -x /usr/bin/chromium ] || echo "browser: /usr/bin/chromium missing; browser tests will be skipped (install Debian's chromium)"
endif

# Debian's prometheus (and its promtool): the shipped alert rules are checked with it.
monitoring:
ifeq ($(IS_ROOT),yes)
	@command -v promtool >/dev/null || { echo "installing Debian's prometheus (promtool) for the metrics tests"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; }
else
	@command -v promtool >/dev/null || echo "monitoring: promtool missing; install Debian's prometheus"
endif

# MLflow's own tracking server and UI (the full `mlflow` package, pinned in
# deploy/mlflow-server.lock) in an environment of its own, var/mlflow-server: the tests
# open an exported mlruns folder in it and import runs from it as from a centre's server.
MLFLOW_SERVER_ENV := var/mlflow-server
mlflow-server: venv
	@stamp=$$(sha256sum deploy/mlflow-server.lock | cut -c1-16); \
	[ "$$(cat "$(MLFLOW_SERVER_ENV)/.installed" 2>/dev/null)" = "$$stamp" ] || { \
		echo "installing MLflow's tracking server (deploy/mlflow-server.lock) into $(MLFLOW_SERVER_ENV)"; \
		rm -rf "$(MLFLOW_SERVER_ENV)" && $(PY) -m venv "$(MLFLOW_SERVER_ENV)" && \
		{ "$(MLFLOW_SERVER_ENV)/bin/pip" install -q --no-deps -r deploy/mlflow-server.lock 2>&1 | { grep -v "is ignored: it is neither" || true; }; } && \
		"$(MLFLOW_SERVER_ENV)/bin/mlflow" --version >/dev/null && echo "$$stamp" > "$(MLFLOW_SERVER_ENV)/.installed"; }

# The dev cluster needs root (packages, users, daemons); without root the demo
# still serves the admin and catalog, with no cluster to submit to.
devcluster: venv
ifeq ($(IS_ROOT),yes)
	@$(DEMO_ENV) $(PY) manage.py ssh_ca --pub-out "$(DATA_DIR)/ssh-ca/trusted.pub" >/dev/null
	@PORTAL_SSH_CA_PUB="$(DATA_DIR)/ssh-ca/trusted.pub" bash deploy/devcluster/up.sh
	@$(DEMO_ENV) $(PY) manage.py migrate --noinput -v0
	@$(DEMO_ENV) $(PY) manage.py register_devcluster
else
	@echo "devcluster: skipped (needs root); run 'sudo make devcluster' for a local Slurm cluster"
endif

devcluster-down:
	@bash deploy/devcluster/down.sh

# 200 more cluster users on the dev cluster (loaduser001..200): the sync at a centre's
# population (tests/devcluster/test_sync_population.py, bench/sync_accounts.py).
devcluster-accounts: devcluster
ifeq ($(IS_ROOT),yes)
	@bash deploy/devcluster/accounts.sh 200
else
	@echo "devcluster-accounts: skipped (needs root)"
endif

# A one-machine HTCondor pool (Debian trixie's minicondor in a debootstrap root, built
# once into /var/lib/portal-condorpool) with its own sshd: the second scheduler.
condorpool: venv
ifeq ($(IS_ROOT),yes)
	@$(DEMO_ENV) $(PY) manage.py ssh_ca --pub-out "$(DATA_DIR)/ssh-ca/trusted.pub" >/dev/null
	@PORTAL_SSH_CA_PUB="$(DATA_DIR)/ssh-ca/trusted.pub" bash deploy/condorpool/up.sh
	@$(DEMO_ENV) $(PY) manage.py migrate --noinput -v0
	@$(DEMO_ENV) $(PY) manage.py register_condorpool
else
	@echo "condorpool: skipped (needs root); run 'sudo make condorpool' for a local HTCondor pool"
endif

condorpool-down:
	@bash deploy/condorpool/down.sh

# A real OpenID Connect provider on 127.0.0.1:4593 (Debian's glewlwyd) with the people
# demo, hpcuser, hpcuser2 and outsider; the portal's client settings in
# /var/lib/portal-idp/portal.env, the passwords in users.json (both root only).
IDP_DIR := $(or $(PORTAL_IDP_DIR),/var/lib/portal-idp)
IDP_PORT := $(or $(PORTAL_IDP_PORT),4593)
idp:
ifeq ($(IS_ROOT),yes)
	@PORTAL_IDP_DEMO_URL=$${PORTAL_IDP_DEMO_URL:-http://localhost:$(PORT)} bash deploy/idp/up.sh
else
	@echo "idp: skipped (needs root); run 'sudo make idp' for a local OpenID Connect provider"
endif

idp-down:
	@bash deploy/idp/down.sh

# A real mail server on 127.0.0.1:2525 (Debian's exim4 with its own configuration) that
# delivers every message, for any address, to /var/lib/portal-mail/Maildir: the demo's
# notifications (PORTAL_DEMO's EMAIL_HOST/EMAIL_PORT defaults) and the tests' mailbox.
MAIL_DIR := $(or $(PORTAL_MAIL_DIR),/var/lib/portal-mail)
mail:
ifeq ($(IS_ROOT),yes)
	@bash deploy/mail/up.sh
else
	@echo "mail: skipped (needs root); run 'sudo make mail' for a local mail server"
endif

mail-down:
	@bash deploy/mail/down.sh

demo-setup: venv docs services devcluster condorpool idp mail
	@$(DEMO_ENV) $(PY) manage.py migrate --noinput -v0
	@$(DEMO_ENV) $(PY) manage.py collectstatic --noinput -v0
	@$(DEMO_ENV) $(PY) manage.py make_dev_certs
	@$(DEMO_ENV) $(PY) manage.py load_demo_catalog
	@$(DEMO_ENV) $(PY) manage.py create_demo_user
	@if [ -r "$(IDP_ENV)" ]; then $(DEMO_ENV) $(PY) manage.py link_demo_identity --idp-dir "$(IDP_DIR)" --redirect http://localhost:$(PORT)/oidc/callback/; fi
ifeq ($(IS_ROOT),yes)
	@$(DEMO_ENV) $(PY) manage.py register_devcluster --ssh-auth certificate --account demo=hpcuser --default
	@$(DEMO_ENV) $(PY) manage.py register_condorpool --ssh-auth certificate --account demo=condoruser
endif

# One stack per data directory: `make demo` holds DATA_DIR/demo.lock (flock) from before
# set-up until the stack stops, and a second one stops at once, before set-up touches
# anything; deploy/stack-free.sh also refuses while another run_proxy (a test stack) serves
# from there.
demo:
	@mkdir -p -m 700 "$(DATA_DIR)"
	@flock --nonblock --conflict-exit-code 75 "$(DATA_DIR)/demo.lock" $(MAKE) --no-print-directory demo-locked; \
		status=$$?; [ $$status != 75 ] || echo "make demo: a portal stack already runs from $(DATA_DIR) (its make demo holds $(DATA_DIR)/demo.lock); stop it first (Ctrl-C where it runs), or give this one its own PORTAL_DATA_DIR. Nothing was changed." >&2; \
		exit $$status

demo-locked:
	@bash deploy/stack-free.sh "$(DATA_DIR)"
	@$(MAKE) --no-print-directory demo-setup
	@echo "Session links: https://<id>.sessions.localhost:$(SESSION_PORT)/ (dev CA: var/tls/ca.pem)"
	@if [ -r "$(MAIL_DIR)/mail.env" ]; then echo "Mail: every email the portal sends lands in $(MAIL_DIR)/Maildir (e.g. mutt -f $(MAIL_DIR)/Maildir)"; fi
	@echo "Docs: http://localhost:$(PORT)/docs/   Ctrl-C stops everything. The way in follows once it answers."
	@set -a; if [ -r "$(IDP_ENV)" ]; then . "$(IDP_ENV)"; PORTAL_IDP_USERS="$(IDP_DIR)/users.json"; \
		PORTAL_OIDC_PROVIDER_NAME=$${PORTAL_OIDC_PROVIDER_NAME-the demo identity provider}; \
		PORTAL_OIDC_ALLOWED_GROUPS=$${PORTAL_OIDC_ALLOWED_GROUPS-portal-users}; \
		PORTAL_OIDC_STAFF_GROUPS=$${PORTAL_OIDC_STAFF_GROUPS-portal-staff}; \
		PORTAL_OIDC_SUPERUSER_GROUPS=$${PORTAL_OIDC_SUPERUSER_GROUPS-portal-staff}; \
		PORTAL_OIDC_LOGOUT_ID_TOKEN_HINT=$${PORTAL_OIDC_LOGOUT_ID_TOKEN_HINT-1}; \
		PORTAL_OIDC_REFRESH_CONFIRMS=$${PORTAL_OIDC_REFRESH_CONFIRMS-0}; fi; set +a; \
		rm -rf "$(DATA_DIR)/prometheus" && mkdir -p -m 700 "$(DATA_DIR)/prometheus" && \
		$(DEMO_ENV) PORT=$(PORT) PROXY_SESSION_PUBLIC_PORT=$(SESSION_PORT) PORTAL_URL=http://localhost:$(PORT) \
		PROMETHEUS_MULTIPROC_DIR="$(abspath $(DATA_DIR))/prometheus" \
		exec .venv/bin/honcho -d . -f deploy/Procfile.demo start

# Type errors and an import against the floors fail the run before anything is set up.
test: venv typecheck floors docs services browser monitoring mlflow-server devcluster devcluster-accounts condorpool idp mail
	@PORTAL_DEMO=1 $(PY) manage.py collectstatic --noinput -v0
	@bash deploy/run-tests.sh

bench: venv services devcluster
ifeq ($(IS_ROOT),yes)
	@command -v wrk >/dev/null && command -v curl >/dev/null && command -v gcc >/dev/null && command -v valgrind >/dev/null || { \
		echo "installing Debian's wrk, curl, gcc and valgrind (load generators; gcc builds bench/*.c; callgrind counts HAProxy's instructions)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends wrk curl gcc libc6-dev valgrind >/dev/null; }
endif
	@$(DEMO_ENV) $(PY) bench/ssh_reuse.py
	@$(DEMO_ENV) $(PY) bench/ssh_cert.py
	@$(DEMO_ENV) $(PY) bench/proxy.py
	@$(DEMO_ENV) $(PY) bench/proxy_cost.py
	@$(DEMO_ENV) $(PY) bench/endpoints.py
	@$(DEMO_ENV) $(PY) bench/proxy_ws.py
	@$(DEMO_ENV) $(PY) bench/metrics.py
	@$(DEMO_ENV) $(PY) bench/compare.py
	@$(DEMO_ENV) $(PY) bench/files_transfer.py
	@$(DEMO_ENV) $(PY) bench/imports.py
	@$(PY) bench/sweeps.py

# A centre's busiest day (#35): PostgreSQL database portal_load seeded by seed_load at
# LOAD_SCALE (1.0: 1,000 users, 105,000 jobs, 100 million metric points; kept between runs),
# loaded with wrk, first renders in Chromium (the two biggest pages at full size at any
# scale: bench/bigpages.py), a static file from a web process against HAProxy's cache
# (bench/static.py). One table at the end; LOAD_BEFORE=<commit> measures that commit's
# code first on the same database and prints both.
bench-load: venv services browser devcluster devcluster-accounts
ifeq ($(IS_ROOT),yes)
	@command -v wrk >/dev/null && command -v gcc >/dev/null || { \
		echo "installing Debian's wrk and gcc (load generators; gcc builds bench/wsbench.c)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends wrk gcc libc6-dev >/dev/null; }
endif
	@$(DEMO_ENV) $(PY) bench/load.py
	@$(DEMO_ENV) $(PY) bench/static.py
	@$(DEMO_ENV) $(PY) bench/bigpages.py
	@$(DEMO_ENV) $(PY) bench/sync_accounts.py
	@$(DEMO_ENV) $(PY) bench/load_failover.py

lint: venv typecheck floors
	@.venv/bin/ruff check .
	@.venv/bin/ruff format --check .

# mypy with django-stubs ([tool.mypy] in pyproject.toml); its plugin imports the settings.
# The cache (var/mypy_cache) does not notice when the type of a setting changes (the
# plugin reads them from portal/settings/), so it starts afresh after an edit there.
typecheck: venv
	@[ -f var/mypy_cache/.settings ] && [ -z "$$(find portal/settings portal/env.py -name "*.py" -newer var/mypy_cache/.settings)" ] \
		|| rm -rf var/mypy_cache
	@PORTAL_DEMO=1 .venv/bin/mypy
	@touch var/mypy_cache/.settings

# The documentation (docs/, Sphinx + MyST, the Furo theme) into var/docs-html, served at
# /docs/: warnings are errors (a broken reference or an orphan page fails); the reference
# pages are generated from the code at each build (docs/_ext/portal_reference.py).
docs: venv
	@PORTAL_DEMO=1 .venv/bin/sphinx-build -q -n -W --keep-going -b html docs $(DATA_DIR)/docs-html

# The docs' screenshots, taken again by the browser tests that take them, into docs/screens/
# (devtools/docs_screens.py; commit what changed).
docs-screens: venv
	@PORTAL_DEMO=1 $(PY) -m devtools.docs_screens

# External links in the docs (needs the internet, so it gates nothing).
docs-linkcheck: venv
	@PORTAL_DEMO=1 .venv/bin/sphinx-build -q -b linkcheck docs $(DATA_DIR)/docs-linkcheck || true

# The floors of the house ([tool.importlinter] in pyproject.toml; tests/test_floors.py).
floors: venv
	@.venv/bin/lint-imports --no-cache

format: venv
	@.venv/bin/ruff format .
	@.venv/bin/ruff check --fix .

clean: services-down
	rm -rf .venv var
