"""A gRPC stand-in for a RocketMQ NameServer and its brokers, for tests and demos of rocket-rebalance.

It is a separate party from the library: it shares only the wire (``rocket_rebalance._proto``) and the model
(``rocket_rebalance.model``), so tests exercise a real client against a real server. Embed it with
``nameserver_stub.server.StubServer`` or run ``nameserver-stub`` / ``python -m nameserver_stub``.
"""
