"""The library floor: no models and no import of any other app.

The library floor: helpers every app may use, with no models and no import of any
other app of the portal (throttles, caches, group commit, the request context, the
Prometheus registry, bounded documents, text and host lists, encryption, validators
and the job vocabulary).
"""
