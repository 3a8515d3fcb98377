"""Serving on the real path (#62): a job on the dev cluster saves the digits model with
MLflow; it is registered (its manifest read over SSH); through the whole stack's REST
API its owner serves it and makes a key; the Slurm job runs MLflow's own scoring server
behind the session guard, and HAProxy carries /invocations at the endpoint's stable
address with the key: the same predictions as the model made in its job. A revoked key
is refused within a second; after its idle minute the endpoint's Slurm job is gone, and
the next request with a key starts it again and is answered: held while the job starts,
then sent on (307) to the model server, or 503 with Retry-After when the hold is over."""

from __future__ import annotations

import json
import ssl
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from endpoints.models import Endpoint
from identity.tokens import ApiToken
from jobs.models import Job
from registry import api as registry_api
from registry import tasks as registry_tasks
from tests import polling
from tests.devcluster.helpers import remote
from tests.devcluster.test_mlflow_jobs import completed, need_training_libraries
from tests.livestack import LiveStack

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]

SAVE = """torch-python - <<'EOF'
import json
import mlflow.sklearn
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

X, y = load_digits(return_X_y=True)
Xtr, Xte, ytr, yte = train_test_split(X, y, random_state=0)
model = LogisticRegression(max_iter=300).fit(Xtr, ytr)
mlflow.sklearn.save_model(model, "model")
json.dump(Xte[:50].tolist(), open("inputs.json", "w"))
json.dump(model.predict(Xte[:50]).tolist(), open("predicted.json", "w"))
EOF"""

# MLflow's scoring server from the dev cluster's PyTorch environment (its `mlflow models
# serve` starts `uvicorn` from PATH).
SERVE = (
    "env PATH=/opt/portal-devcluster/torch/bin:/usr/local/bin:/usr/bin:/bin "
    "mlflow models serve --env-manager local --host 127.0.0.1 --port {port} --model-uri"
)


@pytest.fixture
def stack(devcluster, tmp_path):
    need_training_libraries()
    env = {
        "PORTAL_SERVE_MLFLOW_COMMAND": SERVE,
        "PORTAL_ENDPOINT_IDLE_INTERVAL": "5",
        # held up to 90 s: the Slurm job and MLflow's server start within it here
        "PORTAL_ENDPOINT_HOLD_SECONDS": "90",
    }
    live = LiveStack(tmp_path, env=env).start()
    yield live
    live.stop()


def running(endpoint_id: int, timeout: float = 180) -> Endpoint:
    def ready():
        endpoint = Endpoint.objects.get(pk=endpoint_id)
        if endpoint.state == "failed":
            raise AssertionError(f"the endpoint failed: {endpoint.message}")
        return endpoint if endpoint.state == "running" else None

    return polling.until(ready, timeout, "the endpoint to run", interval=1)


@pytest.mark.timeout(600)
def test_a_served_version_answers_its_predictions_with_a_key_and_wakes_when_stopped(
    stack, devcluster, owner, monkeypatch, settings
):
    settings.PORTAL_URL = stack.url
    job = completed(owner, devcluster, SAVE)
    account = job.cluster_account
    monkeypatch.setattr(
        registry_tasks.read_manifest, "delay", lambda pk: registry_tasks.read_manifest.apply((pk,))
    )
    version = registry_api.register(owner, {"job": job.pk, "path": "model", "name": "digits"})
    version.refresh_from_db()
    assert version.status == "READY", version.status_message
    inputs = json.loads(remote(account, ["cat", f"{job.work_dir}/inputs.json"]))
    expected = json.loads(remote(account, ["cat", f"{job.work_dir}/predicted.json"]))

    _, token = ApiToken.issue(owner, "serve")
    api = httpx.Client(base_url=f"{stack.url}/api/v1", headers={"Authorization": f"Bearer {token}"})
    made = api.post(
        "/endpoints/",
        json={
            "model": version.model_id,
            "version": 1,
            "name": "digits",
            "memory_gb": 1,
            "idle_minutes": 1,
        },
    )
    assert made.status_code == 201, made.text
    endpoint_id, url = made.json()["id"], made.json()["url"]
    assert api.post(f"/endpoints/{endpoint_id}/start/").status_code == 202
    key = api.post("/endpoint-keys/", json={"name": "program", "rate": 20}).json()
    endpoint = running(endpoint_id)
    name = f"ep-{endpoint.public_id}.sessions.localhost"
    assert url == f"https://{name}:{stack.proxy_port}"
    # HAProxy's TLS, checked against the dev CA (connecting to 127.0.0.1 as that name).
    trusted = ssl.create_default_context(cafile=str(Path(settings.TLS_DIR) / "ca.pem"))

    proxy = httpx.Client(verify=trusted, timeout=120, follow_redirects=True)

    def invoke(secret: str) -> httpx.Response:
        return proxy.post(
            f"https://127.0.0.1:{stack.proxy_port}/invocations",
            headers={"Host": f"{name}:{stack.proxy_port}", "Authorization": f"Bearer {secret}"},
            json={"inputs": inputs},
            extensions={"sni_hostname": name},
        )

    answer = invoke(key["key"])
    assert answer.status_code == 200, answer.text
    assert answer.json()["predictions"] == expected and len(expected) == 50
    assert invoke("pe_" + "x" * 43).status_code == 401

    revoked = api.post(f"/endpoint-keys/{key['id']}/revoke/")
    assert revoked.status_code == 200 and revoked.json()["live"] is False
    started = time.monotonic()
    assert invoke(key["key"]).status_code == 401
    assert time.monotonic() - started < 1

    # A minute without a request: stopped by itself, its Slurm job ends; a request with a
    # key starts it again, held while it starts (the portal's bound), then answered.
    first_job = Job.objects.get(pk=endpoint.job_id)
    polling.until(
        lambda: Endpoint.objects.get(pk=endpoint_id).state == "stopped", 150, "the idle stop"
    )
    assert "1 minute without a request" in Endpoint.objects.get(pk=endpoint_id).message
    polling.until(lambda: Job.objects.get(pk=first_job.pk).is_final, 60, "the serving job to end")
    assert str(first_job.scheduler_job_id) not in remote(account, ["squeue", "-h", "-o", "%i"])
    other = api.post("/endpoint-keys/", json={"name": "second"}).json()
    waking = invoke(other["key"])
    assert waking.status_code == 200, waking.text
    assert waking.json()["predictions"] == expected
    assert [r.status_code for r in waking.history] == [307]
    endpoint = Endpoint.objects.get(pk=endpoint_id)
    assert endpoint.state == "running" and endpoint.job_id != first_job.pk
    assert api.post(f"/endpoints/{endpoint_id}/stop/").status_code == 200


# A small language model built from a configuration (no download): a byte-level BPE
# tokenizer trained on the Zen of Python (the `this` module ships it), a 2-layer GPT-2 of
# 32 dimensions trained 120 steps on it, saved with a chat template.
BUILD_LM = """torch-python - <<'EOF'
import codecs, json, this
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

text = codecs.decode(this.s, "rot13")
bpe = Tokenizer(models.BPE(unk_token="<unk>"))
bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
bpe.decoder = decoders.ByteLevel()
alphabet = pre_tokenizers.ByteLevel.alphabet()
trainer = trainers.BpeTrainer(
    vocab_size=400, special_tokens=["<unk>", "<|end|>"], initial_alphabet=alphabet
)
bpe.train_from_iterator([text] * 10, trainer)
tok = PreTrainedTokenizerFast(
    tokenizer_object=bpe, eos_token="<|end|>", unk_token="<unk>", pad_token="<|end|>"
)
tok.chat_template = (
    "{% for m in messages %}{{ m['content'] }}\\n{% endfor %}"
    "{% if add_generation_prompt %}{% endif %}"
)
torch.manual_seed(0)
end = tok.eos_token_id
config = GPT2Config(vocab_size=len(tok), n_positions=128, n_embd=32, n_layer=2, n_head=2,
                    bos_token_id=end, eos_token_id=end, pad_token_id=end)
model = GPT2LMHeadModel(config)
ids = torch.tensor([tok(text)["input_ids"]])
span = min(64, ids.shape[1] - 1)
optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3)
losses = []
for step in range(120):
    start = (step * 7) % (ids.shape[1] - span)
    window = ids[:, start:start + span]
    loss = model(window, labels=window).loss
    loss.backward(); optimiser.step(); optimiser.zero_grad()
    losses.append(loss.item())
model.save_pretrained("lm")
tok.save_pretrained("lm")
json.dump({"first": losses[0], "last": losses[-1]}, open("losses.json", "w"))
EOF"""

# Transformers' own OpenAI-compatible server, from the dev cluster's PyTorch environment.
SERVE_LM = (
    "env HF_HUB_OFFLINE=1 PATH=/opt/portal-devcluster/torch/bin:/usr/local/bin:/usr/bin:/bin "
    "transformers serve --host 127.0.0.1 --port {port} --device cpu"
)

# OpenAI's Python client as a program uses it, at the endpoint's address with a key (run
# with the dev cluster's Python, which has it). Its HTTP client connects to 127.0.0.1 and
# says the endpoint's name in TLS and in Host: the name resolves nowhere here.
CLIENT = """
import json, ssl, sys, time
import httpx2
from openai import AuthenticationError, OpenAI

url, key, model, name, ca = sys.argv[1:6]

class Here(httpx2.HTTPTransport):
    def handle_request(self, request):
        request.extensions["sni_hostname"] = name
        request.headers["Host"] = request.url.netloc.decode()
        request.url = request.url.copy_with(host="127.0.0.1")
        return super().handle_request(request)

http = httpx2.Client(transport=Here(verify=ssl.create_default_context(cafile=ca)))
client = OpenAI(base_url=url + "/v1", api_key=key, http_client=http, max_retries=0)
started = time.monotonic()
first = None
pieces = []
finish = None
stream = client.chat.completions.create(
    model=model,
    messages=[{"role": "user", "content": "Beautiful is better than"}],
    max_tokens=12,
    stream=True,
)
for chunk in stream:
    choice = chunk.choices[0] if chunk.choices else None
    if choice and choice.delta.content:
        first = first if first is not None else time.monotonic() - started
        pieces.append(choice.delta.content)
    if choice and choice.finish_reason:
        finish = choice.finish_reason
models = [m.id for m in client.models.list()]
try:
    OpenAI(base_url=url + "/v1", api_key="pe_" + "n" * 43, http_client=http, max_retries=0
           ).models.list()
    refused = False
except AuthenticationError:
    refused = True
print(json.dumps({"pieces": pieces, "finish": finish, "first": first, "models": models,
                  "refused": refused}))
"""


@pytest.fixture
def lm_stack(devcluster, tmp_path):
    need_training_libraries()
    live = LiveStack(tmp_path, env={"PORTAL_SERVE_OPENAI_COMMAND": SERVE_LM}).start()
    yield live
    live.stop()


@pytest.mark.timeout(600)
def test_a_language_model_endpoint_streams_to_openais_own_client_with_a_key(
    lm_stack, devcluster, owner, monkeypatch, settings
):
    settings.PORTAL_URL = lm_stack.url
    job = completed(owner, devcluster, BUILD_LM)
    losses = json.loads(remote(job.cluster_account, ["cat", f"{job.work_dir}/losses.json"]))
    assert losses["last"] < losses["first"]
    monkeypatch.setattr(
        registry_tasks.read_manifest, "delay", lambda pk: registry_tasks.read_manifest.apply((pk,))
    )
    version = registry_api.register(owner, {"job": job.pk, "path": "lm", "name": "zen-lm"})
    version.refresh_from_db()
    assert version.status == "READY", version.status_message

    _, token = ApiToken.issue(owner, "serve")
    api = httpx.Client(
        base_url=f"{lm_stack.url}/api/v1", headers={"Authorization": f"Bearer {token}"}
    )
    made = api.post(
        "/endpoints/",
        json={"model": version.model_id, "version": 1, "name": "zen", "kind": "openai"},
    )
    assert made.status_code == 201, made.text
    endpoint_id, url = made.json()["id"], made.json()["url"]
    assert made.json()["model_name"] == version.path
    assert api.post(f"/endpoints/{endpoint_id}/start/").status_code == 202
    key = api.post("/endpoint-keys/", json={"name": "chat", "rate": 20}).json()["key"]
    endpoint = running(endpoint_id, timeout=240)
    name = f"ep-{endpoint.public_id}.sessions.localhost"
    ca = str(Path(settings.TLS_DIR) / "ca.pem")
    program = subprocess.run(
        ["/opt/portal-devcluster/torch/bin/python", "-c", CLIENT, url, key, version.path, name, ca],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert program.returncode == 0, program.stderr[-3000:]
    said = json.loads(program.stdout)
    assert len(said["pieces"]) >= 2 and said["finish"] in ("length", "stop"), said
    assert said["models"] == [version.path] and said["refused"] is True
    # The page and the API count what HAProxy carried (the next traffic pass), and the
    # endpoint meter on the node what it cannot see: the first token, tokens a second.
    polling.until(
        lambda: Endpoint.objects.get(pk=endpoint_id).requests >= 2, 60, "the traffic recorded"
    )

    def metered():
        traffic = api.get(f"/endpoints/{endpoint_id}/").json()["traffic"]
        return traffic if traffic["ttft_ms"] is not None else None

    traffic = polling.until(metered, 90, "the endpoint meter's report", interval=2)
    assert 0 < traffic["ttft_ms"] <= said["first"] * 1000 + 5, (traffic, said)
    assert traffic["tokens_per_second"] > 0
    assert api.post(f"/endpoints/{endpoint_id}/stop/").status_code == 200


@pytest.mark.timeout(600)
def test_a_server_that_never_gets_ready_fails_the_endpoint_with_its_last_words(
    lm_stack, devcluster, owner, monkeypatch, settings
):
    """The digits model is no language model: served as one, Transformers' server stops at
    once; the endpoint fails, and its page and API say why in the server's own words."""
    settings.PORTAL_URL = lm_stack.url
    job = completed(owner, devcluster, SAVE)
    monkeypatch.setattr(
        registry_tasks.read_manifest, "delay", lambda pk: registry_tasks.read_manifest.apply((pk,))
    )
    version = registry_api.register(owner, {"job": job.pk, "path": "model", "name": "digits"})
    _, token = ApiToken.issue(owner, "serve")
    api = httpx.Client(
        base_url=f"{lm_stack.url}/api/v1", headers={"Authorization": f"Bearer {token}"}
    )
    made = api.post(
        "/endpoints/",
        json={"model": version.model_id, "version": 1, "name": "wrong", "kind": "openai"},
    ).json()
    assert api.post(f"/endpoints/{made['id']}/start/").status_code == 202

    def failed():
        answer = api.get(f"/endpoints/{made['id']}/").json()
        return answer if answer["state"] == "failed" and answer["log_tail"] else None

    said = polling.until(failed, 240, "the endpoint to fail with its log", interval=1)
    assert "Unrecognized processing class" in said["log_tail"], said
    assert f"Its job {said['job']} ended failed" in said["message"]
