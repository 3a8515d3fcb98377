"""A tus client's requests through Django's test client, for the upload tests."""

import base64

TUS = {"HTTP_TUS_RESUMABLE": "1.0.0"}


def meta(**fields: str) -> str:
    return ",".join(f"{k} {base64.b64encode(v.encode()).decode()}" for k, v in fields.items())


def start(client, url, length: int, **fields: str):
    """POST .../uploads/ with ``fields`` as the upload's metadata (filename, path, ...)."""
    return client.post(
        url + "uploads/", HTTP_UPLOAD_LENGTH=str(length), HTTP_UPLOAD_METADATA=meta(**fields), **TUS
    )


def patch(client, location: str, offset: int, data: bytes):
    return client.generic(
        "PATCH",
        location,
        data,
        content_type="application/offset+octet-stream",
        HTTP_UPLOAD_OFFSET=str(offset),
        **TUS,
    )


def offset(client, location: str) -> int:
    answer = client.head(location, **TUS)
    assert answer.status_code == 200, answer.content
    return int(answer["Upload-Offset"])
