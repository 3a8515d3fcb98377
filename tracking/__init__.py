"""The MLflow-compatible API, run imports and exports.

Training code unchanged (#46): an MLflow-compatible tracking API that writes into the
portal's own metric store, parameters and tags.
"""
