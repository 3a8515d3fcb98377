"""Who the portal is acting for on a cluster, for the certificate it signs and the audit log.

Two context variables, set and read in one task or request (contextvars follow threads
and asyncio tasks, so one request never sees another's):

- ``purpose``: what the portal is doing and for whom, e.g. ``"submit job 42"``; set by
  ``identity.audit`` around an action and written into the key id of a certificate signed
  for a connection opened meanwhile.
- ``requester``: the portal user who asked for the action ("" for the portal's own
  bookkeeping), set by ``identity.audit`` with ``purpose``; a certificate's key id names them.
- ``key_id``: the key id of the certificate that authenticated the connection an
  operation last ran on ("" for a stored key); set by the connection pool, read by the
  audit log so that each row names the sshd login that carried it.
"""

from __future__ import annotations

from contextvars import ContextVar

purpose: ContextVar[str] = ContextVar("cluster_purpose", default="")
# The kind of action alone (``"file_list"``, without its target): what a pooled connection
# is kept for (clusters/pool.py), so that browsing twenty folders is one login, not
# twenty.
action: ContextVar[str] = ContextVar("cluster_action", default="")
requester: ContextVar[str] = ContextVar("cluster_requester", default="")
key_id: ContextVar[str] = ContextVar("cluster_key_id", default="")
