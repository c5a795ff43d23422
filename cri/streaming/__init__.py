"""The runtime's streaming server: Exec, Attach and PortForward over SPDY/3.1 and WebSocket."""

from cri.streaming.runtime import (
    DuplexStream,
    ExecError,
    InputStream,
    OutputStream,
    StreamingRuntime,
    Streams,
    TerminalSize,
)
from cri.streaming.server import StreamingConfig, StreamingServer

__all__ = ["StreamingConfig", "StreamingServer", "StreamingRuntime", "Streams", "TerminalSize", "ExecError",
           "InputStream", "OutputStream", "DuplexStream"]
