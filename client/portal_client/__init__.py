"""Client for the HPC portal's REST API (/api/v1/) and the ``portal`` command."""

from portal_client.api import Client, PortalError
from portal_client.config import Config, load_config

__all__ = ["Client", "Config", "PortalError", "load_config"]
__version__ = "0.1.0"
