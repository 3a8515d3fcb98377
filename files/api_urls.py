"""/api/v1/transfers/ and /api/v1/remotes/ (files/api.py)."""

from rest_framework import routers

from files import api

router = routers.SimpleRouter()
router.register("transfers", api.TransferViewSet, basename="api-transfer")
router.register("remotes", api.RemoteViewSet, basename="api-remote")

urlpatterns = router.urls
