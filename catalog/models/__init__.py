"""The catalog's models (app label ``jobs``, so their tables keep their names):

- images: Tag, ContainerImage, ImageCheck
- apps: SessionApp (what a session runs: the shipped apps and those a centre adds)
"""

from catalog.models.apps import SessionApp
from catalog.models.images import ContainerImage, ImageCheck, Tag

__all__ = ["ContainerImage", "ImageCheck", "SessionApp", "Tag"]
