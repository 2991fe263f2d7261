"""The lab: real clusters and peers for tests, demos and benchmarks, never for an application.

A real Apache RocketMQ NameServer and brokers from Maven jars with Java consumers and producers as peers
(:mod:`.rocketmq`), one consumer group of Python and Java processes on it (:mod:`.mixed_group`), a
``nameserver_stub`` with consumer processes (:mod:`.stub_cluster`), and the one way to wait for a condition
(:mod:`.wait`). Only ``commands/demo.py`` (lazily), ``benchmarks/`` and ``tests/`` import it; ``runtime`` and
``admin`` never do, so embedding the library loads no process harness.
"""
