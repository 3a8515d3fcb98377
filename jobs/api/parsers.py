"""Request parsers of the API: DRF's, with every malformed body a 400."""

from __future__ import annotations

from rest_framework import parsers
from rest_framework.exceptions import ParseError


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser, with JSON nested deeper than Python's parser goes a 400 (not a
    500). The size bound is Django's DATA_UPLOAD_MAX_MEMORY_SIZE, applied when DRF reads
    the body; too large is a 413 from common.api_errors."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply.") from None
