"""Knowledge transfer: losses, Kronecker initialisation, transfer strategies."""
