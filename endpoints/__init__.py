"""Registered versions served by jobs behind the proxy, opened by API keys.

A version is served by a long-running job of its owner's (serving.py: the centre's
command, MLflow's scoring server by default, behind the session guard) at a stable
address, ``ep-<id>.<session domain>``, whatever job carries it now; programs reach it
with an API key (models.py: only its sha256 kept, here and in HAProxy's map, with an
expiry, a scope and a rate), which HAProxy checks on every request (routes.py). A
request to a stopped endpoint with one of its keys starts it (views.py).
"""
