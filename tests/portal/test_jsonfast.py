"""common/jsonfast.py: orjson's JSON, read back as the standard library's would be."""

import json

from django.utils.html import json_script as django_json_script

from common import jsonfast

HOSTILE = {
    "name": "</script><script>alert(1)</script>",
    "amp": "a & b <!-- c -->",
    "numbers": [1, 1.5, -2e-7, None, True],
    "text": "é \u2028 \u2029 \x00",
    "nested": {"k": [{"v": "<>&"}]},
}


def _body(script: str) -> object:
    return json.loads(script.split(">", 1)[1].rsplit("</script>", 1)[0])


def test_json_script_reads_back_as_djangos_and_cannot_close_its_element():
    ours, theirs = jsonfast.json_script(HOSTILE, "x"), django_json_script(HOSTILE, "x")
    assert _body(ours) == _body(theirs) == HOSTILE
    assert ours.startswith('<script id="x" type="application/json">')
    inner = ours.removeprefix('<script id="x" type="application/json">').removesuffix("</script>")
    assert not any(c in inner for c in "<>&")


def test_json_script_escapes_its_element_id():
    assert jsonfast.json_script([], '"><b>').startswith('<script id="&quot;&gt;&lt;b&gt;"')


def test_json_responses_hold_what_the_standard_library_reads():
    response = jsonfast.JsonResponse(HOSTILE)
    assert response["Content-Type"] == "application/json"
    assert json.loads(response.content) == HOSTILE
