"""What identity tells the apps above it, without importing them."""

from django.dispatch import Signal

# The provider no longer vouches for a person (a back-channel logout, a withdrawal at a
# refused sign-in or refresh): ``user``. Receivers take away what lets them in now (the
# session proxy's opener entries: proxy/routes.py), not at some expiry.
withdrawn = Signal()
