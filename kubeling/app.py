"""What every component's `python -m` entry point shares (upstream's component-base):
the parser with --log-level, the client flags (--kubeconfig, --apiserver), logging,
telemetry, SIGINT/SIGTERM, the port file, and the exit codes:

- 0: stopped by a signal;
- 2: bad flags or configuration (argparse's own, or a ConfigError), one line saying which;
- 1: a failure at run time (a port in use, an apiserver or etcd that does not answer),
  one line saying what.

    def main(argv=None) -> int:
        args = build_parser().parse_args(argv)
        return app.run("scheduler", args, lambda: app.serve(SchedulerService(...)))
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from pathlib import Path
from typing import Any, Protocol

import grpc

from kubeling import errors, telemetry
from kubeling.client import Client
from kubeling.gcfreeze import FreezeAfterFull
from kubeling.netutil import optional_host_port_arg
from kubeling.options import ConfigError
from kubeling.signals import wait_for_termination
from kubeling.vitals import with_vitals

__all__ = ["Service", "ConfigError", "parser", "add_client_flags", "client_from", "run", "serve", "EXIT_CONFIG",
           "EXIT_FAILURE"]

log = logging.getLogger(__name__)

EXIT_CONFIG, EXIT_FAILURE = 2, 1
# What a component may fail with at run time, said in one line (anything else is a bug: logged with its traceback).
_RUNTIME = (OSError, RuntimeError, TimeoutError, ConnectionError, errors.ApiError, grpc.RpcError)


class Service(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...


def parser(prog: str, description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("--log-level", default="INFO", type=str.upper,
                   choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], help="how much to log")
    return p


def add_client_flags(p: argparse.ArgumentParser, who: str) -> None:
    """--kubeconfig (this component's credentials, `who`) or --apiserver (plain text)."""
    p.add_argument("--kubeconfig", default="", help=f"credentials for the apiserver ({who}: a kubeconfig with its "
                                                    "client certificate)")
    p.add_argument("--apiserver", type=optional_host_port_arg, default="",
                   help="apiserver gRPC address HOST:PORT, plain text (or --kubeconfig)")


def client_from(args: argparse.Namespace) -> Client:
    """The client the flags name: the kubeconfig's cluster and credentials, else --apiserver."""
    kubeconfig, apiserver = getattr(args, "kubeconfig", ""), getattr(args, "apiserver", "")
    if kubeconfig:
        try:
            return Client.from_kubeconfig(kubeconfig)
        except (OSError, ValueError) as err:
            raise ConfigError(f"--kubeconfig {kubeconfig}: {err}") from None
    if apiserver:
        return Client(apiserver)
    raise ConfigError("--apiserver or --kubeconfig is required")


async def serve(service: Service, *, port_file: str = "", ports: Callable[[], Iterable[int]] | None = None,
                also_close: Iterable[Callable[[], Awaitable[Any]]] = ()) -> None:
    """Start, write the bound ports (one a line) to port_file, run until SIGINT or SIGTERM,
    stop; then close what else the component opened (its client). A start that fails still
    stops what it had started, and its error is the one told."""
    started = False
    try:
        await service.start()
        started = True
        if port_file and ports is not None:
            Path(port_file).write_text("".join(f"{port}\n" for port in ports()))
        await wait_for_termination()
    finally:
        try:
            await service.stop()
        except Exception:
            if started:
                raise
            log.warning("stopping after a failed start failed too", exc_info=True)
        for close in also_close:
            await close()


def run(name: str, args: argparse.Namespace, main: Callable[[], Coroutine[Any, Any, None]], *,
        loop: Callable[[Coroutine[Any, Any, None]], Any] = asyncio.run,
        failures: tuple[type[Exception], ...] = ()) -> int:
    """Set up logging and telemetry, run main() to its end, and say how it ended
    (`failures`: the component's own run-time errors, besides OSError and the like)."""
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    shutdown = telemetry.setup(name)
    gc_pauses = FreezeAfterFull().install()  # a big cache must not stop the loop for a full collection's walk
    try:
        loop(with_vitals(name, main()))
    except ConfigError as err:
        print(f"{name}: invalid configuration: {err}", file=sys.stderr)
        return EXIT_CONFIG
    except (*_RUNTIME, *failures) as err:
        print(f"{name}: {_describe(err)}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return 0
    except Exception as err:  # a bug: its traceback, then the one line
        log.exception("%s failed", name)
        print(f"{name}: unexpected failure: {type(err).__name__}: {err}", file=sys.stderr)
        return EXIT_FAILURE
    finally:
        gc_pauses.uninstall()
        shutdown()
    return 0


def _describe(err: BaseException) -> str:
    if isinstance(err, errors.ApiError):
        return err.message
    if isinstance(err, grpc.RpcError):
        code, details = getattr(err, "code", None), getattr(err, "details", None)
        return f"{code().name}: {details()}" if callable(code) and callable(details) else str(err)
    return str(err) or type(err).__name__
