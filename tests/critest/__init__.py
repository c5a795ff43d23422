"""An offline harness for the upstream CRI validation suite (critest): `make critest`."""
