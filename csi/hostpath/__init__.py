"""A CSI driver whose volumes are directories on its node (upstream's csi-driver-host-path,
written anew): Identity, Controller (create, delete, expand, list, capacity, snapshots)
and Node (stage and publish as bind mounts) over the spec's own gRPC services
(`protos/csi/v1/csi.proto`). `python -m csi.hostpath --help` runs it; csi-sanity judges it."""

from csi.hostpath.driver import DRIVER_NAME, TOPOLOGY_KEY, Driver, DriverConfig, GiB
from csi.hostpath.server import Server

__all__ = ["Driver", "DriverConfig", "Server", "DRIVER_NAME", "TOPOLOGY_KEY", "GiB"]
