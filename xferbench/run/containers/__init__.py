"""The container side of xferbench: a Docker-API engine (engine.py), the debootstrap base image (base.py), and
the runner's container backend (backend.py). Everything created here carries the LABEL below, so cleanup
removes only xferbench's own containers on an engine other projects share."""

LABEL = "io.xferbench.owner"
