"""Model endpoints at the proxy: routed by API key, answers carried unbuffered.

What holds today is the data path (routes.py): HAProxy's ``be_endpoints`` backend and its
runtime entries. What comes next, by the same design: a version is served by a
long-running job of its owner's (MLflow's scoring server, or an OpenAI-compatible server
for language models) at a stable address, ``ep-<id>.<session domain>``, whatever job
carries it now; programs reach it with an API key (hashed here and in HAProxy's map,
with expiry, scope and a rate), which HAProxy checks on every request.
"""
