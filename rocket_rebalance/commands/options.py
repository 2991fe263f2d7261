"""Command-line options shared by several commands: choosing a strategy and its settings, durations, names."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from rocket_rebalance.commands import CommandError
from rocket_rebalance.model import (
    AclCredentials,
    MessageQueue,
    TlsSettings,
    check_duration,
    check_group_name,
    check_namespace,
    check_topic_name,
    duration_rule,
    with_namespace,
    word_choices,
)
from rocket_rebalance.strategies import STRATEGY_NAMES, AllocateMessageQueueStrategy, create_strategy

__all__ = [
    "ACCESS_KEY_ENV",
    "NAMESRV_HELP",
    "SECRET_KEY_ENV",
    "SECURITY_TOKEN_ENV",
    "acl_credentials",
    "add_connection_options",
    "add_namespace_option",
    "add_strategy_options",
    "build_strategies",
    "build_strategy",
    "duration",
    "group_name",
    "tls_settings",
    "topic_name",
    "wire_names",
]

ACCESS_KEY_ENV = "ROCKETMQ_ACCESS_KEY"
SECRET_KEY_ENV = "ROCKETMQ_SECRET_KEY"
SECURITY_TOKEN_ENV = "ROCKETMQ_SECURITY_TOKEN"

NAMESRV_HELP = (
    "name server: a RocketMQ list HOST:PORT[;HOST:PORT...] (RocketMQ's remoting protocol), "
    "or grpc://HOST:PORT for nameserver_stub"
)


def duration(zero: bool = False, unit: str = "seconds") -> Callable[[str], float]:
    """An argparse ``type`` for an interval or a time: the library's :func:`check_duration`, so that a NaN, inf,
    zero or negative value is one usage line naming the option (argparse prefixes ``argument --OPTION:``)."""

    def parse(text: str) -> float:
        try:
            return check_duration("value", float(text), zero=zero, unit=unit)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{duration_rule(zero, unit)}, got {text!r}") from None

    parse.__name__ = "duration"  # what argparse would name in a message of its own
    return parse


def port(text: str) -> int:
    """An argparse ``type`` for a TCP port to listen on: 0 (a free one, said once bound) to 65535."""
    try:
        number = int(text)
    except ValueError:
        number = -1
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"a port is a whole number from 0 to 65535, got {text!r}")
    return number


def _name(check: Callable[[str], str], kind: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        try:
            return check(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    parse.__name__ = kind
    return parse


topic_name = _name(check_topic_name, "topic name")
"""An argparse ``type`` for a topic: the library's :func:`check_topic_name` (Java's rules), so that a name no
broker would accept is one usage line naming the option, before anything is read or asked."""

group_name = _name(check_group_name, "consumer group name")
"""An argparse ``type`` for a consumer group: the library's :func:`check_group_name`."""


def _namespace(text: str) -> str | None:
    try:
        return check_namespace(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_namespace_option(parser: argparse.ArgumentParser) -> None:
    """``--namespace``, for the commands that name a group or topic on a server: the instance's (v1) namespace,
    as the consumers' ``namespace=``."""
    parser.add_argument(
        "--namespace",
        type=_namespace,
        metavar="NS",
        help="the instance's namespace (Java's setNamespace): -g and -t are given without it and sent as NS%%NAME "
        "(the retry topic %%RETRY%%NS%%GROUP)",
    )


def wire_names(args: argparse.Namespace) -> None:
    """``-g`` and ``-t`` (one or repeated, where the command has them) as the wire names them under
    ``--namespace``, in place: every later read of them is of the server's names. A name the namespace makes too
    long is a :class:`CommandError`."""
    try:
        group, topic = getattr(args, "group", None), getattr(args, "topic", None)
        if group is not None:
            args.group = check_group_name(with_namespace(args.namespace, group))
        if isinstance(topic, list):
            args.topic = [check_topic_name(with_namespace(args.namespace, name)) for name in topic]
        elif topic is not None:
            args.topic = check_topic_name(with_namespace(args.namespace, topic))
    except ValueError as error:
        raise CommandError(f"under --namespace {args.namespace}: {error}") from None


def add_connection_options(parser: argparse.ArgumentParser, required: bool, what: str = NAMESRV_HELP) -> None:
    """``-n``, ``--token`` and the ACL credentials, the same for every command that talks to a server. There is
    no option for the secret key itself: a command line is seen by every user of the machine (``ps``) and kept in
    shell histories, so the secret comes from a file or the environment (see :func:`acl_credentials`)."""
    parser.add_argument("-n", "--namesrv", required=required, metavar="ADDRESS", help=what)
    parser.add_argument("--token", help="nameserver_stub's shared token, when it requires one")
    parser.add_argument(
        "--access-key",
        metavar="KEY",
        help=f"RocketMQ ACL access key (default ${ACCESS_KEY_ENV}); every request is signed with it and the secret key",
    )
    parser.add_argument(
        "--secret-key-file",
        type=Path,
        metavar="FILE",
        help=f"a file holding the ACL secret key (default ${SECRET_KEY_ENV}); "
        f"a security token, if any, comes from ${SECURITY_TOKEN_ENV}",
    )
    # Not an option: without it argparse would take "--secret-key S3CRET" as an abbreviation of --secret-key-file
    # and repeat the secret in its "cannot read" error. Its value is never shown.
    parser.add_argument("--secret-key", dest="secret_key_given", help=argparse.SUPPRESS)
    parser.add_argument(
        "--tls",
        action="store_true",
        help="TLS to the name servers and brokers (RocketMQ's useTLS), the server's certificate verified against "
        "--tls-ca or the system's trusted certificates (host names are not checked: brokers register IPs)",
    )
    parser.add_argument(
        "--tls-ca", type=Path, metavar="FILE", help="the CA certificates (PEM) to verify the server with; implies --tls"
    )
    parser.add_argument(
        "--tls-cert", type=Path, metavar="FILE", help="a client certificate (PEM) for mutual TLS; implies --tls"
    )
    parser.add_argument(
        "--tls-key", type=Path, metavar="FILE", help="the client certificate's private key (PEM); implies --tls"
    )
    parser.add_argument(
        "--tls-insecure",
        action="store_true",
        help="TLS without verifying the server's certificate (anyone in between is trusted; warned); implies --tls",
    )


def acl_credentials(args: argparse.Namespace, environ: Mapping[str, str] = os.environ) -> AclCredentials | None:
    """The ACL credentials the options and the environment give: ``--access-key`` or $ROCKETMQ_ACCESS_KEY, the
    secret from ``--secret-key-file`` (surrounding whitespace removed, as Java trims its key file's values) or
    $ROCKETMQ_SECRET_KEY, and an optional $ROCKETMQ_SECURITY_TOKEN. None when none is given; one half without the
    other is a :class:`CommandError` naming what is missing (the error never shows the secret)."""
    if args.secret_key_given is not None:
        raise CommandError(
            f"there is no --secret-key option: a secret on a command line is seen by every user of the machine; "
            f"use --secret-key-file FILE or ${SECRET_KEY_ENV}"
        )
    access_key = args.access_key or environ.get(ACCESS_KEY_ENV) or None
    secret_key: str | None
    if args.secret_key_file is not None:
        try:
            secret_key = args.secret_key_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as error:
            raise CommandError(f"--secret-key-file {args.secret_key_file}: cannot read it ({error})") from None
        if not secret_key:
            raise CommandError(f"--secret-key-file {args.secret_key_file} is empty")
    else:
        secret_key = environ.get(SECRET_KEY_ENV) or None
    token = environ.get(SECURITY_TOKEN_ENV) or None
    if access_key is None and secret_key is None:
        if token is not None:
            raise CommandError(f"${SECURITY_TOKEN_ENV} is set but no ACL access key and secret key are given")
        return None
    if access_key is None:
        raise CommandError(f"an ACL secret key is given but no access key: pass --access-key or set ${ACCESS_KEY_ENV}")
    if secret_key is None:
        raise CommandError(f"--access-key needs its secret key: pass --secret-key-file FILE or set ${SECRET_KEY_ENV}")
    try:
        return AclCredentials(access_key, secret_key, token)
    except ValueError as error:
        raise CommandError(f"ACL credentials: {error}") from None


def tls_settings(args: argparse.Namespace) -> TlsSettings | None:
    """The TLS settings the options give (None for plaintext); each ``--tls-*`` option implies ``--tls``. Every
    file is read and checked here, so a missing one, one that is not PEM, or a key that does not match its
    certificate is a :class:`CommandError` naming the file before anything is sent."""
    from rocket_rebalance.runtime.transport.tls import tls_client  # the ssl module only for a command that asks

    ca, cert, key = (None if path is None else str(path) for path in (args.tls_ca, args.tls_cert, args.tls_key))
    if not args.tls and not args.tls_insecure and ca is None and cert is None and key is None:
        return None
    if key is not None and cert is None:
        raise CommandError(f"--tls-key {key} needs its certificate: pass --tls-cert FILE")
    if args.tls_insecure and ca is not None:
        raise CommandError(f"--tls-ca {ca} verifies the server, which --tls-insecure turns off: give one or the other")
    settings = TlsSettings(ca, cert, key, verify=not args.tls_insecure)
    try:
        tls_client(settings)
    except ValueError as error:
        raise CommandError(str(error)) from None
    return settings


_INNER_CHOICES: dict[str, tuple[str, ...]] = {
    "MACHINE_ROOM_NEARBY": ("AVG", "CONSISTENT_HASH"),
    "CROSS_TOPIC": ("AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH_BOUNDED"),
}
"""The wrapper strategies, with the inner strategies ``--inner`` may give each (the first is its default)."""

# Which strategies each strategy option applies to. A wrapper passes an option on to its inner strategy, so an option
# also applies to a wrapper whose inner strategy takes it.
_OPTION_USERS = {
    "virtual_nodes": ("CONSISTENT_HASH", "CONSISTENT_HASH_BOUNDED"),
    "eps": ("CONSISTENT_HASH_BOUNDED",),
    "idcs": ("MACHINE_ROOM",),
    "inner": tuple(_INNER_CHOICES),
    "config_queues": ("CONFIG",),
}


# Numeric options, passed to ``create_strategy`` as: option -> (its keyword, how to read it, what it must be).
_NUMERIC_OPTIONS: dict[str, tuple[str, Callable[[str], float], str]] = {
    "virtual_nodes": ("virtual_node_count", int, "a whole number"),
    "eps": ("eps", float, "a number"),
}


def _flag(option: str) -> str:
    return "--" + option.replace("_", "-")


def _number(option: str, args: argparse.Namespace) -> float | None:
    """A numeric option's value, read here rather than by argparse so that a typo is one line, not a usage text;
    its range is the strategy's to check (with the strategy's own message)."""
    text = getattr(args, option)
    if text is None:
        return None
    _, kind, what = _NUMERIC_OPTIONS[option]
    try:
        return kind(text)
    except ValueError:
        raise CommandError(f"{_flag(option)} must be {what}, got {text!r}") from None


class _OneStrategy(argparse.Action):
    """``--strategy`` of a command that runs one strategy (``consume``, ``allocate-mq``): given twice, it is refused
    in one line rather than the last one silently kept. Comparing strategies is ``simulate``'s, whose output is
    made for several; ``allocate-mq`` prints mqadmin's ``allocateMQ`` JSON, one strategy's answer."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object, option: str | None = None
    ) -> None:
        if getattr(namespace, self.dest) is not None:
            parser.error(f"{option} given twice: this command runs one strategy (simulate compares several)")
        setattr(namespace, self.dest, values)


def add_strategy_options(parser: argparse.ArgumentParser, repeatable: bool) -> None:
    parser.add_argument(
        "--strategy",
        action="append" if repeatable else _OneStrategy,
        **word_choices(STRATEGY_NAMES),
        metavar="NAME",
        help=f"allocation strategy, one of {', '.join(STRATEGY_NAMES)} (default AVG); CONSISTENT_HASH_BOUNDED and "
        "CROSS_TOPIC exist only in this library: Java consumers cannot run them"
        + ("; repeat to compare (each option below applies to every strategy it configures)" if repeatable else ""),
    )
    parser.add_argument(
        "--virtual-nodes",
        metavar="N",
        help="virtual nodes per consumer of CONSISTENT_HASH (default 10) and CONSISTENT_HASH_BOUNDED (default 40)",
    )
    parser.add_argument(
        "--eps",
        metavar="X",
        help="CONSISTENT_HASH_BOUNDED's slack: no consumer holds more than ceil((1 + X) * queues / consumers); "
        "0 is perfect balance (default 0.25)",
    )
    parser.add_argument("--idcs", metavar="ROOM,...", help="MACHINE_ROOM: the machine rooms to consume from")
    inner_names = list(dict.fromkeys(name for names in _INNER_CHOICES.values() for name in names))
    parser.add_argument(
        "--inner",
        **word_choices(inner_names),
        metavar="NAME",
        help="the inner strategy (default AVG) of "
        + "; of ".join(f"{wrapper}: {', '.join(names)}" for wrapper, names in _INNER_CHOICES.items()),
    )
    parser.add_argument("--config-queues", metavar="BROKER:ID,...", help="CONFIG: the queues every consumer takes")


def _applies(option: str, name: str, inner: str | None) -> bool:
    users = _OPTION_USERS[option]
    return name in users or (name in _INNER_CHOICES and (inner or _INNER_CHOICES[name][0]) in users)


def _check_options(names: Sequence[str], args: argparse.Namespace) -> None:
    """Every option given must configure at least one of the strategies, and ``--inner`` must suit every wrapper:
    an option that would be silently ignored is more likely a mistake than a wish."""
    for option, users in _OPTION_USERS.items():
        if getattr(args, option) is not None and not any(_applies(option, name, args.inner) for name in names):
            wrappers = [w for w, inner in _INNER_CHOICES.items() if set(inner) & set(users)]
            also = f", also as the --inner of {', '.join(wrappers)}" if wrappers else ""
            subject = "strategy" if len(names) == 1 else "strategies"
            raise CommandError(
                f"{_flag(option)} does not apply to {subject} {', '.join(names)} (it is for {', '.join(users)}{also})"
            )
    for name in names:
        choices = _INNER_CHOICES.get(name, ())
        if args.inner is not None and choices and args.inner not in choices:
            raise CommandError(
                f"--inner {args.inner} does not apply to strategy {name} "
                f"(its inner strategy is one of {', '.join(choices)})"
            )


def build_strategies(names: Sequence[str], args: argparse.Namespace) -> list[AllocateMessageQueueStrategy]:
    """The strategies ``names`` (side by side in a comparison), each with the command-line options that apply to it;
    an option that applies to none of them, or an ``--inner`` a wrapper cannot take, is a :class:`CommandError`."""
    _check_options(names, args)
    numbers = {option: _number(option, args) for option in _NUMERIC_OPTIONS}

    def configure(name: str) -> AllocateMessageQueueStrategy:
        if name in _INNER_CHOICES:
            return create_strategy(name, inner=configure(args.inner or _INNER_CHOICES[name][0]))
        if name == "MACHINE_ROOM":
            if not args.idcs:
                raise CommandError("strategy MACHINE_ROOM needs --idcs ROOM,... (the rooms to consume from)")
            return create_strategy(name, consumer_idcs={room.strip() for room in args.idcs.split(",")})
        if name == "CONFIG":
            if not args.config_queues:
                raise CommandError("strategy CONFIG needs --config-queues BROKER:ID,...")
            return create_strategy(name, message_queues=_config_queues(args.topic, args.config_queues))
        options = {
            keyword: numbers[option]
            for option, (keyword, _, _) in _NUMERIC_OPTIONS.items()
            if numbers[option] is not None and name in _OPTION_USERS[option]
        }
        return create_strategy(name, **options)

    return [configure(name) for name in names]


def build_strategy(name: str, args: argparse.Namespace) -> AllocateMessageQueueStrategy:
    """The strategy ``name`` with the command-line options that apply to it; a misplaced option is an error."""
    return build_strategies([name], args)[0]


def _config_queues(topics: str | list[str], spec: str) -> list[MessageQueue]:
    """CONFIG's queues, ``BROKER:QUEUE_ID`` items of the one topic given (``-t`` may be repeatable)."""
    if isinstance(topics, list):
        if len(topics) != 1:
            raise CommandError("strategy CONFIG takes one -t TOPIC: its --config-queues name queues of that topic")
        topics = topics[0]
    queues = []
    for item in spec.split(","):
        broker, _, queue_id = item.strip().rpartition(":")
        if not broker or not queue_id.isdigit():
            raise CommandError(f"--config-queues item {item!r} is not BROKER:QUEUE_ID")
        queues.append(MessageQueue(topics, broker, int(queue_id)))
    return queues
