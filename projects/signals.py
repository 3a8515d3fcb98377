"""What other apps hear of projects."""

from django.dispatch import Signal

# A sync changed a cluster's projects or who is in them (joins, leaves, roles, accounts
# gone): sent with ``cluster``. The session proxy re-pushes the openers of shared
# sessions (proxy/routes.py), so a person who left stops opening them at that sync.
members_changed = Signal()
