"""Storage over the Container Storage Interface: kubeling's hostpath CSI driver (`hostpath/`)
and what upstream runs beside a driver as sidecars (`provisioner`: a claim of the driver's
StorageClass becomes a CreateVolume and a PersistentVolume; `registrar`: the socket the
kubelet's plugin watcher finds the driver by)."""
