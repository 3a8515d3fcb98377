"""Notifications (issue #34), a nested app of jobs: what happened to a person's jobs,
sessions and experiments, kept in the portal (the list and its unread count) and sent by the
channels each person chose per event (email now; webhooks later, as another channel)."""
