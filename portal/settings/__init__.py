"""Settings for the HPC portal (DJANGO_SETTINGS_MODULE=portal.settings). Every value comes
from the environment.

The docs' settings reference (generated from configured.py and dev.py) lists each
variable. Code reads
``settings.X`` at call time so tests can override any of them.

Three layers, in the order they run (each reads only the ones before it):

- dev.py: the dev/test switches (DEBUG, PORTAL_DEMO) that decide which defaults apply,
  and what exists only for development and tests (the demo's own secrets and Redis, the
  dev cluster's state, the test database's suffix);
- configured.py: what an operator sets, every environment variable with its default
  and its meaning, grouped by concern;
- computed.py: the start-up checks that stop a start whose values cannot work, then what
  Django, Celery and Channels are given, built from the layers above.
"""

# The layers in the order they run.
# isort: off
from portal.settings.dev import *  # noqa: F403
from portal.settings.configured import *  # noqa: F403
from portal.settings.computed import *  # noqa: F403
# isort: on
