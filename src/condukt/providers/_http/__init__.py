"""The providers' HTTP plumbing, apart from any protocol.

- :mod:`.transport`: :class:`~condukt.providers.lowlevel.TrioTransport`, the
  HTTP/1.1 connection pool on trio (:mod:`.http11` encodes heads and reads
  responses with httptools, :mod:`.proxy` routes through proxies,
  :mod:`.read_timer` times idle reads);
- :mod:`.node`: the node's shared client and :class:`~condukt.providers.HttpSettings`;
- :mod:`.limits`: :class:`~condukt.providers.ProviderLimits`, shared per endpoint;
- :mod:`.retry`: :class:`~condukt.providers.RetryPolicy`;
- :mod:`.sse`: the server-sent events decoder;
- :mod:`.keys`: API keys from options or the environment;
- :mod:`.errors`: a provider's error response, classified;
- :mod:`.model`: :class:`~condukt.providers.lowlevel.HttpModel`, the request
  loop every protocol module (``anthropic.py``, ``openai.py``...) subclasses.
"""
