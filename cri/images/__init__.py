"""The local image store: an OCI image layout on disk, references, built-in images."""
