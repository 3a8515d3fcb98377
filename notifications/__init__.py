"""What happened to a person's jobs, told in the portal and by mail.

Notifications (issue #34): what happened to a person's jobs,
sessions and experiments, kept in the portal (the list and its unread count) and sent by the
channels each person chose per event (email now; webhooks later, as another channel).
"""
