"""An ingest flood from one job over real HTTP: refused with 413/429 while another job's
uploads go on (pytest-django's live server, the real database and Redis)."""

import json
import threading
import time
import urllib.error
import urllib.request

import pytest

from metrics import ingest
from metrics.models import MetricPoint, MetricSeries
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)


def upload(url: str, job_id: int, token: str, body: list) -> int:
    request = urllib.request.Request(
        f"{url}/api/v1/jobs/{job_id}/metrics/ingest/",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_a_flooding_job_is_refused_and_another_jobs_uploads_go_on(
    live_server, owner, cluster, settings
):
    """Before: one request with the job's token could create ~100k series, and nothing
    limited the rate; every other writer waited behind it."""
    settings.PORTAL_METRICS_MAX_SERIES = 500
    flooder, honest = factories.training_job(owner, cluster), factories.training_job(owner, cluster)
    flood_token, honest_token = ingest.issue_token(flooder), ingest.issue_token(honest)
    # 10,000 new series in one batch, sent again and again from four threads.
    wide = [
        {"seq": s, "time": 1, "metrics": {f"m{s}_{i}": 1 for i in range(100)}} for s in range(100)
    ]
    codes: list[int] = []
    stop = time.monotonic() + 8

    def flood():
        while time.monotonic() < stop:
            codes.append(upload(live_server.url, flooder.pk, flood_token, wide))

    threads = [threading.Thread(target=flood) for _ in range(4)]
    for thread in threads:
        thread.start()
    honest_codes, slowest = [], 0.0
    for n in range(10):
        start = time.monotonic()
        honest_codes.append(
            upload(
                live_server.url, honest.pk, honest_token, factories.metric_records(20, start=20 * n)
            )
        )
        slowest = max(slowest, time.monotonic() - start)
        time.sleep(0.3)
    for thread in threads:
        thread.join()
    assert honest_codes == [200] * 10
    assert codes and set(codes) <= {413, 429}, sorted(set(codes))
    assert MetricSeries.objects.filter(job=flooder).count() == 0
    assert MetricPoint.objects.filter(series__job=honest).count() == 400
    print(f"\nflood: {len(codes)} requests refused; slowest honest upload {slowest:.2f}s")
